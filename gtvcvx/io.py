"""Saving and loading results (``.npz`` without pickles) and atomic file writes."""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .results import GTVResult, Status

__all__ = ["save_result", "load_result", "atomic_write", "atomic_write_text", "read_npz"]

_SCALARS = ("primal", "dual", "gap", "rel_gap", "value", "setup_time", "solve_time")


@contextmanager
def atomic_write(path, mode: str = "w", **kwargs):
    """Write to a temporary file next to ``path`` and rename it into place on success.

    An exception (including KeyboardInterrupt) leaves no half-written ``path`` behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def atomic_write_text(path, text: str) -> None:
    """Atomically write a text file."""
    with atomic_write(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def atomic_savefig(fig, path, **savefig_kwargs) -> Path:
    """Save a matplotlib figure atomically (PNG unless ``format`` is given); returns the path."""
    path = Path(path)
    savefig_kwargs.setdefault("format", path.suffix.lstrip(".") or "png")
    with atomic_write(path, "wb") as fh:
        fig.savefig(fh, **savefig_kwargs)
    return path


def read_npz(path) -> dict:
    """All arrays of an ``.npz`` archive, loaded with ``allow_pickle=False``.

    Raises a ValueError naming the file when it is missing, not an ``.npz`` archive, or holds
    pickled object arrays (which are refused).
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: file not found")
    with open(path, "rb") as fh:
        if fh.read(4) != b"PK\x03\x04":
            raise ValueError(f"{path} is not a valid .npz archive")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {k: archive[k] for k in archive.files}
    except zipfile.BadZipFile:
        raise ValueError(f"{path} is not a valid .npz archive") from None
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise ValueError(f"{path} holds pickled object arrays, which are refused "
                             "(store plain numeric arrays)") from None
        raise ValueError(f"{path} could not be read: {exc}") from None
    except OSError as exc:
        raise ValueError(f"{path} could not be read: {exc}") from None


def save_result(result: GTVResult, path) -> Path:
    """Save a :class:`GTVResult` to ``.npz`` (arrays plus a JSON header; no pickles)."""
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"{path}: results are saved as .npz files")
    header = {k: float(getattr(result, k)) for k in _SCALARS}
    header.update(status=str(result.status), solver=result.solver, iterations=result.iterations,
                  message=result.message, residuals={k: float(v) for k, v in result.residuals.items()})
    arrays = {"header": np.array(json.dumps(header))}
    if result.W is not None:
        arrays["W"] = np.asarray(result.W)
    if result.U is not None:
        arrays["U"] = np.asarray(result.U)
    if result.history is not None and len(result.history):
        hist = result.history
        numeric = hist.select_dtypes(include=[np.number])
        arrays["history"] = numeric.to_numpy(dtype=float)
        arrays["history_columns"] = np.array(list(numeric.columns))
    with atomic_write(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    return path


def load_result(path) -> GTVResult:
    """Read a result written by :func:`save_result` (or ``gtvcvx solve --save``)."""
    import pandas as pd

    path = Path(path)
    arrays = read_npz(path)
    if "header" not in arrays:
        raise ValueError(f"{path}: not a gtvcvx result file (no 'header' entry)")
    try:
        header = json.loads(str(arrays["header"]))
        if not isinstance(header, dict):
            raise ValueError(f"expected a JSON object, got {type(header).__name__}")
        status = Status(header["status"])
    except (ValueError, KeyError) as exc:
        raise ValueError(f"{path}: corrupt result header ({exc})") from None
    history = None
    if "history" in arrays:
        if "history_columns" not in arrays or arrays["history"].ndim != 2 \
                or arrays["history_columns"].shape != (arrays["history"].shape[1],):
            raise ValueError(f"{path}: corrupt result file ('history' needs a matching 'history_columns' entry)")
        history = pd.DataFrame(arrays["history"], columns=[str(c) for c in arrays["history_columns"]])
    return GTVResult(status=status, solver=header.get("solver", ""), W=arrays.get("W"), U=arrays.get("U"),
                     iterations=header.get("iterations"), message=header.get("message", ""),
                     residuals=header.get("residuals", {}), history=history,
                     **{k: float(header.get(k, float("nan"))) for k in _SCALARS})
