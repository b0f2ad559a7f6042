import numpy as np
import pytest
from scipy.optimize import minimize

import gtvcvx as g
from conftest import LOSSES, make_loss

LABELS = np.array([0, 0, 0, 1, 1, 1, 1])


@pytest.fixture(params=LOSSES)
def loss(request):
    return make_loss(request.param, LABELS, 3, seed=11)


def _random_W(loss, seed=0, scale=1.0):
    return scale * np.random.default_rng(seed).normal(size=(loss.n, loss.d))


def test_value_matches_definition(loss):
    W = _random_W(loss)
    if isinstance(loss, g.SquaredDistance):
        expected = ((W - loss.points) ** 2).sum(axis=1)
    else:
        expected = []
        for Xi, yi, wi in zip(loss.X, loss.y, W):
            if len(yi) == 0:
                expected.append(0.0)
            elif isinstance(loss, g.SquaredError):
                expected.append(np.mean((yi - Xi @ wi) ** 2))
            else:
                expected.append(np.mean(np.log1p(np.exp(-yi * (Xi @ wi)))))
    assert np.allclose(loss.node_values(W), expected, rtol=1e-12, atol=1e-12)


def test_gradient_by_finite_differences(loss):
    W = _random_W(loss, 1)
    G = loss.gradient(W)
    h = 1e-6
    for i, j in [(0, 0), (3, 2), (6, 1)]:
        E = np.zeros_like(W)
        E[i, j] = h
        fd = (loss.value(W + E) - loss.value(W - E)) / (2 * h)
        assert abs(fd - G[i, j]) < 1e-6 * (1 + abs(fd))


@pytest.mark.parametrize("step", [0.3, "per-node"])
def test_prox_is_the_minimizer(loss, step):
    V = _random_W(loss, 2)
    tau = np.linspace(0.1, 2.0, loss.n) if step == "per-node" else np.full(loss.n, step)
    P = loss.prox(V, tau)
    # optimality: grad L(p) + (p - v) / tau = 0
    residual = loss.gradient(P) + (P - V) / tau[:, None]
    assert np.abs(residual).max() < 1e-9


def test_conjugate_at_gradient_is_fenchel_young_equality(loss):
    W = _random_W(loss, 3)
    V = loss.gradient(W)
    conj = loss.node_conjugates(V)
    expected = np.einsum("nd,nd->n", W, V) - loss.node_values(W)
    assert np.allclose(conj, expected, rtol=1e-9, atol=1e-10)
    assert np.abs(loss.node_fenchel_young(W, V)).max() < 1e-10


def test_conjugate_is_a_supremum(loss):
    """L^*(v) >= <w, v> - L(w) for random w, and equals the numerical supremum."""
    W0 = _random_W(loss, 4)
    V = loss.gradient(W0)
    conj = loss.node_conjugates(V)
    for trial in range(5):
        W = _random_W(loss, 10 + trial, scale=2.0)
        assert (conj >= np.einsum("nd,nd->n", W, V) - loss.node_values(W) - 1e-10).all()
    i = 1
    def f(w):
        return -(w @ V[i]) + loss.node_values(np.vstack([w if k == i else W0[k] for k in range(loss.n)]))[i]
    best = minimize(f, np.zeros(loss.d), method="BFGS", options={"gtol": 1e-10})
    assert abs(-best.fun - conj[i]) < 1e-6 * (1 + abs(conj[i]))


def test_fenchel_young_is_nonnegative(loss):
    rng = np.random.default_rng(5)
    W = _random_W(loss, 5)
    V = loss.project_conjugate_domain(0.1 * rng.normal(size=W.shape))
    fy = loss.node_fenchel_young(W, V)
    assert (fy[np.isfinite(fy)] >= -1e-12).all()
    assert np.isfinite(fy).all() or isinstance(loss, g.Logistic)


def test_moreau_identity(loss):
    Z = _random_W(loss, 6)
    for step in (0.5, 2.0):
        lhs = loss.prox_conjugate(Z, step) + step * loss.prox(Z / step, 1.0 / step)
        assert np.allclose(lhs, Z, atol=1e-9)


def test_conjugate_domain_and_projection():
    X = [np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), np.zeros((0, 3)), np.eye(3)]
    y = [np.array([1.0, 2.0]), np.zeros(0), np.array([1.0, 0.0, -1.0])]
    loss = g.SquaredError(X, y)
    V = np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 1.0], [1.0, 2.0, 3.0]])
    conj = loss.node_conjugates(V)
    assert np.isinf(conj[0]) and np.isinf(conj[1]) and np.isfinite(conj[2])
    P = loss.project_conjugate_domain(V)
    assert np.allclose(P, [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    assert np.isfinite(loss.node_conjugates(P)).all()
    # closed form for the node with m < d: L*(v) = min {y^T z + (m/4)|z|^2 : X^T z = v}, z = v[:2]
    z = P[0, :2]
    assert np.isclose(loss.node_conjugates(P)[0], y[0] @ z + 0.5 * z @ z)


def test_logistic_conjugate_outside_domain_is_inf():
    X = [np.array([[1.0, 0.0], [0.0, 1.0]])]
    y = [np.array([1.0, -1.0])]
    loss = g.Logistic(X, y)
    # domain: v = -(1/2) (theta_1 * e1 - theta_2 * e2), theta in [0, 1]: v_1 in [-1/2, 0], v_2 in [0, 1/2]
    inside = loss.node_conjugates(np.array([[-0.25, 0.1]]))
    outside = loss.node_conjugates(np.array([[0.3, 0.1]]))
    assert np.isfinite(inside).all() and np.isinf(outside).all()
    th = np.array([0.5, 0.2])
    def negent(t):
        return t * np.log(t) + (1 - t) * np.log(1 - t)
    assert np.isclose(inside[0], negent(th).mean())


def test_logistic_is_overflow_safe():
    X = [np.array([[1e3, 0.0], [0.0, -1e3]])]
    loss = g.Logistic(X, [np.array([1.0, 1.0])])
    W = np.array([[-10.0, 10.0]])
    assert np.isclose(loss.value(W), 1e4)
    assert np.isfinite(loss.gradient(W)).all()


@pytest.mark.parametrize("cls", [g.SquaredError, g.Logistic])
def test_design_loss_input_errors(cls):
    with pytest.raises(ValueError, match=r"X\[1\] has 2 columns but d = 3"):
        cls([np.ones((2, 3)), np.ones((2, 2))], [np.ones(2), np.ones(2)])
    with pytest.raises(ValueError, match=r"y\[0\] has 3 labels but X\[0\] has 2 rows"):
        cls([np.ones((2, 3))], [np.ones(3)])
    with pytest.raises(ValueError, match=r"X\[0\] must be finite"):
        cls([np.array([[1.0, np.nan]])], [np.ones(1)])
    with pytest.raises(ValueError, match="d cannot be inferred"):
        cls([np.zeros((0, 0))], [np.zeros(0)])
    with pytest.raises(ValueError, match="from_stacked"):
        cls(np.ones((4, 2)), np.ones(4))


def test_logistic_label_error():
    with pytest.raises(ValueError, match=r"y\[1\]\[0\] = 0.0: logistic labels must be -1 or \+1"):
        g.Logistic([np.ones((1, 2)), np.ones((1, 2))], [np.ones(1), np.zeros(1)])


def test_float32_input_is_computed_in_float64():
    X = [np.ones((3, 2), dtype=np.float32)]
    loss = g.SquaredError(X, [np.ones(3, dtype=np.float32)])
    assert loss.X_all.dtype == np.float64 and loss.Q.dtype == np.float64


def test_from_stacked_matches_lists():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(7, 2))
    y = rng.normal(size=7)
    node = np.array([2, 0, 2, 1, 0, 2, 2])
    a = g.SquaredError.from_stacked(X, y, node, 4)
    b = g.SquaredError([X[node == i] for i in range(4)], [y[node == i] for i in range(4)], d=2)
    W = rng.normal(size=(4, 2))
    assert np.allclose(a.node_values(W), b.node_values(W))
    assert a.counts.tolist() == [2, 1, 4, 0]


def _factors(loss):
    inv_col, Vs, ss = loss._equilibrated
    return {"X": loss.X_all, "y": loss.y_all, "counts": loss.counts, "s": loss.s, "Q": loss.Q, "b": loss.b,
            "y_sq": loss.y_sq, "rank": loss.rank, "inv_col": inv_col, "Vs": Vs, "ss": ss}


@pytest.mark.parametrize("cls", [g.SquaredError, g.Logistic])
def test_stacked_float64_input_matches_per_node_checks(cls):
    """float64 arrays skip the per-node conversion; the loss is the one the per-node path builds
    (here forced by lists), nodes without data and a column-graded node included."""
    rng = np.random.default_rng(3)
    sizes = [4, 0, 2, 5, 1]
    X = [rng.normal(size=(m, 3)) for m in sizes]
    X[3][:, 2] *= 1e-9  # graded: refactored by the Jacobi SVD
    y = [np.sign(rng.normal(size=m)) + 0.0 for m in sizes]
    fast = cls(X, y)
    slow = cls([x.tolist() for x in X], [v.tolist() for v in y], d=3)
    for name, value in _factors(fast).items():
        np.testing.assert_array_equal(value, _factors(slow)[name], err_msg=name)
    with pytest.raises(ValueError, match=r"X\[2\] must be finite, found inf at index \(1, 0\)"):
        cls(X[:2] + [np.array([[1.0, 2.0, 3.0], [np.inf, 0.0, 0.0]])], y[:3])


def test_factorization_in_blocks_and_threads_matches_one_batch(monkeypatch):
    """The per-node SVDs in blocks of nodes (bounded temporaries) and by the compiled batched SVD
    give the factors of one NumPy batch (the same LAPACK routine per matrix)."""
    import gtvcvx.losses._core as core

    rng = np.random.default_rng(5)
    sizes = rng.integers(0, 7, size=60)
    X = [rng.normal(size=(m, 4)) * np.array([1.0, 1e3, 1e-3, 1.0]) for m in sizes]
    y = [rng.normal(size=m) for m in sizes]
    W = rng.normal(size=(60, 4))
    reference = g.SquaredError(X, y, d=4)
    whole, prox = _factors(reference), reference.prox(W, 0.3)
    monkeypatch.setattr(core, "FACTOR_BLOCK_ENTRIES", 16)  # blocks of one to four nodes
    monkeypatch.setattr(core._jit, "MIN_ENTRIES", 1)  # every block by the compiled kernel
    loss = g.SquaredError(X, y, d=4)
    blocked = _factors(loss)
    for name, value in whole.items():  # (singular vectors up to their signs)
        np.testing.assert_allclose(np.abs(blocked[name]), np.abs(value), rtol=1e-12, atol=1e-14, err_msg=name)
    np.testing.assert_allclose(loss.prox(W, 0.3), prox, rtol=1e-12, atol=1e-12)


def test_huber_prox_by_newton_matches_the_dual_fista_prox():
    """Huber's prox runs semismooth Newton in each node's row space (the dual FISTA of the margin losses ran
    into its 200 warm steps at every call on a 10^4-node chain); both solve the same strongly convex problem:
    same point to rounding, stationary, on nodes without data, with fewer samples than features, and at
    steps and scales over six decades."""
    from gtvcvx.losses._margin import MarginLoss

    rng = np.random.default_rng(0)
    for _ in range(12):
        n, d = 15, int(rng.integers(1, 5))
        X = [rng.normal(size=(int(rng.integers(0, 7)), d)) * 10 ** rng.uniform(-2, 2) for _ in range(n)]
        y = [rng.normal(size=len(x)) * 10 ** rng.uniform(-1, 2) for x in X]
        loss = g.Huber(X, y, d=d, delta=float(10 ** rng.uniform(-1, 1)))
        V = rng.normal(size=(n, d)) * 10 ** rng.uniform(-1, 2)
        tau = 10 ** rng.uniform(-3, 3, size=n)
        newton = loss.prox(V, tau)
        fista = MarginLoss._prox_iterations(loss, V, tau, None, loss.prox_iterations)
        scale = 1.0 + np.abs(V / tau[:, None]).max()
        assert np.abs((newton - V) / tau[:, None] + loss.gradient(newton)).max() <= 1e-12 * scale

        def objective(W):
            return loss.node_values(W) + ((W - V) ** 2).sum(axis=1) / (2 * tau)

        assert (objective(newton) <= objective(fista) + 1e-13 * (1 + np.abs(objective(fista)))).all()
        # warm-started from the answer, the solver loop's prox is the same point
        np.testing.assert_allclose(loss.prox_warm(V, tau, newton), newton, rtol=1e-12, atol=1e-12 * scale)
