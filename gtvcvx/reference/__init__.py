"""Declarative CVXPY reference statements and the backend wrapper.

CVXPY is imported only when a statement is built or solved.
"""

from .backend import installed_backends, run_cvxpy
from .clustering import solve_clustering
from .gtv import dual_statement, primal_statement, solve_dual, solve_primal
from .rkhs import rkhs_dual_statement, rkhs_primal_statement, solve_rkhs_dual, solve_rkhs_primal

__all__ = ["solve_primal", "solve_dual", "primal_statement", "dual_statement", "installed_backends",
           "run_cvxpy", "solve_rkhs_dual", "solve_rkhs_primal", "rkhs_dual_statement", "rkhs_primal_statement",
           "solve_clustering"]
