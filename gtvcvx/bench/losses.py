"""``gtvcvx bench losses``: the losses beyond squared error on graphs of 1,000+ nodes, gtvcvx vs CVXPY.

``gtvcvx bench real`` measures Huber, absolute error and hinge on real graphs of 15-225 nodes;
this target measures them (and logistic) where the graph is large enough that the method choice
and the factorization matter: a chain (a path of sensors, no fill) and a two-block stochastic
block model (mean degree ~5.5, a few isolated nodes, long paths) of ``--sizes`` nodes, each node
with ``--samples-per-node`` rows of ``d = --d`` standard normal features. Node ``i`` of block
``b`` (the SBM's blocks, the chain's two halves) has the weights ``w_b`` (standard normal); the
regression targets (Huber, absolute error) are ``x^T w_b`` plus Student-t noise with two degrees
of freedom (outliers: what these losses are for), the labels (hinge, logistic) the signs of
``x^T w_b + 0.3 N(0, 1)``: each node's few samples are nearly always separable, the pooled ones
are not. Penalty ``--penalties`` at ``lam``. The SBM's isolated nodes learn alone, so with the logistic
loss (no minimizer on separable data) the SBM rows have none: ``gtvcvx.solve`` says so (status
``no_minimizer``) where CVXPY's solvers return "optimal" weights that grow with their accuracy; those
rows are listed and left out of the ratios' summary, as in ``gtvcvx bench real``.

Each instance is solved by ``gtvcvx.solve`` (its automatic method choice) to a certified relative
gap ``--tol`` and by CVXPY+CLARABEL and CVXPY+SCS (gtvcvx's reference defaults), every call whole
(CVXPY's compilation included) in a fresh process, ``--repeats`` times alternating, the median
reported with its peak memory.
"""

from __future__ import annotations

import time

import numpy as np

from .. import AbsoluteError, GTVProblem, Hinge, Huber, Logistic, graphs
from ..penalties import get_penalty
from ..progress import Progress
from .harness import format_table, measured, median_run, publish, ratio
from .real import call_cvxpy, call_gtvcvx

NAME = "losses"
HELP = ("Huber, absolute error, hinge and logistic losses on a chain and an SBM of 1,000-2,000 nodes, few samples "
        "per node: gtvcvx vs CVXPY+CLARABEL and CVXPY+SCS (time, peak memory, ratios)")

LOSSES = {"huber": Huber, "absolute": AbsoluteError, "hinge": Hinge, "logistic": Logistic}
GRAPHS = ("chain", "sbm")
PEERS = ("CLARABEL", "SCS")
#: The penalties without parameters (``--penalties``).
PENALTIES = ("norm2", "norm1", "squared_norm2")


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="1,000 nodes only, one run each")
    parser.add_argument("--sizes", default="1000,2000", help="comma-separated node counts (default 1000,2000)")
    parser.add_argument("--graphs", default=",".join(GRAPHS), help=f"comma-separated graphs of {', '.join(GRAPHS)} "
                                                                   f"(default both)")
    parser.add_argument("--losses", default=",".join(LOSSES), help=f"comma-separated losses of {', '.join(LOSSES)}")
    parser.add_argument("--penalties", default="norm2", help="comma-separated penalties (default norm2)")
    parser.add_argument("--samples-per-node", type=int, default=4, help="rows per node (default 4)")
    parser.add_argument("--d", type=int, default=3, help="features per row (default 3)")
    parser.add_argument("--lam", type=float, default=0.05, help="lam (default 0.05)")
    parser.add_argument("--tol", type=float, default=1e-6, help="gtvcvx's certified relative gap (default 1e-6)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="fresh-process runs per solver and instance, alternated, median reported (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the graph, features and noise (default 0)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per isolated run (default 600)")


def build(graph: str, n: int, loss: str, penalty: str, samples_per_node: int, d: int, lam: float,
          seed: int) -> GTVProblem:
    """One instance (see the module notes); the same arguments give the same problem."""
    if graph not in GRAPHS or loss not in LOSSES:
        raise ValueError(f"graph must be one of {GRAPHS} and loss one of {tuple(LOSSES)}, got {graph!r}, {loss!r}")
    rng = np.random.default_rng(seed)
    if graph == "chain":
        G, block = graphs.chain(n), (np.arange(n) >= n // 2).astype(np.int64)
    else:
        G, block = graphs.sbm([n // 2, n - n // 2], p_in=min(1.0, 10.0 / n), p_out=min(1.0, 1.0 / n), seed=seed)
    weights = rng.normal(size=(2, d))[block]  # (n, d): each node its block's
    X = rng.normal(size=(n, samples_per_node, d))
    signal = np.einsum("nmd,nd->nm", X, weights)
    if loss in ("hinge", "logistic"):
        y = np.where(signal + 0.3 * rng.normal(size=signal.shape) > 0, 1.0, -1.0)
    else:
        y = signal + rng.standard_t(2, size=signal.shape)
    return GTVProblem(G, LOSSES[loss](list(X), list(y), d=d), get_penalty(penalty), lam)


def _names(text: str, allowed, flag: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names or any(name not in allowed for name in names):
        raise SystemExit(f"{flag} must name some of {', '.join(allowed)}, got {text!r}")
    return names


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 4:
        raise SystemExit(f"--sizes must be comma-separated node counts >= 4, got {text!r}")
    return sizes


def run(args) -> int:
    sizes = (1000,) if args.quick else _sizes(args.sizes)
    losses = _names(args.losses, tuple(LOSSES), "--losses")
    graph_kinds = _names(args.graphs, GRAPHS, "--graphs")
    penalties = _names(args.penalties, PENALTIES, "--penalties")
    repeats = 1 if args.quick else args.repeats
    if repeats < 1 or args.samples_per_node < 1 or args.d < 1:
        raise SystemExit("--repeats, --samples-per-node and --d must be at least 1")
    if not (args.lam >= 0 and args.tol > 0):
        raise SystemExit(f"--lam must be >= 0 and --tol > 0, got {args.lam} and {args.tol}")
    started = time.strftime("%Y-%m-%d %H:%M")
    instances = [(gr, n, loss, pen) for n in sizes for gr in graph_kinds for loss in losses for pen in penalties]
    plan = [("gtvcvx", call_gtvcvx, {"tol": args.tol})] + [(p, call_cvxpy, {"solver": p}) for p in PEERS]
    bar = Progress(len(instances) * len(plan) * repeats)
    rows, ok = [], True
    try:
        for gr, n, loss, pen in instances:
            built = {"graph": gr, "n": n, "loss": loss, "penalty": pen, "samples_per_node": args.samples_per_node,
                     "d": args.d, "lam": args.lam, "seed": args.seed}
            runs = {label: [] for label, _, _ in plan}
            for _ in range(repeats):  # alternated: the machine's drift spreads over every solver alike
                for label, call, kwargs in plan:
                    runs[label].append(measured(bar, f"{gr} {n} / {loss} / {pen}: {label}", build, built, call, kwargs,
                                                timeout=args.timeout))
            med = {label: median_run(r) for label, r in runs.items()}
            ok &= all(r.ok for r in med.values())
            out = {label: (r.data if r.ok else {"status": f"crashed: {r.error}"}) for label, r in med.items()}
            fast, ref = out["gtvcvx"], out["CLARABEL"]
            row = {"graph": gr, "n": n, "loss": loss, "penalty": pen, "method": fast.get("method"),
                   "gtvcvx_s": fast.get("seconds", float("nan"))}
            for label in PEERS:
                row[f"{label.lower()}_s"] = out[label].get("seconds", float("nan"))
            row["ratio_clarabel"] = ratio(row["clarabel_s"], row["gtvcvx_s"])
            row["ratio_scs"] = ratio(row["scs_s"], row["gtvcvx_s"])
            row.update(status=fast.get("status"), certified_rel_gap=fast.get("rel_gap", float("nan")))
            fp, rp = fast.get("primal"), ref.get("primal")
            row["objective_vs_clarabel"] = ((fp - rp) / (1.0 + abs(rp)) if fp is not None and rp is not None
                                            else float("nan"))
            for label, r in med.items():
                row[f"{label.lower()}_peak_mb"] = r.peak_mb
            row["peer_status"] = "; ".join(f"{label} {out[label].get('status')}" for label in PEERS
                                           if out[label].get("status") != "optimal")
            rows.append(row)
            bar.note(f"[bench losses] {gr} {n} / {loss} / {pen}: gtvcvx {row['gtvcvx_s']:.3g} s ({row['method']}, "
                     f"{row['status']}), CLARABEL {row['clarabel_s']:.3g} s, SCS {row['scs_s']:.3g} s")
    finally:
        bar.close()
    finite = [r["ratio_clarabel"] for r in rows if np.isfinite(r["ratio_clarabel"]) and r["status"] != "no_minimizer"]
    worst = min(finite, default=float("nan"))
    median = float(np.median(finite)) if finite else float("nan")
    uncertified = [f"{r['graph']} {r['n']} / {r['loss']} / {r['penalty']} ({r['status']})" for r in rows
                   if r["status"] not in ("optimal", "no_minimizer")]
    no_minimizer = [f"{r['graph']} {r['n']} / {r['loss']} / {r['penalty']}" for r in rows if r["status"] == "no_minimizer"]
    cols = ["graph", "n", "loss", "penalty", "method", "gtvcvx_s", "clarabel_s", "scs_s", "ratio_clarabel", "ratio_scs",
            "status", "certified_rel_gap", "objective_vs_clarabel", "gtvcvx_peak_mb", "clarabel_peak_mb", "scs_peak_mb",
            "peer_status"]
    graphs_said = " and ".join({"chain": "a chain", "sbm": "a two-block SBM (p_in = 10 / n, p_out = 1 / n)"}[gr]
                               for gr in graph_kinds)
    lines = [
        "## losses: Huber, absolute error, hinge and logistic on graphs of 1,000+ nodes, gtvcvx vs CVXPY",
        "",
        f"Command: `gtvcvx bench losses{' --quick' if args.quick else ''} --sizes {','.join(map(str, sizes))} "
        f"--graphs {','.join(graph_kinds)} --losses {','.join(losses)} --penalties {','.join(penalties)} "
        f"--samples-per-node {args.samples_per_node} "
        f"--d {args.d} --lam {args.lam:g} --tol {args.tol:g} --repeats {repeats} --seed {args.seed} --out {args.out}` "
        f"(started {started}). {graphs_said[0].upper()}{graphs_said[1:]} of each size, "
        f"{args.samples_per_node} standard normal rows of d = {args.d} per node, two blocks of weights; regression "
        "targets with Student-t (2) noise, labels the signs of the signal plus 0.3 N(0, 1) (see "
        "`gtvcvx.bench.losses`). Every call whole (CVXPY compilation included) in a fresh process, "
        f"{repeats} run(s) per solver alternated, the median's seconds and peak memory (MiB, the solve's "
        "window); `ratio_*` = peer seconds / gtvcvx seconds (above 1: gtvcvx faster); `objective_vs_clarabel` = "
        "(gtvcvx's objective - CLARABEL's) / (1 + |CLARABEL's|); `method` is what `gtvcvx.solve` chose.",
        "",
        format_table(rows, cols),
        "",
        f"Ratio against CVXPY+CLARABEL: worst **{worst:.3g}**, median **{median:.3g}** over {len(finite)} rows "
        "with a minimizer. "
        + (f"Not certified to {args.tol:g}: {'; '.join(uncertified)}." if uncertified
           else f"gtvcvx certified {args.tol:g} on every row with a minimizer.")
        + (f" No minimizer (found by gtvcvx, not timed against the peers' answers): {'; '.join(no_minimizer)}."
           if no_minimizer else ""),
        "",
    ]
    code = publish(args.out, NAME, "\n".join(lines), rows)
    return code if ok else 1
