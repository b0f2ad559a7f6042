"""The correctness oracle behind ``gtvcvx check``: solve a spec, measure, compare with thresholds.

The checks themselves belong to each spec kind's task (:mod:`gtvcvx.tasks`); this module is
the user-facing entry point. Thresholds come from the spec's ``[check]`` table (and
command-line overrides):

======================= ===============================================================
``max_rel_gap``         certified relative gap ``(P - D) / (1 + |P| + |D|)``
``max_abs_gap``         certified gap ``P - D``
``max_objective_error`` ``|P - P_ref| / max(1, |P_ref|)`` against the CVXPY reference
``max_solution_error``  ``||W - W_ref|| / max(1, ||W_ref||)`` against the CVXPY reference
``max_mse``             mean squared error of the local models against the ground truth
``min_ari``             adjusted Rand index of the clusters against the true labels
``min_accuracy``        classifier local models: training accuracy; RKHS: test accuracy
``max_iterations``      iterations of the solver
======================= ===============================================================

Every solve also gets a ``status`` check (the solver must report ``optimal``) and, when a
reference runs, a ``reference_bounds`` check: the certified intervals ``[D, P]`` of the solver
and of the reference must overlap (weak duality; a violation means a wrong certificate).
Experiment specs: a threshold ``max_<name>`` / ``min_<name>`` bounds ``measured[<name>]`` of
the experiment's output from above / below.
"""

from __future__ import annotations

from ..tasks.checks import (BOUNDS_RTOL, REFERENCE_CHECKS, CheckOutcome, SpecCheck, experiment_threshold,
                            run_checks, validate_checks)

__all__ = ["CheckOutcome", "SpecCheck", "run_checks", "validate_checks", "REFERENCE_CHECKS",
           "BOUNDS_RTOL", "experiment_threshold"]
