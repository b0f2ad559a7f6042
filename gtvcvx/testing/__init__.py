"""The oracle API for users' own test suites.

* :func:`certify` - a duality-gap :class:`~gtvcvx.solvers.certificate.Certificate` for a
  candidate solution ``W`` from *any* solver (flows constructed from ``W`` when not given);
* :func:`assert_optimal` - an ``AssertionError`` naming the gap and the nodes / edges where the
  optimality conditions fail, with their Fenchel-Young terms;
* :class:`ReferenceCache` - CVXPY reference solutions cached on disk per spec;
* :func:`check_loss` / :func:`check_penalty` - contract checks for a new loss or penalty
  (:mod:`gtvcvx.testing.contracts`);
* :mod:`gtvcvx.testing.pytest_plugin` - pytest fixtures around the cache; enable with
  ``pytest_plugins = ["gtvcvx.testing.pytest_plugin"]`` in your top-level ``conftest.py``.

Examples
--------
>>> import gtvcvx as g
>>> from gtvcvx.testing import assert_optimal
>>> problem = g.GTVProblem(g.graphs.chain(3), g.SquaredDistance([[0.], [1.], [5.]]), g.Norm2(), 0.2)
>>> cert = assert_optimal(problem, g.solve(problem, tol=1e-10).W, rtol=1e-8)
"""

from __future__ import annotations

import numbers

from ..solvers.certificate import Certificate
from .cache import ReferenceCache, default_cache_dir, spec_key
from .contracts import check_loss, check_penalty
from ..solvers.certify import certify, describe_failures, flow_from_primal

__all__ = ["certify", "assert_optimal", "flow_from_primal", "Certificate", "ReferenceCache", "spec_key",
           "default_cache_dir", "check_loss", "check_penalty"]


#: Seconds of the fast-core solve :func:`assert_optimal` runs for flows when those built from ``W`` do not
#: certify it (see :func:`certify`'s ``solve_time``).
ASSERT_SOLVE_TIME = 60.0


def assert_optimal(problem, W, rtol: float = 1e-6, *, U=None, atol: float = 0.0, k: int = 5,
                   solve_time: float | None = ASSERT_SOLVE_TIME) -> Certificate:
    """Assert that ``W`` solves ``problem`` to a certified relative gap ``rtol`` (or absolute gap ``atol``).

    Parameters
    ----------
    problem : GTVProblem
    W : array_like (n, d)
        Candidate solution from any solver.
    rtol : float
        Largest accepted relative gap ``(P - D) / (1 + |P| + |D|)``.
    U : array_like (|E|, d), optional
        Candidate flows; by default they are constructed from ``W`` (see :func:`certify`).
    atol : float
        Also accept an absolute gap ``P - D <= atol``.
    k : int
        How many nodes and edges the failure message lists.
    solve_time : float or None
        Without ``U`` and for a loss that is not smooth, where the flows built from ``W`` leave a gap above
        ``rtol`` (at its kinks: an exact hinge optimum certified only to 0.83), ``W`` is certified with the
        flows of a fast-core solve too (warm-started at ``W``, at most this many seconds); None: no solve.
        The gap is a bound for ``W`` whatever produced the flows.

    Returns
    -------
    Certificate
        When the assertion holds.

    Raises
    ------
    AssertionError
        With the certified gap, the primal value and dual bound, and the ``k`` nodes and edges
        with the largest Fenchel-Young terms (``L_i(w_i) + L_i^*(v_i) - <w_i, v_i>`` and
        ``c_e phi(z_e) + c_e phi^*(u_e/c_e) - <z_e, u_e>``), i.e. where the optimality
        conditions ``grad L_i(w_i) + (D^T U)_i = 0`` and ``U_e in c_e d phi((DW)_e)`` fail.
    """
    if isinstance(rtol, bool) or not isinstance(rtol, numbers.Real) or not 0.0 <= float(rtol) < 1.0:
        raise ValueError(f"rtol must be a relative gap in [0, 1), got {rtol!r}")  # (nan or -1 failed every W)
    if isinstance(atol, bool) or not isinstance(atol, numbers.Real) or not float(atol) >= 0.0:
        raise ValueError(f"atol must be a number >= 0, got {atol!r}")
    cert = certify(problem, W, U, solve_time=solve_time, target=max(float(rtol), 1e-15))
    ok = cert.rel_gap <= rtol or (atol > 0 and cert.gap <= atol)
    if ok:
        return cert
    lines = [f"W is not optimal to rtol={rtol:g}" + (f" / atol={atol:g}" if atol > 0 else "")
             + f": certified relative gap {cert.rel_gap:.3g} (gap {cert.gap:.3g} = primal {cert.primal:.10g}"
             f" - dual bound {cert.dual:.10g})."]
    if cert.message:
        lines.append(f"Certificate: {cert.message}.")
    if cert.resolution > rtol:
        lines.append(f"float64 cannot certify rtol={rtol:g} on this problem: rounding alone allows a relative "
                     f"gap of {cert.resolution:.3g} (rescale the data, or ask for a looser tolerance).")
    details = describe_failures(problem, W, cert, k=k)
    if details:
        lines.append("The optimality conditions fail most at:")
        lines.append(details)
    raise AssertionError("\n".join(lines))
