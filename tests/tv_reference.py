"""The reference of the exact chain and tree kernels (imported by their tests)."""


def clarabel_tv(y, weight, lam_e, edges):
    """CLARABEL's (tight) minimizer of ``sum_i weight_i / 2 (beta_i - y_i)^2 + sum_e lam_e |beta_a - beta_b|``
    over the pairs ``edges`` (the reference of the exact chain and tree kernels)."""
    import cvxpy as cp

    beta = cp.Variable(y.size)
    objective = 0.5 * cp.sum(cp.multiply(weight, cp.square(beta - y)))
    if len(edges):
        objective = objective + cp.sum(cp.multiply(lam_e, cp.abs(beta[edges[:, 0]] - beta[edges[:, 1]])))
    cp.Problem(cp.Minimize(objective)).solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12)
    return beta.value
