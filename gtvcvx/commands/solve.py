"""``gtvcvx solve SPEC``: solve one spec and print status, objective, certificate and accuracy."""

from __future__ import annotations

import json
import math

NAME = "solve"
HELP = "solve one problem spec and print its status, objective, gap, times and accuracy"


def add_arguments(parser) -> None:
    parser.add_argument("--allow-outside", action="store_true",
                        help="let specs read data files outside their own folder (refused by default: "
                             "specs may be untrusted)")
    parser.add_argument("spec", help="TOML problem spec")
    parser.add_argument("--solver", default=None,
                        help="'fast' (default, or the spec's [solve] solver) or a CVXPY backend: CLARABEL, SCS")
    parser.add_argument("--tol", type=float, default=None, help="relative gap tolerance of the fast core")
    parser.add_argument("--max-iter", type=int, default=None, help="iteration limit")
    parser.add_argument("--time-limit", type=float, default=None, help="time limit in seconds")
    parser.add_argument("--save", metavar="FILE.npz", default=None, help="save W, U and the certificate")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def summarize(spec, result) -> dict:
    """The numbers ``gtvcvx solve`` prints, as a dictionary."""
    from ..metrics import mse

    problem = spec.problem
    out = {
        "spec": spec.name,
        "path": str(spec.path),
        "n": problem.n, "n_edges": problem.n_edges, "d": problem.d,
        "loss": problem.loss.name, "penalty": problem.penalty.name, "lam": problem.lam,
    }
    out.update(result.to_row())
    if spec.truth.W is not None and result.W is not None:
        out["mse"] = mse(result.W, spec.truth.W)
    return out


def _fmt(value) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.10g}"
    return str(value)


def run(args) -> int:
    from ..spec import allow_outside_paths

    with allow_outside_paths(getattr(args, "allow_outside", False)):
        return _run(args)


def _run(args) -> int:
    from ..results import Status
    from ..runner import run_solver
    from ..spec import load_spec

    spec = load_spec(args.spec)
    if spec.kind == "experiment":
        raise ValueError(f"{spec.path}: an experiment spec ('{spec.experiment}') is a study, not one problem; "
                         "run it with 'gtvcvx report' or 'gtvcvx check'")
    options = {k: v for k, v in spec.solve_options.items()}
    solver = args.solver or options.pop("solver", "fast")
    options.pop("solver", None)
    for key in ("tol", "max_iter", "time_limit"):
        value = getattr(args, key)
        if value is not None:
            options[key] = value
    check_solver_name(solver)
    if spec.kind == "rkhs":
        return _run_rkhs(spec, solver, options, args)
    result = run_solver(spec.problem, solver, **options)
    summary = summarize(spec, result)
    if args.save:
        from ..io import save_result

        summary["saved"] = str(save_result(result, args.save))
    if args.json:
        print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                          for k, v in summary.items()}, default=str))
    else:
        labels = [("spec", f"{spec.name} ({spec.path})"),
                  ("problem", f"n={problem_line(spec)}"),
                  ("solver", result.solver), ("status", str(result.status)),
                  ("objective", _fmt(result.primal)), ("dual bound", _fmt(result.dual)),
                  ("gap", _fmt(result.gap)), ("rel gap", _fmt(result.rel_gap)),
                  ("iterations", _fmt(result.iterations)),
                  ("setup time", f"{result.setup_time:.3f} s"), ("solve time", f"{result.solve_time:.3f} s")]
        if "mse" in summary:
            labels.append(("mse", _fmt(summary["mse"])))
        if result.message:
            labels.append(("message", result.message))
        if "saved" in summary:
            labels.append(("saved", summary["saved"]))
        width = max(len(k) for k, _ in labels)
        for key, value in labels:
            print(f"{key:<{width}}  {value}")
    return 0 if result.status == Status.OPTIMAL else 1


def _run_rkhs(spec, solver, options, args) -> int:
    """``gtvcvx solve`` on a ``kind = "rkhs"`` spec: solve, print the certificate and accuracy."""
    import dataclasses

    from ..results import Status
    from ..rkhs import run_rkhs_spec

    if args.save:
        raise ValueError("--save writes GTV results; it is not available for rkhs specs")
    overrides = {k: options[k] for k in ("tol", "max_iter", "time_limit") if k in options}
    if overrides:
        spec = dataclasses.replace(spec, solve_options={**spec.solve_options, **overrides})
    result = run_rkhs_spec(spec, solver)
    row = {"spec": spec.name, "path": str(spec.path), **result.to_row()}
    if args.json:
        print(json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()},
                         default=str))
    else:
        keys = [k for k in ("spec", "solver", "method", "status", "primal", "dual", "gap", "rel_gap", "iterations",
                            "setup_time", "solve_time", "n_kernels", "n_critical", "accuracy", "message") if k in row]
        width = max(len(k) for k in keys)
        for key in keys:
            if row[key] not in ("", None):
                print(f"{key:<{width}}  {_fmt(row[key])}")
    return 0 if result.status == Status.OPTIMAL else 1


def check_solver_name(solver: str) -> None:
    """Reject a solver name that is neither 'fast' nor an installed CVXPY backend (exit 2)."""
    from ..reference import installed_backends

    if solver.lower() != "fast" and solver.upper() not in installed_backends():
        raise ValueError(f"--solver {solver!r}: expected 'fast' or an installed CVXPY backend "
                         f"({', '.join(installed_backends())})")


def problem_line(spec) -> str:
    p = spec.problem
    return (f"{p.n} |E|={p.n_edges} d={p.d} loss={p.loss.name} penalty={p.penalty.name} lam={p.lam:g}")
