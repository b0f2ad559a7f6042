"""Small input-validation helpers shared by every public entry point.

Every helper raises ``ValueError`` (or ``TypeError`` for a wrong kind of object) with a
message that names the argument and says what was expected, so that user errors never
surface as a traceback from deep inside NumPy.
"""

from __future__ import annotations

import math
import numbers
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np

__all__ = [
    "as_float_array",
    "as_index_array",
    "check_magnitude",
    "check_nonnegative_scalar",
    "check_positive_int",
    "MAX_DATA_MAGNITUDE",
    "MAX_ELEMENTS",
    "ResourceLimitError",
    "memory_budget",
    "check_memory",
    "allocation_guard",
    "contained_path",
]

#: Refuse to allocate arrays with more elements than this (guards huge declared sizes).
MAX_ELEMENTS = 2_000_000_000

#: Data entries beyond this magnitude are refused where their squares are formed up front (the RKHS
#: kernels' squared distances and default widths): float64 overflows past ~1.8e308. (The GTV losses
#: square them inside the solve instead, which ends with status ``solver_error`` and the same remedy
#: once ``P(W)`` or, with data beyond this magnitude, the certificate overflows at three check-points.)
MAX_DATA_MAGNITUDE = 1e150


class ResourceLimitError(ValueError):
    """An input would need more memory than the budget allows (refused before allocating).

    A ``ValueError``, so command-line entry points report it as bad input (exit 2).
    """


def memory_budget() -> int:
    """Bytes one allocation plan may use: ``$GTVCVX_MAX_MEMORY`` (bytes, or with a K/M/G/T
    suffix), else 75 % of the machine's physical memory (8 GiB when that cannot be read)."""
    env = os.environ.get("GTVCVX_MAX_MEMORY", "").strip()
    if env:
        units = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}
        text = env.upper().removesuffix("B").removesuffix("I")
        factor = units.get(text[-1:], 1)
        digits = text[:-1] if text[-1:] in units else text
        try:
            value = float(digits) * factor
        except ValueError:
            raise ValueError(f"GTVCVX_MAX_MEMORY = {env!r}: expected a number of bytes, e.g. 8G") from None
        if not value > 0:
            raise ValueError(f"GTVCVX_MAX_MEMORY = {env!r}: expected a positive size")
        return int(value)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    return int(0.75 * total) if total > 0 else 8 * 2 ** 30


def check_memory(nbytes, what: str) -> None:
    """Refuse (``ResourceLimitError``) a plan that needs more than :func:`memory_budget` bytes.

    Parameters
    ----------
    nbytes : int or float
        Estimated bytes of the allocation (or of the peak of a computation).
    what : str
        What would be allocated, for the message (e.g. ``"the logistic prox buffers
        (2000 nodes x 200 samples x 100 x 100)"``).
    """
    budget = memory_budget()
    if not nbytes <= budget:
        raise ResourceLimitError(
            f"{what} would need about {float(nbytes) / 2 ** 30:.3g} GiB, more than the memory budget "
            f"of {budget / 2 ** 30:.3g} GiB (set GTVCVX_MAX_MEMORY, e.g. GTVCVX_MAX_MEMORY=64G, to allow more)")


@contextmanager
def allocation_guard(what: str):
    """Turn a ``MemoryError`` inside the block into a :class:`ResourceLimitError` naming ``what``.

    For allocations that passed :func:`check_memory` but still fail (the machine is shared,
    the estimate was low): the caller sees one clear error instead of a traceback.
    """
    try:
        yield
    except MemoryError:
        raise ResourceLimitError(
            f"{what}: out of memory while allocating (the machine has less free memory than the budget "
            f"of {memory_budget() / 2 ** 30:.3g} GiB; lower GTVCVX_MAX_MEMORY or reduce the input)") from None


def contained_path(value, root, name: str) -> Path:
    """``value``, a path relative to the directory ``root``, resolved and kept inside ``root``.

    For file names read from untrusted input (e.g. a spec's ``file = "edges.csv"``): refuses
    absolute paths, ``..`` components and symbolic links that lead outside ``root``, so a
    spec cannot make the program read (and quote) files elsewhere on the machine.

    Parameters
    ----------
    value : str or Path
        The path as written in the input.
    root : str or Path
        The directory it is relative to (e.g. the spec's directory).
    name : str
        The key it came from, for the message (e.g. ``"graph.file"``).

    Returns
    -------
    Path
        The resolved path (which may not exist; the caller checks that).
    """
    text = str(value)
    path = Path(text)
    if not text or path.is_absolute() or path.drive:
        raise ValueError(f"{name} = {text!r}: expected a path relative to the directory {root}")
    if ".." in path.parts:
        raise ValueError(f"{name} = {text!r}: expected a path inside the directory {root}, without '..'")
    base = Path(root).resolve()
    full = (base / path).resolve()
    if not full.is_relative_to(base):
        raise ValueError(f"{name} = {text!r}: a symbolic link leads outside the directory {root}; "
                         "expected a file inside it")
    return full


def _describe(x) -> str:
    arr = np.asarray(x) if not isinstance(x, np.ndarray) else x
    return f"shape {arr.shape} and dtype {arr.dtype}"


def as_float_array(x, name: str, *, ndim: int | None = None, shape=None, finite: bool = True,
                   copy: bool = False) -> np.ndarray:
    """Convert ``x`` to a float64 array and check its dimension, shape and finiteness.

    Parameters
    ----------
    x : array_like
        Input data; float32, integer and boolean inputs are converted to float64. Complex
        input is refused (casting would drop the imaginary part), and so are object, string
        and other non-numeric arrays.
    name : str
        Name used in error messages (e.g. ``"X[3]"`` or ``"weights"``).
    ndim : int, optional
        Required number of dimensions.
    shape : tuple, optional
        Required shape; ``None`` entries match any length.
    finite : bool
        Reject NaN and infinite entries.
    copy : bool
        Always return a fresh array.

    Raises
    ------
    ValueError
        Naming ``name``: e.g. ``"X[3] must be real, got complex128"``.
    ResourceLimitError
        When the conversion runs out of memory.
    """
    if isinstance(x, np.ndarray):
        raw = x
    else:
        try:
            with allocation_guard(f"{name} as an array"):
                raw = np.asarray(x)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ResourceLimitError):
                raise
            raise ValueError(f"{name} must be an array of real numbers ({exc})") from None
    kind = raw.dtype.kind
    if kind == "c":  # casting would silently drop the imaginary part
        raise ValueError(f"{name} must be real, got {raw.dtype}")
    if kind == "O":
        raise ValueError(f"{name} must be an array of real numbers, got an object array (dtype object); "
                         "convert it to a numeric dtype first")
    if kind not in "biuf":
        raise ValueError(f"{name} must be an array of real numbers, got dtype {raw.dtype}")
    with allocation_guard(f"{name} (shape {raw.shape}) as float64"):
        arr = np.array(raw, dtype=np.float64, copy=copy or None)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, got {arr.ndim}-D with shape {arr.shape}")
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
            want = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if finite and arr.size and not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        where = tuple(int(b) for b in bad)
        raise ValueError(f"{name} must be finite, found {float(arr[tuple(bad)])!r} at index {where}")
    return arr


def as_index_array(x, name: str, *, ndim: int | None = None) -> np.ndarray:
    """Convert ``x`` to an int64 array, rejecting non-integral values with a clear message."""
    arr = np.asarray(x)
    if arr.size == 0:
        return arr.astype(np.int64).reshape(arr.shape)
    if arr.dtype.kind in "iu":
        out = arr.astype(np.int64)
    elif arr.dtype.kind == "f" or arr.dtype.kind == "b":
        if arr.dtype.kind == "b" or not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise ValueError(f"{name} must hold integer indices, got {_describe(arr)}")
        out = arr.astype(np.int64)
    else:
        raise ValueError(f"{name} must hold integer indices, got {_describe(arr)}")
    if ndim is not None and out.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array of indices, got shape {out.shape}")
    return out


def check_magnitude(values: np.ndarray, name: str) -> None:
    """Refuse data whose largest entry exceeds :data:`MAX_DATA_MAGNITUDE` in magnitude.

    Parameters
    ----------
    values : ndarray
        Finite float data (checked with :func:`as_float_array` first).
    name : str
        Name in the message, followed by the offending entry's index (e.g. ``X[3, 1]``).

    Raises
    ------
    ValueError
        Naming the entry, its value and the remedy (rescale the data).
    """
    if values.size == 0:
        return
    flat = int(np.argmax(np.abs(values)))
    value = float(values.flat[flat])
    if abs(value) <= MAX_DATA_MAGNITUDE:
        return
    where = ", ".join(str(int(i)) for i in np.unravel_index(flat, values.shape))
    raise ValueError(f"{name}[{where}] = {value:.6g}: data beyond {MAX_DATA_MAGNITUDE:.0e} in magnitude cannot be "
                     "used, since its squares overflow float64 (~1.8e308); rescale the data (e.g. standardize it)")


def check_nonnegative_scalar(x, name: str) -> float:
    """Return ``x`` as a finite float >= 0 or raise a ValueError naming ``name``."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValueError(f"{name} must be a real number >= 0, got {x!r}")
    value = float(x)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    return value


def check_positive_int(x, name: str, *, minimum: int = 1, allow_none: bool = False) -> int | None:
    """Return ``x`` as an int >= ``minimum`` (numpy integers too) or raise a ValueError naming ``name``.

    The package's one integer-option validator (``max_iter``, ``check_every``, ``k``, ...).
    """
    if x is None and allow_none:
        return None
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or int(x) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}{' or None' if allow_none else ''}, got {x!r}")
    return int(x)


def check_positive_number(x, name: str, *, allow_none: bool = False) -> float | None:
    """Return ``x`` as a finite float > 0 or raise a ValueError naming ``name``.

    Any real number type is accepted (``int``, ``float``, numpy scalars); ``bool`` and strings are not.
    """
    if x is None and allow_none:
        return None
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not (math.isfinite(float(x)) and float(x) > 0):
        raise ValueError(f"{name} must be a positive number{' or None' if allow_none else ''}, got {x!r}")
    return float(x)


def check_gap_tolerance(x, name: str = "tol", *, allow_none: bool = False) -> float | None:
    """Return a relative-gap tolerance ``x`` as a float in ``(0, 1)`` or raise a ValueError naming ``name``.

    Every relative gap ``(P - D) / (1 + |P| + |D|)`` is below 1, so a tolerance of 1 or more would
    declare any first iterate optimal.
    """
    value = check_positive_number(x, name, allow_none=allow_none)
    if value is not None and value >= 1.0:
        raise ValueError(f"{name} must be a relative-gap tolerance below 1, got {x!r}: every relative gap "
                         "(P - D) / (1 + |P| + |D|) is below 1, so the first iterate would count as optimal")
    return value


def check_time_limit(x, name: str = "time_limit") -> float | None:
    """``time_limit`` (or the argument ``name``): a positive number of seconds (``inf`` means none) or None."""
    if x is None or (not isinstance(x, bool) and isinstance(x, numbers.Real) and float(x) > 0):
        return None if x is None else float(x)
    raise ValueError(f"{name} must be a positive number of seconds or None, got {x!r}")

