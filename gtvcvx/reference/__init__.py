"""Declarative CVXPY reference statements of GTV and convex clustering, and the backend wrapper.

CVXPY is imported only when a statement is built or solved. The RKHS classifier's statements
live with their family in :mod:`gtvcvx.rkhs.reference` (they use :func:`run_cvxpy` from here).
"""

from .backend import installed_backends, run_cvxpy
from .clustering import solve_clustering
from .gtv import dual_statement, primal_statement, solve_dual, solve_primal

__all__ = ["solve_primal", "solve_dual", "primal_statement", "dual_statement", "installed_backends",
           "run_cvxpy", "solve_clustering"]
