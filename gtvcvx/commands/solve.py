"""``gtvcvx solve SPEC``: solve one spec and print status, objective, certificate and accuracy."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time

from .._text import printable
from ..render.tables import json_value
from .report import check_output_path

NAME = "solve"
HELP = "solve one problem spec and print its status, objective, gap, times and accuracy"


def add_arguments(parser) -> None:
    parser.add_argument("--allow-outside", action="store_true",
                        help="let specs read data files outside their own folder (refused by default: "
                             "specs may be untrusted)")
    parser.add_argument("spec", help="TOML problem spec")
    parser.add_argument("--solver", default=None,
                        help="'fast' (default, or the spec's [solve] solver) or a CVXPY backend: CLARABEL, SCS")
    parser.add_argument("--tol", type=float, default=None, help="tolerance: the fast core's relative gap; mapped to CLARABEL's gap/feasibility and SCS's eps_abs/eps_rel tolerances")
    parser.add_argument("--max-iter", type=int, default=None, help="iteration limit")
    parser.add_argument("--time-limit", type=float, default=None, help="time limit in seconds")
    parser.add_argument("--save", metavar="FILE.npz", default=None, help="save W, U and the certificate")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--backend", choices=("local", "dask"), default="local",
                        help="'dask': partition the graph (METIS) and solve on a Dask cluster (fast solver, GTV specs)")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="with --backend dask: the address of a running Dask scheduler (default: a LocalCluster "
                             "on this machine, one worker per core)")
    parser.add_argument("--parts", type=int, default=None,
                        help="with --backend dask: number of graph parts (default: one per worker)")
    parser.add_argument("--checkpoint-dir", default=None,
                        help="with --backend dask: where parts checkpoint their state (the client and every worker must reach it)")


def summarize(spec, result) -> dict:
    """The numbers ``gtvcvx solve`` prints, as a dictionary (from the spec's task)."""
    from ..tasks import task_for

    task = task_for(spec)
    out = task.summarize(spec, result)  # result comes from solve_spec: certified already
    if "certified" in getattr(result, "info", {}):
        out["certified"] = result.info["certified"]
    return out


#: Labels of the text output; other fields print under their own names.
_LABELS = {"primal": "objective", "dual": "dual bound", "rel_gap": "rel gap"}
#: Fields the text output leaves out (shown elsewhere or backend-internal).
_HIDDEN = ("path", "n", "n_edges", "d", "loss", "penalty", "lam", "value", "message", "saved")


def _json_safe(value):
    """``value`` with every float JSON can hold (:func:`~gtvcvx.render.tables.json_value`: nan -> None,
    infinities -> ``"inf"`` / ``"-inf"``), through dictionaries, lists and tuples."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return json_value(value)


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
    from ..tasks import load_spec, solve_spec, task_for

    spec = load_spec(args.spec)
    task = task_for(spec)
    if not getattr(task, "comparable", False):
        raise ValueError(f"{spec.path}: this {task.kind} spec is a study, not one problem; "
                         "run it with 'gtvcvx report' or 'gtvcvx check'")
    solver = args.solver or (spec.solve_options or {}).get("solver", "fast")
    check_solver_name(solver)
    overrides = {key: getattr(args, key) for key in ("tol", "max_iter", "time_limit")
                 if getattr(args, key) is not None}
    if args.save and not hasattr(spec, "problem") or (args.save and task.kind != "gtv"):
        raise ValueError(f"--save writes GTV results; it is not available for {task.kind} specs")
    if args.save:
        check_output_path(args.save, "--save")
    time_limit = overrides.get("time_limit", (spec.solve_options or {}).get("time_limit"))
    with _backend_options(args, task, solver) as backend, _still_running(f"{spec.name} with {solver}", time_limit):
        result = solve_spec(spec, solver, **overrides, **backend)
    summary = summarize(spec, result)
    if args.save:
        from ..io import save_result

        summary["saved"] = str(save_result(result, args.save))
    if args.json:
        # non-finite numbers as in results.json (nan -> null, inf -> "inf"): valid JSON for every parser
        print(json.dumps(_json_safe(summary), default=str, allow_nan=False))
    else:
        lines = [("spec", f"{spec.name} ({spec.path})")]
        if hasattr(spec, "problem") and hasattr(spec.problem, "graph"):
            lines.append(("problem", f"n={problem_line(spec)}"))
        for key, value in summary.items():
            if key in ("spec",) + _HIDDEN or key.startswith("res_") or value in ("", None):
                continue
            text = f"{value:.3f} s" if key.endswith("_time") and isinstance(value, float) else _fmt(value)
            lines.append((_LABELS.get(key, key), text))
        if result.message:
            lines.append(("message", result.message))
        if "saved" in summary:
            lines.append(("saved", summary["saved"]))
        width = max(len(k) for k, _ in lines)
        for key, value in lines:
            print(printable(f"{key:<{width}}  {value}"))
    return 0 if result.status == Status.OPTIMAL else 1


#: Seconds between the "still solving" lines of a long ``gtvcvx solve`` (the first after as many).
HEARTBEAT_SECONDS = 10.0


@contextlib.contextmanager
def _still_running(label: str, time_limit, stream=None):
    """While the block runs, a line on stderr every :data:`HEARTBEAT_SECONDS` with the elapsed time and what
    bounds the rest (the time limit's remainder, or none): a short solve prints nothing."""
    stream = sys.stderr if stream is None else stream
    stop, start = threading.Event(), time.monotonic()

    def beat():
        while not stop.wait(HEARTBEAT_SECONDS):
            elapsed = time.monotonic() - start
            bound = (f"at most {max(float(time_limit) - elapsed, 0.0):.0f} s left (time_limit {float(time_limit):g} s)"
                     if time_limit else "no time limit: --time-limit bounds it")
            stream.write(printable(f"gtvcvx solve: still solving {label} ({elapsed:.0f} s; {bound})") + "\n")
            stream.flush()

    thread = threading.Thread(target=beat, name="gtvcvx-solve-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def _backend_options(args, task, solver: str):
    """The solve options of ``--backend`` (a Dask client for ``--scheduler``, closed afterwards)."""
    backend = getattr(args, "backend", "local")
    dask_flags = [flag for flag, value in (("--scheduler", getattr(args, "scheduler", None)),
                                           ("--parts", getattr(args, "parts", None)),
                                           ("--checkpoint-dir", getattr(args, "checkpoint_dir", None)))
                  if value is not None]
    if backend == "local":
        if dask_flags:
            raise ValueError(f"{', '.join(dask_flags)} only apply with --backend dask")
        yield {}
        return
    if task.kind != "gtv" or solver.lower() != "fast":
        raise ValueError(f"--backend dask solves GTV specs with the fast solver, not a {task.kind} spec "
                         f"with solver {solver!r}")
    if args.parts is not None and args.parts < 1:
        raise ValueError(f"--parts must be >= 1, got {args.parts}")
    options = {"backend": "dask", "n_parts": args.parts, "checkpoint_dir": args.checkpoint_dir,
               "verbose": not args.json}
    if args.scheduler is None:
        yield options
        return
    try:
        from dask.distributed import Client
    except ImportError as exc:
        raise ValueError("--backend dask needs Dask distributed: pip install 'gtvcvx[distributed]'") from exc
    try:
        client = Client(args.scheduler, timeout=10)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"--scheduler {args.scheduler!r}: cannot connect ({exc})") from exc
    try:
        yield {**options, "client": client}
    finally:
        client.close()


def check_solver_name(solver: str) -> None:
    """Reject a solver name that is neither 'fast' nor an installed CVXPY backend (exit 2)."""
    from ..reference import installed_backends

    if solver.lower() != "fast" and solver.upper() not in installed_backends():
        raise ValueError(f"--solver {solver!r}: expected 'fast' or an installed CVXPY backend "
                         f"({', '.join(installed_backends())})")


def problem_line(spec) -> str:
    p = spec.problem
    return (f"{p.n} |E|={p.n_edges} d={p.d} loss={p.loss.name} penalty={p.penalty.name} lam={p.lam:g}")
