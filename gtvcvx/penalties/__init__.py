"""Edge penalties ``phi``, batched over all edges, in the shared vocabulary of gtvcvx.

The vocabulary every penalty answers is described in :mod:`gtvcvx.penalties._core`
(values, conjugates, proxes, dual-ball geometry, a-priori bounds, CVXPY statements). Each
penalty lives in its own module and registers itself in :data:`PENALTIES`; a spec names it
by string or by an inline table with its parameters (``penalty = {name = "group_norm2",
groups = [0, 0, 1]}``). To add one: a module with a :class:`Penalty` subclass decorated by
:func:`register_penalty`, one import line here, and its contract tests come from
:func:`gtvcvx.testing.check_penalty` automatically (``tests/test_contracts.py``).
"""

from ._core import (CAPACITY_RTOL, PENALTIES, Norm1, Norm2, Penalty, SquaredNorm2, get_penalty,
                    register_penalty)
from .group import GroupNorm2
from .quadratic import QuadraticForm

__all__ = ["Penalty", "Norm2", "Norm1", "SquaredNorm2", "GroupNorm2", "QuadraticForm", "CAPACITY_RTOL",
           "PENALTIES", "register_penalty", "get_penalty"]
