"""numba, loaded on first use: the one place that imports it and sets the compile options.

``import gtvcvx`` does not load numba; the compiled kernels (the chain solver's dynamic program,
the fast core's edge sweeps, the squared-error prox) call :func:`njit` when first needed.

The fast core's sweeps over large arrays also come compiled with ``parallel=True`` (their loops
are numba ``prange`` loops, plain ranges in the serial build). They run on numba's thread count
(``NUMBA_NUM_THREADS``, or :func:`numba.set_num_threads` in the calling thread; default: every
core), and only in the main thread (:func:`parallel_threads`): numba's fallback threading layer,
``workqueue``, must not be entered by two threads at once, and a Dask worker's or a caller's thread
pool already has its own parallelism. Unless ``NUMBA_THREADING_LAYER`` says otherwise, numba is
asked for a fork-safe layer: with GNU OpenMP (numba's default where TBB is absent) a process
forked after a threaded kernel ran (``multiprocessing``'s default start method on Linux) aborts
on its own first threaded kernel.
"""

from __future__ import annotations

import functools
import os
import threading
import types

__all__ = ["MIN_ENTRIES", "njit", "parallel_threads", "prefetch_row", "product_error", "read_only"]

#: Part of every compiled kernel's cache name (:func:`_build_twin`). numba invalidates a cached
#: kernel when its own source file changes, not when the options it is compiled with here change
#: (``parallel``, ``cache``, how ``helpers`` are compiled): change this tag with them.
CACHE_TAG = "3"

#: Array entries from which a kernel that has a NumPy twin runs compiled: below it, loading numba
#: (about 0.6 s in a fresh process) costs more than the kernel saves.
MIN_ENTRIES = 1 << 20


def prefetch_row(a, i) -> None:
    """Ask the memory system for row ``i`` of the 2-D C-contiguous array ``a`` ahead of its use (a
    hint: no effect on results, never a fault). Plain Python: nothing; in a kernel compiled by
    :func:`njit`: the first and the last cache line of the row (LLVM's ``llvm.prefetch``).

    The sweeps that read or update node rows in edge order issue it a fixed distance ahead
    (:data:`gtvcvx.solvers._edge_kernels.PREFETCH_DISTANCE` edges): their loop body is too short
    for the processor to keep more than a few of those random misses in flight by itself.
    """


@functools.cache
def _prefetch_intrinsic():
    """:func:`prefetch_row` for compiled kernels, or a compiled no-op where this LLVM does not
    take the intrinsic."""
    import numba
    from llvmlite import ir
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def prefetch_row_compiled(typingctx, a, i):
        def codegen(context, builder, signature, args):
            array_type, index_type = signature.args
            array = context.make_array(array_type)(context, builder, args[0])
            row = context.cast(builder, args[1], index_type, numba.types.intp)
            width = cgutils.unpack_tuple(builder, array.shape, 2)[1]
            last = builder.sub(width, context.get_constant(numba.types.intp, 1))
            byte = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]), "llvm.prefetch.p0i8")
            for column in (context.get_constant(numba.types.intp, 0), last):
                pointer = cgutils.get_item_pointer(context, builder, array_type, array, [row, column])
                # (read, keep in all cache levels, data)
                builder.call(function, [builder.bitcast(pointer, byte), i32(0), i32(3), i32(1)])
            return context.get_dummy_value()

        return numba.types.void(a, i), codegen

    def check(a, i):
        prefetch_row_compiled(a, i)

    try:
        import numpy as np

        numba.njit(check)(np.zeros((2, 3)), 1)
        return prefetch_row_compiled
    except Exception:  # pragma: no cover - an LLVM without the intrinsic under this name
        return numba.njit(lambda a, i: None)


def product_error(a, b, p):
    """The rounding error ``a * b - p`` of ``p = fl(a * b)``, exactly (operands within Dekker's
    splitter's range, ``|a|, |b| <= 2^996``, and no underflow). Plain Python: Dekker's TwoProduct
    (split, four products); in a kernel compiled by :func:`njit`: one fused multiply-add
    ``fma(a, b, -p)`` (LLVM's ``llvm.fma``), the same exact value in about a third of the
    operations (measured: the certificate's doubled-precision residual sums at 2e6 x 10 samples
    51.9 -> 33.7 ms, bit-identical).

    References
    ----------
    .. [1] T. Ogita, S. M. Rump, S. Oishi, "Accurate sum and dot product", SIAM J. Sci. Comput.
       26(6), 2005, Algorithm 3.2 (TwoProduct) and its FMA form (TwoProductFMA).
    """
    c = 134217729.0 * a  # 2**27 + 1
    a_hi = c - (c - a)
    a_lo = a - a_hi
    c = 134217729.0 * b
    b_hi = c - (c - b)
    b_lo = b - b_hi
    return a_lo * b_lo - (((p - a_hi * b_hi) - a_lo * b_hi) - a_hi * b_lo)


@functools.cache
def _product_error_compiled():
    """:func:`product_error` for compiled kernels: the fused multiply-add, or Dekker's form compiled
    where this LLVM does not take the intrinsic."""
    import numba
    from llvmlite import ir
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def product_error_fma(typingctx, a, b, p):
        real = numba.types.float64

        def codegen(context, builder, signature, args):
            double = ir.DoubleType()
            a_, b_, p_ = (context.cast(builder, value, kind, real) for value, kind in zip(args, signature.args))
            function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(double, [double] * 3),
                                                      "llvm.fma.f64")
            return builder.call(function, [a_, b_, builder.fneg(p_)])

        return real(a, b, p), codegen

    def check(a, b):
        return product_error_fma(a, b, a * b)

    try:
        if numba.njit(check)(1.0 + 2.0 ** -30, 1.0 - 2.0 ** -30) == -(2.0 ** -60):
            return product_error_fma
    except Exception:  # pragma: no cover - an LLVM without the intrinsic under this name
        pass
    return numba.njit(product_error)  # pragma: no cover


def read_only(a):
    """``a`` marked read-only: numba types read-only arrays apart (e.g. ``Graph.end_columns``, a
    problem's capacities, a loss's samples), so a kernel's warm-up calls it with both kinds."""
    a.flags.writeable = False
    return a


def njit(*functions, purpose: str, parallel: bool = False, helpers=()):
    """``functions`` compiled by numba (``cache=True``: on disk when the package directory is
    writable, each build under its own cache name, :func:`_build_twin`; ``nogil=True``: Dask parts
    on one worker run them side by side), in order; ``parallel``: their ``prange`` loops split over
    threads (see the module docstring).

    ``helpers``: plain functions the kernels call by their global names (scalar steps shared by
    several kernels); each is compiled too and bound under its name in the globals of the kernels
    that call it, so the kernels' compiled code calls the compiled helper (inlined by LLVM for the
    scalar steps; a helper taking arrays was not, see
    :func:`gtvcvx.solvers._edge_kernels.edge_fused_step`).
    ``purpose`` names what needs them in the error raised when numba is missing.
    """
    try:
        import numba
    except ImportError as exc:  # pragma: no cover - numba is a dependency
        raise ImportError(f"{purpose} needs numba (pip install numba)") from exc
    if parallel:
        _prefer_forksafe(numba)
    jit = numba.njit(cache=True, nogil=True, parallel=bool(parallel))
    helpers = [getattr(helper, "py_func", helper) for helper in helpers]
    compiled_helpers = {helper.__name__: numba.njit(cache=True, nogil=True)(helper) for helper in helpers}
    for function in (*functions, *helpers):  # (the intrinsics a helper calls are bound for it too)
        names = function.__code__.co_names
        if "prange" in names:
            # the kernel modules bind ``prange = range`` (numba not loaded); numba.prange is a range
            # in plain Python and in serial builds too
            function.__globals__["prange"] = numba.prange
        for name, helper in compiled_helpers.items():
            if name in names:
                function.__globals__[name] = helper
        if "prefetch_row" in names:
            function.__globals__["prefetch_row"] = _prefetch_intrinsic()
        if "product_error" in names:
            function.__globals__["product_error"] = _product_error_compiled()
    build = "threaded" if parallel else "serial"
    return tuple(jit(_build_twin(function, build)) for function in functions)


def _build_twin(function, build: str):
    """``function`` under the qualified name ``<name>__<build><CACHE_TAG>``, so that each build of a
    kernel has its own on-disk cache entries.

    numba keys its cache by the qualified name, the signature, the machine and the bytecode, not by
    ``parallel``: the serial and the threaded build of one kernel would otherwise load each other's
    machine code, whichever was compiled first. Measured on a fresh install (10^6 SBM edges,
    d = 10): the threaded build ran the serial code, gather 14.5 and move 20.1 ms instead of 7.5
    and 10.9 ms; a Dask worker's serial build could equally load threaded code.
    """
    twin = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                              function.__closure__)
    twin.__qualname__ = f"{function.__qualname__}__{build}{CACHE_TAG}"
    twin.__module__ = function.__module__
    twin.__doc__ = function.__doc__
    return twin


def parallel_threads() -> int:
    """Threads the parallel kernels may use in the calling thread: numba's thread count in the
    main thread (loads numba), 1 in any other thread (see the module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        return 1
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency
        return 1
    _prefer_forksafe(numba)  # (before get_num_threads: it starts the threading layer)
    return int(numba.get_num_threads())


def _prefer_forksafe(numba) -> None:
    """Ask numba for a fork-safe threading layer unless the caller chose one (no effect once a
    layer is running)."""
    if "NUMBA_THREADING_LAYER" not in os.environ and numba.config.THREADING_LAYER == "default":
        numba.config.THREADING_LAYER = "forksafe"
