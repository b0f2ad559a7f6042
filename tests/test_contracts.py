"""Every registered loss and penalty answers the shared vocabulary (gtvcvx.testing.contracts), and
the new ones (absolute error, Huber, hinge; group norm, quadratic form) solve end to end.

A new loss or penalty gets its contract tests here without editing this file: the tests are
generated from the registries.
"""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.losses import LOSSES, AbsoluteError, Hinge, Huber
from gtvcvx.penalties import PENALTIES, GroupNorm2, Norm2, QuadraticForm
from gtvcvx.reference import solve_primal
from gtvcvx.spec import SpecError
from gtvcvx.testing.contracts import check_loss, check_penalty, example_loss


@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_contract(name, d):
    check_loss(example_loss(LOSSES[name], d=d, rng=np.random.default_rng(d)), np.random.default_rng(10 + d))


@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("name", sorted(PENALTIES))
def test_penalty_contract(name, d):
    check_penalty(PENALTIES[name].example(d, np.random.default_rng(d)), d, np.random.default_rng(20 + d))


# -- the checks can fail --------------------------------------------------------------------
class _ThresholdTwice(Norm2):
    """A wrong prox: thresholds by 2 t c instead of t c."""

    def _prox(self, Z, step, scale):
        return super()._prox(Z, 2 * np.asarray(step), scale)


class _LooseBound(Norm2):
    def dual_ball_radius(self, d):
        return 0.5


class _NoDataHuber(Huber):
    """A loss whose CVXPY conjugate forgets the 1/m weights."""

    def cvxpy_conjugate(self, V):
        expr, cons = super().cvxpy_conjugate(V)
        return 2 * expr, cons


class _WrongProxAbsolute(AbsoluteError):
    def prox(self, V, step, *, warm_start=None):
        return super().prox(V, 2 * np.asarray(step), warm_start=warm_start)


class _ScaledHuberKeepsDelta(Huber):
    """Scales the labels but not delta: another problem, which solve() would certify as the caller's."""

    def scaled(self, factor):
        return Huber(self.X, [y * factor for y in self.y], d=self.d, delta=self.delta)


def test_loss_contract_catches_a_wrong_scaling():
    loss = example_loss(_ScaledHuberKeepsDelta, rng=np.random.default_rng(0))
    with pytest.raises(AssertionError, match=r"loss 'huber': scaled\(c\).node_values\(c w\) == c\^2"):
        check_loss(loss)


class _HingeMinorantsTooHigh(Hinge):
    """Claims a_k^T w <= L_i(w) with weight 1 instead of m_i: the allowance would bound the optimum
    by a polyhedron that does not contain it."""

    def linear_minorants(self):
        A, node, weight = super().linear_minorants()
        return A, node, np.ones_like(weight)


def test_loss_contract_catches_unsound_linear_minorants():
    loss = example_loss(_HingeMinorantsTooHigh, rng=np.random.default_rng(0))
    with pytest.raises(AssertionError, match=r"loss 'hinge': linear_minorants is not a lower bound"):
        check_loss(loss)


def test_penalty_contract_catches_a_norm_trait_that_is_not_homogeneous():
    from gtvcvx.penalties import SquaredNorm2

    class _SquaredCalledNorm(SquaredNorm2):
        traits = ("norm", "quadratic", "smooth")

    with pytest.raises(AssertionError, match=r"trait 'norm': phi\(c z\) == c phi\(z\)"):
        check_penalty(_SquaredCalledNorm(), 3)


def test_penalty_contract_catches_a_wrong_prox():
    with pytest.raises(AssertionError, match=r"penalty 'norm2': prox vs CVXPY argmin"):
        check_penalty(_ThresholdTwice(), 3)


def test_penalty_contract_catches_an_unsound_bound():
    with pytest.raises(AssertionError, match=r"flow_bound is not sound|dual_ball_radius\(d\) = 0.5 is not a bound"):
        check_penalty(_LooseBound(), 3)


def test_loss_contract_catches_a_wrong_cvxpy_conjugate():
    loss = example_loss(_NoDataHuber, rng=np.random.default_rng(0))
    with pytest.raises(AssertionError, match=r"loss 'huber': conjugate vs cvxpy_conjugate"):
        check_loss(loss)


def test_loss_contract_catches_a_wrong_prox():
    loss = example_loss(_WrongProxAbsolute, rng=np.random.default_rng(0))
    with pytest.raises(AssertionError, match=r"loss 'absolute_error': prox vs CVXPY argmin"):
        check_loss(loss)


# -- the new components end to end ----------------------------------------------------------
def _data(rng, d, counts, classifier=False):
    X = [rng.normal(size=(m, d)) for m in counts]
    y = [rng.normal(size=m) for m in counts]
    return X, [np.where(v > 0, 1.0, -1.0) for v in y] if classifier else y


COUNTS = (6, 2, 0, 5, 4, 3)  # a node without data and nodes with m_i < d


@pytest.mark.parametrize("make_loss, make_penalty", [
    (lambda X, y, yc: AbsoluteError(X, y), lambda: Norm2()),
    (lambda X, y, yc: Huber(X, y, delta=0.5), lambda: GroupNorm2([0, 0, 1])),
    (lambda X, y, yc: Hinge(X, yc), lambda: QuadraticForm([[2.0, 0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 0.5]])),
    (lambda X, y, yc: g.SquaredError(X, y), lambda: GroupNorm2([0, 1, 1])),
], ids=["absolute-norm2", "huber-group", "hinge-quadratic", "squared-group"])
def test_new_components_solve_to_the_reference(make_loss, make_penalty):
    rng = np.random.default_rng(4)
    X, y = _data(rng, 3, COUNTS)
    yc = [np.where(v > 0, 1.0, -1.0) for v in y]
    problem = g.GTVProblem(g.graphs.chain(len(COUNTS)), make_loss(X, y, yc), make_penalty(), 0.3)
    result = g.solve(problem, tol=1e-7, max_iter=20_000)
    assert result.status == "optimal", result.message
    assert result.rel_gap <= 1e-7
    ref = solve_primal(problem, solver="CLARABEL")
    # the certified gap bounds the distance to CLARABEL's optimum (up to CLARABEL's own accuracy)
    assert result.primal - ref.primal <= result.gap + 1e-7 * (1 + abs(ref.primal))
    assert abs(result.primal - ref.primal) <= 1e-6 * (1 + abs(ref.primal))


@pytest.mark.parametrize("loss_cls", [AbsoluteError, Huber, Hinge])
def test_new_losses_certificate_bounds_the_true_suboptimality_early(loss_cls):
    rng = np.random.default_rng(5)
    X, y = _data(rng, 3, COUNTS, classifier="classifier" in loss_cls.traits)
    problem = g.GTVProblem(g.graphs.chain(len(COUNTS)), loss_cls(X, y), Norm2(), 0.3)
    optimum = solve_primal(problem, solver="CLARABEL").primal
    for iterations in (5, 30):
        early = g.solve(problem, max_iter=iterations, tol=1e-12)
        assert early.gap >= early.primal - optimum - 1e-9 * (1 + abs(optimum))


def test_hinge_needs_plus_minus_one_labels():
    with pytest.raises(ValueError, match=r"hinge.*-1.*\+1"):
        Hinge([np.ones((2, 2))], [np.array([0.0, 1.0])])


def test_group_norm_and_quadratic_form_validate_their_parameters():
    with pytest.raises(ValueError, match=r"quadratic_form.*positive definite"):
        QuadraticForm([[1.0, 0.0], [0.0, -1.0]])
    problem_loss = g.SquaredDistance(np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"group_norm2"):
        g.GTVProblem(g.graphs.chain(3), problem_loss, GroupNorm2([0, 0, 1]), 0.1)


SPEC = """
name = "huber_group"
seed = 2
[graph]
generator = "chain"
n = 6
[data]
generator = "linear"
d = 3
m = 2
[problem]
loss = { name = "huber", delta = 0.25 }
penalty = { name = "group_norm2", groups = [0, 0, 1] }
lam = 0.1
"""


def test_spec_names_new_components_with_parameters(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    loaded = g.load_spec(spec)
    assert loaded.problem.loss == loaded.problem.loss and loaded.problem.loss.delta == 0.25
    assert loaded.problem.penalty == GroupNorm2([0, 0, 1])
    result = g.solve_spec(spec, tol=1e-6)
    assert result.status == "optimal"


def test_separable_hinge_is_certified_by_the_zero_flow():
    # separable data: one w has every margin >= 1, so P* = 0 and the flows vanish; the flow
    # iterates approach 0 from outside dom L^* (a = 0 is a vertex of the hinge box), and the
    # certificate falls back to the zero flow, which is always dual feasible
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(m, 3)) for m in (4, 2, 0, 3)]
    y = [np.where(v >= 0, 1.0, -1.0) for v in (rng.normal(size=len(x)) for x in X)]
    problem = g.GTVProblem(g.graphs.chain(4), Hinge(X, y), QuadraticForm(2 * np.eye(3)), 0.2)
    optimum = solve_primal(problem, solver="CLARABEL").primal
    assert abs(optimum) <= 1e-8
    for method in ("halpern", "pdhg"):
        result = g.solve(problem, method=method, tol=1e-6, max_iter=5000)
        assert result.status == "optimal" and result.gap >= result.primal - max(optimum, 0.0)


@pytest.mark.parametrize("edit, message", [
    (('delta = 0.25', 'delta = -1'), r"problem.loss: loss 'huber': delta must be a positive number, got -1"),
    (('groups = [0, 0, 1]', 'groups = [0, 1]'),
     r"problem.penalty: penalty 'group_norm2' has groups for d = 2 coordinates, but the models have d = 3"),
    (('{ name = "huber", delta = 0.25 }', '"hinge"'), r"data: y\[0\]\[0\] = .*: hinge labels must be -1 or \+1"),
])
def test_spec_errors_of_new_components_name_the_key(tmp_path, edit, message):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace(*edit))
    with pytest.raises(SpecError, match=message):
        g.load_spec(spec)
