"""Local losses ``L_i``, batched over all nodes, in the shared vocabulary of gtvcvx.

The vocabulary every loss answers (values, gradients, proxes, conjugates, Fenchel-Young
certificates, linear domains, CVXPY statements) is described in :mod:`gtvcvx.losses._core`.
Each loss registers itself in :data:`LOSSES`; a spec names it by string or by an inline
table with its parameters (``loss = {name = "huber", delta = 0.5}``).

Where things live: :mod:`._core` (the base class, squared error, logistic, squared distance
and the registry), :mod:`._margin` (the family of sample-separable losses with a box-shaped
conjugate), and one module per loss of that family (:mod:`.absolute`, :mod:`.huber`,
:mod:`.hinge`). To add a loss: a module with a registered :class:`Loss` subclass and one
import line here; its contract tests come from :func:`gtvcvx.testing.check_loss`
(``tests/test_contracts.py``).
"""

from ._core import (DOMAIN_RTOL, LOSSES, LinearDomain, Logistic, Loss, SquaredDistance, SquaredError, build_loss,
                    get_loss, register_loss)
from ._margin import MarginLoss
from .absolute import AbsoluteError
from .huber import Huber
from .hinge import Hinge

__all__ = ["Loss", "LinearDomain", "SquaredError", "Logistic", "SquaredDistance", "MarginLoss", "AbsoluteError",
           "Huber", "Hinge", "DOMAIN_RTOL", "LOSSES", "register_loss", "get_loss", "build_loss"]
