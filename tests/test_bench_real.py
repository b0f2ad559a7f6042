"""gtvcvx bench real: the bank's instances are built from bundled data, seeded, and solvable."""

import numpy as np
import pytest

pytest.importorskip("networkx")


def test_bank_instances_are_seeded_and_match_clarabel():
    from gtvcvx.bench import real

    a = real.build("florentine_families", "diabetes", "norm2", 3, 0.05, seed=1)
    b = real.build("florentine_families", "diabetes", "norm2", 3, 0.05, seed=1)
    assert a.n == 15 and a.d == 11 and a.digest() == b.digest()
    assert a.digest() != real.build("florentine_families", "diabetes", "norm2", 3, 0.05, seed=2).digest()
    fast = real.call_gtvcvx(a, tol=1e-7)
    assert fast["status"] == "optimal"
    lag = real.call_lag(a, tol=1e-6)
    assert lag["true_at"] is not None and lag["certified_at"] >= lag["true_at"]
    classification = real.build("karate_club", "breast_cancer", "norm1", 2, 0.05, seed=0)
    assert classification.d == 5 and set(np.unique(classification.loss.y_all)) == {-1.0, 1.0}
    assert real.call_gtvcvx(classification, tol=1e-6)["status"] == "optimal"  # weak features: a minimizer
    separable = real.build("karate_club", "breast_cancer_all", "norm1", 2, 0.05, seed=0)
    assert separable.d == 31 and real.call_gtvcvx(separable, tol=1e-6)["status"] == "no_minimizer"


def test_large_digits_instances_have_the_stated_shape():
    """``--large``: the digits images on their own Gaussian k-NN graphs (one image per node)."""
    from gtvcvx.bench import real

    five = real.build("digits_5nn", "digits", "norm2", 3, 0.05, seed=0)
    ten = real.build("digits_10nn", "digits", "norm1", 3, 0.05, seed=0)
    assert (five.n, five.n_edges, five.d) == (1797, 6309, 5) and ten.n_edges == 12343
    assert five.digest() == real.build("digits_5nn", "digits", "norm2", 3, 0.05, seed=1).digest()  # no dealing
    assert np.all(five.loss.counts == 1) and ten.penalty.name != five.penalty.name
    caps = five.capacities
    assert caps.min() < 1e-12 * caps.max()  # the regime of the weighted flow projection


def test_losses_beyond_the_bank_are_built_on_the_data_they_take():
    """``--losses``: Huber / absolute error on the regression data, hinge on the +-1 labels."""
    from gtvcvx.bench import real

    hinge = real.build("karate_club", "breast_cancer", "norm2", 3, 0.05, seed=0, loss="hinge")
    bank = real.build("karate_club", "breast_cancer", "norm2", 3, 0.05, seed=0)
    assert hinge.loss.name == "hinge" and bank.loss.name == "logistic"
    np.testing.assert_array_equal(hinge.loss.X_all, bank.loss.X_all)  # the same dealing
    assert real.build("florentine_families", "diabetes", "norm1", 3, 0.05, seed=0, loss="absolute").loss.name == \
        "absolute_error"
    with pytest.raises(ValueError, match="does not take the data set 'diabetes'"):
        real.build("florentine_families", "diabetes", "norm2", 3, 0.05, seed=0, loss="hinge")
    with pytest.raises(ValueError, match="losses: squared_error"):
        real.build("florentine_families", "diabetes", "norm2", 3, 0.05, seed=0, loss="cauchy")


def test_qp_peers_run_only_on_lp_and_qp_rows_and_the_best_peer_must_match_the_objective():
    from gtvcvx.bench.harness import PEER_MATCH, best_peer
    from gtvcvx.bench.real import PEERS, QP_PEERS, peers_for

    assert set(peers_for("squared_error", "norm1")) == set(PEERS)
    assert set(peers_for("hinge", "squared_norm2")) == set(PEERS)
    for loss, penalty in (("squared_error", "norm2"), ("logistic", "norm1")):  # SOCP / exponential cone
        assert not set(peers_for(loss, penalty)) & set(QP_PEERS) and "SCS indirect" in peers_for(loss, penalty)
    tol = 1e-6
    peers = {"CLARABEL": (2.0, "optimal", 10.0), "OSQP": (0.1, "optimal", 10.0 + 11 * PEER_MATCH * tol * 11),
             "PIQP": (0.5, "optimal", 10.0 + 0.5 * PEER_MATCH * tol * 11), "SCS": (0.01, "inaccurate", 10.0),
             "HIGHS": (0.02, "solver_error", None)}
    # OSQP is fastest among the optimal ones but its objective is off by more than PEER_MATCH tol
    assert best_peer(peers, 10.0, tol) == ("PIQP", 0.5)
    assert best_peer(peers, None, tol) == ("PIQP", 0.5)  # the best objective from the peers alone
    for none in (best_peer({"SCS": (0.01, "inaccurate", 10.0)}, 10.0, tol), best_peer({}, None, tol)):
        assert none[0] == "" and np.isnan(none[1])


def test_table_one_quotes_the_fastest_peer_whose_answer_matches():
    from gtvcvx.bench.gtv import PAPER_TOL, _ratio_lines
    from gtvcvx.bench.harness import PEER_MATCH

    match = PEER_MATCH * PAPER_TOL * (1 + 3.6)  # (relative to 1 + |best objective|)

    def row(solver, status, error, total, ratio):
        return {"solver": solver, "status": status, "objective": 3.6 + error, "total_s": total,
                "time_ratio_vs_fast": ratio, "certified_rel_gap": 1e-7}

    rows = [row("fast", "optimal", 0.0, 1.0, 1.0), row("CVXPY+CLARABEL", "optimal", 0.0, 200.0, 200.0),
            row("CVXPY+SCS indirect eps 1e-7", "optimal", 0.5 * match, 20.0, 20.0),
            row("CVXPY+SCS eps 1e-4 (SCS default)", "optimal", 100 * match, 2.0, 2.0),
            row("CVXPY+SCS eps 1e-7", "inaccurate", 0.0, 1.5, 1.5)]
    last = _ratio_lines(rows).splitlines()[-1]
    assert "Best-configured peer" in last and "CVXPY+SCS indirect eps 1e-7, **20x**" in last


def test_raw_instances_keep_the_data_sets_own_units():
    """``--raw``: the same dealing, the features and targets as loaded (plus the intercept)."""
    from sklearn.datasets import load_breast_cancer, load_diabetes

    from gtvcvx.bench import real

    raw = real.build("florentine_families", "diabetes", "norm2", 3, 0.05, seed=0, raw=True)
    standardized = real.build("florentine_families", "diabetes", "norm2", 3, 0.05, seed=0)
    X, y = load_diabetes(return_X_y=True, scaled=False)
    assert raw.d == standardized.d == 11 and raw.digest() != standardized.digest()
    assert set(raw.loss.y_all) <= set(y) and np.isin(raw.loss.X_all[:, 1:], X).all()
    assert np.all(raw.loss.X_all[:, 0] == 1.0)
    classification = real.build("karate_club", "breast_cancer", "norm2", 2, 0.05, seed=0, raw=True)
    bunch = load_breast_cancer()
    columns = [list(bunch.feature_names).index(f) for f in real.WEAK_FEATURES]
    assert np.isin(classification.loss.X_all[:, 1:], bunch.data[:, columns]).all()
    assert set(np.unique(classification.loss.y_all)) == {-1.0, 1.0}
