"""Capability declarations: what a loss or penalty can do, and what a solver requires of it.

A solver never switches on the class of a loss or penalty. It states the operations and
traits it needs with :func:`require`, and a component that lacks one is refused with a message
that names the solver, the component and the missing capability (the pattern of skglm's
``_datafit_required_attr``). A component provides

* every *optional operation* its class overrides (an operation the base class declares with
  :func:`optional`, whose base body raises :class:`CapabilityError`), and
* every *trait* listed in its class attribute ``traits`` (properties of the function such as
  ``"smooth"`` or ``"strongly_convex"`` that no method can show).

Example
-------
>>> from gtvcvx.capabilities import require
>>> require(problem.loss, ("prox", "certify_nodes"), user="gtvcvx.solve")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["CapabilityError", "optional", "capabilities", "provides", "require", "TRAITS", "registrar"]

#: Traits a component may declare, and what each promises.
TRAITS = {
    "smooth": "differentiable with a Lipschitz gradient (``gradient`` is the true gradient)",
    "strongly_convex": "strongly convex in w (so the optimum is unique)",
    "separable_points": "L_i(w) = ||w - a_i||^2 for given points a_i (convex clustering; ``loss.points``)",
    "norm": "phi is a norm (a positively homogeneous penalty with a bounded dual ball)",
    "quadratic": "phi or L is a convex quadratic",
    "nonnegative": ("L_i(w) >= 0 for every w, so L_i^*(0) = -inf L_i <= 0: the zero dual point certifies a node "
                    "whose flow is zero with the term L_i(w_i), exactly (no residual)"),
    "classifier": "labels y in {-1, +1} predicted by sign(x^T w) (training accuracy is measured)",
    "no_minimizer_if_separable": ("L_i(t w) decreases strictly towards inf L_i = 0 as t -> inf when every sample "
                                  "of node i has y x^T w > 0 (logistic; ``X_all``, ``y_all``, ``node_of_sample``): "
                                  "strictly separable data leave the problem without a minimizer"),
}


class CapabilityError(ValueError):
    """A solver needs an operation or trait the given loss or penalty does not provide."""


def registrar(registry: dict, base: type, kind: str):
    """A class decorator adding named subclasses of ``base`` to ``registry`` under ``cls.name``
    (how losses and penalties register; ``kind`` names them in errors)."""

    def register(cls):
        if not (isinstance(cls, type) and issubclass(cls, base)) or cls.name in ("", kind):
            raise TypeError(f"register_{kind} needs a named {base.__name__} subclass, got {cls!r}")
        if cls.name in registry and registry[cls.name] is not cls:
            raise ValueError(f"{kind} {cls.name!r} is already registered by {registry[cls.name].__name__}")
        registry[cls.name] = cls
        return cls

    register.__name__ = register.__qualname__ = f"register_{kind}"
    register.__module__ = base.__module__  # where the module assigns it (gtvcvx.losses._core.register_loss)
    register.__doc__ = (f"Class decorator: add a :class:`{base.__name__}` subclass to the {kind} registry "
                        "under ``cls.name``.")
    return register


def optional(method):
    """Mark a base-class method as an optional operation (its body should raise)."""
    method.__gtvcvx_optional__ = True
    return method


def _optional_operations(cls) -> set[str]:
    names = set()
    for base in cls.__mro__:
        for name, value in vars(base).items():
            if getattr(value, "__gtvcvx_optional__", False):
                names.add(name)
    return names


def capabilities(component) -> frozenset[str]:
    """The optional operations ``component`` implements and the traits it declares."""
    cls = type(component)
    provided = set(getattr(cls, "traits", ()))
    for name in _optional_operations(cls):
        attr = getattr(cls, name, None)
        if attr is not None and not getattr(attr, "__gtvcvx_optional__", False):
            provided.add(name)
    return frozenset(provided)


def provides(component, capability: str) -> bool:
    """True when ``component`` implements the operation or declares the trait ``capability``."""
    return capability in capabilities(component)


def require(component, needed: Iterable[str], *, user: str) -> None:
    """Raise :class:`CapabilityError` unless ``component`` provides everything in ``needed``.

    Parameters
    ----------
    component : Loss or Penalty
    needed : iterable of str
        Operation names (e.g. ``"prox"``) or traits (see :data:`TRAITS`).
    user : str
        Who needs them, for the message (e.g. ``"solve_ssnal"``).
    """
    have = capabilities(component)
    missing = [name for name in needed if name not in have]
    if missing:
        kind = "loss" if hasattr(component, "node_values") else "penalty"
        described = "; ".join(f"'{m}' ({TRAITS[m]})" if m in TRAITS else f"'{m}'" for m in missing)
        raise CapabilityError(
            f"{user} needs the {kind} '{getattr(component, 'name', type(component).__name__)}' to provide "
            f"{described}; it provides {sorted(have) or 'none of the optional capabilities'}. "
            "Use a solver that does not need it (e.g. a CVXPY backend: solver='CLARABEL').")
