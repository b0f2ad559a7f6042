"""``gtvcvx bench rkhs``: the kernel-sparse dual, fast core vs CVXPY + CLARABEL and CVXPY + SCS.

One instance (the paper's ellipses, N = 900 samples, a 32 x 32 grid of centers at three widths =
3072 atoms), every solver in its own spawned process (wall time, peak memory), all in one run:
the fast core (SSNAL, the default; restarted PDHG as evidence for the algorithm choice) and the
CVXPY dual statement on CLARABEL and SCS. Accuracy is compared on the certified dual objective
against the best value any run found.
"""

from __future__ import annotations

import os
import time

import numpy as np

from . import _rkhs_svc
from ..progress import Progress
from .harness import format_table, measured, median_run, ratio, write_bench_report

NAME = "rkhs"
HELP = "kernel-sparse RKHS dual (N = 900, ~3000 atoms): fast core vs CVXPY+CLARABEL and CVXPY+SCS"

FULL = {"n": 900, "points_per_dim": 32, "widths": (1.0, 2.0, 4.0)}
QUICK = {"n": 150, "points_per_dim": 10, "widths": (2.0, 4.0)}


def _load_average() -> str:
    import os

    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="a small instance (N = 150, 200 atoms)")
    parser.add_argument("--seed", type=int, default=0, help="data seed (default: 0)")
    parser.add_argument("--gamma", type=float, default=0.5)
    parser.add_argument("--eps", type=float, default=0.1)
    parser.add_argument("--C", type=float, default=1000.0, help="soft-margin bound (default: 1000)")
    parser.add_argument("--match", type=float, default=1e-6,
                        help="target relative dual-objective error of the fast core (default: 1e-6)")
    parser.add_argument("--pdhg-time", type=float, default=120.0,
                        help="time limit of the restarted-PDHG evidence run, seconds (0 skips it; default: 120)")
    parser.add_argument("--scs-time", type=float, default=900.0, help="SCS time limit, seconds (default: 900)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="kill a run after this many seconds")
    parser.add_argument("--repeats", type=int, default=3,
                        help="fresh-process runs of the fast core and of CLARABEL, alternated; each row is the "
                             "median run (SCS and PDHG, time-limited, run once; default: 3)")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads in every run (default: 1)")
    parser.add_argument("--svc", action="store_true",
                        help="instead: SparseKernelClassifier vs scikit-learn SVC(kernel='rbf') at N = 1e3, 1e4, "
                             "1e5 and on breast-cancer data, default threads (--quick: N = 300, 1000)")
    parser.add_argument("--fit-time", type=float, default=900.0,
                        help="with --svc: time limit of each gtvcvx fit, seconds (default: 900)")


# ---------------------------------------------------------------------------------------
# builder and calls (module level: they run in spawned processes)
# ---------------------------------------------------------------------------------------
def build_instance(n, points_per_dim, widths, gamma, eps, C, seed, threshold=1e-6):
    """The benchmark problem (data, dictionary and sparse kernel matrix are built untimed).

    CVXPY and its backends are imported here too, so that no run pays import time on the clock.
    """
    import cvxpy  # noqa: F401  (warm imports, untimed)

    from ..rkhs import reference as _reference  # noqa: F401
    from ..rkhs import Dictionary, RKHSProblem
    from ..rkhs.data import ELLIPSE_BOX, ellipses

    data = ellipses(n, seed=seed)
    D = Dictionary.grid(ELLIPSE_BOX, points_per_dim, widths, threshold=threshold)
    return RKHSProblem(data.X, data.y, D, gamma, eps, C)


def _summary(result) -> dict:
    return {"status": str(result.status), "dual": result.dual, "primal": result.primal, "rel_gap": result.rel_gap,
            "setup_time": result.setup_time, "solve_time": result.solve_time, "iterations": result.iterations,
            "n_kernels": result.n_kernels, "n_critical": result.n_critical, "message": result.message[:200],
            "newton_steps": result.info.get("newton_steps"), "restarts": result.info.get("restarts")}


def call_fast(problem, method="ssnal", tol=1e-6, time_limit=None, max_iter=None):
    from ..rkhs import solve_dual

    return _summary(solve_dual(problem, method=method, tol=tol, time_limit=time_limit, max_iter=max_iter,
                               record_history=False))


def call_cvxpy(problem, solver="CLARABEL", opts=None):
    from ..rkhs.reference import solve_rkhs_dual

    return _summary(solve_rkhs_dual(problem, solver, **(opts or {})))


# ---------------------------------------------------------------------------------------
def run(args) -> int:
    if args.svc:
        return _rkhs_svc.run(args)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # inherited by the spawned runs
    size = QUICK if args.quick else FULL
    kw = dict(size, gamma=args.gamma, eps=args.eps, C=args.C, seed=args.seed)
    # the fast core stops on (P - D)/(1 + |P| + |D|); with P ~ D this bounds the dual error by
    # about 2 * tol relative to |D|, so ask for tol = match / 2.5 to match the dual to `match`.
    fast_tol = args.match / 2.5
    if args.repeats < 1:
        raise ValueError(f"--repeats must be a positive integer, got {args.repeats}")
    # (label, call, its arguments, runs): the time-limited evidence runs once, the timed pair alternated
    plan = [("fast (SSNAL)", call_fast, {"method": "ssnal", "tol": fast_tol}, args.repeats),
            ("CVXPY+CLARABEL", call_cvxpy, {"solver": "CLARABEL"}, args.repeats),
            ("CVXPY+SCS", call_cvxpy, {"solver": "SCS", "opts": {"time_limit": args.scs_time}}, 1)]
    if args.pdhg_time > 0:
        plan.insert(1, ("fast (restarted PDHG)", call_fast, {"method": "pdhg", "tol": fast_tol,
                                                             "time_limit": args.pdhg_time}, 1))
    started = time.strftime("%Y-%m-%d %H:%M")
    repeated = {label: [] for label, *_ in plan}
    bar = Progress(sum(n for *_, n in plan))
    try:
        for round_ in range(max(n for *_, n in plan)):
            for label, call, call_kw, n in plan:
                if round_ >= n or (repeated[label] and not repeated[label][-1].ok):
                    continue
                shown = f"{label} (run {round_ + 1} of {n})" if n > 1 else label
                r = measured(bar, shown, build_instance, kw, call, call_kw, timeout=args.timeout)
                r.label = label
                repeated[label].append(r)
                d = r.data
                bar.note(f"[bench rkhs] {shown}: {'ok' if r.ok else 'FAILED ' + r.error} wall={r.wall:.2f}s "
                         f"peak={r.peak_mb:.0f}MiB status={d.get('status')} dual={d.get('dual')} "
                         f"rel_gap={d.get('rel_gap')}")
    finally:
        bar.close()
    runs = [median_run(repeated[label]) for label, *_ in plan]
    duals = [r.data.get("dual", float("nan")) for r in runs if r.ok]
    finite = [v for v in duals if np.isfinite(v)]
    best = max(finite) if finite else float("nan")
    rows = []
    for r in runs:
        d = r.data
        dual = d.get("dual", float("nan"))
        rows.append({
            "solver": r.label, "status": d.get("status", "crashed" if not r.ok else ""),
            "setup_s": d.get("setup_time", float("nan")), "solve_s": d.get("solve_time", float("nan")),
            "wall_s": r.wall, "runs": d.get("runs", 1),
            "wall_range_s": (f"{min(d['walls']):.3g}-{max(d['walls']):.3g}" if len(d.get("walls", ())) > 1 else ""),
            "peak_mb": r.peak_mb, "extra_mb": r.extra_mb, "dual": dual,
            "dual_error": (best - dual) / max(1.0, abs(best)) if np.isfinite(dual) else float("nan"),
            "certified_rel_gap": d.get("rel_gap", float("nan")), "iterations": d.get("iterations"),
            "newton_steps": d.get("newton_steps"), "n_kernels": d.get("n_kernels"), "n_critical": d.get("n_critical"),
            "note": r.error or d.get("message", ""),
        })
    fast = next(r for r in rows if r["solver"] == "fast (SSNAL)")
    for row in rows:
        row["time_ratio_vs_fast"] = ratio(row["wall_s"], fast["wall_s"])
        row["memory_ratio_vs_fast"] = ratio(row["extra_mb"], fast["extra_mb"])

    probe = build_instance(**kw)
    n_atoms, density = probe.M, probe.density
    cols = ["solver", "status", "setup_s", "solve_s", "wall_s", "runs", "wall_range_s", "peak_mb", "extra_mb", "dual", "dual_error",
            "certified_rel_gap", "iterations", "newton_steps", "n_kernels", "n_critical", "time_ratio_vs_fast",
            "memory_ratio_vs_fast"]
    clar = next((r for r in rows if r["solver"] == "CVXPY+CLARABEL"), None)
    scs = next((r for r in rows if r["solver"] == "CVXPY+SCS"), None)
    lines = [
        f"## rkhs: kernel-sparse classifier dual ({'quick' if args.quick else 'full'} instance)",
        "",
        f"Command: `gtvcvx bench rkhs{' --quick' if args.quick else ''} --pdhg-time {args.pdhg_time:g} "
        f"--scs-time {args.scs_time:g} --threads {args.threads} --repeats {args.repeats} --out {args.out}` "
        f"(started {started}). "
        f"Instance: the paper's two ellipses, N = {kw['n']} samples (seed {args.seed}), a "
        f"{kw['points_per_dim']} x {kw['points_per_dim']} grid of centers at widths {list(kw['widths'])} "
        f"= {n_atoms} atoms, kernel entries below 1e-6 dropped (density {density:.1%}); gamma = {args.gamma:g}, "
        f"eps = {args.eps:g}, C = {args.C:g}. Every run is a fresh spawned process; the fast core and CLARABEL "
        f"ran {args.repeats} times each, alternated, and a row is the run of median wall time (`runs`, "
        "`wall_range_s`: the spread); SCS and PDHG, time-limited, ran once. Data, dictionary and "
        "kernel matrix are built before the clock starts; `setup_s` is the fast core's setup or CVXPY's "
        "compilation, `solve_s` the solver, `wall_s` both. `dual` is the dual objective re-evaluated by gtvcvx "
        f"at the returned (projected) multipliers; `dual_error` = (best - dual) / max(1, |best|) with best = "
        f"{best:.12g}, the largest certified dual value of any run. The fast core stops at a certified "
        f"relative gap of {fast_tol:.2g} (so that its dual matches to {args.match:g}); CLARABEL runs at its "
        f"defaults, SCS at eps_abs = eps_rel = 1e-7 with a {args.scs_time:g} s limit.",
        "",
        format_table(rows, cols),
        "",
    ]
    if clar is not None:
        lines.append(f"* CLARABEL / fast wall-time ratio: **{clar['time_ratio_vs_fast']:.1f}x** "
                     f"(peak-memory increment ratio {clar['memory_ratio_vs_fast']:.1f}x).")
    if scs is not None:
        lines.append(f"* SCS / fast wall-time ratio: **{scs['time_ratio_vs_fast']:.1f}x** "
                     f"(peak-memory increment ratio {scs['memory_ratio_vs_fast']:.1f}x).")
    pd_row = next((r for r in rows if "PDHG" in r["solver"]), None)
    if pd_row is not None:
        lines.append(f"* Restarted PDHG (PDLP-style restarts and primal weight) on the same dual: status "
                     f"{pd_row['status']}, certified relative gap {pd_row['certified_rel_gap']:.2g} after "
                     f"{pd_row['wall_s']:.0f} s; this is why SSNAL is the fast core's default.")
    lines += [
        f"* All runs use {args.threads} BLAS thread(s); the ratios are of the median runs of this one "
        f"invocation (load average "
        f"{_load_average()} when it ended).",
    ]
    for r in rows:
        if r["note"]:
            lines.append(f"* {r['solver']}: {r['note']}")
    section = write_bench_report(args.out, NAME, "\n".join(lines), rows)
    print(f"[bench rkhs] wrote {section}")
    return 0 if all(r.ok for r in runs) else 1
