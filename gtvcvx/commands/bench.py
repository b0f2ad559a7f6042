"""``gtvcvx bench TARGET``: benchmarks against CVXPY + CLARABEL and CVXPY + SCS in one run."""

from __future__ import annotations

import importlib
import pkgutil

NAME = "bench"
HELP = "benchmark the fast core against CVXPY+CLARABEL and CVXPY+SCS (time, peak memory, ratios)"


def _targets():
    from .. import bench

    for info in sorted(pkgutil.iter_modules(bench.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{bench.__name__}.{info.name}")
        if hasattr(module, "NAME") and hasattr(module, "run"):
            yield module


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="target", metavar="TARGET")
    sub.required = True
    for module in _targets():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        p.add_argument("--out", default="reports", help="report directory; results go to its bench/ folder (default: reports)")
        module.add_arguments(p)
        p.set_defaults(_bench=module.run)


def run(args) -> int:
    return int(args._bench(args))
