r"""The one restart and primal-weight policy of the restarted PDHG codes (GTV and RKHS).

Both codes measure a fixed-point residual ``r`` of the current epoch (the PDHG-metric distance
between a point and its PDHG step) and ask :func:`restart_due`; at a restart they rebalance the
primal weight ``omega`` with :func:`updated_primal_weight` from how far each block moved during
the epoch.

Notes
-----
Restart criteria (cuPDLP / cuPDLPx, with the constants of Applegate et al.): restart when

* *sufficient decay*: ``r <= 0.2 r_0``,
* *necessary decay without local progress*: ``r <= 0.8 r_0`` and ``r > r_prev``,
* *artificial*: the epoch has lasted ``>= 0.36`` of all iterations so far,

where ``r_0`` is the residual at the start of the epoch and ``r_prev`` at the previous test.
The primal weight is a geometric smoothing of the ratio of distances moved,
``omega <- exp(theta log(dy / dx) + (1 - theta) log omega)`` with ``theta = 1/2``, skipped when
either block did not move.

References
----------
.. [1] D. Applegate et al., "Practical large-scale linear programming using primal-dual hybrid
   gradient", NeurIPS 2021 (PDLP: restarts and primal weight).
.. [2] H. Lu, J. Yang, "cuPDLPx: a further enhanced GPU-based first-order solver for linear
   programming", 2025.
"""

from __future__ import annotations

import math

__all__ = ["SUFFICIENT_DECAY", "NECESSARY_DECAY", "ARTIFICIAL_FRACTION", "restart_due", "updated_primal_weight"]

SUFFICIENT_DECAY = 0.2
NECESSARY_DECAY = 0.8
ARTIFICIAL_FRACTION = 0.36
#: Distances below this count as "did not move" (no primal-weight update).
MIN_MOVE = 1e-12


def restart_due(r: float, r_epoch0: float, r_prev: float | None, k_in_epoch: int, iteration: int) -> bool:
    """True when the residual ``r`` of the current epoch calls for a restart (see the module Notes).

    Parameters
    ----------
    r, r_epoch0, r_prev : float
        Residual now, at the start of the epoch, and at the previous test (``None`` if none).
    k_in_epoch, iteration : int
        Iterations in the current epoch and in total.
    """
    return (r <= SUFFICIENT_DECAY * r_epoch0
            or (r <= NECESSARY_DECAY * r_epoch0 and r_prev is not None and r > r_prev)
            or k_in_epoch >= ARTIFICIAL_FRACTION * iteration)


def updated_primal_weight(omega: float, primal_move: float, dual_move: float, smoothing: float = 0.5) -> float:
    """``exp(smoothing log(dual_move / primal_move) + (1 - smoothing) log omega)``, or ``omega`` if a block stayed (or the ratio is not a positive float)."""
    ratio = dual_move / primal_move if primal_move > MIN_MOVE and dual_move > MIN_MOVE else float("nan")
    if 0.0 < ratio < math.inf:  # (moves so unequal that the ratio under- or overflows leave omega too)
        return math.exp(smoothing * math.log(ratio) + (1.0 - smoothing) * math.log(omega))
    return float(omega)
