"""Kernel-sparse RKHS classifiers (Peifer, Chamon, Paternain & Ribeiro) with certified duals.

* :class:`Dictionary` - Gaussian kernel atoms (center, width, quadrature weight), sparse kernels;
* :class:`RKHSProblem` - data + dictionary + ``gamma``, ``eps``, ``C``: objectives, recovery;
* :func:`solve_dual` - the fast core (semismooth-Newton ALM; restarted PDHG and the paper's
  projected subgradient ascent as options) with an honest duality-gap certificate;
* :class:`SparseKernelClassifier` - a scikit-learn estimator (passes ``check_estimator``; one-vs-rest
  for more classes; dictionaries built from the training data at fit time);
* :func:`federated_fit` - the federated protocol (agents send critical samples only);
* :func:`run_rkhs_spec`, :func:`plot_decision_boundary` - ``kind = "rkhs"`` specs.

The CVXPY reference statements live in :mod:`gtvcvx.rkhs.reference`. The estimator and the
federated protocol are loaded on first use: they import scikit-learn (about 0.6 s), which
``import gtvcvx`` and every command that does not fit a classifier should not pay for.
"""

from .certificate import RKHSCertificate, certify, hard_margin_feasible_point
from .dictionary import Dictionary, gaussian_kernel
from .problem import RKHSProblem, encode_labels, phi_conjugate, psi
from .result import RKHSResult, critical_mask
from .solver import METHODS, solve_dual, solve_problem
from .spec import RKHSSpec, load_rkhs_spec
from .run import plot_decision_boundary, run_rkhs_spec

__all__ = ["SparseKernelClassifier", "NotFittedError", "ConvergenceWarning", "solve_problem", "federated_fit",
           "FederatedResult", "RKHSSpec", "load_rkhs_spec", "run_rkhs_spec", "plot_decision_boundary",
           "Dictionary", "gaussian_kernel", "RKHSProblem", "encode_labels", "psi", "phi_conjugate",
           "RKHSResult", "critical_mask", "RKHSCertificate", "certify", "hard_margin_feasible_point",
           "solve_dual", "METHODS"]

#: Names of the submodules that import scikit-learn, loaded on first access (PEP 562).
_LAZY = {"SparseKernelClassifier": "classifier", "NotFittedError": "classifier", "ConvergenceWarning": "classifier",
         "DICTIONARIES": "classifier", "FederatedResult": "federated", "federated_fit": "federated"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
