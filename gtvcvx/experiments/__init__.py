"""Experiments: multi-run studies (paper reproductions, sweeps) driven by ``kind = "experiment"`` specs.

Each module in this package defines ``EXPERIMENTS = {"name": function}``; a function has the
signature ``function(params: dict, out_dir: Path, *, scale: str = "default") -> ExperimentOutput``
and writes its figures into ``out_dir``. ``scale`` is one of :data:`SCALES`: ``"full"`` runs the
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
import pkgutil
from dataclasses import dataclass, field

__all__ = ["ExperimentOutput", "SCALES", "check_scale", "scaled_params", "registry", "get_experiment"]

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
    params = dict(params or {})
    unknown = set(params) - set(protocol)
    if unknown:
        raise ValueError(f"params: unknown key(s) {sorted(unknown)} for {context}; expected some of {sorted(protocol)}")
    out = dict(protocol)
    if scale != "full":
        out.update(overrides)
    out.update(params)
    return out


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
    """

    title: str
    markdown: str
    tables: dict = field(default_factory=dict)
    figures: list = field(default_factory=list)
    measured: dict = field(default_factory=dict)


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


def get_experiment(name: str):
    table = registry()
    if name not in table:
        raise ValueError(f"unknown experiment {name!r}; expected one of {sorted(table)}")
    return table[name]
