"""Saving and loading results (``.npz`` without pickles) and atomic file writes."""

from __future__ import annotations

import csv
import json
import os
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ._validation import ResourceLimitError, allocation_guard, check_memory
from .results import GTVResult, Status

__all__ = ["save_result", "load_result", "atomic_write", "atomic_write_text", "read_npz", "read_npy",
           "read_samples_csv"]


def _read_umask() -> int:
    """The process umask, read without changing it where Linux allows (``/proc/self/status``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore at import, before any thread writes files
    os.umask(mask)
    return mask


#: Mode of the files written here: what ``open()`` would give (``0o666 & ~umask``, 0644 under
#: umask 022), not ``mkstemp``'s private 0600.
_FILE_MODE = 0o666 & ~_read_umask()
#: Array dtypes :func:`read_npz` returns: booleans, integers, floats and (for result headers) text.
_NPZ_KINDS = "biufUS"
#: A member that expands more than this many times, to more than ``_BOMB_FLOOR`` bytes, is
#: refused as a likely zip bomb (numeric data compress a few times at most; plain zeros ~1000x).
_BOMB_RATIO = 200
_BOMB_FLOOR = 64 * 2 ** 20
#: Most members an ``.npz`` archive may list (the data files need six at most).
_MAX_MEMBERS = 1000

_SCALARS = ("primal", "dual", "gap", "rel_gap", "value", "setup_time", "solve_time")


@contextmanager
def atomic_write(path, mode: str = "w", **kwargs):
    """Write to a temporary file next to ``path`` and rename it into place on success.

    An exception (including KeyboardInterrupt) leaves no half-written ``path`` behind. The
    file gets the mode ``open()`` would give it (``0o666 & ~umask``), or keeps the mode of the
    file it replaces.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # replacing a file keeps its permissions; a new one gets open()'s usual mode
        file_mode = os.stat(path).st_mode & 0o777
    except OSError:
        file_mode = _FILE_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(fd, file_mode)  # mkstemp creates 0600
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


def _npy_header(fp, where: str):
    """``(shape, dtype, header_bytes)`` of the ``.npy`` stream ``fp`` without reading its data."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fp)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, _, dtype = fmt.read_array_header_2_0(fp)
        else:
            raise ValueError(f".npy format version {version[0]}.{version[1]} is not supported (expected 1.0 or 2.0)")
    except (ValueError, EOFError) as exc:
        raise ValueError(f"{where} is not a valid .npy array ({exc})") from None
    return tuple(int(k) for k in shape), dtype, fp.tell()


def _check_npy(where: str, key: str, shape, dtype, data_bytes: int) -> int:
    """Refuse dtypes and shapes :func:`read_npz` does not load; returns the array's bytes."""
    if dtype.hasobject:
        raise ValueError(f"{where} holds pickled object arrays, which are refused (store plain numeric arrays)")
    if dtype.kind == "c":
        raise ValueError(f"{where}: array {key!r} has dtype {dtype}; expected real numbers "
                         "(store the real and imaginary parts as two arrays)")
    if dtype.kind not in _NPZ_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"{where}: array {key!r} has dtype {dtype}; expected numbers")
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if nbytes != data_bytes:
        raise ValueError(f"{where}: array {key!r} declares shape {shape} of {dtype} ({nbytes} bytes) but "
                         f"holds {data_bytes} bytes of data; the file is corrupt or forged")
    return nbytes


def _inspect_npz(path: Path, fh) -> None:
    """Check an ``.npz`` archive (open as ``fh``) from its directory and member headers only.

    Refuses (before anything is decompressed beyond the headers): more than
    ``_MAX_MEMBERS`` members, members that are not ``.npy`` arrays, declared sizes over the
    memory budget, likely zip bombs, headers whose shape disagrees with the member's size,
    and dtypes :func:`read_npz` does not return.
    """
    end_record = getattr(zipfile, "_EndRecData", None)  # the directory's entry count, unparsed
    if end_record is not None:
        record = end_record(fh)
        if record and record[zipfile._ECD_ENTRIES_TOTAL] > _MAX_MEMBERS:
            raise ResourceLimitError(f"{path}: the archive lists {record[zipfile._ECD_ENTRIES_TOTAL]} members; "
                                     f"expected at most {_MAX_MEMBERS} arrays")
        fh.seek(0)
    with zipfile.ZipFile(fh) as archive:
        infos = archive.infolist()
        for info in infos:
            if not info.filename.endswith(".npy"):
                raise ValueError(f"{path}: member {info.filename!r} is not a .npy array; expected an archive "
                                 "of arrays written by numpy.savez")
        if infos:
            largest = max(infos, key=lambda i: i.file_size)
            check_memory(sum(i.file_size for i in infos),
                         f"{path}: its {len(infos)} arrays (member {largest.filename!r} alone declares "
                         f"{largest.file_size} bytes uncompressed)")
        for info in infos:
            name = info.filename
            if info.file_size > _BOMB_FLOOR and info.file_size > _BOMB_RATIO * max(info.compress_size, 1):
                raise ResourceLimitError(
                    f"{path}: member {name!r} expands {info.compress_size} compressed bytes to "
                    f"{info.file_size} (more than {_BOMB_RATIO} times): refused as a likely zip bomb "
                    "(store large arrays uncompressed, with numpy.savez)")
            with archive.open(info) as fp:
                shape, dtype, header = _npy_header(fp, f"{path}: member {name!r}")
            _check_npy(str(path), name[:-4], shape, dtype, info.file_size - header)


def read_npz(path) -> dict:
    """All arrays of an ``.npz`` archive, loaded with ``allow_pickle=False``.

    The archive is inspected before anything is decompressed: its directory (declared sizes)
    and each member's ``.npy`` header (shape and dtype).

    Raises
    ------
    ValueError
        Naming the file (and the member or key) when it is missing, not an ``.npz`` archive,
        holds pickled object arrays, complex or other non-numeric arrays, or a member whose
        header disagrees with its size.
    ResourceLimitError
        When the arrays would not fit in the memory budget, or a member expands more than
        200-fold to over 64 MiB (a likely zip bomb); refused without decompressing it.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: file not found")
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic == b"\x93NUMPY":
        raise ValueError(f"{path} is a single .npy array, not an .npz archive (save with numpy.savez)")
    if magic[:4] != b"PK\x03\x04":
        raise ValueError(f"{path} is not a valid .npz archive")
    try:
        with open(path, "rb") as fh:  # one open file: what is inspected is what is loaded
            _inspect_npz(path, fh)
            fh.seek(0)
            with allocation_guard(f"{path}: its arrays"), np.load(fh, allow_pickle=False) as archive:
                return {k: archive[k] for k in archive.files}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as exc:
        raise ValueError(f"{path} is not a valid .npz archive ({exc})") from None
    except ValueError as exc:
        if isinstance(exc, ResourceLimitError) or str(exc).startswith(str(path)):
            raise
        if "pickle" in str(exc).lower():
            raise ValueError(f"{path} holds pickled object arrays, which are refused "
                             "(store plain numeric arrays)") from None
        raise ValueError(f"{path} could not be read: {exc}") from None
    except OSError as exc:
        raise ValueError(f"{path} could not be read: {exc}") from None


def read_npy(path) -> np.ndarray:
    """The array of a ``.npy`` file, loaded with ``allow_pickle=False`` after checking its header.

    Raises
    ------
    ValueError
        Naming the file when it is missing, not a ``.npy`` file, holds pickled, complex or
        non-numeric data, or its header disagrees with the file's size.
    ResourceLimitError
        When the array would not fit in the memory budget.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: file not found")
    try:
        with open(path, "rb") as fh:
            shape, dtype, header = _npy_header(fh, str(path))
            size = os.fstat(fh.fileno()).st_size
        nbytes = _check_npy(str(path), path.stem, shape, dtype, size - header)
        check_memory(nbytes, f"{path}: an array of shape {shape} and dtype {dtype}")
        with allocation_guard(f"{path}: an array of shape {shape}"):
            return np.load(path, allow_pickle=False)
    except OSError as exc:
        raise ValueError(f"{path} could not be read: {exc}") from None


#: Columns of a samples CSV that are not features.
SAMPLE_COLUMNS = ("node", "y")


def read_samples_csv(path) -> dict:
    """Stacked local data from a CSV file: one row per sample, columns ``node``, ``y`` and features.

    The header names the columns: ``node`` (the node index of the sample, an integer >= 0),
    ``y`` (its label or target) and one column per feature, in the order of the header (any
    other names, e.g. ``x0, x1, ...``). ``#`` starts a comment; a UTF-8 byte-order mark is
    ignored. Every line holds exactly one field per column of the header.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    dict
        ``{"X": (M, d) float64, "y": (M,) float64, "node": (M,) int64}``, the keys of an
        ``.npz`` data file, for :meth:`gtvcvx.SquaredError.from_stacked` and the other losses.

    Raises
    ------
    ValueError
        Naming the file and what was expected: a missing ``node`` or ``y`` column, no feature
        column, a duplicated column name, a line with more or fewer fields than the header (with
        its line), a cell that is not a finite number (with its line and
        column), or a node index that is not a non-negative integer. A cell is never quoted
        (the file may not be a data file at all).
    ResourceLimitError
        When the file is too large for the memory budget (checked before parsing).
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: file not found")
    # parsing holds the text and about three float64 copies of it: refuse what cannot fit
    check_memory(8 * path.stat().st_size, f"{path}: parsing a CSV file of {path.stat().st_size} bytes")
    columns = _samples_csv_header(path)  # also checks every line's field count
    try:
        with allocation_guard(f"{path}: its samples"):
            # index_col=False: a longer row never becomes an index; QUOTE_NONE: cells are never quoted
            frame = pd.read_csv(path, comment="#", dtype=str, keep_default_na=False, skipinitialspace=True,
                                index_col=False, quoting=csv.QUOTE_NONE, encoding="utf-8-sig")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a samples CSV with a header line 'node,y,x0,...' "
                         f"({type(exc).__name__})") from None
    if len(columns) != frame.shape[1] or len(set(columns)) != len(columns) or "" in columns:
        raise ValueError(f"{path}: every column needs its own name in the header line 'node,y,x0,...'")
    missing = [c for c in SAMPLE_COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"{path}: no {' or '.join(repr(c) for c in missing)} column; expected a header "
                         f"line 'node,y,x0,x1,...' (node index, label, features)")
    features = [c for c in columns if c not in SAMPLE_COLUMNS]
    if not features:
        raise ValueError(f"{path}: no feature column; expected a header line 'node,y,x0,x1,...'")
    frame.columns = columns
    values = {}
    for column in columns:
        numbers = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(numbers))
        if bad.size:
            raise ValueError(f"{path}:{_csv_line(path, int(bad[0]))}: column {column!r} is not a finite number")
        values[column] = numbers
    node = values["node"]
    bad = np.flatnonzero((node < 0) | (node != np.floor(node)) | (node > np.iinfo(np.int64).max // 2))
    if bad.size:
        raise ValueError(f"{path}:{_csv_line(path, int(bad[0]))}: column 'node' must be an integer >= 0")
    X = np.column_stack([values[c] for c in features]) if len(node) else np.zeros((0, len(features)))
    return {"X": X, "y": values["y"], "node": node.astype(np.int64)}


def _data_line(line: str) -> str:
    """The part of a CSV line before its ``#`` comment; blank when the line holds no data."""
    return line.split("#", 1)[0].strip()


def _samples_csv_header(path: Path) -> list[str]:
    """The column names of a samples CSV, after checking that every data line has as many fields.

    Lines are taken as :func:`read_samples_csv` parses them: a UTF-8 byte-order mark is dropped,
    ``#`` starts a comment, blank lines are skipped and cells are never quoted.

    Raises
    ------
    ValueError
        Naming the file and the first line whose number of fields differs from the header's.
    """
    header: list[str] = []
    try:
        with open(path, encoding="utf-8-sig") as fh:
            for lineno, line in enumerate(fh, start=1):
                text = _data_line(line)
                if not text:
                    continue
                if not header:
                    header = [name.strip() for name in text.split(",")]
                    continue
                n_fields = text.count(",") + 1
                if n_fields != len(header):
                    raise ValueError(f"{path}:{lineno}: line {lineno} has {n_fields} fields, the header "
                                     f"{len(header)}; expected one value per column of 'node,y,x0,...'")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text CSV file (could not decode as UTF-8)") from None
    return header


def _csv_line(path: Path, row: int) -> int:
    """The line number (1-based) of data row ``row`` (0-based) of a CSV with one header line."""
    seen = -1
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not _data_line(line):
                continue
            if seen == row:
                return lineno
            seen += 1
    return 0


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
