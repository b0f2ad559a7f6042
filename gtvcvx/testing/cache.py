"""A disk cache of reference solutions, so that repeated CI runs do not re-solve with CVXPY.

Entries are ``.npz`` files written by :func:`gtvcvx.io.save_result` (no pickles), named by a
SHA-256 key over the *problem's own content* (:meth:`gtvcvx.GTVProblem.digest`: graph, data,
loss, penalty, ``lam``), the solver and its options, and the versions of gtvcvx, NumPy, CVXPY
and the backend package. A spec changed in memory, new data, another solver or an upgrade
gives a new key; stale entries are never read again. Only ``optimal`` solutions are stored.

Entries are not trusted: before use, ``W`` must have the problem's shape and be finite, the
status must be ``optimal``, and the stored objective must match ``P(W)`` recomputed from the
problem (the recomputed value is what is returned). A failed check, an unreadable file or any
I/O error (read-only or full disk) gives a :class:`CacheWarning` and a fresh solve.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np

__all__ = ["ReferenceCache", "spec_key", "problem_key", "default_cache_dir", "CacheWarning"]

_KEY_VERSION = b"gtvcvx-reference-cache-v2"


class CacheWarning(UserWarning):
    """A cache entry was not used (corrupt, inconsistent, unreadable) or could not be written."""


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def problem_key(problem, solver: str, options: dict | None = None) -> str:
    """The cache key (hex SHA-256) of a problem's content, solver, options and package versions.

    Parameters
    ----------
    problem : GTVProblem
    solver : str
        Normalized solver name (``"CLARABEL"``, ``"SCS"``, ``"fast"``...).
    options : dict, optional
        Solver options (part of the key).
    """
    from .. import __version__

    h = hashlib.sha256(_KEY_VERSION)
    parts = [problem.digest(), str(solver), json.dumps(options or {}, sort_keys=True, default=str),
             __version__, _version("numpy"), _version("cvxpy"), _version(str(solver).lower())]
    for part in parts:
        h.update(b"\0" + part.encode())
    return h.hexdigest()


def default_cache_dir() -> Path:
    """``$GTVCVX_CACHE_DIR``, else ``$XDG_CACHE_HOME/gtvcvx/references`` (``~/.cache/...``)."""
    env = os.environ.get("GTVCVX_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gtvcvx" / "references"


def _data_files(path: Path) -> list[Path]:
    """Files a spec names in ``[graph] file`` / ``[data] file`` (resolved like the loader does)."""
    import tomllib

    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    out = []
    for table in ("graph", "data"):
        value = doc.get(table, {}).get("file") if isinstance(doc.get(table), dict) else None
        if isinstance(value, str):
            candidate = Path(value) if Path(value).is_absolute() else path.parent / value
            if candidate.is_file():
                out.append(candidate)
    return out


def spec_key(spec_path, solver: str, options: dict | None = None) -> str:
    """A key (hex SHA-256) of a spec file's bytes, its data files, gtvcvx's version, solver and options.

    Identifies a spec *file*; the cache itself keys on the loaded problem (:func:`problem_key`),
    so that a spec edited in memory cannot be served another problem's answer.
    """
    from .. import __version__

    path = Path(spec_path)
    h = hashlib.sha256()
    h.update(_KEY_VERSION)
    h.update(b"\0" + __version__.encode())
    h.update(b"\0" + str(solver).encode())
    h.update(b"\0" + json.dumps(options or {}, sort_keys=True, default=str).encode())
    h.update(b"\0" + path.read_bytes())
    for extra in _data_files(path):
        h.update(b"\0" + extra.name.encode() + b"\0" + extra.read_bytes())
    return h.hexdigest()


class ReferenceCache:
    """Reference solutions of GTV specs, solved once and then read from ``directory``.

    Parameters
    ----------
    directory : path, optional
        Default :func:`default_cache_dir`.
    refresh : bool
        Ignore existing entries (solve again and overwrite).

    Attributes
    ----------
    hits, misses : int
        How many :meth:`get` calls were served from disk / solved.

    Examples
    --------
    >>> cache = ReferenceCache("/tmp/gtvcvx-cache")                 # doctest: +SKIP
    >>> ref = cache.get("problems/quick/sbm_nlasso.toml", "CLARABEL")  # doctest: +SKIP
    """

    def __init__(self, directory=None, *, refresh: bool = False):
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.refresh = bool(refresh)
        self.hits = 0
        self.misses = 0

    def path_for(self, problem, solver: str, options: dict | None = None, stem: str = "problem") -> Path:
        """Where the entry of ``(problem, solver, options)`` lives."""
        from ..runner import normalize_solver_name

        solver = normalize_solver_name(solver)
        return self.directory / f"{stem}-{solver}-{problem_key(problem, solver, options)[:20]}.npz"

    def get(self, spec, solver: str = "CLARABEL", **options):
        """The :class:`~gtvcvx.results.GTVResult` of ``solver`` on ``spec``.

        ``spec`` is a path, a loaded Spec (``kind = "gtv"``) or a :class:`~gtvcvx.GTVProblem`.
        ``options`` go to :func:`gtvcvx.runner.run_solver` (defaults: the spec's ``[solve]``
        settings) and are part of the key, with the problem's content and package versions.
        """
        from ..problem import GTVProblem
        from ..runner import normalize_solver_name, run_solver
        from ..tasks import load_spec

        solver = normalize_solver_name(solver)
        if isinstance(spec, GTVProblem):
            problem, stem, merged = spec, "problem", dict(options)
        else:
            if isinstance(spec, (str, os.PathLike)):
                spec = load_spec(spec)
            if getattr(spec, "kind", "gtv") != "gtv":
                raise ValueError("ReferenceCache stores solutions of GTV problems (kind 'gtv' specs)")
            problem = spec.problem
            stem = Path(spec.path).stem if getattr(spec, "path", None) else "spec"
            merged = {k: v for k, v in (spec.solve_options or {}).items() if k != "solver"}
            if solver != "fast":
                merged.pop("tol", None)
            merged.update(options)
        path = self.path_for(problem, solver, merged, stem)
        if not self.refresh:
            result = self._read(path, problem)
            if result is not None:
                self.hits += 1
                return result
        self.misses += 1
        result = run_solver(problem, solver, **merged)
        if str(result.status) == "optimal" and result.W is not None:
            self._write(path, result)
        return result

    def _read(self, path: Path, problem):
        """A validated entry, or None (with a CacheWarning when one existed but was unusable)."""
        from ..io import load_result

        try:
            if not path.is_file():
                return None
            result = load_result(path)
        except (OSError, ValueError) as exc:
            warnings.warn(f"reference cache entry {path} is unreadable ({exc}); solving again", CacheWarning,
                          stacklevel=3)
            return None
        W = result.W
        problem_ok = (W is not None and np.shape(W) == (problem.n, problem.d) and np.isfinite(W).all()
                      and str(result.status) == "optimal")
        recomputed = problem.objective(W) if problem_ok else float("nan")
        if not problem_ok or not abs(recomputed - result.primal) <= 1e-9 * (1.0 + abs(recomputed)):
            warnings.warn(f"reference cache entry {path} does not match its problem (shape, status or "
                          f"objective {result.primal!r} vs recomputed {recomputed!r}); solving again",
                          CacheWarning, stacklevel=3)
            return None
        return dataclasses.replace(result, primal=recomputed)

    def _write(self, path: Path, result) -> None:
        from ..io import save_result

        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            save_result(result, path)  # atomic: a temporary file renamed into place
        except OSError as exc:
            warnings.warn(f"could not write the reference cache entry {path} ({exc}); the result is used "
                          "uncached", CacheWarning, stacklevel=3)

    def clear(self) -> int:
        """Delete every entry; returns how many files were removed."""
        count = 0
        if self.directory.is_dir():
            for entry in self.directory.glob("*.npz"):
                try:
                    entry.unlink()
                    count += 1
                except OSError as exc:
                    warnings.warn(f"could not remove {entry} ({exc})", CacheWarning, stacklevel=2)
        return count

    def __repr__(self) -> str:
        return f"ReferenceCache({str(self.directory)!r}, hits={self.hits}, misses={self.misses})"
