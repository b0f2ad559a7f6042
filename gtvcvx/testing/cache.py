"""A disk cache of reference solutions, so that repeated CI runs do not re-solve with CVXPY.

Entries are ``.npz`` files written by :func:`gtvcvx.io.save_result` (no pickles), named by a
SHA-256 key over: the spec file's bytes, the bytes of the graph / data files it names, the
gtvcvx version, the solver name and its options. Editing a spec or its data, upgrading
gtvcvx or changing the solver gives a new key; stale entries are simply never read again.
Only ``optimal`` solutions are stored.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

__all__ = ["ReferenceCache", "spec_key", "default_cache_dir"]

_KEY_VERSION = b"gtvcvx-reference-cache-v1"


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
    """The cache key (hex SHA-256) of a spec file, its data files, gtvcvx's version, solver and options."""
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

    def path_for(self, spec_path, solver: str, options: dict | None = None) -> Path:
        """Where the entry of ``(spec, solver, options)`` lives."""
        from ..runner import normalize_solver_name

        solver = normalize_solver_name(solver)
        key = spec_key(spec_path, solver, options)
        return self.directory / f"{Path(spec_path).stem}-{solver}-{key[:20]}.npz"

    def get(self, spec, solver: str = "CLARABEL", **options):
        """The :class:`~gtvcvx.results.GTVResult` of ``solver`` on ``spec`` (a path or a loaded Spec).

        ``options`` go to :func:`gtvcvx.runner.run_solver` (defaults: the spec's ``[solve]``
        settings) and are part of the key.
        """
        from ..io import load_result, save_result
        from ..runner import normalize_solver_name, run_solver
        from ..spec import load_spec

        solver = normalize_solver_name(solver)
        if isinstance(spec, (str, os.PathLike)):
            spec = load_spec(spec)
        if getattr(spec, "kind", "gtv") != "gtv" or spec.path is None:
            raise ValueError("ReferenceCache stores solutions of kind 'gtv' specs loaded from a file")
        merged = {k: v for k, v in (spec.solve_options or {}).items() if k != "solver"}
        if solver != "fast":
            merged.pop("tol", None)
        merged.update(options)
        path = self.path_for(spec.path, solver, merged)
        if path.is_file() and not self.refresh:
            try:
                result = load_result(path)
            except ValueError:
                result = None  # a corrupt entry is solved again and overwritten
            if result is not None and result.W is not None:
                self.hits += 1
                return result
        self.misses += 1
        result = run_solver(spec.problem, solver, **merged)
        if str(result.status) == "optimal" and result.W is not None:
            save_result(result, path)
        return result

    def clear(self) -> int:
        """Delete every entry; returns how many files were removed."""
        count = 0
        if self.directory.is_dir():
            for entry in self.directory.glob("*.npz"):
                entry.unlink()
                count += 1
        return count

    def __repr__(self) -> str:
        return f"ReferenceCache({str(self.directory)!r}, hits={self.hits}, misses={self.misses})"
