"""``gtvcvx bench gtv-methods``: what each ingredient of the fast core buys, on the Table I instance.

The fast core's default (reflected restarted Halpern PDHG with an adaptive primal weight) is
compared with variants that drop one ingredient at a time, down to the GTV paper's plain
Algorithm 1. Iteration counts are deterministic (the certificate schedule depends on
iteration counts only); times are from this run, each variant in a fresh process.
"""

from __future__ import annotations

from pathlib import Path

from .gtv import PAPER_SPEC, build_spec
from ..progress import Progress
from .harness import format_table, measured, publish

NAME = "gtv-methods"
HELP = "fast-core ablation on the Table I instance: restarts, reflection, primal weight, plain Algorithm 1"

#: (label, options of gtvcvx.solve)
VARIANTS = (
    ("reflected Halpern + restarts + adaptive primal weight (default)", {}),
    ("Halpern, no reflection", {"reflection": 0.0}),
    ("reflected Halpern, fixed primal weight", {"adaptive_weight": False}),
    ("plain PDHG with the paper's fixed steps (Algorithm 1)", {"method": "pdhg"}),
)


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="the small quick SBM spec instead of Table I")
    parser.add_argument("--tol", type=float, default=1e-6, help="certified relative gap to reach (default 1e-6)")
    parser.add_argument("--max-iter", type=int, default=20_000, help="iteration limit per variant")


def call_variant(problem, tol: float, max_iter: int, options: dict):
    from ..solvers import solve

    r = solve(problem, tol=tol, max_iter=max_iter, **options)
    return {"status": str(r.status), "rel_gap": r.rel_gap, "iterations": r.iterations,
            "certificates": 0 if r.history is None else len(r.history),
            "solve_time": r.solve_time, "certificate_time": r.info.get("certificate_time", float("nan"))}


def run(args) -> int:
    spec_path = PAPER_SPEC if not args.quick else PAPER_SPEC.parents[1] / "quick" / "sbm_nlasso.toml"
    rows = []
    bar = Progress(len(VARIANTS))
    runs = []
    try:
        for label, options in VARIANTS:
            runs.append(measured(bar, label, build_spec, {"path": str(spec_path)}, call_variant,
                                 {"tol": args.tol, "max_iter": args.max_iter, "options": options}))
    finally:
        bar.close()
    for (label, options), run_ in zip(VARIANTS, runs):
        d = run_.data
        rows.append({"variant": label, "options": ", ".join(f"{k}={v!r}" for k, v in options.items()) or "-",
                     "status": d.get("status") if run_.ok else run_.error, "iterations": d.get("iterations"),
                     "certified_rel_gap": d.get("rel_gap"), "certificates": d.get("certificates"),
                     "solve_s": d.get("solve_time"), "certificate_s": d.get("certificate_time")})
    relative = Path(spec_path).relative_to(PAPER_SPEC.parents[2])
    text = "\n".join([
        "## Fast-core ablation (`gtvcvx bench gtv-methods`)", "",
        f"Instance `{relative}`, every variant to certified relative gap {args.tol:g} (at most "
        f"{args.max_iter} iterations), each in a fresh process. Iterations are deterministic; times are "
        "from this run.", "", format_table(rows)])
    return publish(args.out, NAME, text, rows)
