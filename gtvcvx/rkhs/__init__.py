"""Kernel-sparse RKHS classifiers (Peifer, Chamon, Paternain & Ribeiro) with certified duals.

* :class:`Dictionary` - Gaussian kernel atoms (center, width, quadrature weight), sparse kernels;
* :class:`RKHSProblem` - data + dictionary + ``gamma``, ``eps``, ``C``: objectives, recovery;
* :func:`solve_dual` - the fast core (semismooth-Newton ALM; restarted PDHG and the paper's
  projected subgradient ascent as options) with an honest duality-gap certificate;
* :class:`SparseKernelClassifier` - a scikit-learn estimator (passes ``check_estimator``; one-vs-rest
  for more classes; dictionaries built from the training data at fit time);
* :func:`federated_fit` - the federated protocol (agents send critical samples only);
* :func:`run_rkhs_spec`, :func:`plot_decision_boundary` - ``kind = "rkhs"`` specs.

The CVXPY reference statements live in :mod:`gtvcvx.rkhs.reference`.
"""

from .certificate import RKHSCertificate, certify, hard_margin_feasible_point
from .dictionary import Dictionary, gaussian_kernel
from .problem import RKHSProblem, encode_labels, phi_conjugate, psi
from .result import RKHSResult, critical_mask
from .solver import METHODS, solve_dual
from .classifier import ConvergenceWarning, NotFittedError, SparseKernelClassifier, solve_problem
from .federated import FederatedResult, federated_fit
from .spec import RKHSSpec, load_rkhs_spec
from .run import plot_decision_boundary, run_rkhs_spec

__all__ = ["SparseKernelClassifier", "NotFittedError", "ConvergenceWarning", "solve_problem", "federated_fit",
           "FederatedResult", "RKHSSpec", "load_rkhs_spec", "run_rkhs_spec", "plot_decision_boundary",
           "Dictionary", "gaussian_kernel", "RKHSProblem", "encode_labels", "psi", "phi_conjugate",
           "RKHSResult", "critical_mask", "RKHSCertificate", "certify", "hard_margin_feasible_point",
           "solve_dual", "METHODS"]
