"""gtvcvx: convex optimization over networks of local datasets, with certified accuracy."""

from importlib.metadata import PackageNotFoundError, version

from . import graphs
from .graph import Graph
from .losses import AbsoluteError, Hinge, Huber, Logistic, SquaredDistance, SquaredError
from .penalties import GroupNorm2, Norm1, Norm2, QuadraticForm, SquaredNorm2
from .problem import GTVProblem
from .results import GTVResult, SolveResult, Status

try:
    __version__ = version("gtvcvx")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

__all__ = ["Graph", "graphs", "GTVProblem", "GTVResult", "SolveResult", "Status", "SquaredError", "Logistic",
           "SquaredDistance", "AbsoluteError", "Huber", "Hinge", "Norm2", "Norm1", "SquaredNorm2", "GroupNorm2",
           "QuadraticForm", "__version__"]

from .solvers import solve  # noqa: E402
from .tasks import load_spec, solve_spec  # noqa: E402

__all__ += ["solve", "load_spec", "solve_spec"]
