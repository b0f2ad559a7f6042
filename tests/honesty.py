"""An independent evaluator of GTV objectives for the honesty tests: 80-digit decimal arithmetic.

Every float is converted to ``Decimal`` exactly, so ``exact_objective(problem, W)`` is the true
``P(W)`` to about 80 significant digits, whatever the scaling of the data. It reads the
problem's declared content (``loss.content()``, graph arrays) and nothing the solvers compute.
"""

from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np

import gtvcvx as g

PRECISION = 80


def _dec(x) -> Decimal:
    return Decimal(float(x))


def _loss_values(loss, W) -> list[Decimal]:
    content = loss.content()
    n = loss.n
    out = [Decimal(0)] * n
    if isinstance(loss, g.SquaredDistance):
        for i in range(n):
            out[i] = sum(((_dec(W[i, j]) - _dec(content["points"][i, j])) ** 2 for j in range(loss.d)), Decimal(0))
        return out
    X, y, counts = content["X"], content["y"], content["counts"]
    start = 0
    for i in range(n):
        m = int(counts[i])
        total = Decimal(0)
        for k in range(start, start + m):
            pred = sum((_dec(X[k, j]) * _dec(W[i, j]) for j in range(loss.d)), Decimal(0))
            if isinstance(loss, g.SquaredError):
                total += (_dec(y[k]) - pred) ** 2
            elif isinstance(loss, g.AbsoluteError):
                total += abs(_dec(y[k]) - pred)
            elif isinstance(loss, g.Huber):
                u, delta = abs(pred - _dec(y[k])), _dec(content["delta"])
                total += u * u / 2 if u <= delta else delta * u - delta * delta / 2
            elif isinstance(loss, g.Hinge):
                total += max(Decimal(0), 1 - _dec(y[k]) * pred)
            elif isinstance(loss, g.Logistic):  # log(1 + exp(-y x^T w)), stable in decimal
                mu = -_dec(y[k]) * pred
                total += (mu + (1 + (-mu).exp()).ln()) if mu > 0 else (1 + mu.exp()).ln()
            else:
                raise TypeError(f"no exact evaluator for {type(loss).__name__}")
        if m:
            out[i] = total / m
        start += m
    return out


def _penalty_values(problem, W) -> list[Decimal]:
    out = []
    for (i, j), c in zip(problem.graph.edges, problem.capacities):
        z = [_dec(W[i, k]) - _dec(W[j, k]) for k in range(problem.d)]
        penalty = problem.penalty
        if isinstance(penalty, g.Norm2):
            phi = sum((v * v for v in z), Decimal(0)).sqrt()
        elif isinstance(penalty, g.Norm1):
            phi = sum((abs(v) for v in z), Decimal(0))
        elif isinstance(penalty, g.GroupNorm2):
            phi = sum((sum((z[k] * z[k] for k in range(problem.d) if penalty.labels[k] == group), Decimal(0)).sqrt()
                       for group in set(penalty.labels.tolist())), Decimal(0))
        elif isinstance(penalty, g.QuadraticForm):
            phi = sum((z[a] * _dec(penalty.Q[a, b]) * z[b] for a in range(problem.d) for b in range(problem.d)),
                      Decimal(0)) / 2
        elif isinstance(penalty, g.SquaredNorm2):
            phi = sum((v * v for v in z), Decimal(0)) / 2
        else:
            raise TypeError(f"no exact evaluator for {type(penalty).__name__}")
        out.append(_dec(c) * phi)
    return out


def exact_objective(problem, W) -> Decimal:
    """``P(W)`` in 80-digit decimal arithmetic."""
    W = np.asarray(W, dtype=float)
    with localcontext() as ctx:
        ctx.prec = PRECISION
        return sum(_loss_values(problem.loss, W), Decimal(0)) + sum(_penalty_values(problem, W), Decimal(0))


def check_dual_bound(cert, primal_values, *, what="") -> None:
    """A certified dual bound never exceeds any exactly evaluated primal value (weak duality).

    ``primal_values`` are exact ``P(W')`` of any candidates ``W'``; the comparison is exact
    (the float ``cert.dual`` converted to Decimal), with no tolerance.
    """
    best = min(primal_values)
    if np.isfinite(cert.dual):
        assert Decimal(float(cert.dual)) <= best, (
            f"{what}: certified dual {cert.dual!r} exceeds the exact primal value {float(best)!r} "
            f"of a feasible point (the gap {cert.gap:.3g} would be a lie)")
