"""TOML problem specs: a file names the graph, the local data, the loss, the penalty, lam,
solver settings and check thresholds; :func:`gtvcvx.load_spec` turns it into a :class:`Spec`
(this module reads ``kind = "gtv"`` specs and holds the typed readers every kind uses).

Example (``problems/paper/table1.toml``)::

    name = "paper_table1"
    seed = 0

    [graph]
    generator = "sbm"
    sizes = [100, 100]
    p_in = 0.5
    p_out = 0.01

    [data]
    generator = "linear"
    d = 100
    m = 10
    sigma = 1e-3

    [problem]
    loss = "squared_error"
    penalty = "norm2"
    lam = 1e-2

    [solve]
    tol = 1e-6

    [check]
    max_rel_gap = 1e-6
    max_mse = 1e-3

Graph generators: ``sbm``, ``chain``, ``clustered_chain``, ``star``, ``complete``, ``knn`` (built
on the data points) or ``file = "edges.csv"``. Data generators: ``linear``, ``logistic``,
``blobs`` or ``file = "data.npz"`` (loaded with ``allow_pickle=False``; keys ``X``, ``y``,
``node`` for labelled data or ``points``; optional ``W_true`` and ``labels``) or
``file = "data.csv"`` (one sample per row, header ``node,y,x0,x1,...``; see
:func:`gtvcvx.io.read_samples_csv`). Seeds for the
graph and the data are spawned from the top-level ``seed`` unless given in their tables.
Every error names the file, the key and what was expected.
"""

from __future__ import annotations

import contextvars
import difflib
import math
import re
import sys
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import data as data_mod
from . import graphs as graphs_mod
from .data import GroundTruth
from .graph import Graph
from .io import read_npz, read_samples_csv
from .losses import build_loss, get_loss
from .penalties import get_penalty
from ._text import first_unsafe, printable
from ._validation import MAX_DATA_MAGNITUDE, contained_path
from .problem import GTVProblem

__all__ = ["Spec", "SpecError", "Table", "load_gtv_spec", "read_spec_document", "read_sections",
           "read_solve_options", "read_checks", "find_specs", "allow_outside_paths", "MAX_SPEC_ELEMENTS",
           "CHECK_KEYS"]

#: Largest number of array elements a spec may declare (about 4 GB of float64).
MAX_SPEC_ELEMENTS = 500_000_000

#: Shortest ``[solve] time_limit`` (seconds): a solve cannot even start in less.
MIN_TIME_LIMIT = 1e-3

#: Thresholds understood in a spec's ``[check]`` table.
CHECK_KEYS = {
    "max_rel_gap": "relative duality gap (P - D) / (1 + |P| + |D|)",
    "max_abs_gap": "absolute duality gap P - D",
    "max_solution_error": "||W - W_ref|| / max(1, ||W_ref||) against the CVXPY reference",
    "max_objective_error": "|P - P_ref| / max(1, |P_ref|) against the CVXPY reference",
    "max_mse": "mean squared error of the local models against the ground truth",
    "min_ari": "adjusted Rand index of the recovered clusters against the ground truth",
    "min_accuracy": "classification accuracy",
    "max_iterations": "iterations of the solver",
}


class SpecError(ValueError):
    """A spec file is malformed; the message names the file, the key and what was expected."""

    def __init__(self, path, key: str | None, message: str):
        self.path = str(path)
        self.key = key
        super().__init__(f"{path}: {key}: {message}" if key else f"{path}: {message}")


@dataclass
class Spec:
    """A loaded problem spec.

    Attributes
    ----------
    name : str
    path : Path or None
    problem : GTVProblem
    truth : GroundTruth
        True local models / cluster labels where the data are synthetic (fields may be None).
    solve_options : dict
        ``tol``, ``max_iter``, ``time_limit``, ``solver`` and per-backend option tables.
    checks : dict
        Thresholds from the ``[check]`` table (see :data:`CHECK_KEYS`).
    seed : int or None
    description : str
    config : dict
        The parsed TOML document.
    """

    name: str
    path: Path | None
    problem: GTVProblem
    truth: GroundTruth
    solve_options: dict = field(default_factory=dict)
    checks: dict = field(default_factory=dict)
    seed: int | None = None
    description: str = ""
    config: dict = field(default_factory=dict)
    kind: str = "gtv"


# ---------------------------------------------------------------------------------------
# small typed readers
# ---------------------------------------------------------------------------------------
class Table:
    """A TOML table with typed getters whose errors name the file and the dotted key."""

    def __init__(self, path, prefix: str, table: Any):
        self.path = path
        self.prefix = prefix
        if not isinstance(table, dict):
            raise SpecError(path, prefix or None, f"expected a table, got {type(table).__name__}")
        self.table = table
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def error(self, name: str, message: str) -> SpecError:
        return SpecError(self.path, self.key(name), message)

    def has(self, name: str) -> bool:
        return name in self.table

    def missing(self, name: str, expected: str) -> SpecError:
        """``name`` is absent: say what was expected and, for a near-miss key in the table, what was found."""
        near = difflib.get_close_matches(name, [k for k in self.table if k not in self.used and isinstance(k, str)],
                                         n=1, cutoff=0.6)
        found = f" (found {near[0]!r}: a misspelling of {name!r}?)" if near else ""
        return self.error(name, f"missing; expected {expected}{found}")

    def raw(self, name: str, default=None):
        self.used.add(name)
        return self.table.get(name, default)

    def str(self, name: str, default=None, choices=None) -> str:
        value = self.raw(name, default)
        if value is None:
            raise self.missing(name, "a string" + (f" in {sorted(choices)}" if choices else ""))
        if not isinstance(value, str):
            raise self.error(name, f"expected a string, got {value!r}")
        if choices is not None and value not in choices:
            raise self.error(name, f"expected one of {sorted(choices)}, got {value!r}")
        return value

    def number(self, name: str, default=None, *, minimum=None, maximum=None, integer=False, exclusive=False):
        value = self.raw(name, default)
        kind = "an integer" if integer else "a number"
        if value is None:
            raise self.missing(name, kind)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
            raise self.error(name, f"expected {kind}, got {value!r}")
        if not math.isfinite(value):
            raise self.error(name, f"expected a finite number, got {value!r}")
        if minimum is not None and (value < minimum or (exclusive and value == minimum)):
            raise self.error(name, f"expected {kind} {'>' if exclusive else '>='} {minimum}, got {value!r}")
        if maximum is not None and value > maximum:
            raise self.error(name, f"expected {kind} <= {maximum}, got {value!r}")
        return value

    def int_list(self, name: str, default=None, *, minimum=1) -> list[int]:
        value = self.raw(name, default)
        if value is None:
            raise self.missing(name, "a list of integers")
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if (not isinstance(value, list) or not value
                or any(isinstance(v, bool) or not isinstance(v, int) or v < minimum for v in value)):
            raise self.error(name, f"expected a non-empty list of integers >= {minimum}, got {value!r}")
        return value

    def bounds(self, name: str, dim: int | None = None) -> list[tuple[float, float]]:
        """A box: a list of ``[low, high]`` pairs, one per feature, with ``low < high``.

        Bounds beyond :data:`gtvcvx._validation.MAX_DATA_MAGNITUDE` in magnitude are refused:
        samples drawn in the box and their squared distances must stay finite (a box such as
        ``[-1e308, 1e308]`` has an infinite width).
        """
        value = self.raw(name)
        ok = isinstance(value, list) and value and all(
            isinstance(b, list) and len(b) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                        and math.isfinite(v) for v in b) and b[0] < b[1]
            for b in value)
        if not ok:
            raise self.error(name, f"expected a list of [low, high] pairs with low < high, got {value!r}")
        if dim is not None and len(value) != dim:
            raise self.error(name, f"expected {dim} [low, high] pairs (one per feature), got {len(value)}")
        for index, (low, high) in enumerate(value):
            if max(abs(low), abs(high)) > MAX_DATA_MAGNITUDE or not math.isfinite(float(high) - float(low)):
                raise self.error(name, f"pair {index} [{low!r}, {high!r}]: expected bounds within "
                                       f"+-{MAX_DATA_MAGNITUDE:.0e} (a finite width whose squares stay finite)")
        return [(float(a), float(b)) for a, b in value]

    def path_value(self, name: str) -> Path:
        """A file named by the spec: relative to the spec's folder and confined to it (resolved,
        symlinks included) unless outside paths are allowed (:func:`allow_outside_paths`)."""
        value = self.str(name)
        if _ALLOW_OUTSIDE.get():
            candidate = Path(value)
            if not candidate.is_absolute():
                candidate = Path(self.path).parent / candidate
        else:
            try:
                candidate = contained_path(value, Path(self.path).parent, name)
            except ValueError as exc:
                raise self.error(name, f"{exc}; the spec may only read files in its own folder "
                                       "(pass --allow-outside, or allow_outside=True, to permit it)") from None
        if not candidate.is_file():
            raise self.error(name, f"file not found: {candidate}")
        return candidate

    def finish(self, allowed_extra=()) -> None:
        unknown = set(self.table) - self.used - set(allowed_extra)
        if unknown:
            name = sorted(unknown)[0]
            valid = sorted(self.used | set(allowed_extra))
            raise self.error(name, f"unknown key; {did_you_mean(name, valid)}expected one of {valid}")


def did_you_mean(name, valid) -> str:
    """``"did you mean 'x'? "`` for the closest of ``valid`` to a misspelled ``name`` (empty when none is close)."""
    near = difflib.get_close_matches(str(name), list(valid), n=1, cutoff=0.6)
    return f"did you mean {near[0]!r}? " if near else ""


# ---------------------------------------------------------------------------------------
# graph
# ---------------------------------------------------------------------------------------
_GRAPH_GENERATORS = ("sbm", "chain", "clustered_chain", "star", "complete", "knn", "file")


def _expected_edges(table: Table, generator: str) -> float:
    t = table.table
    try:
        if generator == "sbm":
            sizes = np.asarray(t.get("sizes", [1]), dtype=float)
            within = float((sizes * (sizes - 1) / 2).sum()) * float(t.get("p_in", 0))
            across = float((sizes.sum() ** 2 - (sizes ** 2).sum()) / 2) * float(t.get("p_out", 0))
            return within + across
        if generator == "complete":
            n = float(t.get("n", 1))
            return n * (n - 1) / 2
    except (TypeError, ValueError):
        return 0.0
    return 0.0


def _build_graph(table: Table, seed, points=None):
    """Returns (Graph, labels or None)."""
    generator = "file" if table.has("file") else table.str("generator", choices=_GRAPH_GENERATORS)
    table.used.update({"generator"})
    try:
        if generator == "file":
            path = table.path_value("file")
            n = table.number("n", None, minimum=1, integer=True) if table.has("n") else None
            graph = Graph.from_csv(path, n=n)
            labels = None
        elif generator == "sbm":
            sizes = table.int_list("sizes")
            p_in = table.number("p_in", minimum=0, maximum=1)
            p_out = table.number("p_out", minimum=0, maximum=1)
            graph, labels = graphs_mod.sbm(sizes, p_in, p_out, seed=seed)
        elif generator == "clustered_chain":
            sizes = table.int_list("sizes")
            bridge = table.number("bridge_weight", minimum=0)
            weight = table.number("weight", 1.0, minimum=0, exclusive=True)
            graph, labels = graphs_mod.clustered_chain(sizes, bridge, weight)
        elif generator in ("chain", "star", "complete"):
            n = table.number("n", minimum=1, integer=True)
            weight = table.number("weight", 1.0, minimum=0, exclusive=True)
            graph = getattr(graphs_mod, generator)(n, weight)
            labels = None
        else:  # knn on the data points
            if points is None:
                raise table.error("generator", "'knn' needs point data ([data] generator 'blobs' or a file with 'points')")
            k = table.number("k", 10, minimum=1, integer=True)
            weights = table.str("weights", "gaussian", choices=("gaussian", "uniform"))
            phi = table.number("phi", minimum=0) if table.has("phi") else None
            graph = graphs_mod.knn(points, k, weights=weights, phi=phi)
            labels = None
    except SpecError:
        raise
    except ValueError as exc:
        raise table.error("generator" if not table.has("file") else "file", str(exc)) from None
    table.finish(allowed_extra=("seed",))
    return graph, labels


# ---------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------
_DATA_GENERATORS = ("linear", "logistic", "blobs", "file")


def _load_data_file(table: Table):
    """``(path, arrays)`` of a data file: ``.csv`` (samples: ``node, y, features``) or ``.npz``."""
    path = table.path_value("file")
    try:
        arrays = read_samples_csv(path) if path.suffix.lower() == ".csv" else read_npz(path)
    except ValueError as exc:
        raise table.error("file", str(exc)) from None
    allowed = {"X", "y", "node", "points", "W_true", "labels"}
    unknown = set(arrays) - allowed
    if unknown:
        raise table.error("file", f"{path} has unexpected arrays {sorted(unknown)}; expected keys among {sorted(allowed)}")
    for key, arr in arrays.items():
        if arr.dtype.kind not in "biuf":
            raise table.error("file", f"{path}: array {key!r} has dtype {arr.dtype}; expected numbers")
    return path, arrays


def _estimate_check(path, n_nodes: int, samples: float, d: int, edges: float) -> None:
    for what, count in (("nodes", n_nodes), ("data entries (samples x d)", samples * d),
                        ("flow entries (edges x d)", edges * d), ("edges", edges)):
        if count > MAX_SPEC_ELEMENTS:
            raise SpecError(path, None, f"the spec declares about {count:.3g} {what}, more than the limit of "
                                        f"{MAX_SPEC_ELEMENTS:.3g}; refusing before allocating")


def read_sections(path: Path, doc: dict, required: tuple[str, ...], table=None):
    """The common head of a spec: ``name``, ``description``, ``seed`` and its tables.

    Returns ``(name, description, seed, tables)`` where ``tables`` maps every required section
    and the optional ``solve`` and ``check`` to a ``table`` reader (default :class:`Table`).
    Unknown top-level keys raise :class:`SpecError`.
    """
    table = table or Table
    top = table(path, "", doc)
    top.used.add("kind")
    name = top.str("name", path.stem)
    description = top.str("description", "")
    seed = top.number("seed", 0, minimum=0, integer=True)
    for section in required:
        if section not in doc:
            near = difflib.get_close_matches(section, [k for k in doc if isinstance(k, str)], n=1, cutoff=0.6)
            raise SpecError(path, section, "missing table" + (f" (found [{near[0]}]: a misspelling of "
                                                             f"[{section}]?)" if near else ""))
    tables = {section: table(path, section, top.raw(section)) for section in required}
    for section in ("solve", "check"):
        tables[section] = table(path, section, top.raw(section, {}))
    top.finish()
    return name, description, seed, tables


def read_component(table: Table, key: str) -> tuple[str, dict]:
    """A loss or penalty named in a spec: ``key = "name"`` or ``key = {name = "...", <param> = ...}``.

    Returns ``(name, params)``; the parameters are passed to the component's constructor,
    which names any it does not accept.
    """
    value = table.raw(key)
    if isinstance(value, str):
        return value, {}
    if isinstance(value, dict):
        params = dict(value)
        name = params.pop("name", None)
        if not isinstance(name, str):
            raise table.error(key, f"an inline table needs a string 'name', got {value!r}")
        return name, params
    if value is None:
        raise table.missing(key, "a name or an inline table {name = ..., <param> = ...}")
    raise table.error(key, f"expected a name or an inline table, got {value!r}")


def read_solve_options(solve_t: Table, methods: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The ``[solve]`` table: ``solver``, ``tol``, ``max_iter``, ``time_limit`` (and ``method``
    when ``methods`` are given), plus one sub-table of options per CVXPY backend."""
    keys = ("solver", "tol", "max_iter", "time_limit") + (("method",) if methods else ())
    solve_options: dict[str, Any] = {}
    if solve_t.has("solver"):
        solver = solve_t.str("solver")
        if solver.lower() != "fast" and solver.upper() not in _cvxpy_backends():
            raise solve_t.error("solver", f"expected 'fast' or a CVXPY backend name, got {solver!r}; "
                                          f"{did_you_mean(solver.upper(), _cvxpy_backends())}{_backends_hint()}")
        solve_options["solver"] = solver
    if methods and solve_t.has("method"):
        solve_options["method"] = solve_t.str("method", choices=methods)
    if solve_t.has("tol"):
        solve_options["tol"] = solve_t.number("tol", minimum=0, exclusive=True)
    if solve_t.has("max_iter"):
        solve_options["max_iter"] = solve_t.number("max_iter", minimum=1, integer=True)
    if solve_t.has("time_limit"):
        solve_options["time_limit"] = solve_t.number("time_limit", minimum=MIN_TIME_LIMIT)
    backends = {}
    for key, value in solve_t.table.items():
        if isinstance(value, dict):
            if key.upper() not in _cvxpy_backends():
                raise solve_t.error(key, f"unknown backend {key!r} for a table of solver options; "
                                         f"{did_you_mean(key.upper(), _cvxpy_backends())}{_backends_hint()}")
            backends[key.upper()] = dict(value)
            solve_t.used.add(key)
    if backends:
        solve_options["backend_options"] = backends
    solve_t.finish(allowed_extra=keys)
    return solve_options


def _cvxpy_backends() -> list[str]:
    """Every solver name CVXPY knows (installed here or not), and the installed ones."""
    import cvxpy

    return sorted(set(cvxpy.settings.SOLVERS) | set(cvxpy.installed_solvers()))


def _backends_hint() -> str:
    import cvxpy

    return (f"the installed CVXPY backends are {', '.join(sorted(cvxpy.installed_solvers()))} "
            "(other CVXPY solver names are accepted too)")


def read_checks(check_t: Table, allowed) -> dict[str, float]:
    """The ``[check]`` table: non-negative thresholds, each named in ``allowed``."""
    checks = {}
    for key in list(check_t.table):
        if key not in allowed:
            raise check_t.error(key, f"unknown check; expected one of {sorted(allowed)}")
        checks[key] = check_t.number(key, minimum=0)
    return checks


_ALLOW_OUTSIDE = contextvars.ContextVar("gtvcvx_allow_outside", default=False)


@contextmanager
def allow_outside_paths(allowed: bool = True):
    """Within the block, specs may name files outside their own folder (``--allow-outside``).

    By default a spec's ``file`` keys must stay inside the spec's folder: an absolute path,
    ``..`` or a symlink leading out is refused, so an untrusted spec cannot read other files.
    """
    token = _ALLOW_OUTSIDE.set(bool(allowed))
    try:
        yield
    finally:
        _ALLOW_OUTSIDE.reset(token)


def read_spec_document(path) -> dict:
    """Read a spec file as a TOML document; errors name the file.

    Raises
    ------
    SpecError
        The file is missing, not text, or not valid TOML.
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError(path, None, "spec file not found")
    try:
        with open(path, "rb") as fh:
            text = fh.read().removeprefix(b"\xef\xbb\xbf").decode("utf-8")  # a UTF-8 byte-order mark is dropped
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(path, None, f"not valid TOML ({exc})") from None
    except UnicodeDecodeError:
        raise SpecError(path, None, "not a text TOML file") from None
    except RecursionError:
        raise SpecError(path, None, "arrays or tables nest too deeply to be read; expected a spec "
                                    "of a few levels of tables and lists") from None
    except ValueError as exc:  # an integer literal longer than Python converts (sys.get_int_max_str_digits)
        raise _long_integer_error(path, text, exc) from None
    _refuse_control_characters(path, doc, "")
    _refuse_line_breaks(path, doc.get("name"), "name")
    return doc


def _long_integer_error(path: Path, text: str, exc: ValueError) -> SpecError:
    """The :class:`SpecError` for an integer literal tomllib could not convert, naming its line and key."""
    match = re.search(r"[0-9][0-9_]{%d,}" % max(sys.get_int_max_str_digits(), 1), text)
    if match is None:
        return SpecError(path, None, f"not valid TOML ({exc})")
    lineno = text.count("\n", 0, match.start()) + 1
    line = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
    key = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*=", line)
    return SpecError(path, key.group(1) if key else None,
                     f"line {lineno}: an integer literal of {len(match.group()):,} digits is too long to read; "
                     "expected a number of ordinary size")


#: Line breaks (and the tab) refused in spec names and keys: they print on one line of reports and of ``check``.
_LINE_BREAKS = "\n\t\u2028\u2029"


def _refuse_line_breaks(path: Path, value, key: str) -> None:
    """Refuse a line break or tab in ``value`` (a spec's ``name``, or a key), which is printed on one line."""
    if not isinstance(value, str):
        return
    found = next(((i, ch) for i, ch in enumerate(value) if ch in _LINE_BREAKS), None)
    if found is not None:
        raise SpecError(path, key, f"holds a line break or tab ({found[1]!r} at position {found[0]}); expected "
                        "one line of text (a longer text belongs in 'description')")


def _refuse_control_characters(path: Path, value, key: str) -> None:
    """Refuse control characters (but tab and newline) in every key and string of a spec document,
    and line breaks and tabs in keys.

    Names, keys and file names are printed on terminals and written to JUnit XML, where such
    characters could rewrite what is shown or break the file (see :mod:`gtvcvx._text`).
    """
    if isinstance(value, dict):
        for name, item in value.items():
            child = f"{key}.{printable(name)}" if key else printable(name)
            found = first_unsafe(name)
            if found is not None:
                raise SpecError(path, child, f"the key holds a control character ({found[1]!r} at position {found[0]}); "
                                "keys must be printable text")
            _refuse_line_breaks(path, name, child)
            _refuse_control_characters(path, item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_control_characters(path, item, f"{key}[{index}]")
    elif isinstance(value, str):
        found = first_unsafe(value)
        if found is not None:
            raise SpecError(path, key, f"holds a control character ({found[1]!r} at position {found[0]}); "
                            "expected printable text (tabs and newlines are allowed)")


def load_gtv_spec(path, doc: dict | None = None) -> Spec:
    """Build the problem, ground truth, solve options and checks of a ``kind = "gtv"`` spec.

    Most callers want :func:`gtvcvx.load_spec`, which reads any kind of spec. ``doc`` is the
    parsed TOML document (read from ``path`` when omitted).

    Raises
    ------
    SpecError
        A ``ValueError`` whose message names the file, the key and what was expected.
    """
    path = Path(path)
    if doc is None:
        doc = read_spec_document(path)

    name, description, seed, tables = read_sections(path, doc, ("graph", "data", "problem"))
    graph_t, data_t, prob_t, solve_t, check_t = (tables[k] for k in ("graph", "data", "problem", "solve", "check"))

    graph_seed, data_seed = np.random.SeedSequence(seed).spawn(2)
    if graph_t.has("seed"):
        graph_seed = graph_t.number("seed", minimum=0, integer=True)
    if data_t.has("seed"):
        data_seed = data_t.number("seed", minimum=0, integer=True)
    graph_seed = np.random.default_rng(graph_seed)
    data_seed = np.random.default_rng(data_seed)

    # --- problem table first (cheap) so that name errors come early
    loss_name, loss_params = read_component(prob_t, "loss")
    try:
        loss_class = get_loss(loss_name)
    except ValueError as exc:
        raise prob_t.error("loss", str(exc)) from None
    penalty_name, penalty_params = read_component(prob_t, "penalty")
    try:
        penalty = get_penalty(penalty_name, **penalty_params)
    except ValueError as exc:
        raise prob_t.error("penalty", str(exc)) from None
    lam = prob_t.number("lam", minimum=0)
    prob_t.finish()

    # --- data (and graph; knn graphs are built on the points)
    data_generator = "file" if data_t.has("file") else data_t.str("generator", choices=_DATA_GENERATORS)
    data_t.used.add("generator")
    graph_generator = graph_t.table.get("generator", "file" if graph_t.has("file") else None)
    points = None
    truth_W = truth_labels = None
    X = y = None
    loss_data = None  # stacked (X, y, node, n) from an .npz file

    if data_generator in ("blobs",) or (data_generator == "file" and graph_generator == "knn"):
        if data_generator == "blobs":
            sizes = data_t.int_list("sizes")
            d = data_t.number("d", 2, minimum=1, integer=True)
            _estimate_check(path, sum(sizes), sum(sizes), d, 0)
            pset = data_mod.blobs(sizes, d, separation=data_t.number("separation", 5.0, minimum=0),
                                  std=data_t.number("std", 1.0, minimum=0), seed=data_seed)
            points, truth_W, truth_labels = pset.points, pset.truth.W, pset.truth.labels
        else:
            npz_path, arrays = _load_data_file(data_t)
            if "points" not in arrays:
                raise data_t.error("file", f"{npz_path} has no 'points' array (needed for a knn graph)")
            points = arrays["points"]
            truth_W, truth_labels = arrays.get("W_true"), arrays.get("labels")
        data_t.finish(allowed_extra=("seed",))
        graph, graph_labels = _build_graph(graph_t, graph_seed, points=points)
    else:
        if graph_generator in _GRAPH_GENERATORS and graph_generator not in ("file", "knn"):
            if graph_generator in ("sbm", "clustered_chain"):
                n_guess = sum(graph_t.int_list("sizes"))  # validated before it is summed
            else:
                n_guess = graph_t.table.get("n", 0)
            if isinstance(n_guess, (int, float)) and n_guess > MAX_SPEC_ELEMENTS:
                raise SpecError(path, "graph", f"declares {n_guess:.3g} nodes, more than the limit; refusing")
            if data_generator in ("linear", "logistic"):
                d_guess = data_t.table.get("d", 1)
                m_guess = data_t.table.get("m", 10)
                if isinstance(d_guess, int) and isinstance(m_guess, int) and isinstance(n_guess, (int, float)):
                    _estimate_check(path, n_guess, float(n_guess) * m_guess, d_guess,
                                    _expected_edges(graph_t, graph_generator))
        graph, graph_labels = _build_graph(graph_t, graph_seed)
        n = graph.n
        if data_generator in ("linear", "logistic"):
            d = data_t.number("d", minimum=1, integer=True)
            m_raw = data_t.raw("m", 10)
            if isinstance(m_raw, list):
                m = data_t.int_list("m", minimum=0)
                if len(m) != n:
                    raise data_t.error("m", f"expected one sample count per node ({n}), got {len(m)}")
            else:
                m = data_t.number("m", 10, minimum=0, integer=True)
            sigma = data_t.number("sigma", 1e-3 if data_generator == "linear" else 0.0, minimum=0)
            rho = data_t.number("rho", 1.0, minimum=0, maximum=1)
            if graph_labels is None:
                n_clusters = data_t.number("n_clusters", 1, minimum=1, integer=True)
                labels = np.minimum(np.arange(n) * n_clusters // n, n_clusters - 1)
            else:
                if data_t.has("n_clusters"):
                    raise data_t.error("n_clusters", "the graph generator already defines the clusters")
                labels = graph_labels
            gen = data_mod.linear_model if data_generator == "linear" else data_mod.logistic_model
            try:
                ds = gen(labels, d, m, sigma=sigma, rho=rho, seed=data_seed)
            except ValueError as exc:
                raise data_t.error("generator", str(exc)) from None
            X, y, truth_W, truth_labels = ds.X, ds.y, ds.truth.W, ds.truth.labels
        elif data_generator == "file":
            npz_path, arrays = _load_data_file(data_t)
            if "points" in arrays:
                points = arrays["points"]
            elif {"X", "y", "node"} <= set(arrays):
                loss_data = (arrays["X"], arrays["y"], arrays["node"], n)
            else:
                raise data_t.error("file", f"{npz_path} must hold 'X', 'y' and 'node' arrays, or 'points'")
            truth_W, truth_labels = arrays.get("W_true"), arrays.get("labels")
        else:
            raise data_t.error("generator", f"'{data_generator}' data need a 'knn' graph built on them")
        data_t.finish(allowed_extra=("seed",))

    # --- loss (from the registry: the spec names it, the data feed it)
    try:
        loss = build_loss(loss_class.name, loss_params, X=X, y=y, points=points, stacked=loss_data)
    except ValueError as exc:
        # the loss's own parameters (its messages name it: "loss 'huber': delta ...") vs. its data
        parameter = "parameter" in str(exc) or str(exc).startswith(f"loss '{loss_class.name}':")
        raise SpecError(path, "problem.loss" if parameter else "data", str(exc)) from None

    try:
        problem = GTVProblem(graph, loss, penalty, lam)
    except ValueError as exc:  # a penalty fixed to another dimension than the data's d, or a data mismatch
        where = "problem.penalty" if str(exc).startswith(f"penalty '{penalty.name}'") else "data"
        raise SpecError(path, where, str(exc)) from None

    truth = GroundTruth(
        W=_truth_array(path, "W_true", truth_W, (problem.n, problem.d)),
        labels=_truth_array(path, "labels", truth_labels, (problem.n,)),
    )

    # --- solve options and checks
    solve_options = read_solve_options(solve_t)
    checks = read_checks(check_t, CHECK_KEYS)
    return Spec(name=name, path=path, problem=problem, truth=truth, solve_options=solve_options,
                checks=checks, seed=seed, description=description, config=doc)


def _truth_array(path, key, value, shape):
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.shape != shape:
        raise SpecError(path, f"data.{key}", f"expected shape {shape}, got {arr.shape}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise SpecError(path, f"data.{key}", "must be finite")
    return arr


def find_specs(paths) -> list[Path]:
    """Expand files and directories (recursively, ``*.toml``) into a sorted list of spec paths.

    A spec found in a directory must stay inside it, by the rule of the specs' data files
    (:func:`gtvcvx._validation.contained_path`): a symbolic link leading outside is refused.
    A file named in ``paths`` is the caller's choice and is taken as it is.

    Raises
    ------
    SpecError
        Naming a path that does not exist, or a spec found in a directory that leads outside it.
    """
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(p.rglob("*.toml"))
            for spec_path in found:
                try:
                    contained_path(spec_path.relative_to(p), p, "the spec file")
                except ValueError:
                    raise SpecError(spec_path, None, f"a symbolic link leads outside the searched directory {p}; "
                                    "a spec found in a directory must stay inside it (name the file itself "
                                    "to run it anyway)") from None
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise SpecError(p, None, "no such spec file or directory")
    return out
