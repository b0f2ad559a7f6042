"""Declared vocabulary: capabilities, traits, registries, and refusals that name what is missing."""

import numpy as np
import pytest

import gtvcvx as g
from gtvcvx.capabilities import CapabilityError, capabilities, optional, provides, require
from gtvcvx.losses import LOSSES, build_loss, get_loss
from gtvcvx.penalties import PENALTIES, get_penalty


def test_traits_and_optional_operations_are_reported():
    points = g.SquaredDistance(np.zeros((3, 2)))
    assert {"smooth", "strongly_convex", "separable_points"} <= capabilities(points)
    assert provides(g.Norm2(), "dual_direction") and provides(g.Norm1(), "norm")
    assert not provides(g.SquaredNorm2(), "dual_direction") and not provides(g.SquaredNorm2(), "norm")


def test_require_names_user_component_and_missing_capability():
    with pytest.raises(CapabilityError, match=r"my_solver needs the penalty 'squared_norm2' to provide 'norm' "
                                              r"\(phi is a norm"):
        require(g.SquaredNorm2(), ("norm",), user="my_solver")
    require(g.Norm2(), ("norm", "dual_direction"), user="my_solver")  # provided: no error


def test_an_override_of_an_optional_operation_counts_and_the_base_placeholder_raises():
    class Base:
        @optional
        def extra(self):
            raise CapabilityError("no extra")

    class With(Base):
        def extra(self):
            return 1

    assert "extra" in capabilities(With()) and "extra" not in capabilities(Base())
    with pytest.raises(CapabilityError):
        Base().extra()


@pytest.mark.parametrize("penalty", [g.Norm2(), g.Norm1()])
def test_dual_direction_attains_the_dual_norm(penalty):
    rng = np.random.default_rng(0)
    B = rng.normal(size=(20, 5))
    B[3] = 0.0
    V = penalty.dual_direction(B)
    ones = np.ones(len(B))
    np.testing.assert_allclose(penalty.edge_values(V[B.any(1)], ones[B.any(1)]), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.einsum("kd,kd->k", B, V), penalty.dual_norms(B), rtol=1e-12)
    assert not V[3].any()
    # kappa: ||u||_2 <= kappa ||u||_* on random points
    assert (np.linalg.norm(B, axis=1) <= penalty.dual_ball_radius(5) * penalty.dual_norms(B) * (1 + 1e-12)).all()


def test_registries_build_components_and_name_bad_parameters():
    assert set(LOSSES) == {"squared_error", "logistic", "squared_distance", "absolute_error", "huber", "hinge"}
    assert get_loss("least_squares") is g.SquaredError and get_penalty("l1") == g.Norm1()
    assert set(PENALTIES) == {"norm1", "norm2", "squared_norm2", "group_norm2", "quadratic_form"}
    assert get_penalty("group_norm2", groups=[0, 0, 1]) == g.GroupNorm2([0, 0, 1]) != g.GroupNorm2([0, 1, 1])
    assert build_loss("huber", {"delta": 0.5}, X=[np.ones((1, 2))], y=[np.ones(1)]).content()["delta"] == 0.5
    loss = build_loss("squared_distance", points=np.zeros((2, 3)))
    assert loss.n == 2 and loss.d == 3
    with pytest.raises(ValueError, match="loss 'squared_error' needs labelled data"):
        build_loss("squared_error", points=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="takes no parameter 'delta'"):
        build_loss("squared_distance", {"delta": 1.0}, points=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="unknown loss 'huberr'; expected one of"):
        get_loss("huberr")
    with pytest.raises(ValueError, match="penalty 'norm1' takes no parameter 'groups'"):
        get_penalty("norm1", groups=[[0]])
