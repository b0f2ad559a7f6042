"""``gtvcvx bench clustering``: convex clustering, SSNAL and the PDHG core against CVXPY + CLARABEL / SCS.

Part 1 (matched accuracy): n = 500 points (five 2-D Gaussian blobs, standardized), the Gaussian
k = 10 nearest-neighbour graph, l2 fusion at one lam; both gtvcvx methods (SSNAL,
:func:`gtvcvx.solvers.ssnal.solve_ssnal`, and the restarted PDHG core, :func:`gtvcvx.solve`) to
certified relative gap 1e-6, CVXPY + CLARABEL and CVXPY + SCS (the clustering statement of
:mod:`gtvcvx.reference.clustering`) at their default tolerances; objective errors against the
best value found, certified gaps for every solver (the reference flows are certified by gtvcvx
too), wall time, peak memory, ratios.

Part 2 (scale): both gtvcvx methods on 10^4 and 10^5 points in d = 2, 5, 10 (k = 10 graphs).

Part 3: compile time of the CVXPY clustering statement on the complete graph with 300 points.

Part 4 (CCMM's scale): 10^6 points in 7-D (five Gaussian blobs), k = 10, the PDHG core to
certified relative gap 1e-4, graph construction timed apart from the solve.

Every solver run happens in a fresh process (:func:`gtvcvx.bench.harness.run_isolated`).
"""

from __future__ import annotations

import math

from ..progress import Progress
from .harness import format_table, measured, publish, ratio, warm_compiled_kernels

NAME = "clustering"
HELP = ("convex clustering: SSNAL and the Halpern PDHG core vs CLARABEL/SCS on 500 points (k=10), then "
        "scaling to 10^5 points")

#: The gtvcvx methods measured: label -> function name in :func:`call_fast`.
METHODS = {"ssnal": "SSNAL", "halpern": "Halpern PDHG"}

#: Gaussian weight scale on standardized points (Chi & Lange 2015 and Sun, Toh & Yuan 2021 use 0.5).
#: The scale-free default of ``graphs.knn`` (1 / median squared neighbour distance) grows with the
#: density of the points: on 10^5 points in 2-D it makes far-neighbour weights underflow to 0.
PHI = 0.5

#: Published reference points, quoted in the report text (other machines, other stopping rules).
PUBLISHED = ("Published reference points (other hardware and stopping rules, not re-measured here): "
             "SSNAL (Sun, Toh & Yuan, JMLR 2021) clusters about 200,000 points in about 6 minutes; "
             "CCMM (Touw, Groenen & Terada, arXiv:2211.01877) over 1,000,000 points in 7-D in 51 s on "
             "average (a desktop computer, its own stopping rule, no certificate).")

CCMM = ("CCMM (Touw, Groenen & Terada, arXiv:2211.01877) reports over 10^6 points in 7-D in 51 s on average on "
        "a desktop computer (its own stopping rule, no certificate; not re-measured here). Its clock covers the "
        "solve and the clusters, not the k-NN weights: the paper's script computes `SparseWeights(X, k, phi)` "
        "first and reports `CCMM(X, W).convex_clustering(...).elapsed_time` (github.com/djwtouw/CCMM-paper, "
        "`Numerical Results/analysis_power_consumption.py`), so call_plus_labels_s is the comparable column.")

#: Part 4: CCMM's scale (points, dimension, neighbours, certified relative gap).
MILLION = {"n": 1_000_000, "d": 7, "k": 10, "tol": 1e-4}


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="small instances only (a smoke run)")
    parser.add_argument("--skip-references", action="store_true", help="gtvcvx methods only in part 1")
    parser.add_argument("--methods", default="ssnal,halpern",
                        help="gtvcvx methods to measure, comma separated (default ssnal,halpern)")
    parser.add_argument("--skip-scale", action="store_true", help="skip the scaling part")
    parser.add_argument("--n", type=int, default=500, help="points in part 1 (default 500)")
    parser.add_argument("--n-large", type=int, default=5000,
                        help="points of a second matched-accuracy instance (default 5000; 0 skips it)")
    parser.add_argument("--lam", type=float, default=0.5, help="lam of part 1 (standardized units, default 0.5)")
    parser.add_argument("--reference-time-limit", type=float, default=1800.0,
                        help="seconds allowed per reference solve (default 1800)")
    parser.add_argument("--scale-time-limit", type=float, default=1200.0,
                        help="seconds allowed per gtvcvx solve in part 2 (default 1200)")
    parser.add_argument("--n-million", type=int, default=MILLION["n"],
                        help=f"points of part 4, CCMM's scale in {MILLION['d']}-D (default {MILLION['n']}; 0 skips it)")
    parser.add_argument("--million-seeds", default="1",
                        help="seeds of part 4's point sets, comma separated, one run each (default 1)")


# ---------------------------------------------------------------------------------- builders
def build_blobs(n: int, d: int, k: int, lam: float, seed: int = 0, n_blobs: int = 5, phi: float = PHI):
    """Standardized Gaussian blobs, Gaussian k-NN graph (``exp(-phi ||a_i - a_j||^2)``), l2 fusion."""
    import numpy as np

    from .. import data
    from ..clustering import clustering_problem

    sizes = np.full(n_blobs, n // n_blobs)
    sizes[: n - sizes.sum()] += 1
    points = data.blobs(sizes, d, separation=4.0, std=1.0, seed=seed).points
    problem, _ = clustering_problem(points, lam, k=k, phi=phi, standardize=True)
    return problem


def build_blobs_timed(n: int, d: int, k: int, lam: float, seed: int = 0):
    """:func:`build_blobs` and the seconds it took (points, standardization, k-NN graph, weights)."""
    import time

    t0 = time.perf_counter()
    problem = build_blobs(n, d, k, lam, seed=seed)
    return problem, time.perf_counter() - t0


def build_complete(n: int, d: int, seed: int = 0):
    import numpy as np

    from .. import graphs

    points = np.random.default_rng(seed).normal(size=(n, d))
    return points, graphs.complete(n)


# ---------------------------------------------------------------------------------- calls
def call_fast(problem, tol: float, time_limit: float | None = None, method: str = "ssnal"):
    """One gtvcvx solve: ``method="ssnal"`` (:func:`~gtvcvx.solvers.ssnal.solve_ssnal`) or ``"halpern"``
    (:func:`gtvcvx.solve`, the restarted Halpern PDHG core)."""
    import time

    from ..clustering import cluster_labels

    start = time.perf_counter()
    if method == "ssnal":
        from ..solvers.ssnal import solve_ssnal

        r = solve_ssnal(problem, tol=tol, time_limit=time_limit)
    else:
        from ..solvers import solve

        r = solve(problem, tol=tol, time_limit=time_limit, method=method)
    returned = time.perf_counter()
    clusters = cluster_labels(problem, r.W, r.U)
    return {"call_time": returned - start, "labels_time": time.perf_counter() - returned,
            "status": str(r.status), "primal": r.primal, "dual": r.dual, "rel_gap": r.rel_gap,
            "iterations": r.iterations, "setup_time": r.setup_time, "solve_time": r.solve_time,
            "n": problem.n, "n_edges": problem.n_edges, "d": problem.d, "n_clusters": clusters.n_clusters,
            "certificate_time": r.info.get("certificate_time", float("nan")),
            "newton": r.info.get("newton_iterations"), "cg": r.info.get("cg_iterations"),
            "linear_solver": r.info.get("linear_solver", "")}


def call_fast_timed(instance, tol: float, time_limit: float | None = None, method: str = "halpern"):
    """:func:`call_fast` on a :func:`build_blobs_timed` instance, with its build time."""
    problem, build_seconds = instance
    out = call_fast(problem, tol, time_limit=time_limit, method=method)
    out["graph_time"] = build_seconds
    return out


def call_reference(problem, solver: str, time_limit: float):
    from ..clustering import cluster_labels
    from ..reference.clustering import solve_clustering

    r = solve_clustering(problem.loss.points, problem.lam, problem.graph, problem.penalty, solver,
                         time_limit=time_limit)
    n_clusters = cluster_labels(problem, r.W, r.U).n_clusters if r.W is not None else None
    return {"status": str(r.status), "primal": r.primal, "dual": r.dual, "rel_gap": r.rel_gap,
            "iterations": r.iterations, "setup_time": r.setup_time, "solve_time": r.solve_time,
            "value": r.value, "message": r.message, "n_clusters": n_clusters}


def call_compile(instance):
    import time

    import cvxpy as cp

    from ..reference.clustering import clustering_statement

    points, graph = instance
    t0 = time.perf_counter()
    statement = clustering_statement(points, graph)
    built = time.perf_counter() - t0
    statement.lam.value = 0.1
    t1 = time.perf_counter()
    statement.problem.get_problem_data(cp.CLARABEL)
    compiled = time.perf_counter() - t1
    return {"n": graph.n, "n_edges": graph.n_edges, "d": points.shape[1], "statement_s": built, "compile_s": compiled}


# ---------------------------------------------------------------------------------- parts
def _total(data: dict) -> float:
    try:
        return float(data.get("setup_time", float("nan"))) + float(data.get("solve_time", float("nan")))
    except (TypeError, ValueError):
        return float("nan")


def _methods(args) -> list[str]:
    methods = [m.strip().lower() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise SystemExit(f"--methods must name some of {', '.join(METHODS)}, got {args.methods!r}")
    return methods


def _matched_part(args, n: int, bar: Progress) -> tuple[str, list[dict]]:
    spec = {"n": n, "d": 2, "k": 10, "lam": args.lam, "seed": 0}
    runs = [measured(bar, METHODS[m], build_blobs, spec, call_fast, {"tol": 1e-6, "method": m})
            for m in _methods(args)]
    n_fast = len(runs)
    if not args.skip_references:
        for solver in ("CLARABEL", "SCS"):
            runs.append(measured(bar, f"CVXPY+{solver}", build_blobs, spec, call_reference,
                                  {"solver": solver, "time_limit": args.reference_time_limit},
                                  timeout=args.reference_time_limit * 2 + 600))
    values = [r.data["primal"] for r in runs if r.ok and math.isfinite(r.data.get("primal", float("nan")))]
    best = min(values) if values else float("nan")
    fast = runs[0]  # the first gtvcvx method (SSNAL by default) is the base of the ratios
    rows = []
    for index, run in enumerate(runs):
        d = run.data
        total = _total(d) if run.ok else float("nan")
        rows.append({
            "n": n, "solver": run.label, "status": d.get("status") if run.ok else "failed: " + run.error,
            "objective": d.get("primal", float("nan")),
            "objective_error": (d.get("primal", float("nan")) - best) / (1 + abs(best)) if run.ok else float("nan"),
            "certified_rel_gap": d.get("rel_gap", float("nan")), "n_clusters": d.get("n_clusters"),
            "iterations": d.get("iterations"), "newton": d.get("newton") if index < n_fast else None,
            "cg": d.get("cg") if index < n_fast else None,
            "setup_s": d.get("setup_time", float("nan")), "solve_s": d.get("solve_time", float("nan")),
            "total_s": total, "wall_s": run.wall, "peak_MiB": run.peak_mb, "extra_MiB": run.extra_mb,
            "time_ratio_vs_first": ratio(total, _total(fast.data)) if fast.ok and run.ok else float("nan"),
        })
    columns = ["n", "solver", "status", "objective", "objective_error", "certified_rel_gap", "n_clusters", "iterations",
               "newton", "cg", "setup_s", "solve_s", "total_s", "wall_s", "peak_MiB", "extra_MiB",
               "time_ratio_vs_first"]
    return format_table(rows, columns), rows


def _scale_grid(args) -> list[tuple[int, int]]:
    if args.quick:
        return [(2_000, 2), (5_000, 5)]
    return [(10_000, 2), (10_000, 5), (10_000, 10), (100_000, 2), (100_000, 5), (100_000, 10)]


def _scale_part(args, bar: Progress) -> tuple[str, list[dict]]:
    rows = []
    for n, d in _scale_grid(args):
        for method in _methods(args):
            run = measured(bar, f"{METHODS[method]} n={n} d={d}", build_blobs,
                               {"n": n, "d": d, "k": 10, "lam": args.lam, "seed": 1}, call_fast,
                               {"tol": 1e-6, "time_limit": args.scale_time_limit, "method": method},
                               timeout=args.scale_time_limit * 2 + 600)
            dd = run.data
            rows.append({"n": n, "d": d, "method": METHODS[method], "n_edges": dd.get("n_edges"),
                         "status": dd.get("status") if run.ok else run.error,
                         "rel_gap": dd.get("rel_gap"), "n_clusters": dd.get("n_clusters"),
                         "iterations": dd.get("iterations"), "newton": dd.get("newton"), "cg": dd.get("cg"),
                         "linear_solver": dd.get("linear_solver"), "setup_s": dd.get("setup_time"),
                         "solve_s": dd.get("solve_time"), "certificate_s": dd.get("certificate_time"),
                         "wall_s": run.wall, "peak_MiB": run.peak_mb, "extra_MiB": run.extra_mb})
    return format_table(rows), rows


def million_seeds(text: str) -> list[int]:
    """``--million-seeds``: non-negative integers, comma separated."""
    try:
        seeds = [int(part) for part in str(text).split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"--million-seeds must be comma-separated integers, got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise SystemExit(f"--million-seeds must name at least one seed >= 0, got {text!r}")
    return seeds


def _million_part(args, bar: Progress) -> tuple[str, list[dict]]:
    n = 20_000 if args.quick else args.n_million
    d, k, tol = MILLION["d"], MILLION["k"], MILLION["tol"]
    rows = []
    for seed in million_seeds(args.million_seeds):
        run = measured(bar, f"Halpern PDHG n={n} d={d} tol={tol:g} seed={seed}", build_blobs_timed,
                       {"n": n, "d": d, "k": k, "lam": args.lam, "seed": seed}, call_fast_timed,
                       {"tol": tol, "time_limit": args.scale_time_limit, "method": "halpern"},
                       timeout=args.scale_time_limit * 2 + 600)
        dd = run.data
        solve = _total(dd) if run.ok else float("nan")
        rows.append({"n": n, "d": d, "k": k, "seed": seed, "n_edges": dd.get("n_edges"), "tol": tol,
                     "status": dd.get("status") if run.ok else run.error, "rel_gap": dd.get("rel_gap"),
                     "n_clusters": dd.get("n_clusters"), "iterations": dd.get("iterations"),
                     "graph_s": dd.get("graph_time"), "setup_s": dd.get("setup_time"), "solve_s": dd.get("solve_time"),
                     "certificate_s": dd.get("certificate_time"), "setup_plus_solve_s": solve,
                     "call_s": dd.get("call_time"), "labels_s": dd.get("labels_time"),
                     "call_plus_labels_s": ((dd.get("call_time") or 0.0) + (dd.get("labels_time") or 0.0)
                                            if run.ok else float("nan")),
                     "graph_plus_call_s": ((dd.get("graph_time") or 0.0) + (dd.get("call_time") or 0.0)
                                           if run.ok else float("nan")),
                     "wall_s": run.wall, "peak_MiB": run.peak_mb})
    return format_table(rows), rows


def _compile_part(args, bar: Progress) -> tuple[str, list[dict]]:
    n = 100 if args.quick else 300
    run = measured(bar, f"compile complete n={n}", build_complete, {"n": n, "d": 2}, call_compile, {})
    row = dict(run.data) if run.ok else {"error": run.error}
    row.update({"wall_s": run.wall, "peak_MiB": run.peak_mb})
    return format_table([row]), [row]


def run(args) -> int:
    warm_compiled_kernels()  # (the runs' fresh processes then load the kernels from numba's cache)
    n = 200 if args.quick else args.n
    methods = _methods(args)
    sections = ["## Convex clustering (`gtvcvx bench clustering`)", "",
                "Convex clustering is GTV with L_i(w) = ||w - a_i||^2 and the l2 fusion penalty. Points: five 2-D "
                "Gaussian blobs (separation 4, std 1), standardized; graph: k = 10 nearest neighbours with Gaussian "
                f"weights exp(-{PHI:g} ||a_i - a_j||^2) (Chi & Lange; Sun, Toh & Yuan); lam = {args.lam:g} "
                "(standardized units). gtvcvx methods: SSNAL (`gtvcvx.solvers.ssnal.solve_ssnal`, semismooth Newton "
                "augmented Lagrangian, `solver=\"ssnal\"`; iterations = augmented "
                "Lagrangian steps, newton / cg = Newton steps and conjugate-gradient iterations) and PDHG "
                "(`gtvcvx.solve`, restarted Halpern PDHG, the clustering front end's `solver=\"fast\"`; iterations = PDHG steps). Each run in a fresh process; "
                "peak_MiB is the peak RSS during the measured call (imports and the instance included, the builder's "
                "temporaries not), extra_MiB what the call added on top of them.", ""]
    sizes = [n] + ([args.n_large] if args.n_large and not args.quick else [])
    total = (len(sizes) * (len(methods) + (0 if args.skip_references else 2))
             + (0 if args.skip_scale else len(_scale_grid(args)) * len(methods))
             + (len(million_seeds(args.million_seeds)) if args.n_million else 0) + 1)
    bar = Progress(total)
    try:
        rows_all = _parts(args, bar, sizes, methods, sections)
    finally:
        bar.close()
    text = "\n".join(sections)
    return publish(args.out, NAME, text, rows_all)


def _parts(args, bar: Progress, sizes: list[int], methods: list[str], sections: list[str]) -> list[dict]:
    """Run the bench's parts in order, appending their Markdown to ``sections``; the table rows."""
    rows_all = []
    for size in sizes:
        md, rows = _matched_part(args, size, bar)
        sections += [f"### Matched accuracy: n = {size}, k = 10", "",
                     "gtvcvx methods to certified relative gap 1e-6; CVXPY references at their default tolerances "
                     "(objective error = (P - P_best) / (1 + |P_best|), P evaluated by gtvcvx at each solver's W; "
                     "the reference flows, the multipliers of Z = D W, are certified by gtvcvx too). "
                     f"total_s = setup (CVXPY compile) + solve; time_ratio_vs_first = total_s / total_s of "
                     f"{METHODS[methods[0]]}.", "", md, ""]
        clar = next((r for r in rows if r["solver"] == "CVXPY+CLARABEL"), None)
        if clar:
            ratios = [f"{r['solver']} **{ratio(clar['total_s'], r['total_s']):.3g}x**" for r in rows
                      if r["solver"] in METHODS.values() and math.isfinite(ratio(clar["total_s"], r["total_s"]))]
            if ratios:
                sections += [f"CLARABEL time / gtvcvx time at n = {size} in this run: " + ", ".join(ratios)
                             + " (target at n = 500: at least 50x).", ""]
        for r in rows:
            r["part"] = "matched"
        rows_all += rows
    if not args.skip_scale:
        md, rows = _scale_part(args, bar)
        sections += ["### Scaling (k = 10, certified relative gap 1e-6)", "", md, "", PUBLISHED, ""]
        for r in rows:
            r["part"] = "scale"
        rows_all += rows
    if args.n_million:
        md, rows = _million_part(args, bar)
        sections += [f"### CCMM's scale: {MILLION['d']}-D, k = {MILLION['k']}, certified relative gap {MILLION['tol']:g}",
                     "", "Five standardized Gaussian blobs (separation 4) in 7-D, the Gaussian 10-NN graph, "
                     f"lam = {args.lam:g}; `gtvcvx.solve(method=\"halpern\", tol={MILLION['tol']:g})`, one run per seed of "
                     "the point set (`--million-seeds`). graph_s: "
                     "points, standardization and the k-NN graph (scipy's cKDTree); setup_s: the solver's setup "
                     "(the locality relabelling of large graphs included); setup_plus_solve_s: the solver's setup "
                     "and iterations; call_s: until `gtvcvx.solve` returned (its result assembled: flows in the "
                     "caller's edge order, residuals); labels_s: `cluster_labels` (which certifies the pair again); "
                     "call_plus_labels_s = call_s + labels_s (what CCMM's clock covers, below); "
                     "graph_plus_call_s = graph_s + call_s; wall_s: the measured call (solve and cluster labels) "
                     "without the graph.", "", md, "", CCMM, ""]
        for r in rows:
            r["part"] = "million"
        rows_all += rows
    md, rows = _compile_part(args, bar)
    sections += ["### CVXPY statement compile time, complete graph", "",
                 "`gtvcvx.reference.clustering.clustering_statement` (Z = D W with one sparse incidence product, "
                 "row-wise cones, lam a DPP parameter) and CVXPY's compilation for CLARABEL:", "", md, ""]
    for r in rows:
        r["part"] = "compile"
    rows_all += rows
    return rows_all
