"""``kind = "rkhs"`` TOML specs: one kernel-sparse classification problem with check thresholds.

Example (``problems/rkhs/ellipses_small.toml``)::

    kind = "rkhs"
    name = "rkhs_ellipses_small"
    description = "the paper's two ellipses, 200 samples"
    seed = 0

    [data]
    generator = "ellipses"      # "ellipses", "breast_cancer" or file = "data.npz"
    n = 200
    noise = 0.2
    n_test = 1000

    [dictionary]
    type = "grid"               # "grid", "sobol" or "samples"
    bounds = [[-18.0, 9.0], [-10.0, 20.0]]
    points_per_dim = 16
    widths = [1.5, 3.0]
    threshold = 1e-6

    [problem]
    gamma = 0.5
    eps = 0.1
    C = 1000.0                  # omit for the hard margin

    [solve]
    tol = 1e-6
    method = "ssnal"

    [check]
    max_rel_gap = 1e-6
    min_accuracy = 0.9

A data file is loaded with ``allow_pickle=False`` and holds ``X`` (N, d) and ``y`` (N,), plus
optionally ``X_test`` and ``y_test``. Labels may be any two numeric classes. Every error is a
:class:`gtvcvx.spec.SpecError` naming the file, the dotted key and what was expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..spec import MAX_SPEC_ELEMENTS, SpecError, Table, read_checks, read_sections, read_solve_options
from .dictionary import Dictionary
from .problem import RKHSProblem, encode_labels

__all__ = ["RKHSSpec", "load_rkhs_spec", "RKHS_CHECK_KEYS"]

#: Thresholds understood in an rkhs spec's ``[check]`` table.
RKHS_CHECK_KEYS = {
    "max_rel_gap": "certified relative duality gap (P - D) / (1 + |P| + |D|)",
    "max_abs_gap": "certified duality gap P - D",
    "max_objective_error": "|D - D_ref| / max(1, |D_ref|) against the CVXPY reference dual",
    "min_accuracy": "test accuracy (training accuracy when the spec has no test set)",
    "max_iterations": "iterations of the solver",
}

_GENERATORS = ("ellipses", "breast_cancer", "file")
_DICTIONARIES = ("grid", "sobol", "samples")
_METHODS = ("ssnal", "pdhg", "subgradient")


@dataclass
class RKHSSpec:
    """A loaded ``kind = "rkhs"`` spec.

    Attributes
    ----------
    name, path, description
    problem : RKHSProblem
        Training data (labels encoded -1/+1), dictionary, gamma, eps, C.
    X_test, y_test : ndarray or None
        Test set (labels encoded -1/+1), when the spec has one.
    classes : ndarray (2,)
        Original labels of -1 and +1.
    solve_options : dict
        ``tol``, ``max_iter``, ``time_limit``, ``method``, ``solver`` and ``backend_options``.
    checks : dict
        Thresholds (see :data:`RKHS_CHECK_KEYS`).
    seed : int
    config : dict
        The parsed TOML document.
    """

    name: str
    path: Path | None
    problem: RKHSProblem
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    classes: np.ndarray | None = None
    solve_options: dict = field(default_factory=dict)
    checks: dict = field(default_factory=dict)
    seed: int = 0
    description: str = ""
    config: dict = field(default_factory=dict)
    kind: str = "rkhs"

    @property
    def dictionary(self) -> Dictionary:
        return self.problem.dictionary

    @property
    def X(self) -> np.ndarray:
        return self.problem.X

    @property
    def y(self) -> np.ndarray:
        return self.problem.y

    @property
    def has_test(self) -> bool:
        return self.X_test is not None


class _T(Table):
    """A spec table (see :class:`gtvcvx.spec.Table`, whose ``bounds`` it uses) with the list getter of RKHS specs."""

    def number_list(self, name, *, positive=True):
        value = self.raw(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value]
        ok = isinstance(value, list) and value and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (v > 0 or not positive)
            for v in value)
        if not ok:
            raise self.error(name, f"expected a positive number or a non-empty list of positive numbers, got {value!r}")
        return [float(v) for v in value]


def _load_file(t: _T):
    from ..io import read_npz

    path = t.path_value("file")
    try:
        arrays = read_npz(path)
    except ValueError as exc:
        raise t.error("file", str(exc)) from None
    allowed = {"X", "y", "X_test", "y_test"}
    if not {"X", "y"} <= set(arrays):
        raise t.error("file", f"{path} must hold arrays 'X' and 'y' (optionally 'X_test', 'y_test'), "
                              f"got {sorted(arrays)}")
    unknown = set(arrays) - allowed
    if unknown:
        raise t.error("file", f"{path} has unexpected arrays {sorted(unknown)}; expected keys among {sorted(allowed)}")
    if ("X_test" in arrays) != ("y_test" in arrays):
        raise t.error("file", f"{path} must hold both 'X_test' and 'y_test' or neither")
    for key, arr in arrays.items():
        if arr.dtype.kind not in "biuf":
            raise t.error("file", f"{path}: array {key!r} has dtype {arr.dtype}; expected numbers")
    return arrays.get("X"), arrays.get("y"), arrays.get("X_test"), arrays.get("y_test")


def _data(t: _T, seed):
    from . import data as data_mod

    generator = "file" if t.has("file") else t.str("generator", choices=_GENERATORS)
    t.used.add("generator")
    if t.has("seed"):
        seed = t.number("seed", minimum=0, integer=True)
    if generator == "ellipses":
        n = t.number("n", minimum=2, integer=True)
        n_test = t.number("n_test", 0, minimum=0, integer=True)
        noise = t.number("noise", 0.2, minimum=0)
        box = t.bounds("box", dim=2) if t.has("box") else data_mod.ELLIPSE_BOX
        if n + n_test > MAX_SPEC_ELEMENTS:
            raise t.error("n", f"declares {n + n_test} samples, more than the limit {MAX_SPEC_ELEMENTS}")
        train_seed, test_seed = np.random.SeedSequence(seed).spawn(2)
        train = data_mod.ellipses(n, noise=noise, box=box, seed=np.random.default_rng(train_seed))
        X, y = train.X, train.y
        X_test = y_test = None
        if n_test:
            test = data_mod.ellipses(n_test, noise=noise, box=box, seed=np.random.default_rng(test_seed))
            X_test, y_test = test.X, test.y
    elif generator == "breast_cancer":
        frac = t.number("test_fraction", 0.3, minimum=0, maximum=0.9)
        try:
            train, test = data_mod.breast_cancer(seed=seed, test_fraction=frac)
        except ImportError as exc:
            raise t.error("generator", str(exc)) from None
        X, y = train.X, train.y
        X_test, y_test = (test.X, test.y) if test.n else (None, None)
    else:
        X, y, X_test, y_test = _load_file(t)
    t.finish()
    return X, y, X_test, y_test


def _dictionary(t: _T, X, seed) -> Dictionary:
    kind = t.str("type", "grid", choices=_DICTIONARIES)
    widths = t.number_list("widths")
    threshold = t.number("threshold", 1e-6, minimum=0, maximum=0.999)
    weights = t.number("weights", minimum=0, exclusive=True) if t.has("weights") else None
    d = X.shape[1]
    try:
        if kind == "grid":
            bounds = t.bounds("bounds", dim=d) if t.has("bounds") else _data_box(X)
            ppd = t.raw("points_per_dim")
            if isinstance(ppd, int) and not isinstance(ppd, bool):
                ppd = [ppd] * d
            if (not isinstance(ppd, list) or len(ppd) != d
                    or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in ppd)):
                raise t.error("points_per_dim", f"expected a positive integer or {d} positive integers, got {ppd!r}")
            n_atoms = float(np.prod([float(v) for v in ppd])) * len(widths)
            _guard(t, "points_per_dim", n_atoms, X.shape[0])
            D = Dictionary.grid(bounds, ppd, widths, threshold=threshold)
        elif kind == "sobol":
            bounds = t.bounds("bounds", dim=d) if t.has("bounds") else _data_box(X)
            n = t.number("n", minimum=1, integer=True)
            _guard(t, "n", float(n) * len(widths), X.shape[0])
            D = Dictionary.sobol(bounds, n, widths, seed=seed, threshold=threshold)
        else:
            _guard(t, "widths", float(X.shape[0]) * len(widths), X.shape[0])
            D = Dictionary.from_samples(X, widths, threshold=threshold)
    except ValueError as exc:
        if isinstance(exc, SpecError):
            raise
        raise t.error("type", str(exc)) from None
    if weights is not None:
        D = Dictionary(D.centers, D.widths, weights, threshold=threshold)
    t.finish()
    return D


def _data_box(X):
    lo, hi = X.min(0), X.max(0)
    pad = 0.05 * np.maximum(hi - lo, 1e-12)
    return list(zip(lo - pad, hi + pad))


def _guard(t, key, n_atoms, n_samples):
    if n_atoms * max(n_samples, 1) > MAX_SPEC_ELEMENTS:
        raise t.error(key, f"the dictionary has about {n_atoms:.3g} atoms, i.e. a {n_samples} x {n_atoms:.3g} "
                           f"kernel matrix, more than the limit of {MAX_SPEC_ELEMENTS:.3g} entries; refusing")


def _labels(path, key, y, classes=None):
    y = np.asarray(y)
    try:
        if classes is None:
            y_pm, classes = encode_labels(y, key)
        else:
            if y.ndim != 1:
                raise ValueError(f"{key} must be a 1-D array of labels, got shape {y.shape}")
            if not np.isin(y, classes).all():
                raise ValueError(f"{key} holds labels outside the training classes {classes.tolist()}")
            y_pm = np.where(y == classes[1], 1.0, -1.0)
    except ValueError as exc:
        raise SpecError(path, "data", str(exc)) from None
    return y_pm, classes


def load_rkhs_spec(path, doc: dict) -> RKHSSpec:
    """Build an :class:`RKHSSpec` from a parsed ``kind = "rkhs"`` TOML document.

    Raises
    ------
    gtvcvx.spec.SpecError
        Naming the file, the dotted key and what was expected.
    """
    path = Path(path)
    name, description, seed, tables = read_sections(path, doc, ("data", "dictionary", "problem"), _T)
    data_t, dict_t, prob_t, solve_t, check_t = (tables[k] for k in ("data", "dictionary", "problem", "solve", "check"))

    gamma = prob_t.number("gamma", minimum=0, exclusive=True)
    eps = prob_t.number("eps", 0.1, minimum=0)
    C = prob_t.number("C", minimum=0, exclusive=True) if prob_t.has("C") else None
    prob_t.finish()

    solve_options = read_solve_options(solve_t, methods=_METHODS)
    checks = read_checks(check_t, RKHS_CHECK_KEYS)

    X, y, X_test, y_test = _data(data_t, seed)
    try:
        from .._validation import as_float_array

        X = as_float_array(X, "X", ndim=2)
        if X_test is not None:
            X_test = as_float_array(X_test, "X_test", ndim=2, shape=(None, X.shape[1]))
    except ValueError as exc:
        raise SpecError(path, "data", str(exc)) from None
    y_pm, classes = _labels(path, "y", y)
    y_test_pm = None
    if y_test is not None:
        if np.asarray(y_test).shape != (X_test.shape[0],):
            raise SpecError(path, "data", f"y_test must have one label per row of X_test ({X_test.shape[0]})")
        y_test_pm, _ = _labels(path, "y_test", y_test, classes)
    if y_pm.shape[0] != X.shape[0]:
        raise SpecError(path, "data", f"y must have one label per row of X ({X.shape[0]}), got {y_pm.shape[0]}")

    dictionary = _dictionary(dict_t, X, seed)
    try:
        problem = RKHSProblem(X, y_pm, dictionary, gamma, eps, C)
    except ValueError as exc:
        raise SpecError(path, "problem", str(exc)) from None
    return RKHSSpec(name=name, path=path, problem=problem, X_test=X_test, y_test=y_test_pm, classes=classes,
                    solve_options=solve_options, checks=checks, seed=seed, description=description, config=doc)
