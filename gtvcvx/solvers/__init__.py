"""The fast core: hand-written NumPy/SciPy-sparse primal-dual solvers with certificates."""

from .certificate import Certificate, certify_pair, feasible_flow
from .gtv import IterationInfo, solve

__all__ = ["solve", "IterationInfo", "Certificate", "certify_pair", "feasible_flow"]
