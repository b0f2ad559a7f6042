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
