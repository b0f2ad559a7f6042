"""gtvcvx: convex optimization over networks of local datasets, with certified accuracy.

The public names below are imported on first use (PEP 562): ``import gtvcvx`` itself loads no
NumPy, SciPy, pandas or CVXPY, so the ``gtvcvx`` command starts in milliseconds and a Ctrl-C
during its heavy imports reaches its own handler (exit 130, one line) instead of printing a
traceback from the package's ``__init__``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

#: Public name -> the submodule that defines it (a submodule maps to itself).
_EXPORTS = {
    "graphs": "graphs",
    "Graph": "graph",
    "GTVProblem": "problem",
    "GTVResult": "results", "SolveResult": "results", "Status": "results",
    "SquaredError": "losses", "Logistic": "losses", "SquaredDistance": "losses", "AbsoluteError": "losses",
    "Huber": "losses", "Hinge": "losses",
    "Norm2": "penalties", "Norm1": "penalties", "SquaredNorm2": "penalties", "GroupNorm2": "penalties",
    "QuadraticForm": "penalties",
    "solve": "solvers",
    "load_spec": "tasks", "solve_spec": "tasks",
}

__all__ = ["Graph", "graphs", "GTVProblem", "GTVResult", "SolveResult", "Status", "SquaredError", "Logistic",
           "SquaredDistance", "AbsoluteError", "Huber", "Hinge", "Norm2", "Norm1", "SquaredNorm2", "GroupNorm2",
           "QuadraticForm", "__version__", "solve", "load_spec", "solve_spec"]


def __getattr__(name: str):
    if name == "__version__":
        value = _installed_version()
    elif name in _EXPORTS:
        module = import_module(f"{__name__}.{_EXPORTS[name]}")
        value = module if _EXPORTS[name] == name else getattr(module, name)
    elif name.isidentifier() and not name.startswith("__") and _is_submodule(name):  # ``gtvcvx.rkhs`` after a bare ``import gtvcvx``
        value = import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _is_submodule(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(f"{__name__}.{name}") is not None


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gtvcvx")
    except PackageNotFoundError:  # running from a source tree without installation
        return "0.0.0+unknown"


if TYPE_CHECKING:  # what static analysis and IDEs see: the same names, imported eagerly
    from . import graphs
    from .graph import Graph
    from .losses import AbsoluteError, Hinge, Huber, Logistic, SquaredDistance, SquaredError
    from .penalties import GroupNorm2, Norm1, Norm2, QuadraticForm, SquaredNorm2
    from .problem import GTVProblem
    from .results import GTVResult, SolveResult, Status
    from .solvers import solve
    from .tasks import load_spec, solve_spec

    __version__: str
