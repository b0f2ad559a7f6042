import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.penalties import get_penalty

PENALTIES = [g.Norm2(), g.Norm1(), g.SquaredNorm2()]
rng = np.random.default_rng(0)
Z = rng.normal(size=(6, 3))
SCALE = np.array([0.5, 1.0, 2.0, 0.0, 0.3, 1.5])


def phi(pen, z):
    return {"norm2": np.linalg.norm(z), "norm1": np.abs(z).sum(), "squared_norm2": 0.5 * z @ z}[pen.name]


@pytest.mark.parametrize("pen", PENALTIES, ids=lambda p: p.name)
def test_values(pen):
    expected = [c * phi(pen, z) for z, c in zip(Z, SCALE)]
    assert np.allclose(pen.edge_values(Z, SCALE), expected)


@pytest.mark.parametrize("pen", PENALTIES, ids=lambda p: p.name)
@pytest.mark.parametrize("step", [0.4, 3.0])
def test_moreau_identity(pen, step):
    # prox_{step h}(z) + step * prox_{h*/step}(z/step) = z, with h = c phi and h*(u) = c phi*(u/c)
    scale = np.where(SCALE > 0, SCALE, 0.7)
    lhs = pen.prox(Z, step, scale) + step * pen.prox_conjugate(Z / step, 1.0 / step, scale)
    assert np.allclose(lhs, Z)


@pytest.mark.parametrize("pen", PENALTIES, ids=lambda p: p.name)
def test_prox_minimizes(pen):
    step = 0.7
    P = pen.prox(Z, step, SCALE)
    for e in range(len(Z)):
        def f(x):
            return step * SCALE[e] * phi(pen, x) + 0.5 * ((x - Z[e]) ** 2).sum()
        for _ in range(20):
            trial = P[e] + 1e-3 * rng.normal(size=3)
            assert f(P[e]) <= f(trial) + 1e-12


@pytest.mark.parametrize("pen", PENALTIES, ids=lambda p: p.name)
def test_conjugate_and_fenchel_young(pen):
    U = pen.project_conjugate_domain(rng.normal(size=Z.shape), SCALE)
    conj = pen.edge_conjugates(U, SCALE)
    assert np.isfinite(conj).all()
    assert (pen.edge_fenchel_young(Z, U, SCALE) >= -1e-12).all()
    # at u in the subdifferential, Fenchel-Young is an equality
    pos = SCALE > 0
    if pen.name == "norm2":
        U_opt = SCALE[:, None] * Z / np.linalg.norm(Z, axis=1, keepdims=True)
    elif pen.name == "norm1":
        U_opt = SCALE[:, None] * np.sign(Z)
    else:
        U_opt = SCALE[:, None] * Z
    assert np.allclose(pen.edge_fenchel_young(Z, U_opt, SCALE)[pos], 0.0, atol=1e-12)
    if pen.is_norm:
        outside = U_opt * 1.01
        assert np.isinf(pen.edge_conjugates(outside, SCALE)[pos]).all()
    blocked = np.zeros_like(Z)
    blocked[3] = 1.0
    assert np.isinf(pen.edge_conjugates(blocked, SCALE)[3])


def test_get_penalty_names():
    assert isinstance(get_penalty("nLasso"), g.Norm2)
    assert isinstance(get_penalty("l1"), g.Norm1)
    assert isinstance(get_penalty("mocha"), g.SquaredNorm2)
    with pytest.raises(ValueError, match="unknown penalty 'l3'"):
        get_penalty("l3")


@pytest.mark.parametrize("pen", PENALTIES + [g.GroupNorm2([0, 0, 1]),
                                             g.QuadraticForm([[2.0, 0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 0.5]])],
                         ids=lambda p: p.name)
def test_project_conjugate_domain_into_a_kept_buffer(pen):
    rng = np.random.default_rng(8)
    U = rng.normal(size=(12, 3)) * 5.0
    scale = np.r_[rng.uniform(0.1, 2.0, size=10), 0.0, 0.0]  # two edges without capacity
    kept, fresh = U.copy(), pen.project_conjugate_domain(U, scale)
    buffer = np.full_like(U, np.nan)
    assert pen.project_conjugate_domain(U, scale, out=buffer) is buffer
    np.testing.assert_array_equal(buffer, fresh)
    np.testing.assert_array_equal(U, kept)  # the input is never modified
    assert fresh is not U and np.abs(fresh - U).max() > 0  # something was projected


@pytest.mark.parametrize("pen", [g.Norm2(), g.Norm1(), g.GroupNorm2([0, 0, 1])], ids=lambda p: p.name)
def test_face_tangent_is_the_projection_onto_the_active_faces(pen):
    rng = np.random.default_rng(9)
    scale = rng.uniform(0.5, 2.0, size=12)
    U = pen.project_conjugate_domain(rng.normal(size=(12, 3)) * 3.0, scale)  # most rows on a face
    U[:3] *= 0.5  # three rows strictly inside their balls
    tangent = pen.face_tangent(U, scale)
    delta = rng.normal(size=U.shape)
    moved = tangent(delta)
    np.testing.assert_allclose(tangent(moved), moved, atol=1e-12)  # a projection ...
    other = rng.normal(size=U.shape)
    assert np.vdot(tangent(other), delta) == pytest.approx(np.vdot(other, moved))  # ... orthogonal
    np.testing.assert_array_equal(moved[:3], delta[:3])  # rows inside their balls are free
    assert np.abs(moved - delta).max() > 0.1  # rows on a face are restricted
    # along a face, the dual norm grows only to second order: ||u + t d||_* = c + O(t^2)
    for t in (1e-3, 1e-4):
        excess = pen.dual_norms(U[3:] + t * moved[3:]) - pen.dual_norms(U[3:])
        assert excess.max() <= 10.0 * t * t * (1.0 + np.abs(moved).max() ** 2)


def test_face_tangent_without_faces():
    U = np.ones((4, 3)) * 0.1
    assert g.Norm2().face_tangent(U, np.ones(4)) is None  # nothing at capacity
    assert g.SquaredNorm2().face_tangent(U, np.ones(4)) is None  # not a norm: no balls
