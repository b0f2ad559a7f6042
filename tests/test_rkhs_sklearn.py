"""SparseKernelClassifier as a scikit-learn estimator: check_estimator, model selection, pipelines."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone, is_classifier
from sklearn.datasets import load_iris, make_moons
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from gtvcvx.results import Status
from gtvcvx.rkhs import ConvergenceWarning, Dictionary, NotFittedError, SparseKernelClassifier


@parametrize_with_checks([SparseKernelClassifier()])
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def moons():
    return make_moons(160, noise=0.2, random_state=0)


def test_is_a_classifier_with_tags_and_stratified_cross_validation(moons):
    X, y = moons
    clf = SparseKernelClassifier(n_centers=60)
    assert is_classifier(clf) and clf.__sklearn_tags__().estimator_type == "classifier"
    assert not hasattr(clf, "predict_proba")  # decision values are not calibrated probabilities
    scores = cross_val_score(clf, X, y, cv=3, scoring="roc_auc")  # needs decision_function of a classifier
    assert np.isfinite(scores).all() and scores.min() > 0.9


def test_pipeline_and_grid_search_refit_the_dictionary_per_fold(moons):
    X, y = moons
    X = X * [1000.0, 0.001]  # unscaled features: the pipeline's scaler makes them comparable
    pipe = make_pipeline(StandardScaler(), SparseKernelClassifier(n_centers=60))
    search = GridSearchCV(pipe, {"sparsekernelclassifier__gamma": [0.1, 1.0]}, cv=StratifiedKFold(3))
    search.fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_score_ > 0.85 and search.score(X, y) > 0.85
    best = search.best_estimator_[-1]
    assert best.status_ == Status.OPTIMAL and best.rel_gap_ <= 1e-6
    # the atoms come from the training data of each fit, never from data it did not see
    centers = np.unique(best.dictionary_.centers, axis=0)
    scaled = search.best_estimator_[0].transform(X)
    assert centers.shape[0] <= 60 and all((np.abs(scaled - c).sum(axis=1) < 1e-12).any() for c in centers)


@pytest.mark.parametrize("kind", ["samples", "grid", "sobol"])
def test_built_dictionaries_follow_the_data(moons, kind):
    X, y = moons
    clf = SparseKernelClassifier(kind, n_centers=64, widths=[0.3, 0.6]).fit(X, y)
    D = clf.dictionary_
    assert D.dim == 2 and set(np.unique(D.widths)) == {0.3, 0.6}
    assert D.n_atoms == 2 * {"samples": 64, "grid": 64, "sobol": 64}[kind]
    low, high = X.min(axis=0), X.max(axis=0)
    assert (D.centers >= low - 1e-12).all() and (D.centers <= high + 1e-12).all()
    assert clf.score(X, y) > 0.9 and clf.status_ == Status.OPTIMAL
    again = clone(clf).fit(X, y)  # seeded: the same atoms and the same model
    np.testing.assert_array_equal(again.dictionary_.centers, D.centers)
    np.testing.assert_array_equal(again.alpha_, clf.alpha_)


def test_grid_refuses_high_dimension_with_a_way_out():
    X = np.random.default_rng(0).standard_normal((40, 12))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match="dictionary='grid' needs 2\\^12 .* use 'sobol' or 'samples'"):
        SparseKernelClassifier("grid", n_centers=100).fit(X, y)
    assert SparseKernelClassifier("sobol", n_centers=64).fit(X, y).dictionary_.dim == 12


def test_more_than_two_classes_one_vs_rest_on_one_dictionary():
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = make_pipeline(StandardScaler(), SparseKernelClassifier(n_centers=80)).fit(X, names)
    model = clf[-1]
    assert list(model.classes_) == ["setosa", "versicolor", "virginica"]
    scores = clf.decision_function(X)
    assert scores.shape == (150, 3) and model.alpha_.shape == (3, model.dictionary_.n_atoms)
    np.testing.assert_array_equal(clf.predict(X), model.classes_[scores.argmax(axis=1)])
    assert clf.score(X, names) > 0.9
    assert len(model.results_) == 3 and all(r.status == Status.OPTIMAL for r in model.results_)
    assert model.rel_gap_ == max(r.rel_gap for r in model.results_) <= 1e-6
    assert model.n_kernels_ == np.count_nonzero((model.alpha_ != 0).any(axis=0))


def test_a_given_dictionary_is_used_as_is_and_errors_follow_scikit_learn(moons):
    X, y = moons
    D = Dictionary.grid([(-2, 3), (-1.5, 2)], 6, [0.5, 1.0])
    clf = SparseKernelClassifier(D)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        clf.decision_function(X)
    clf.fit(X, y)
    assert clf.dictionary_ is D and clf.score(X, y) > 0.85
    with pytest.raises(TypeError, match="Sparse data was passed"):
        import scipy.sparse as sp

        clf.fit(sp.csr_matrix(X), y)


def test_bench_against_svc_measures_both_estimators_on_the_same_split():
    """``gtvcvx bench rkhs --svc`` calls: same data, fit time, accuracy, model size, the certified gap."""
    from gtvcvx.bench import _rkhs_svc

    data = _rkhs_svc.build("breast_cancer", 398, seed=0)
    assert data[0].shape == (398, 30) and data[2].shape == (171, 30)
    svc = _rkhs_svc.call_svc(data, C=1.0)
    ours = _rkhs_svc.call_gtvcvx(data, time_limit=60.0)
    for row in (svc, ours):
        assert row["fit_s"] > 0 and 0.85 <= row["accuracy"] <= 1.0 and row["size"] > 0
    assert ours["status"] == "optimal" and ours["rel_gap"] <= 1e-6
    assert np.isnan(svc["rel_gap"]) and svc["size"] < 398  # support vectors are a subset of the samples
    X, y, _, _ = _rkhs_svc.build("ellipses", 50, seed=3)
    assert X.shape == (50, 2) and set(np.unique(y)) <= {-1, 1}


def test_atom_weight_sets_the_built_atoms_weights_and_is_validated(moons):
    X, y = moons
    quadrature = SparseKernelClassifier(n_centers=40, atom_weight=None).fit(X, y)
    assert np.allclose(quadrature.dictionary_.weights, 1.0 / 40)
    unit = SparseKernelClassifier(n_centers=40).fit(X, y)  # the default
    assert np.allclose(unit.dictionary_.weights, 1.0) and unit.atom_weight == 1.0
    assert unit.status_ == Status.OPTIMAL and unit.rel_gap_ <= 1e-6
    # the L0 price gamma counts in units of the series coefficients: a sparser model than 1/n_centers
    assert unit.n_kernels_ < quadrature.n_kernels_
    for bad in (0.0, -1.0, float("nan"), True, "1"):
        with pytest.raises(ValueError, match="atom_weight must be None or a positive finite number"):
            SparseKernelClassifier(atom_weight=bad).fit(X, y)


def test_verbose_prints_the_certificate_checks_and_is_silent_by_default(moons, capsys):
    X, y = moons
    SparseKernelClassifier().fit(X, y)
    assert capsys.readouterr().out == ""
    clf = SparseKernelClassifier(verbose=True).fit(X, y)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[ssnal]")]
    assert lines and "rel_gap=" in lines[-1] and " t=" in lines[-1]
    assert float(lines[-1].split("rel_gap=")[1].split()[0]) == pytest.approx(clf.rel_gap_, rel=1e-3)


def test_a_hard_margin_fit_that_does_not_converge_says_what_the_optimum_is_at_least_and_what_to_do():
    """Noisy moons with the hard margin: the margins hold only with huge coefficients (at N = 1000 the
    optimum is >= 1e11 and CLARABEL does not converge either); the fit's warning quotes the certified lower
    bound and names the soft margin. A soft-margin fit stopped by its limit gets no such hint."""
    import warnings

    X, y = make_moons(200, noise=0.2, random_state=2)
    with pytest.warns(ConvergenceWarning, match="soft margin C is the remedy") as caught:
        clf = SparseKernelClassifier(C=None, max_iter=3).fit(X, y)
    message = next(str(w.message) for w in caught if "remedy" in str(w.message))
    bound = float(message.split("optimal objective is at least ")[1].split()[0])
    assert 0.99 * clf.result_.dual <= bound <= clf.result_.dual and clf.rel_gap_ >= 0.1  # rounded down
    with warnings.catch_warnings(record=True) as soft:
        warnings.simplefilter("always")
        SparseKernelClassifier(max_iter=1).fit(X, y)
    assert soft and not any("remedy" in str(w.message) for w in soft)


def test_parameters_that_would_fit_a_meaningless_model_are_refused_by_name(moons):
    X, y = moons
    cases = [({"eps": 1.0}, "eps must be below 1"), ({"tol": 1.0}, "tol must be a relative-gap tolerance below 1"),
             ({"critical_tol": -1.0}, "critical_tol"), ({"critical_tol": float("nan")}, "critical_tol"),
             ({"critical_tol": "a"}, "critical_tol"), ({"gamma": -1.0}, "gamma"),
             ({"time_limit": "abc"}, "time_limit must be a positive number of seconds"),
             ({"solver_options": {"bogus": 1}}, r"unknown option\(s\) \['bogus'\] for method 'ssnal'"),
             ({"solver_options": {"tol": 1e-3}}, r"solver_options must not set \['tol'\]"),
             ({"solver_options": [1]}, "solver_options must be a dict")]
    for params, match in cases:
        with pytest.raises(ValueError, match=match):
            SparseKernelClassifier(n_centers=20, **params).fit(X, y)
    three = np.arange(X.shape[0]) % 3
    with pytest.raises(ValueError, match=r"lam0 .* with 3 classes"):
        SparseKernelClassifier(n_centers=20).fit(X, three, lam0=np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="lam0 .* by solver='CLARABEL'"):
        SparseKernelClassifier(n_centers=20, solver="CLARABEL").fit(X, y, lam0=np.zeros(X.shape[0]))


def test_a_refit_that_fails_leaves_no_model_of_the_previous_fit(moons):
    X, y = moons
    clf = SparseKernelClassifier(n_centers=20).fit(X, y)
    wide = np.hstack([X] * 6)
    with pytest.raises(ValueError, match="dictionary='grid' needs"):
        clf.set_params(dictionary="grid", n_centers=1).fit(wide, y)
    assert not hasattr(clf, "alpha_") and not hasattr(clf, "n_features_in_")
    with pytest.raises(NotFittedError):
        clf.predict(X)
    for bad_X, bad_y, match in [(wide, np.zeros(len(y)), "at least two classes"), (wide[:, :1] * np.nan, y, "NaN")]:
        clf = SparseKernelClassifier(n_centers=20).fit(X, y)
        with pytest.raises(ValueError, match=match):
            clf.fit(bad_X, bad_y)
        assert not hasattr(clf, "alpha_") and not hasattr(clf, "n_features_in_")
    # a parameter refused before the data are read leaves the previous model whole
    clf = SparseKernelClassifier(n_centers=20).fit(X, y)
    with pytest.raises(ValueError, match="gamma"):
        clf.set_params(gamma=-1.0).fit(wide, y)
    assert clf.n_features_in_ == 2 and clf.predict(X).shape == y.shape


def test_a_backends_optimal_that_the_certificate_does_not_confirm_is_inaccurate(moons, monkeypatch):
    """CLARABEL said 'optimal' at a point gtvcvx certified at a relative gap of 0.88 (noisy moons, C = 1e9):
    the classifier's status follows the certificate, with a ConvergenceWarning naming both."""
    import dataclasses

    from gtvcvx.rkhs import classifier

    X, y = moons
    real = classifier.solve_problem

    def claims_optimal(problem, solver, **kw):
        return dataclasses.replace(real(problem, "fast", **kw), solver="CLARABEL", status=Status.OPTIMAL, rel_gap=0.88)

    monkeypatch.setattr(classifier, "solve_problem", claims_optimal)
    with pytest.warns(ConvergenceWarning, match=r"CLARABEL reported 'optimal', but .* relative gap of 0\.88 > tol"):
        clf = SparseKernelClassifier(n_centers=20, solver="CLARABEL").fit(X, y)
    assert clf.status_ == Status.INACCURATE and clf.result_.status == Status.INACCURATE


def test_one_vs_rest_problems_share_the_time_limit_and_have_their_own_critical_thresholds(monkeypatch):
    from gtvcvx.rkhs import classifier

    X, y = load_iris(return_X_y=True)
    limits, real = [], classifier.solve_problem

    def recording(problem, solver, **kw):
        limits.append(kw["time_limit"])
        return real(problem, solver, **kw)

    monkeypatch.setattr(classifier, "solve_problem", recording)
    clf = SparseKernelClassifier(n_centers=40, time_limit=30.0, critical_tol=0.05).fit(X, y)
    assert len(limits) == 3 and 30.0 >= limits[0] > limits[1] > limits[2] > 0
    assert clf.critical_threshold_.shape == (3,)
    above = np.flatnonzero((clf.dual_ > clf.critical_threshold_[:, None]).any(axis=0))
    np.testing.assert_array_equal(clf.critical_samples_, above)


def test_a_model_that_predicts_one_class_everywhere_or_breaks_its_hard_margins_says_so(moons):
    X, y = moons
    far = Dictionary.from_samples(X[:5] + 50.0, [0.5])  # atoms nowhere near the data
    with pytest.warns(UserWarning, match=r"predicts 0 for every training sample \(0 kernels\).*\(the given dictionary\)"):
        SparseKernelClassifier(far).fit(X, y)
    # the paper's L0 recovery, hard margin: the certificate is the envelope point's, the coefficients break margins
    # (the red-team's instance; violations at 160 samples are ~1e-5, the recovery's usual inaccuracy: no warning)
    Xs, ys = make_moons(200, noise=0.2, random_state=0)
    Xs = StandardScaler().fit_transform(Xs)
    with pytest.warns(UserWarning, match=r"L0 recovery \(recovery='l0'\) violates the hard margins .* by up to 1\.19"):
        clf = SparseKernelClassifier(C=None, recovery="l0").fit(Xs, ys)
    r = clf.result_
    assert r.margin_violation > 0.01 and r.l0_primal == np.inf and r.l0_gap == np.inf
    assert r.status == Status.OPTIMAL and np.isfinite(r.gap)
