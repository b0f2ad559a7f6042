"""Federated protocol: counts, what is sent, warm start, comparison with the centralized fit."""

from __future__ import annotations

import numpy as np
import pytest

from gtvcvx.results import Status
from gtvcvx.rkhs import Dictionary, RKHSProblem, critical_mask, federated_fit, solve_dual
from gtvcvx.rkhs.data import ELLIPSE_BOX, agent_regions, ellipse_agents, ellipses

GAMMA, EPS, C = 0.5, 0.1, 200.0


@pytest.fixture(scope="module")
def split():
    data = ellipse_agents(54, n_agents_layout=(3, 1), overlap=0.2, seed=5)
    agents = [(data.X[data.agent == a], data.y[data.agent == a]) for a in range(3)]
    D = Dictionary.grid(ELLIPSE_BOX, 6, [3.0], threshold=1e-6)
    test = ellipses(200, seed=6)
    return agents, D, test


def test_agent_layout_overlaps_and_covers_the_box():
    regions = agent_regions(ELLIPSE_BOX, (3, 3), overlap=0.25)
    assert regions.shape == (9, 2, 2)
    box = np.array(ELLIPSE_BOX)
    assert (regions[:, :, 0] >= box[:, 0]).all() and (regions[:, :, 1] <= box[:, 1]).all()
    # neighbouring cells overlap by 2 * 25 % of a cell width
    assert regions[0, 0, 1] - regions[3, 0, 0] == pytest.approx(0.5 * 27.0 / 3)
    data = ellipse_agents(90, seed=0)
    assert np.bincount(data.agent).tolist() == [10] * 9
    inside = ((data.X >= regions[data.agent, :, 0] - 1.5) & (data.X <= regions[data.agent, :, 1] + 1.5)).all()
    assert inside  # positions are the agent's uniform draws plus N(0, 0.2^2) noise


def test_federated_counts_and_sent_samples(split):
    agents, D, test = split
    res = federated_fit(agents, D, GAMMA, EPS, C=C, test=(test.X, test.y))
    n_total = sum(len(y) for _, y in agents)
    assert res.n_held == n_total == res.agents["n_held"].sum()
    assert res.n_sent == res.agents["n_sent"].sum() == sum(len(s) for s in res.sent)
    assert res.communication == pytest.approx(res.n_sent / res.n_held)
    assert 0 < res.n_sent < res.n_held
    # each agent sent exactly its critical samples of its own problem (hinge cost C/N per sample)
    for (X, y), sent in zip(agents, res.sent):
        local = solve_dual(RKHSProblem(X, y, D, GAMMA, EPS, C * len(y) / n_total))
        assert local.status == Status.OPTIMAL
        np.testing.assert_array_equal(np.flatnonzero(critical_mask(local.multipliers)), sent)
    assert res.server.status == Status.OPTIMAL and res.server.rel_gap <= 1e-6
    assert (res.agents["status"] == "optimal").all()
    assert res.model.dual_.shape == (res.n_sent,)
    # side by side with the centralized fit, accuracies on the test set
    assert list(res.summary["model"]) == ["federated", "centralized"]
    assert list(res.summary["n_samples"]) == [res.n_sent, res.n_held]
    acc = res.summary["accuracy"].to_numpy()
    assert acc[0] == pytest.approx(res.model.score(test.X, test.y))
    assert acc[1] == pytest.approx(res.centralized.score(test.X, test.y))
    row = res.to_row()
    assert row["n_sent"] == res.n_sent and row["accuracy_federated"] == acc[0]


def test_server_problem_is_the_centralized_problem_restricted(split):
    agents, D, _ = split
    res = federated_fit(agents, D, GAMMA, EPS, C=C)
    # the server's dual value cannot exceed the centralized one (fewer constraints, same costs)
    assert res.server.dual <= res.centralized.result_.dual * (1 + 1e-6)
    # and warm-starting does not change the optimum
    cold = federated_fit(agents, D, GAMMA, EPS, C=C, warm_start=False, centralized=False)
    assert cold.server.dual == pytest.approx(res.server.dual, rel=2e-6)


def test_agent_with_a_single_class_and_string_labels(split):
    agents, D, test = split
    X0, y0 = agents[0]
    lab = [np.where(y > 0, "pos", "neg") for _, y in agents]
    only_neg = np.full(len(y0), "neg")
    res = federated_fit([(X0, only_neg), (agents[1][0], lab[1]), (agents[2][0], lab[2])], D, GAMMA, EPS, C=C,
                        centralized=False)
    assert list(res.model.classes_) == ["neg", "pos"]
    assert set(res.model.predict(test.X)) <= {"neg", "pos"}
    assert res.agents["status"].iloc[0] == "optimal"


def test_federated_input_errors(split):
    agents, D, _ = split
    with pytest.raises(ValueError, match="agents must be a non-empty list"):
        federated_fit([], D, GAMMA, EPS)
    with pytest.raises(ValueError, match=r"agents\[1\]\.y"):
        federated_fit([agents[0], (agents[1][0], agents[1][1][:-1])], D, GAMMA, EPS)
    with pytest.raises(ValueError, match="exactly two classes"):
        federated_fit([(X, np.ones(len(y))) for X, y in agents], D, GAMMA, EPS)
    # a dict per agent is read by its keys (unpacked, it gave "agents[0].X ... got dtype <U1")
    as_dicts = federated_fit([{"X": X, "y": y} for X, y in agents], D, GAMMA, EPS, centralized=False)
    assert as_dicts.agents["status"].iloc[0] == "optimal"
    with pytest.raises(ValueError, match=r"agents\[0\] is a dict without the keys 'X' and 'y'"):
        federated_fit([{"features": agents[0][0]}], D, GAMMA, EPS)
