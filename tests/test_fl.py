"""The lecture notes' FL algorithms (gtvcvx.fl): convergence to their GTV targets certified by the gap,
communication accounting, and the closed form and Proposition 3.1 of lecture 004 as oracles."""

import numpy as np
import pytest
import scipy.sparse as sp

import gtvcvx as g
from gtvcvx.capabilities import CapabilityError
from gtvcvx.fl import fedavg_gd, fedavg_prox, fedrelax, fedrelax_nonparametric


def _linear_data(n=12, d=3, m=6, noise=0.05, seed=0, same=False):
    rng = np.random.default_rng(seed)
    truth = np.tile(rng.normal(size=d), (n, 1)) if same else rng.normal(size=(n, d))
    X = [rng.normal(size=(m, d)) for _ in range(n)]
    y = [X[i] @ truth[i] + noise * rng.normal(size=m) for i in range(n)]
    return X, y, truth


def _closed_form(graph, X, y, alpha):
    """Lecture 004, eqs. (3.19)-(3.25): min sum_i (1/m_i)||y_i - X_i w_i||^2 + alpha sum_e A_e ||w_i - w_j||^2
    has Q w = -q/2 with Q = blockdiag(X_i^T X_i / m_i) + alpha L (x) I, q_i = -(2/m_i) X_i^T y_i."""
    n, d = len(X), X[0].shape[1]
    blocks = sp.block_diag([Xi.T @ Xi / Xi.shape[0] for Xi in X])
    Q = (blocks + alpha * sp.kron(graph.laplacian(weighted=True), sp.eye(d))).toarray()
    q = np.concatenate([-2.0 / Xi.shape[0] * Xi.T @ yi for Xi, yi in zip(X, y)])
    return np.linalg.solve(Q, -0.5 * q).reshape(n, d)


def test_gtv_with_the_squared_penalty_matches_the_closed_form_of_lecture_004():
    graph = g.graphs.sbm([6, 6], 0.7, 0.2, seed=1).graph
    X, y, _ = _linear_data()
    alpha = 0.3
    # our SquaredNorm2 is ||u||^2 / 2, the lecture's penalty is ||u||^2: lam = 2 alpha
    problem = g.GTVProblem(graph, g.SquaredError(X, y), g.SquaredNorm2(), 2 * alpha)
    result = g.solve(problem, tol=1e-12, max_iter=200_000)
    closed = _closed_form(graph, X, y, alpha)
    assert result.status == "optimal"
    # a gap of 1e-12 bounds ||W - W*||^2 by 2 gap / mu (mu ~ 0.1 here): compare values tightly, models loosely
    assert abs(problem.objective(closed) - result.primal) <= 1e-11 * (1 + result.primal)
    assert result.dual <= problem.objective(closed) + 1e-12 and np.abs(result.W - closed).max() <= 1e-5


def test_proposition_3_1_bound_on_the_deviation_from_the_average():
    graph = g.graphs.sbm([8, 8], 0.6, 0.3, seed=2).graph
    lap = graph.laplacian(weighted=True).toarray()
    lambda_2 = np.linalg.eigvalsh(lap)[1]
    assert lambda_2 > 0  # connected
    for seed in range(5):
        X, y, truth = _linear_data(n=16, d=2, m=4, noise=0.5, seed=seed, same=True)
        for alpha in (0.1, 1.0, 10.0):
            W = _closed_form(graph, X, y, alpha)
            deviation = ((W - W.mean(axis=0)) ** 2).sum()
            noise = sum(((yi - Xi @ truth[i]) ** 2).sum() / Xi.shape[0] for i, (Xi, yi) in enumerate(zip(X, y)))
            assert deviation <= noise / (lambda_2 * alpha) + 1e-12  # (3.30)


def test_fedrelax_converges_to_the_certified_gtv_solution_and_counts_messages():
    graph = g.graphs.sbm([6, 6], 0.7, 0.2, seed=1).graph
    X, y, _ = _linear_data()
    problem = g.GTVProblem(graph, g.SquaredError(X, y), g.SquaredNorm2(), 0.5)
    result = fedrelax(problem, rounds=5000, tol=1e-13)
    assert result.rel_gap <= 1e-9 and result.rounds < 5000
    reference = g.solve(problem, tol=1e-12, max_iter=200_000)
    assert abs(problem.objective(result.W) - reference.primal) <= 1e-9 * (1 + reference.primal)
    assert np.abs(result.W - reference.W).max() <= 1e-5
    assert result.bytes_per_round == 8 * problem.d * 2 * graph.n_edges
    assert result.bytes_total == result.bytes_per_round * result.rounds
    objective = result.history["objective"].to_numpy()
    assert objective[-1] <= objective[0]


def test_private_fedrelax_trades_accuracy_for_noise():
    graph = g.graphs.sbm([6, 6], 0.7, 0.2, seed=1).graph
    X, y, _ = _linear_data()
    problem = g.GTVProblem(graph, g.SquaredError(X, y), g.SquaredNorm2(), 0.5)
    optimum = g.solve(problem, tol=1e-12, max_iter=200_000).primal
    excess = []
    for sigma in (0.0, 0.01, 0.1):
        runs = [fedrelax(problem, rounds=400, tol=None, noise=sigma, seed=s) for s in range(3)]
        excess.append(np.mean([problem.objective(r.W) - optimum for r in runs]))
        assert all(r.rel_gap >= 0 for r in runs)
    assert excess[0] < 1e-9 < excess[1] < excess[2]
    # the reported gap is an honest bound on the excess of each private run
    run = fedrelax(problem, rounds=400, tol=None, noise=0.1, seed=7)
    assert run.certificate.gap >= problem.objective(run.W) - optimum - 1e-12


def test_nonparametric_fedrelax_with_linear_models_solves_gtv_with_the_test_set_quadratic_form():
    from sklearn.linear_model import LinearRegression

    graph = g.graphs.sbm([5, 5], 0.8, 0.2, seed=3).graph
    X, y, _ = _linear_data(n=10, d=2, m=8, seed=3)
    problem = g.GTVProblem(graph, g.SquaredError(X, y), g.SquaredNorm2(), 0.8)
    X_test = np.random.default_rng(4).normal(size=(20, 2))
    result = fedrelax_nonparametric(problem, lambda: LinearRegression(fit_intercept=False), X_test, rounds=400,
                                    tol=1e-13)
    assert result.W is not None and result.target.penalty.name == "quadratic_form"
    assert result.rel_gap <= 1e-8
    assert result.bytes_per_round == 8 * 20 * 2 * graph.n_edges
    # a decision tree also runs (no coefficients, so no certificate)
    from sklearn.tree import DecisionTreeRegressor

    trees = fedrelax_nonparametric(problem, lambda: DecisionTreeRegressor(max_depth=2, random_state=0), X_test,
                                   rounds=3)
    assert trees.W is None and trees.certificate is None and trees.info["predictions"].shape == (10, 20)


def test_fedavg_projected_gradient_descent_reaches_the_pooled_model_certified():
    graph = g.graphs.sbm([6, 6], 0.7, 0.2, seed=1).graph
    X, y, _ = _linear_data()
    problem = g.GTVProblem(graph, g.SquaredError(X, y), g.Norm2(), 0.5)
    result = fedavg_gd(problem, rounds=20_000, weighting="nodes", tol=1e-14)
    assert np.ptp(result.W, axis=0).max() == 0  # one model
    assert result.rel_gap <= 1e-8  # optimal for GTV just above lam_max: the pooled model
    pooled = np.linalg.lstsq(np.vstack([Xi / np.sqrt(len(yi)) for Xi, yi in zip(X, y)]),
                             np.concatenate([yi / np.sqrt(len(yi)) for yi in y]), rcond=None)[0]
    assert np.abs(result.W[0] - pooled).max() <= 1e-7
    assert result.bytes_per_round == 8 * problem.d * 2 * problem.n


def test_fedsgd_with_sample_weights_reaches_the_sample_pooled_model_and_local_steps_drift():
    graph = g.graphs.chain(6)
    rng = np.random.default_rng(5)
    X = [rng.normal(size=(m, 2)) for m in (2, 3, 5, 8, 13, 21)]
    y = [Xi @ rng.normal(size=2) for Xi in X]
    problem = g.GTVProblem(graph, g.SquaredError(X, y), g.Norm2(), 1.0)
    fedsgd = fedavg_gd(problem, rounds=50_000, tol=1e-15)
    assert fedsgd.name == "fedsgd" and fedsgd.certificate is None
    all_samples = np.linalg.lstsq(np.vstack(X), np.concatenate(y), rcond=None)[0]
    assert np.abs(fedsgd.W[0] - all_samples).max() <= 1e-7
    drifted = fedavg_gd(problem, rounds=50_000, local_steps=10, tol=1e-15)
    assert np.abs(drifted.W[0] - all_samples).max() > 1e-4  # client drift with E > 1 on heterogeneous data


def test_fedavg_prox_approaches_the_pooled_model_as_lam_grows():
    graph = g.graphs.sbm([6, 6], 0.7, 0.2, seed=1).graph
    X, y, _ = _linear_data()
    problem = g.GTVProblem(graph, g.SquaredError(X, y), g.Norm2(), 0.5)
    gaps = [fedavg_prox(problem, rounds=20_000, lam=lam, tol=1e-14).rel_gap for lam in (1.0, 10.0, 100.0)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] <= 1e-3


def test_fl_algorithms_refuse_what_they_cannot_run():
    graph = g.graphs.chain(4)
    X, y, _ = _linear_data(n=4)
    with pytest.raises(CapabilityError, match="half squared penalty"):
        fedrelax(g.GTVProblem(graph, g.SquaredError(X, y), g.Norm2(), 1.0))
    with pytest.raises(ValueError, match="lam > 0"):
        fedrelax(g.GTVProblem(graph, g.SquaredError(X, y), g.SquaredNorm2(), 0.0))
    with pytest.raises(ValueError, match="noise must be"):
        fedrelax(g.GTVProblem(graph, g.SquaredError(X, y), g.SquaredNorm2(), 1.0), noise=-1.0)
    with pytest.raises(ValueError, match="weighting must be"):
        fedavg_gd(g.GTVProblem(graph, g.SquaredError(X, y), g.Norm2(), 1.0), weighting="clients")
    with pytest.raises(ValueError, match="X_test must be"):
        fedrelax_nonparametric(g.GTVProblem(graph, g.SquaredError(X, y), g.Norm2(), 1.0), object, np.ones((3, 5)))


def test_a_diverging_step_size_is_reported_not_raised():
    """FedAvg with lr = 1e10 on a quadratic: the models leave float64 within ~30 rounds, and the next
    gradient call raised "W must be finite, found -inf" out of fedavg_gd. The run now stops at the first
    round whose models are not finite, returns the round before (finite, its certificate honest: far from
    optimal) and says where."""
    import gtvcvx as g
    from gtvcvx import fl

    rng = np.random.default_rng(0)
    node = np.repeat(np.arange(10), 3)
    X = rng.normal(size=(30, 2))
    y = X @ np.array([1.0, -1.0]) + 0.1 * rng.normal(size=30)
    problem = g.GTVProblem(g.graphs.chain(10), g.SquaredError.from_stacked(X, y, node, 10), g.Norm2(), lam=0.1)
    result = fl.fedavg_gd(problem, rounds=200, lr=1e10, weighting="nodes")
    stopped = result.info["diverged_at_round"]
    assert 1 < stopped < 200 and result.rounds == stopped - 1 and np.isfinite(result.W).all()
    assert bool(result.history["diverged"].iloc[-1]) and result.certificate is not None and not result.rel_gap < 1
    assert "diverged_at_round" not in fl.fedavg_gd(problem, rounds=50, weighting="nodes").info
