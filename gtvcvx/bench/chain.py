"""``gtvcvx bench chain``: 1-D total variation on a chain, the exact solver against C and CVXPY.

Instances: a piecewise-constant signal (one jump per 1,000 samples on average, levels N(0, 3^2))
plus N(0, 1) noise, on the chain graph with unit weights, ``min_x 1/2 ||x - y||^2 + lam_tv sum_k
|x_{k+1} - x_k|`` with ``lam_tv = 1``, i.e. the GTV problem with ``SquaredDistance``, ``Norm1`` and
``lam = 2 lam_tv``. Sizes n = 10^3 .. 10^7 (``--quick``: 10^3, 10^5).

Measured, each in a fresh process (:func:`gtvcvx.bench.harness.run_isolated`), median of
``--repeats`` calls:

* ``gtvcvx.solve`` (method ``"auto"`` picks the exact chain solver): the whole call, path walk
  and certificate included, and its dynamic-programming kernel alone;
* the same dynamic program in C (``dp``, R. Tibshirani's implementation of Johnson's algorithm) and
  Condat's direct algorithm (``TV1D_denoise``), both from the proxTV sources (``prox_tv`` 3.2.1 on
  PyPI), compiled by this machine's C++ compiler with ``-O3 -march=native`` at bench time (the
  package itself does not build here: it needs LAPACKE); rows say so when this is not possible;
* the restarted Halpern PDHG core (``method="halpern"``) and CVXPY + CLARABEL / SCS on the sizes
  where they finish in reasonable time.

The ratio column divides each time by the C dynamic program's; the issue's target is the kernel
within 3x of a C implementation of the same algorithm at n = 10^5 and 10^6.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import GTVProblem, Norm1, SquaredDistance, graphs, solve
from ..progress import Progress
from ..reference import solve_primal
from ..graph import Graph
from ..solvers._chain_kernels import compiled
from ..solvers._tree_kernels import compiled as tree_kernels
from ..solvers.tree import tree_plan
from .harness import format_table, ratio, run_isolated, write_bench_report

NAME = "chain"
HELP = ("1-D total variation on a chain: the exact solver vs C (Johnson's DP, Condat) and CVXPY, n = 10^3..10^7; "
        "and on random trees")

SIZES = (1_000, 100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (1_000, 100_000)
#: Random recursive trees (the exact tree solver; no C peer).
TREE_SIZES = (1_000, 100_000, 1_000_000)
QUICK_TREE_SIZES = (1_000, 100_000)
#: The iterative methods only run up to these sizes (the PDHG core needs ~10 s at 10^5).
MAX_N = {"halpern": 100_000, "CLARABEL": 100_000, "SCS": 10_000}
LAM_TV = 1.0
PROXTV = "prox_tv==3.2.1"
_WRAPPER = """
#include "condat_fast_tv.h"
#include "johnsonRyanTV.h"
extern "C" {
void peer_condat(double* y, int n, double lam, double* out) { TV1D_denoise(y, out, n, lam); }
void peer_johnson(double* y, int n, double lam, double* out) { dp(n, y, lam, out); }
}
"""


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="n = 10^3 and 10^5 only")
    parser.add_argument("--repeats", type=int, default=5, help="calls per measurement, median reported (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the signal and noise (default 0)")
    parser.add_argument("--no-c-peers", action="store_true", help="skip downloading and compiling the C peers")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per isolated run (default 600)")


# ---------------------------------------------------------------------------------- instance
def signal(n: int, seed: int = 0) -> np.ndarray:
    """Piecewise-constant levels N(0, 9) with about n / 1000 jumps, plus N(0, 1) noise."""
    rng = np.random.default_rng(seed)
    jumps = np.sort(rng.choice(np.arange(1, n), size=max(1, n // 1000), replace=False))
    levels = 3.0 * rng.normal(size=jumps.size + 1)
    return np.repeat(levels, np.diff(np.concatenate([[0], jumps, [n]]))) + rng.normal(size=n)


def random_tree(n: int, seed: int = 0):
    """``(graph, y)``: a random recursive tree (node k joins a uniform earlier node) and a signal
    constant on subtrees (about n / 1000 nodes start a new level N(0, 9)) plus N(0, 1) noise."""
    rng = np.random.default_rng(seed)
    attach = rng.integers(0, np.arange(1, n)) if n > 1 else np.zeros(0, dtype=np.int64)
    above = np.concatenate([[0], attach])  # the root is its own
    starts = np.zeros(n, dtype=bool)
    starts[0] = True
    starts[rng.choice(n, size=max(1, n // 1000), replace=False)] = True
    source = np.where(starts, np.arange(n), above)
    while True:  # pointer jumping: every node to the level-starting node above it (depth ~ e ln n)
        jumped = source[source]
        if np.array_equal(jumped, source):
            break
        source = jumped
    levels = 3.0 * rng.normal(size=n)
    y = levels[source] + rng.normal(size=n)
    edges = np.column_stack([np.arange(1, n), attach])
    return Graph.from_edges(n, edges), y


def build(n: int, seed: int = 0, peer_lib: str | None = None, kind: str = "chain"):
    """``(y, problem, peer_lib)`` for one size, on a chain or (``kind="tree"``) a random tree."""
    if kind == "tree":
        graph, y = random_tree(n, seed)
    else:
        graph, y = graphs.chain(n), signal(n, seed)
    problem = GTVProblem(graph, SquaredDistance(y[:, None]), Norm1(), 2.0 * LAM_TV)
    return y, problem, peer_lib


def _median_time(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), out


# ---------------------------------------------------------------------------------- calls
def call_gtvcvx(instance, repeats: int = 5) -> dict:
    y, problem, _ = instance
    solve(problem, tol=1e-9)  # numba's compiled kernels load on the first call (about 0.2 s)
    seconds, result = _median_time(lambda: solve(problem, tol=1e-9), repeats)
    return {"seconds": seconds, "status": str(result.status), "rel_gap": result.rel_gap,
            "method": result.info.get("method"), "x": result.W[:, 0]}


def call_kernel(instance, repeats: int = 5) -> dict:
    y, problem, _ = instance
    n = y.size
    if problem.graph.degree.max(initial=0) > 2:  # a tree: its dynamic program on the relabelled nodes
        _, tv_tree, _ = tree_kernels()
        plan = tree_plan(problem)
        above = plan.parent_position
        Yt, lam, positions = y[plan.order][None].copy(), np.where(above >= 0, LAM_TV, 0.0), np.arange(n)
        out = np.empty_like(Yt)
        seconds, _ = _median_time(lambda: tv_tree(Yt, np.ones(n), lam, positions, above, out), repeats)
        x = np.empty(n)
        x[plan.order] = out[0]
        return {"seconds": seconds, "x": x}
    _, tv1d_paths, *_ = compiled()
    Yt, weight, lam, starts = y[None].copy(), np.ones(n), np.full(n, LAM_TV), np.array([0, n])
    out = np.empty_like(Yt)
    seconds, _ = _median_time(lambda: tv1d_paths(Yt, np.zeros(1), weight, lam, starts, out), repeats)
    return {"seconds": seconds, "x": out[0].copy()}


def call_c_peer(instance, symbol: str, repeats: int = 5) -> dict:
    y, _, lib_path = instance
    lib = ctypes.CDLL(lib_path)
    fn = getattr(lib, symbol)
    pointer = ctypes.POINTER(ctypes.c_double)
    y = np.ascontiguousarray(y)
    out = np.empty_like(y)
    seconds, _ = _median_time(lambda: fn(y.ctypes.data_as(pointer), ctypes.c_int(y.size), ctypes.c_double(LAM_TV),
                                         out.ctypes.data_as(pointer)), repeats)
    return {"seconds": seconds, "x": out}


def call_halpern(instance, repeats: int = 1) -> dict:
    _, problem, _ = instance
    seconds, result = _median_time(lambda: solve(problem, tol=1e-9, method="halpern", time_limit=300), repeats)
    return {"seconds": seconds, "status": str(result.status), "rel_gap": result.rel_gap, "x": result.W[:, 0]}


def call_cvxpy(instance, solver: str, repeats: int = 1) -> dict:
    _, problem, _ = instance
    seconds, result = _median_time(lambda: solve_primal(problem, solver), repeats)
    return {"seconds": seconds, "status": str(result.status), "x": result.W[:, 0]}


# ---------------------------------------------------------------------------------- C peers
def compile_c_peers(work: Path) -> tuple[str | None, str]:
    """Download the proxTV sources and compile its two 1-D TV routines; ``(library, note)``."""
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        return None, "no C++ compiler found"
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", PROXTV, "--no-deps", "--no-binary", ":all:",
                        "-d", str(work), "-q"], check=True, capture_output=True, timeout=300)
        archive = next(work.glob("prox_tv-*.tar.gz"))
        with tarfile.open(archive) as tar:
            names = [m for m in tar.getmembers() if m.isfile() and Path(m.name).name in
                     ("condat_fast_tv.cpp", "condat_fast_tv.h", "johnsonRyanTV.cpp", "johnsonRyanTV.h")]
            for member in names:  # the four files only, flattened: nothing lands outside `work`
                data = tar.extractfile(member).read()
                (work / Path(member.name).name).write_bytes(data)
        (work / "wrapper.cpp").write_text(_WRAPPER)
        lib = work / "libtvpeers.so"
        subprocess.run([compiler, "-O3", "-march=native", "-shared", "-fPIC", "-I", str(work),
                        str(work / "condat_fast_tv.cpp"), str(work / "johnsonRyanTV.cpp"), str(work / "wrapper.cpp"),
                        "-o", str(lib)], check=True, capture_output=True, timeout=300)
    except (subprocess.SubprocessError, OSError, StopIteration, tarfile.TarError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        return None, f"C peers unavailable ({type(exc).__name__}: {detail.decode(errors='replace')[-200:] or exc})"
    return str(lib), f"compiled with {Path(compiler).name} -O3 -march=native from {PROXTV} sources"


# ---------------------------------------------------------------------------------- run
def run(args) -> int:
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be at least 1, got {args.repeats}")
    sizes = QUICK_SIZES if args.quick else SIZES
    started = time.strftime("%Y-%m-%d %H:%M")
    with tempfile.TemporaryDirectory(prefix="gtvcvx-bench-chain-") as tmp:
        lib, peer_note = (None, "C peers skipped (--no-c-peers)") if args.no_c_peers else compile_c_peers(Path(tmp))
        print(f"[bench chain] {peer_note}", flush=True)
        plan = [("gtvcvx.solve (auto -> chain)", call_gtvcvx, {}, None),
                ("gtvcvx DP kernel only", call_kernel, {}, None)]
        if lib:
            plan += [("C: Johnson DP (proxTV dp)", call_c_peer, {"symbol": "peer_johnson"}, None),
                     ("C: Condat TV1D_denoise (proxTV)", call_c_peer, {"symbol": "peer_condat"}, None)]
        plan += [("gtvcvx Halpern PDHG (tol 1e-9)", call_halpern, {}, "halpern"),
                 ("CVXPY + CLARABEL", call_cvxpy, {"solver": "CLARABEL"}, "CLARABEL"),
                 ("CVXPY + SCS", call_cvxpy, {"solver": "SCS"}, "SCS")]
        # (not named tree_plan: call_kernel uses gtvcvx.solvers.tree.tree_plan)
        plan_on_trees = [("gtvcvx.solve (auto -> tree)", call_gtvcvx, {}, None),
                         ("gtvcvx tree DP kernel only", call_kernel, {}, None),
                         *(item for item in plan if item[3] is not None)]
        jobs = [("chain", n, item) for n in sizes for item in plan if item[3] is None or n <= MAX_N[item[3]]]
        jobs += [("tree", n, item) for n in (QUICK_TREE_SIZES if args.quick else TREE_SIZES) for item in plan_on_trees
                 if item[3] is None or n <= MAX_N[item[3]]]
        rows, ok = [], True
        bar = Progress(len(jobs))
        try:
            reference = {}
            for kind, n, (label, call, kwargs, _) in jobs:
                bar.start(f"{kind} n={n}: {label}")
                repeats = args.repeats if call in (call_gtvcvx, call_kernel, call_c_peer) else 1
                run_ = run_isolated(label, build, {"n": n, "seed": args.seed, "peer_lib": lib, "kind": kind}, call,
                                    {**kwargs, "repeats": repeats}, timeout=args.timeout)
                bar.advance()
                ok &= run_.ok
                data = run_.data
                x = data.pop("x", None)
                if x is not None and (kind, n) not in reference:
                    reference[kind, n] = x
                row = {"graph": kind, "n": n, "method": label, "seconds": data.get("seconds", float("nan")),
                       "status": data.get("status", "" if run_.ok else "crashed"),
                       "certified_rel_gap": data.get("rel_gap", float("nan")),
                       "max_abs_diff_vs_gtvcvx": (float(np.abs(x - reference[kind, n]).max()) if x is not None
                                                  else float("nan")),
                       "peak_mb": run_.peak_mb, "note": run_.error}
                rows.append(row)
                bar.note(f"[bench chain] {kind} n={n} {label}: {row['seconds']:.3g} s {row['status']}")
        finally:
            bar.close()
    for row in rows:
        c_dp = next((r["seconds"] for r in rows if r["graph"] == row["graph"] and r["n"] == row["n"]
                     and r["method"].startswith("C: Johnson")), None)
        row["ratio_vs_c_dp"] = ratio(row["seconds"], c_dp)
    cols = ["graph", "n", "method", "seconds", "ratio_vs_c_dp", "status", "certified_rel_gap",
            "max_abs_diff_vs_gtvcvx", "peak_mb"]
    lines = [
        "## chain: exact 1-D total variation against C and CVXPY (and on trees)",
        "",
        f"Command: `gtvcvx bench chain{' --quick' if args.quick else ''} --repeats {args.repeats} --seed {args.seed} "
        f"--out {args.out}` (started {started}). Signal: piecewise-constant levels N(0, 9) with about n / 1000 jumps "
        f"plus N(0, 1) noise (seed {args.seed}); chain graph, `SquaredDistance`, `Norm1`, lam = {2 * LAM_TV:g} "
        f"(= 1-D TV denoising with lam_tv = {LAM_TV:g}). `graph = tree`: a random recursive tree (node k joins a "
        "uniform earlier node; depth ~ e ln n, degrees up to ~ln n) with levels constant on subtrees (about n / 1000 "
        "level changes), the same noise and lam; there is no C peer (the exact tree solver is gtvcvx's message "
        "passing, O(n log n)). Each method in its own spawned process; `seconds` is the "
        f"median of {args.repeats} calls for gtvcvx and the C peers (after one warm-up call of gtvcvx, which "
        "loads numba's cached kernels), one call for the iterative solvers and CVXPY (whole call, compilation "
        f"included). {peer_note}. `ratio_vs_c_dp` divides by the C dynamic program (the same algorithm as "
        "gtvcvx's chain kernel); `max_abs_diff_vs_gtvcvx` compares each solution with gtvcvx's; `peak_mb` is the "
        "peak resident memory during the measured call (imports and the instance included).",
        "",
        format_table(rows, cols),
        "",
    ]
    lines += [f"* {r['graph']} n={r['n']} {r['method']}: {r['note']}" for r in rows if r["note"]]
    write_bench_report(args.out, NAME, "\n".join(lines), rows)
    print("\n".join(lines))
    return 0 if ok else 1
