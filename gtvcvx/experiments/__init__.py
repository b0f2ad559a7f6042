"""Experiments: multi-run studies (paper reproductions, sweeps) driven by ``kind = "experiment"`` specs.

Each module in this package defines ``EXPERIMENTS = {"name": function}``; a function has the
signature ``function(params: dict, out_dir: Path, *, scale: str = "default", studies=None) ->
ExperimentOutput`` and writes its figures into ``out_dir``. A study that separates running from
rendering also writes a :class:`StudyRecord` (parameters, measured values, tables as CSV, the
facts its text quotes) next to its figures and registers a renderer in its module's
``RENDERERS = {"name": function(record) -> str}``; ``gtvcvx render`` then rewrites its section
from the record without solving (:func:`render_record`). ``studies`` is a :class:`StudyStore`
shared by the specs of one ``gtvcvx report`` / ``gtvcvx check`` run, so that a summary reuses
the records of studies already run with the same parameters. ``scale`` is one of :data:`SCALES`: ``"full"`` runs the
source's protocol (every repetition and sweep point), ``"default"`` a smaller version that keeps
the main job (``gtvcvx report problems``) within minutes, ``"quick"`` a smoke test for CI; a spec's
``[params]`` override every scale (see :func:`scaled_params`). Specs name an experiment from this registry (never an
arbitrary import path)::

    kind = "experiment"
    name = "paper_sbm_k_clusters"
    experiment = "sbm_k_clusters"

    [params]
    k = [2, 3, 4]

    [check]
    ...
"""

from __future__ import annotations

import importlib
import math
import json
import pkgutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..io import atomic_write_text

__all__ = ["ExperimentOutput", "SCALES", "check_scale", "scaled_params", "registry", "get_experiment",
           "StudyRecord", "StudyStore", "renderers", "render_record", "load_defaults", "study_params"]

#: Sizes an experiment can run at, smallest first.
SCALES = ("quick", "default", "full")


def check_scale(scale) -> str:
    """``scale`` if it is one of :data:`SCALES`, else a ValueError naming them."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(map(repr, SCALES))}, got {scale!r}")
    return scale


def scaled_params(protocol: dict, overrides: dict, params, scale: str, *, context: str) -> dict:
    """An experiment's parameters: ``protocol``, then ``overrides`` unless ``scale == "full"``, then ``params``.

    Parameters
    ----------
    protocol : dict
        Every parameter with the source's value (the full protocol).
    overrides : dict
        What the requested scale changes (ignored at ``"full"``).
    params : dict or None
        The spec's ``[params]``; they win at every scale, so a spec that states a value gets it.
    scale : str
        One of :data:`SCALES`.
    context : str
        Names the experiment in the error for an unknown key.
    """
    check_scale(scale)
    params = check_params(protocol, params, context=context)
    out = dict(protocol)
    if scale != "full":
        out.update(overrides)
    out.update(params)
    return out


def check_params(protocol: dict, params, *, context: str) -> dict:
    """A spec's ``[params]`` as a dict, checked against the study's ``protocol``: known keys only, each value
    of its default's kind, counts bounded (see :func:`_check_param`); a ValueError names the key."""
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"params for {context}: expected a table of parameters, got {params!r}")
    params = dict(params or {})
    unknown = set(params) - set(protocol)
    if unknown:
        raise ValueError(f"params: unknown key(s) {sorted(unknown)} for {context}; expected some of {sorted(protocol)}")
    for key, value in params.items():
        _check_param(key, value, protocol[key], context)
    return params


def protocol_of(experiment: str) -> dict | None:
    """The full protocol of the study an experiment runs, where the experiment is one study of a module's
    ``DEFAULTS`` (same name); None for an experiment that combines studies (its parameters are checked
    when it runs)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        defaults = getattr(importlib.import_module(f"{__name__}.{info.name}"), "DEFAULTS", None)
        if isinstance(defaults, dict) and isinstance(defaults.get(experiment), dict):
            return defaults[experiment]
    return None


#: A count in a spec's ``[params]`` (repetitions, sweep sizes, nodes, ...) may be at most this
#: many times the study's full protocol, and always up to :data:`MIN_COUNT_LIMIT`.
COUNT_FACTOR = 100
MIN_COUNT_LIMIT = 1000


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count_limit(default) -> int:
    return max(COUNT_FACTOR * default, MIN_COUNT_LIMIT)


def _check_param(key: str, value, default, context: str) -> None:
    """Refuse a spec's ``[params]`` value of another kind than the protocol's ``default`` (a string
    where a list is expected, ...) and counts beyond :func:`_count_limit`; seeds are any integer >= 0."""
    where = f"params.{key} = {value!r} for {context}"
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false")
    elif _is_count(default):
        limit = None if key.endswith("seed") else _count_limit(default)
        if not _is_count(value) or value < 0 or (limit is not None and value > limit):
            bound = "" if limit is None else f" and <= {limit} ({COUNT_FACTOR} times the study's protocol, {default})"
            raise ValueError(f"{where}: expected an integer >= 0{bound}")
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{where}: expected a finite number")
    elif isinstance(default, dict):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected a table like {default!r}")
    elif isinstance(default, list):
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list like {default!r} (write [{value!r}] for one element)")
        if default and all(_is_count(v) for v in default):
            limit = _count_limit(max(default))
            if not all(_is_count(v) and 0 <= v <= limit for v in value):
                raise ValueError(f"{where}: expected a list of integers between 0 and {limit} "
                                 f"({COUNT_FACTOR} times the study's protocol, {default})")


def load_defaults(module_file) -> tuple[dict, dict]:
    """``(protocol, scaled)`` of a study module, from ``<module>_defaults.toml`` next to it (the single source).

    The file's top-level tables are the studies' full protocols (``scale="full"``); its
    ``[default.<study>]`` and ``[quick.<study>]`` tables what the smaller scales change:
    ``scaled[scale][study]``.
    """
    path = Path(module_file).with_name(f"{Path(module_file).stem}_defaults.toml")
    with path.open("rb") as handle:
        table = tomllib.load(handle)
    scaled = {scale: table.pop(scale, {}) for scale in SCALES if scale != "full"}
    unknown = {study for overrides in scaled.values() for study in overrides} - set(table)
    if unknown:
        raise RuntimeError(f"{path}: scale overrides for unknown studies {sorted(unknown)}")
    return table, scaled


def study_params(study: str, params, scale: str, defaults: tuple[dict, dict]) -> dict:
    """A study's parameters at ``scale``: its protocol, the scale's overrides, then the spec's ``params``."""
    protocol, scaled = defaults
    return scaled_params(protocol[study], scaled.get(scale, {}).get(study, {}), params, scale,
                         context=f"experiment {study!r}")


@dataclass
class ExperimentOutput:
    """What an experiment produced.

    Attributes
    ----------
    title : str
    markdown : str
        Body of the experiment's report section (tables inline, figures referenced by
        file name relative to ``out_dir``).
    tables : dict of str -> pandas.DataFrame
        Written as CSV next to the Markdown by ``gtvcvx report``.
    figures : list of Path
        Image files the experiment wrote into ``out_dir``.
    measured : dict of str -> float
        Named numbers that ``[check]`` thresholds of the spec can refer to.
    record : Path or None
        The :class:`StudyRecord` file the experiment wrote (its tables are CSV files next to
        it), when its text can be rendered again from data.
    """

    title: str
    markdown: str
    tables: dict = field(default_factory=dict)
    figures: list = field(default_factory=list)
    measured: dict = field(default_factory=dict)
    record: Path | None = None


#: Format tag of a study record file.
RECORD_FORMAT = "gtvcvx-study/1"


@dataclass
class StudyRecord:
    """What one study measured, as data: enough to render its text again without solving.

    Attributes
    ----------
    study : str
        The experiment name (a key of :func:`registry` and of :func:`renderers`).
    title : str
    params : dict
        The effective parameters (after the scale and the spec's overrides).
    measured : dict of str -> float
    tables : dict of str -> pandas.DataFrame
    facts : dict
        Other JSON values the text quotes (sizes of the data, a side computation's numbers).
    figures : list of str
        Figure file names, relative to the record's directory.
    directory : Path or None
        Where the record was loaded from (not part of the file).
    """

    study: str
    title: str
    params: dict
    measured: dict
    tables: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    figures: list = field(default_factory=list)
    directory: Path | None = field(default=None, compare=False)

    def save(self, directory) -> Path:
        """Write ``<directory>/<study>.json`` and one ``<study>.<table>.csv`` per table; the JSON path."""
        directory = Path(directory)
        tables = {}
        for key, df in self.tables.items():
            name = f"{self.study}.{key}.csv"
            atomic_write_text(directory / name, df.to_csv(index=False, float_format="%.17g"))
            tables[key] = name
        doc = {"format": RECORD_FORMAT, "study": self.study, "title": self.title, "params": self.params,
               "measured": self.measured, "facts": self.facts, "figures": [Path(f).name for f in self.figures],
               "tables": tables}
        path = directory / f"{self.study}.json"
        atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True, default=str) + "\n")
        return path

    @classmethod
    def load(cls, path) -> "StudyRecord":
        """The record saved at ``path`` (tables read from the CSV files next to it).

        Raises
        ------
        ValueError
            Not a study record, or a table file outside the record's directory.
        """
        path = Path(path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not readable as a study record ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT:
            raise ValueError(f"{path}: expected a study record (format {RECORD_FORMAT!r})")
        tables = {}
        for key, name in dict(doc.get("tables") or {}).items():
            if not isinstance(name, str) or Path(name).name != name or name.startswith("."):
                raise ValueError(f"{path}: tables.{key}: expected a file name next to the record, got {name!r}")
            tables[key] = pd.read_csv(path.parent / name)
        return cls(study=str(doc["study"]), title=str(doc.get("title", "")), params=dict(doc.get("params") or {}),
                   measured=dict(doc.get("measured") or {}), tables=tables, facts=dict(doc.get("facts") or {}),
                   figures=[str(f) for f in doc.get("figures") or []], directory=path.parent)


class StudyStore:
    """Records of the studies run in one ``gtvcvx report`` / ``gtvcvx check`` run.

    Keyed by study name *and* effective parameters (the seeds are parameters): a summary reuses
    a study's record only when it was run with exactly the parameters the summary would use, so
    what it reports never depends on which runs happened before; the store only saves time.
    It is created by the caller and passed explicitly (no module state).
    """

    def __init__(self):
        self._records: dict = {}

    @staticmethod
    def key(study: str, params: dict) -> tuple:
        return study, json.dumps(params, sort_keys=True, default=str)

    def put(self, record: StudyRecord) -> None:
        self._records[self.key(record.study, record.params)] = record

    def get(self, study: str, params: dict) -> StudyRecord | None:
        return self._records.get(self.key(study, params))


def registry() -> dict:
    """Every experiment name -> function, from the modules of this package."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for name, function in getattr(module, "EXPERIMENTS", {}).items():
            if name in found:
                raise RuntimeError(f"experiment {name!r} is defined twice")
            found[name] = function
    return found


def renderers() -> dict:
    """Every study name -> ``function(record) -> Markdown``, from the modules' ``RENDERERS``."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            found.update(getattr(importlib.import_module(f"{__name__}.{info.name}"), "RENDERERS", {}))
    return found


def render_record(record: StudyRecord) -> str:
    """The Markdown of a study from its record (no solving).

    Raises
    ------
    ValueError
        No renderer is registered for ``record.study``.
    """
    table = renderers()
    if record.study not in table:
        raise ValueError(f"no renderer for study {record.study!r}; expected one of {sorted(table)}")
    return table[record.study](record)


def get_experiment(name: str):
    table = registry()
    if name not in table:
        raise ValueError(f"unknown experiment {name!r}; expected one of {sorted(table)}")
    return table[name]
