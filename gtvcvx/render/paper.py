"""Markdown of the GTV-paper studies (:mod:`gtvcvx.experiments.paper`), from their records only.

Every function here takes a study record (an object with ``params``, ``measured``, ``tables``,
``facts`` and ``figures``: :class:`gtvcvx.experiments.StudyRecord`) and returns the study's
Markdown; none of them solves anything, so ``gtvcvx render`` rewrites the paper pages from the
files a run left behind. The numbers the paper states (:data:`PAPER_VALUES`) and the sources of
the setup details (:data:`SOURCES`) live here, with the text that cites them.

References
----------
Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, "Clustered federated learning via generalized
total variation minimization", IEEE Trans. Signal Processing 71, 2023 (arXiv 2105.12769);
``../shared/seeds/`` 002.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .tables import markdown_table

__all__ = ["PAPER_VALUES", "SOURCES", "fmt", "table1", "k_clusters", "chain", "lam_guidance", "digits", "summary",
           "SUMMARY_SECTIONS"]

#: Numbers the paper states (Table I; the authors' notebook prints the same values).
PAPER_VALUES = {"gtv": 1.42e-5, "ifca": 2.82, "fedavg": 2.86}

#: Sources of the setup details (cited in the report).
SOURCES = {
    "paper": "Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, \"Clustered federated learning via generalized "
             "total variation minimization\", IEEE Trans. Signal Processing 71, 2023; arXiv 2105.12769 "
             "(abstract: https://ar5iv.labs.arxiv.org/html/2105.12769)",
    "notebook_sbm": "authors' repository github.com/sahelyiyi/FederatedLearning, experiments/SBM_experiment_ifca.ipynb "
                    "(Table I numbers, IFCA configuration, Algorithm 1 with K = 2000 iterations)",
    "notebook_chain": "github.com/sahelyiyi/FederatedLearning, experiments/chain_experiment.ipynb "
                      "(chain of two clusters, d = 2, m = 5, w = (2, 2) and (-2, 2))",
    "notebook_mnist": "github.com/sahelyiyi/FederatedLearning, experiments/mnist_NN_experiment.ipynb "
                      "(clusters of digit pairs {0,1} and {2,3}, 3-NN graph with exponential weights, lam sweep)",
    "ifca": "A. Ghosh, J. Chung, D. Yin, K. Ramchandran, \"An efficient framework for clustered federated "
            "learning\", NeurIPS 2020",
}


def fmt(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isnan(x):
        return "-"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e4:
        return f"{x:.{digits}g}"
    return f"{x:.{digits - 1}e}"


def _md_table(df: pd.DataFrame, columns=None, digits: int = 3) -> str:
    """The package's table writer with the studies' conventions: missing values as ``-``, flags as yes/no."""
    return markdown_table(df, columns, digits, nan="-", decorate=_yes_no)


def _yes_no(column, value, row):
    return ("yes" if value else "no") if isinstance(value, (bool, np.bool_)) else None


def _table1_reading(p, m) -> str:
    short, long = min(p["pdhg_iterations"]), max(p["pdhg_iterations"])
    return (f"Reading: GTV recovers both clusters (ARI {fmt(m['gtv_ari'])}) with MSE {fmt(m['gtv_mse'])}, "
            f"{math.log10(m['fedavg_mse'] / m['gtv_mse']):.1f} orders of magnitude below FedAvg; IFCA with restarts "
            f"and the oracle reach the noise floor ({fmt(m['oracle_mse'])}), GTV's excess over it is the bias from "
            f"lam (see the lam guidance section). What restarts buy: the fast core certifies rel. gap "
            f"{fmt(m['gtv_rel_gap'])} after {int(m['gtv_iterations'])} iterations, while the paper's plain "
            f"Algorithm 1 is at rel. gap {fmt(m['algorithm1_short_rel_gap'])} (MSE {fmt(m['algorithm1_short_mse'])}) "
            f"after {short} iterations and {fmt(m['algorithm1_long_rel_gap'])} (MSE {fmt(m['algorithm1_long_mse'])}) "
            f"after {long}. Local models alone interpolate their {p['m']} samples in d = {p['d']} and are far off "
            f"(MSE of the weights {fmt(m.get('local_mse'))}).")


def table1(record) -> str:
    """Table I: the measured table, the reading, the MSE and convergence figures."""
    p, measured, table, figures = record.params, record.measured, record.tables["table1"], record.figures
    cols = ["method", "paper_mse", "protocol", "weight_mse", "prediction_mse", "ari", "iterations", "rel_gap",
            "seconds"]
    cols = [c for c in cols if c in table.columns]
    n_short = min(p["pdhg_iterations"])
    lines = [
        "**The paper's protocol** (002, Sec. VI-A, Table I): Algorithm 1 run for a fixed R = 1000 iterations"
        + ("" if n_short == 1000 else f" (this run's scale uses R = {n_short})") + ", "
        "reporting the MSE (39) of the weights, (1/|V|) sum_i ||w_i - w_true_i||^2. Paper: "
        f"{fmt(PAPER_VALUES['gtv'])}; measured here under that protocol: {fmt(measured.get('algorithm1_short_mse'))} "
        f"(row `Algorithm 1 (plain PDHG), {n_short} iterations`), "
        + _ratio_text(measured.get("algorithm1_short_mse"), PAPER_VALUES["gtv"]) + ". The authors' notebook, a "
        "second reading, ran 2000 iterations with the sum-of-squares loss and printed a training prediction MSE "
        "(rows marked `notebook`); the certified GTV minimizer is the reference for both.",
        "",
        f"Setting: SBM with {p['sizes']} nodes, p_in = {p['p_in']}, p_out = {p['p_out']}; node i holds m_i = {p['m']} "
        f"samples x ~ N(0, I_{p['d']}), y = w_c^T x + {p['sigma']} e, cluster weights with entries uniform on "
        f"{{0, 0.5}}; squared-error loss (1/m_i)||y_i - X_i w||^2, nLasso penalty, lam = {p['lam']}. Seed {p['seed']}.",
        "",
        "`weight_mse` = (1/n) sum_i ||w_i - w_true_i||^2 (the measure this project uses); `prediction_mse` = mean of "
        "(y - x^T w_i)^2 over all training samples, which is what the authors' notebook prints for Table I "
        "(source: " + SOURCES["notebook_sbm"] + ").",
        "",
        _md_table(table, cols),
        "",
        _table1_reading(p, measured),
        "",
        f"![Table I MSE]({figures[0]})",
        "",
        f"![convergence]({figures[1]})",
        "",
    ]
    return "\n".join(lines)


def k_clusters(record) -> str:
    """Fig. 2: the table over k and its reading."""
    p, table = record.params, record.tables["k_clusters"]
    cols = ["k", "cluster_sizes", "boundary_edges", "gtv_mse", "gtv_rel_gap", "algorithm1_mse", "algorithm1_rel_gap",
            "gtv_clusters", "gtv_ari", "predicted_recovery", "congestion", "ifca_mse", "ifca_ari", "fedavg_mse",
            "oracle_mse", "gtv_seconds"]
    cols = [c for c in cols if c in table.columns]
    protocol = ""
    if "algorithm1_mse" in table.columns:
        r_run = p.get("paper_iterations", 2000)
        scale_note = "" if r_run == 2000 else f"; this scale runs R = {r_run}"
        protocol = (" `algorithm1_mse` / `algorithm1_rel_gap`: the paper's protocol (Sec. VI-A: Algorithm 1 with "
                    f"R = 2000 iterations{scale_note}), next to the certified minimizer (`gtv_mse`).")
    thm_cols = ["k", "thm2_clusters_holding", "thm2_bound", "thm2_deviation", "gtv_ari"]
    thm = []
    if "thm2_bound" in table.columns:
        holding = table[table["thm2_clusters_holding"] == table["k"]]
        thm = ["Theorem 2 as stated (paper 002, Definition 1, eq. (35); bound (36)), evaluated by "
               "`gtvcvx.recovery.theorem2` on each k: `thm2_clusters_holding` = clusters satisfying condition (35), "
               "`thm2_bound` = max_c 2 |dC| lam / alpha_c, `thm2_deviation` = max_i ||w_i - wbar_c|| of the certified "
               "solution (wbar_c: the cluster-wise optimizer of eq. 9).", "", _md_table(table, thm_cols), "",
               f"Reading: condition (35) holds for every cluster at {len(holding)} of {len(table)} values of k"
               + (f" (k = {', '.join(map(str, holding['k']))})" if len(holding) else "")
               + f"; the measured deviation is below the bound (36) at "
               f"{int((table['thm2_deviation'] <= table['thm2_bound']).sum())} of {len(table)}.", ""]
    return "\n".join([
        f"Setting: {p['n_nodes']} nodes split as evenly as possible into k clusters, SBM p_in = {p['p_in']}, "
        f"p_out = {p['p_out']}, d = {p['d']}, m_i = {p['m']}, sigma = {p['sigma']}, nLasso lam = {p['lam']}, "
        f"certified to rel. gap {p['tol']}; IFCA with the true k and {p['ifca_restarts']} restarts. Seed {p['seed']}. "
        "`predicted_recovery` / `congestion`: the network-flow conditions of the lam guidance section at this lam "
        "(congestion < 1 guarantees that the GTV solution is exactly cluster-wise constant)." + protocol,
        "", _md_table(table, cols), "", _k_reading(p, table), "", f"![MSE versus k]({record.figures[0]})", "",
        *thm])


def _k_reading(p, t) -> str:
    ok = t[t["gtv_ari"] > 0.999999]["k"].tolist()
    bad = t[t["gtv_ari"] <= 0.999999]
    cert = t[t["predicted_recovery"]]["k"].tolist()
    ifca_bad = t[t["ifca_ari"] < 0.999]["k"].tolist()
    parts = [f"Reading: GTV recovers the clusters exactly (ARI 1) for k = {', '.join(map(str, ok)) or 'none'}"]
    if cert:
        parts.append(f"; the flow conditions certify it for k = {', '.join(map(str, cert))} (they are sufficient, "
                     "not necessary)")
    for _, r in bad.iterrows():
        parts.append(f"; at k = {r['k']} (clusters of about {p['n_nodes'] // r['k']} nodes) lam = {p['lam']} is too "
                     f"small for the flows inside the clusters (congestion {fmt(r['congestion'])}): the solution "
                     f"splits into {r['gtv_clusters']} pieces and the MSE rises to {fmt(r['gtv_mse'])} (fewer, "
                     "sparser intra-cluster edges need a larger lam)")
    parts.append(". IFCA (true k, restarts, best training loss) "
                 + (f"ends in a wrong partition for k = {', '.join(map(str, ifca_bad))}" if ifca_bad
                    else "recovers every k"))
    parts.append(f"; FedAvg stays at {fmt(t['fedavg_mse'].min())}-{fmt(t['fedavg_mse'].max())} and the oracle at "
                 f"{fmt(t['oracle_mse'].min())}-{fmt(t['oracle_mse'].max())}. Where it recovers the clusters, "
                 "GTV's MSE is the lam-induced bias; it grows with k at fixed lam, consistent with more boundary "
                 "flow per node (smaller clusters with more boundary edges).")
    return "".join(parts)


def _chain_reading(p, summary) -> str:
    sub = summary[summary["family"] == "rho"]
    if not len(sub):
        return ""
    below = sub[(sub["eps"] > 0) & (sub["eps"] < 1)]
    above = sub[sub["eps"] >= 1]
    zero = sub[sub["eps"] == 0]
    norms = [k for k in p["penalties"] if k != "squared_norm2"]

    def span(df, pens):
        v = df[df["penalty"].isin(pens)]["mse_mean"]
        return f"{fmt(v.min())}-{fmt(v.max())}" if len(v) else "-"

    rho_lo, rho_hi = sub["value"].min(), sub["value"].max()
    mean_lo = below[(below["value"] == rho_lo) & below["penalty"].isin(norms)]["mse_mean"].mean()
    mean_hi = below[(below["value"] == rho_hi) & below["penalty"].isin(norms)]["mse_mean"].mean()
    trend = ""
    if rho_lo != rho_hi and np.isfinite(mean_lo) and np.isfinite(mean_hi):
        trend = (", lower with more nodes holding data" if mean_hi < mean_lo else
                 ", not lower with more nodes holding data")
    text = (f"Reading (noise-free): with the norm penalties ({', '.join(norms)}) the clusters are recovered up to "
            f"a small bias while the bridge is lighter than the intra-cluster edges: MSE {span(zero, norms)} at "
            f"eps = 0 and {span(below, norms)} for 0 < eps < 1{trend}; for eps >= 1 the bridge is no longer cheaper "
            "to cut than an intra-cluster edge, the cut moves (non-uniquely, see below) and the MSE jumps to "
            f"{span(above, norms)}.")
    if "squared_norm2" in p["penalties"]:
        text += (f" The squared l2 penalty (MOCHA) never fuses exactly; it smooths across the bridge, MSE "
                 f"{span(below, ['squared_norm2'])} for 0 < eps < 1.")
    noisy = summary[summary["family"] == "sigma"]
    if len(noisy):
        text += (" With noise the floor rises with sigma (rho = " + str(p["sigma_rho"]) + "): "
                 + ", ".join(f"sigma = {fmt(v)}: "
                             f"{fmt(noisy[(noisy['value'] == v) & (noisy['eps'] == 0)]['mse_mean'].min())}"
                             for v in sorted(noisy["value"].unique())) + " at eps = 0 (best penalty).")
    return text


def _squared_scaling(penalties) -> str:
    """Which squared-penalty scaling a reproduction uses, and why (issue: legends use ||u||^2)."""
    if "squared_norm2" not in penalties:
        return ""
    lam = penalties["squared_norm2"]
    return (f" Squared penalty: gtvcvx's `SquaredNorm2` is ||u||^2 / 2 (the paper's Sec. III convention, whose dual "
            f"update operator it matches); the legends of Figs. 3-4 and 9-10 and the lecture notes write ||u||^2, so "
            f"our lam = {fmt(lam)} equals their lam = {fmt(lam / 2)} (we keep the paper's definition so that one "
            "penalty object serves every solver and certificate).")


def chain(record) -> str:
    """Figs. 3-4: setting, reading, figures, mean-MSE tables and the non-uniqueness run."""
    p, summary, figures = record.params, record.tables["chain_summary"], record.figures
    nonunique = record.facts.get("nonunique")
    n_solves, seconds = int(record.measured["solves"]), record.measured["seconds"]
    pen = ", ".join(f"{k} (lam = {v})" for k, v in p["penalties"].items())
    lines = [
        f"Setting: a chain of 2 x {p['cluster_size']} nodes, intra-cluster edge weight 1, one bridge edge of "
        "weight eps "
        f"(eps = 0 removes it); cluster weights {p['weights']}; a fraction rho of the nodes (chosen at random) holds "
        f"m_i = {p['m']} samples x ~ N(0, I_{p['d']}), y = w^T x + sigma e; penalties {pen}; squared-error loss. "
        f"{p['repetitions']} repetitions (new features and new set of nodes with data; the same data for every eps and "
        f"penalty), each solve certified to rel. gap {p['tol']} from a cold start W = 0. {n_solves} solves in "
        f"{seconds:.0f} s. Seed {p['seed']}." + _squared_scaling(p["penalties"]),
        "",
    ]
    lines += [_chain_reading(p, summary), ""]
    for fig in figures:
        lines += [f"![{fig.rsplit('.', 1)[0]}]({fig})", ""]
    for family in ("rho", "sigma"):
        sub = summary[summary["family"] == family]
        if not len(sub):
            continue
        wide = sub.pivot_table(index="eps", columns=["penalty", "value"], values="mse_mean", sort=False)
        wide.columns = [f"{a}, {family}={fmt(b)}" for a, b in wide.columns]
        wide = wide.reset_index()
        lines += [f"Mean MSE over repetitions ({'noise-free' if family == 'rho' else 'rho = ' + str(p['sigma_rho'])}):",
                  "", _md_table(wide), ""]
    if nonunique:
        lines += [
            f"Non-uniqueness: for eps = {nonunique['eps']} > 1 (the bridge is heavier than the intra-cluster edges), "
            f"rho = {nonunique['rho']}, nLasso, two runs certified to rel. gap <= "
            f"{fmt(max(nonunique['rel_gap_cold'], nonunique['rel_gap_warm']))} "
            f"with objectives {nonunique['objective_cold']:.10g} (from W = 0) and {nonunique['objective_warm']:.10g} "
            f"(warm start from the eps = {nonunique['warm_from_eps']} solution) give MSE "
            f"{fmt(nonunique['mse_cold'])} and {fmt(nonunique['mse_warm'])}. Nodes without data between the last "
            "data node of one cluster and the first "
            "of the other can switch models anywhere along the run at the same cost, so for eps >= 1 the MSE "
            "measures one minimizer out of many (the solver's choice), not a property of the problem.",
            ""]
    return "\n".join(lines)


def lam_guidance(record) -> str:
    """The lam sweep: what the columns mean, the certified window, the table and its reading."""
    p, m, table = record.params, record.measured, record.tables["lam_guidance"]
    lam_lo, lam_hi = m["lam_lo"], m["lam_hi"]
    cols = ["lam", "mse", "reduced_mse", "clusters_found", "ari", "recovered", "predicted_recovery", "congestion",
            "deviation_from_clusterwise", "rel_gap", "iterations", "seconds"]
    thm_cols = ["lam", "thm2_condition", "thm2_delta_max", "thm2_bound", "thm2_deviation", "recovered"]
    return "\n".join([
        f"The Table I problem (seed {p['seed']}) solved along a warm-started lam sweep, each point certified to "
        "rel. gap "
        f"{p['tol']}. `clusters_found` = components of the edges with ||w_i - w_j|| <= {p['fusion_tol']} x the true "
        "cluster separation; `recovered` = these components are exactly the true clusters. `predicted_recovery` = the "
        "network-flow (KKT) conditions hold: the cluster-reduced problem keeps the clusters apart and the electrical "
        "flow that routes the remaining demands inside every cluster has `congestion` < 1 (capacity lam A_e). This "
        "certifies that the GTV minimizer is unique and equal to the cluster-wise solution (`reduced_mse`); "
        "`deviation_from_clusterwise` = max_i ||w_i - v_c(i)|| / max_c ||v_c|| of the computed solution.",
        "",
        f"Certified recovery window: lam in [{fmt(lam_lo)}, {fmt(lam_hi)}] (bisection on the flow conditions); "
        f"closed-form fusion threshold of the two clusters ||grad S_1(w_pool)|| / A(boundary) = "
        f"{fmt(m['lam_hi_closed_form'])}.",
        "", _md_table(table, cols), "", _guidance_reading(table, lam_lo, lam_hi), "",
        f"![lam guidance]({record.figures[0]})", "",
        *(_theorem2_text(record, table, thm_cols) if "thm2_condition" in table.columns else [])])


def _theorem2_text(record, table, cols) -> list[str]:
    """Theorem 2 of the paper (Definition 1, eqs. 35-36) evaluated at every lam of the sweep."""
    c = record.facts.get("theorem2", {})
    holding = table[table["thm2_condition"]]
    below = int((table["thm2_deviation"] <= table["thm2_bound"]).sum())
    lines = [
        "**Theorem 2 as stated** (paper 002, Sec. V: Definition 1, eq. (35); bound eq. (36); proof in appendix "
        "IX-A, Lemma 3), evaluated by `gtvcvx.recovery.theorem2` with this problem's exact constants: strong "
        "convexity of the cluster-wise sums alpha_c = " + ", ".join(fmt(a) for a in c.get("alpha", [])) +
        f" (eq. 13), largest smoothness constant beta_i = {fmt(c.get('beta_max', float('nan')))} (eq. 12), "
        "weighted boundaries |dC| = " + ", ".join(fmt(b) for b in c.get("boundary", [])) + "; delta_i = "
        "||grad L_i(wbar_c)|| at the cluster-wise optimizer of eq. (9) (`thm2_delta_max`, eq. 11). Condition "
        f"(35) is checked {c.get('check', '')}. `thm2_deviation` = max_i ||w_i - wbar_c|| of the certified "
        "solution, `thm2_bound` = 2 |dC| lam / alpha_c (eq. 36).",
        "", _md_table(table, cols), ""]
    if len(holding):
        ratio_ = (holding["thm2_deviation"] / holding["thm2_bound"]).max()
        lines.append(f"Reading: condition (35) holds at {len(holding)} of {len(table)} lams (from lam = "
                     f"{fmt(holding['lam'].min())}); there the measured deviation is at most {ratio_:.2g} x the bound "
                     "(36), and the theorem's first claim, a cluster-wise constant solution, is "
                     + ("confirmed by `recovered` at each of them." if holding["recovered"].all() else
                        "NOT confirmed at every one of them (see `recovered`)."))
    else:
        demand, degree = c.get("demand_sum", []), c.get("max_internal_degree", [])
        why = ""
        if demand and degree:
            why = (f" Already the subset A = C minus i0 fails at the smallest lam: the cluster's summed demand "
                   f"sum_i b_i = {', '.join(fmt(x) for x in demand)} (each b_i >= beta_i |dC| / alpha_c) against an "
                   f"internal degree of at most {', '.join(fmt(x) for x in degree)} for any root i0.")
        lines.append(f"Reading: condition (35) holds at none of the {len(table)} lams: the term beta_i |dC| / alpha_c "
                     "+ delta_i / lam, summed over a subset, exceeds what the cluster's internal edges can carry, so "
                     "Theorem 2 says nothing here although the exact flow conditions above certify recovery in a "
                     "window; its constants are worst-case (every node pays its smoothness times the whole "
                     "boundary)." + why)
    lines[-1] += (f" The measured deviation is below the bound (36) at {below} of {len(table)} lams (the bound is "
                  "only guaranteed where (35) holds).")
    return lines + [""]


def _guidance_reading(t, lam_lo, lam_hi) -> str:
    best = t.loc[t["mse"].idxmin()]
    inside = t[t["predicted_recovery"]]
    slope = float("nan")
    if len(inside) >= 3:
        x, y = np.log10(inside["lam"].to_numpy()), np.log10(inside["reduced_mse"].to_numpy())
        keep = x >= x.min() + 1  # away from the lower end, where the noise floor dominates
        if keep.sum() >= 2:
            slope = float(np.polyfit(x[keep], y[keep], 1)[0])
    violations = int((t["predicted_recovery"] & ~t["recovered"]).sum())
    text = (f"Reading: the flow conditions certify exact recovery for lam in [{fmt(lam_lo)}, {fmt(lam_hi)}]; "
            + ("every lam of the sweep inside this window indeed recovers the clusters. " if violations == 0 else
               f"{violations} lam(s) inside the window do NOT show recovery in the computed solution. ")
            + f"The smallest MSE, {fmt(best['mse'])}, is at lam = {fmt(best['lam'])}; inside the window the MSE is "
            "the bias of the cluster-wise solution")
    if np.isfinite(slope):
        text += f", growing like lam^{slope:.2f}"
    below = t[t["lam"] < lam_lo] if np.isfinite(lam_lo) else t.iloc[:0]
    above = t[t["lam"] > lam_hi] if np.isfinite(lam_hi) else t.iloc[:0]
    if len(below):
        text += (". Below the window the computed solution deviates from the cluster-wise one by up to "
                 f"{fmt(below['deviation_from_clusterwise'].max())} (relative) and recovers the clusters at "
                 f"{int(below['recovered'].sum())} of {len(below)} lams")
    if len(above):
        text += (f"; above it the clusters are found at {int(above['recovered'].sum())} of {len(above)} lams "
                 "(the two clusters fuse into the pooled model)")
    text += ". Rule of thumb from this sweep: the smallest lam that the flow conditions certify."
    return text


def digits(record) -> str:
    """Digits: the data and graph as built, the table against the baselines and its reading."""
    p, f, table = record.params, record.facts, record.tables["digits"]
    gtv = table[table["method"] == "GTV nLasso"]
    base = table[table["method"] != "GTV nLasso"].set_index("method")["val_accuracy"]
    return "\n".join([
        f"Data: scikit-learn's bundled 8x8 digits (1797 images, no download). Cluster c = a digit pair {p['pairs']}; "
        f"its images are shuffled and split into {p['nodes_per_cluster']} local datasets (nodes); in every node a "
        f"fraction {p['train_fraction']} is training data, the rest validation data; label +1 for the first digit of "
        f"the pair, -1 for the second. Features: pixels / 16, PCA to {p['pca_dim']} dimensions fitted on the training "
        f"images, plus a bias feature (d = {f['d']}); {f['n_train']} training and {f['n_val']} validation samples. "
        f"Training labels are flipped with probability {p['label_noise']} ({f['flips']} flips; validation labels are "
        "clean): without label noise every digit pair is linearly separable, the logistic loss then has no "
        "minimizer on a cluster, and no lam > 0 gives a finite GTV solution when a cluster is a component of the "
        f"graph. Graph: {p['knn']}-NN between the nodes' mean training features with weights "
        "exp(-phi ||a_i - a_j||^2), "
        f"phi = 1 / median squared {p['knn']}-NN distance = {f['phi']:.3g}, plus a minimum spanning tree so that the "
        f"graph is connected: {f['n_edges']} edges, {f['cross_edges']} between clusters. GTV: logistic loss + nLasso, "
        f"fast core with warm starts along lam, tol {p['tol']}, time limit {p['time_limit']} s per lam. Baselines use "
        f"a ridge {float(p['ridge'])} (the unregularized logistic fits do not exist on separable local data). "
        f"Seed {p['seed']}.",
        "", _md_table(table, ["method", "lam", "val_accuracy", "train_accuracy", "clusters", "ari", "rel_gap", "status",
                              "iterations", "seconds"]),
        "", _digits_reading(gtv, base, p), "", f"![digits accuracy]({record.figures[0]})", ""])


def _digits_reading(gtv, base, p) -> str:
    best = gtv.loc[gtv["val_accuracy"].idxmax()]
    recovered = gtv[gtv["ari"] > 0.999999]["lam"].tolist()
    last = gtv.iloc[-1]
    text = (f"Reading: validation accuracy goes from the local models ({base.iloc[0]:.3f}) to "
            f"{best['val_accuracy']:.3f} at lam = {fmt(best['lam'])}")
    if last["lam"] > best["lam"] and last["val_accuracy"] < best["val_accuracy"]:
        text += (f" and back down to {last['val_accuracy']:.3f} at lam = {fmt(last['lam'])} (FedAvg: "
                 f"{base.iloc[1]:.3f}), where the cross-cluster edges fuse the different pair tasks into fewer models")
    text += "."
    if recovered:
        text += (f" At lam = {', '.join(fmt(x) for x in recovered)} the GTV models form exactly the "
                 f"{len(p['pairs'])} digit-pair clusters (ARI 1). Oracle cluster-wise FedAvg reaches "
                 f"{base.iloc[2]:.3f}")
        if best["val_accuracy"] > base.iloc[2]:
            text += ("; GTV exceeds it slightly, presumably because the few cross-cluster edges also shrink the "
                     "cluster models toward each other (extra regularization on noisy labels)")
        text += "."
    text += f" IFCA reaches {base.iloc[3]:.3f}."
    return text


def _ratio_text(measured, paper) -> str:
    if measured is None or paper is None or not np.isfinite(measured) or measured <= 0:
        return "not measured"
    r = measured / paper
    if 0.1 <= r <= 10:
        return f"{r:.2g} x the paper's value"
    return f"{abs(math.log10(r)):.1f} orders of magnitude {'above' if r > 1 else 'below'} the paper's value"


def _ifca_k_clause(r2) -> str:
    if r2 is None:
        return ""
    t = r2.tables["k_clusters"]
    failed = t[t["ifca_ari"] < 0.999]["k"].tolist()
    if not failed:
        return f" (it also recovers every k = {t['k'].min()}..{t['k'].max()} of Fig. 2)"
    return f" (it does fail to recover the clusters for k = {', '.join(map(str, failed))} in Fig. 2)"


def _comparison_rows(r1, r2=None) -> list[dict]:
    """Every number the paper states (Table I), with what we measured and why they differ."""
    m = r1.measured
    p = r1.params
    n_short, n_long = min(p["pdhg_iterations"]), max(p["pdhg_iterations"])
    g = m.get
    fed_w, fed_p = g("fedavg_mse"), g("fedavg_prediction_mse")
    rows = [
        {"quantity": f"Table I, Algorithm 1 as the paper states it (R = {n_short} iterations, weight MSE (39))",
         "paper": PAPER_VALUES["gtv"], "measured": g("algorithm1_short_mse"),
         "measured_as": ("MSE (39) of the weights after exactly the paper's R iterations of plain Algorithm 1 "
                         f"(certified rel. gap of that iterate {fmt(g('algorithm1_short_rel_gap'))}); paper 002, "
                         "Sec. VI-A: 'using a fixed number of R = 1000 iterations'"),
         "comment": (_ratio_text(g("algorithm1_short_mse"), PAPER_VALUES["gtv"]) + ": the paper's protocol does not "
                     f"reproduce its value on this draw. Algorithm 1 has not converged after {n_short} iterations; "
                     f"after {n_long} the MSE is {fmt(g('algorithm1_long_mse'))} (rel. gap "
                     f"{fmt(g('algorithm1_long_rel_gap'))}); the restarted fast core certifies rel. gap "
                     f"{fmt(g('gtv_rel_gap'))} in {int(g('gtv_iterations', 0))} iterations. The authors' notebook that "
                     "printed Table I ran 2000 iterations and prints a prediction MSE: the next two rows are that "
                     "second reading.")},
        {"quantity": "Table I, GTV (lam = 1e-2)", "paper": PAPER_VALUES["gtv"],
         "measured": g("authors_gtv_l1_prediction_mse"),
         "measured_as": "training prediction MSE, certified GTV with the l1 penalty and the authors' scaling (sum "
                        "of squared errors per node): the configuration of the notebook's printed run",
         "comment": (_ratio_text(g("authors_gtv_l1_prediction_mse"), PAPER_VALUES["gtv"]) + ". Remaining "
                     "differences: the data draw, and the notebook's Algorithm 1 stopped after 2000 iterations with "
                     "sigma = 0.9/2, while this value is at the certified minimizer.")},
        {"quantity": "Table I, GTV (nLasso, as the table labels it)", "paper": PAPER_VALUES["gtv"],
         "measured": g("authors_algorithm1_long_prediction_mse"),
         "measured_as": f"training prediction MSE, plain Algorithm 1 after {n_long} iterations, authors' scaling "
                        "(sum of squared errors), nLasso",
         "comment": (_ratio_text(g("authors_algorithm1_long_prediction_mse"), PAPER_VALUES["gtv"]) + ". The noise "
                     "floor (oracle cluster-wise fit) is " + fmt(g("oracle_prediction_mse")) + "; the paper's value "
                     "is " + (f"{PAPER_VALUES['gtv'] / g('oracle_prediction_mse'):.0f}" if g("oracle_prediction_mse")
                              else "?") + " times the floor here. The nLasso solution is closer to the oracle than "
                     "the l1 one (row above), which is the penalty of the printed run; Algorithm 1 after "
                     f"{n_long} iterations has converged here (rel. gap "
                     f"{fmt(g('authors_algorithm1_long_rel_gap'))}).")},
        {"quantity": "Table I, GTV", "paper": PAPER_VALUES["gtv"], "measured": g("gtv_mse"),
         "measured_as": f"MSE of the weights, certified GTV (rel. gap {fmt(g('gtv_rel_gap'))}), mean loss "
                        f"(1/m_i)||.||^2, nLasso, lam = {fmt(p['lam'])}",
         "comment": (_ratio_text(g("gtv_mse"), PAPER_VALUES["gtv"]) + f" (a different measure). With the mean loss, "
                     f"lam = {fmt(p['lam'])} weighs m = {p['m']} times more against the data than in the authors' "
                     "code, so the lam-induced bias (~lam^2, see the lam guidance section) is larger: with the "
                     "authors' scaling the certified weight MSE is " + fmt(g("authors_gtv_mse")) + ". "
                     + (f"Either way {math.log10(fed_w / g('gtv_mse')):.0f} orders of magnitude below FedAvg."
                        if fed_w and g("gtv_mse") else ""))},
        {"quantity": "Table I, IFCA", "paper": PAPER_VALUES["ifca"],
         "measured": g("ifca_paper_protocol_prediction_mse"),
         "measured_as": (f"training prediction MSE, IFCA as configured in the authors' notebook (gradient steps, "
                         f"lr {p['ifca_paper_lr']}, {p['ifca_paper_rounds']} rounds, {{0,1}} init, one run)"),
         "comment": (_ratio_text(g("ifca_paper_protocol_prediction_mse"), PAPER_VALUES["ifca"]) + ". "
                     + ("Reproduced: the two models start far from both clusters, each receives nodes of both "
                        "clusters, both drift to the pooled model and IFCA collapses to FedAvg (measured: the same "
                        "MSE as FedAvg, " + fmt(fed_p) + "; ARI " + fmt(g("ifca_paper_protocol_ari")) + "). The "
                        "remaining difference is the data draw (see FedAvg)."
                        if fed_p and abs(g("ifca_paper_protocol_prediction_mse") - fed_p) <= 1e-3 * fed_p else
                        "This run does not collapse exactly to FedAvg (FedAvg: " + fmt(fed_p) + ", ARI "
                        + fmt(g("ifca_paper_protocol_ari")) + ")."))},
        {"quantity": "Table I, IFCA", "paper": PAPER_VALUES["ifca"], "measured": g("ifca_mse"),
         "measured_as": f"MSE of the weights, IFCA with exact refits and {p['ifca_restarts']} random restarts",
         "comment": (_ratio_text(g("ifca_mse"), PAPER_VALUES["ifca"]) + ": on this well-separated problem IFCA with "
                     f"restarts recovers both clusters (ARI {fmt(g('ifca_ari'))}) and equals the oracle cluster-wise "
                     "FedAvg; the paper's IFCA value reflects one collapsed run, not a limitation of IFCA here"
                     + _ifca_k_clause(r2) + ".")},
        {"quantity": "Table I, FedAvg", "paper": PAPER_VALUES["fedavg"], "measured": fed_p,
         "measured_as": "training prediction MSE of the exact pooled model",
         "comment": (_ratio_text(fed_p, PAPER_VALUES["fedavg"]) + ". FedAvg's error is about (number of coordinates "
                     "where the two cluster weights differ) x 0.25^2 x (1 - d/(n m)); that number is "
                     "Binomial(100, 1/2), so single data draws differ by about +-15 % (ours: weight MSE "
                     + fmt(fed_w) + ").")},
    ]
    return rows


def _found_and_chosen(results) -> str:
    pc = results["paper_chain"].params
    n_chain = int(results["paper_chain"].measured.get("solves", 0))
    pd_ = results["paper_digits"].params
    pk = results["paper_sbm_k_clusters"].params
    return "\n".join([
        "- **Found** (authors' notebook `SBM_experiment_ifca.ipynb`, " + SOURCES["notebook_sbm"].split(",")[0] + "): "
        "Table I's numbers 1.42e-5 / 2.82 / 2.86 are printed there as `mean total MSE`, which is the mean squared "
        "*training-label prediction* error, not the distance to the true weights; data = 2 x 100 nodes, m = 10, "
        "d = 100, weights Bernoulli(1/2) x 0.5 (i.e. entries in {0, 0.5}), noise 1e-3; Algorithm 1 ran K = 2000 "
        "iterations with tau_i = 1/deg_i, sigma = 0.9/2 on the *sum* of squared errors per node (our mean loss with "
        "lam/m); the printed GTV run used the l1 penalty with lam = 0.01 (the notebook defines lam = 0.01 for l1 and "
        "l2, 0.05 for MOCHA); IFCA = the reference code of Ghosh et al. with gradient averaging, lr 0.1, 300 epochs, "
        "{0,1}-valued initialization, one run; FedAvg = local prox steps plus averaging.",
        "- **Found** (`chain_experiment.ipynb`): the chain of two clusters uses d = 2, m_i = 5, weights (2, 2) and "
        "(-2, 2), intra-cluster weight 1 and one bridge edge of weight eps, noise-free labels, a random subset of "
        f"nodes with data; we use these. Chosen: 2 x {pc['cluster_size']} nodes (the notebook used 2 x 100; "
        f"{pc['cluster_size']} keeps the {n_chain} certified solves within the time budget), eps in {pc['eps']}, "
        f"{pc['repetitions']} repetitions, penalties and lam {pc['penalties']} (as specified for this reproduction), "
        "on the mean loss.",
        "- **Found** (paper 002, Sec. VI-C and Table II): n = 40 nodes with digits {0,1} / {2,3} (m_i = 500: "
        "400 training, 100 validation), and in Table II n = 100 nodes in five clusters of 20 with the digit pairs "
        "{0,1}, {2,3}, {4,5}, {6,7}, {8,9}; each node is connected to the four other nodes of smallest distance "
        "(a KL-divergence estimate between the nodes' t-SNE embeddings), A = exp(-dist); Algorithm 1 with R = 50 "
        "iterations and lam = 1 (Figs. 5-7). The authors' notebook (`mnist_NN_experiment.ipynb`) uses a 3-NN graph "
        "and a lam sweep from 0 to 1e4. MNIST itself cannot be downloaded here. Chosen: the pairs "
        f"{pd_['pairs']} of scikit-learn's bundled 8x8 digits, "
        f"{pd_['nodes_per_cluster']} nodes each, logistic models, PCA-{pd_['pca_dim']} features, "
        f"{pd_['label_noise']:.0%} training label noise (see the digits section for why), {pd_['knn']}-NN + MST graph.",
        "- **Found**: Theorem 2 with Definition 1 (paper 002, Sec. V, eqs. (35)-(36); proof in appendix IX-A, "
        "Lemma 3). Evaluated with this problem's exact constants by `gtvcvx.recovery.theorem2` in the lam "
        "guidance section, next to the exact network-flow (KKT) conditions it is built on.",
        "- **Found**: Fig. 2 reports Algorithm 1 after R = 2000 iterations (Sec. VI-A); Figs. 3-4 and 10: R = 2000, "
        "Fig. 9: 3000, Fig. 13: 1000 (Sec. IX-B). **Not found**: Fig. 2's node count per k. Chosen: "
        f"{pk['n_nodes']} nodes split evenly into k clusters, SBM {pk['p_in']} / {pk['p_out']}, d = {pk['d']}, "
        f"m_i = {pk['m']}, lam = {pk['lam']}; every GTV point is the certified minimizer, not R iterations.",
    ])


def appendix_sbm(record) -> str:
    """Appendix, Sec. IX-B1/B2: Figs. 9-11 and the per-cluster covariances, against the paper's protocol."""
    p, m, t = record.params, record.measured, record.tables
    pen = ", ".join(f"{k} (lam = {fmt(v)})" for k, v in p["penalties"].items())
    summary = t["appendix_summary"]
    noniid, fig11 = t["appendix_noniid"], t["appendix_fig11"]
    cols = ["family", "value", "penalty", "p_out", "mse_mean", "mse_std", "worst_rel_gap"]
    alg1, mocha = m.get("noniid_norm2_mse"), m.get("noniid_squared_norm2_mse")
    lines = [
        "**The paper's protocol** (002, Sec. IX-B1-B2): SBM of two clusters of 100 nodes, p_in = 0.5, a grid of "
        "p_out; m_i = 5 samples x in R^2, labels from eq. (37) with w_1 = (2, 2), w_2 = (-2, 2); a fraction rho of "
        "the nodes holds data; lam = 1e-2; Algorithm 1 for R = 3000 (Fig. 9) / 2000 (Fig. 10) iterations; 5 "
        "realizations, mean and standard deviation of the MSE (39). Fig. 9: sigma = 0, rho in {0.2, 0.4, 0.6}; "
        "Fig. 10: rho = 0.6, sigma in {1e-2, 1e-1, 1}, one panel per penalty; the figures' axes: p_out from 0 to 0.6, "
        "MSE from 1e-16 to 1 (Fig. 9) and 1e-4 to 1 (Fig. 10). Run here: 2 x "
        f"{p['cluster_size']} nodes, p_out in {p['p_outs']}, rho in {p['rhos']}, sigma in "
        f"{p['sigmas']}, penalties {pen}, {p['repetitions']} realizations (new graph, data and observed nodes each); "
        f"every point is the certified minimizer (rel. gap <= {fmt(p['tol'])}), not R iterations. Seed {p['seed']}."
        + _squared_scaling(p["penalties"]),
        "", _md_table(summary, cols), "",
        f"![Fig. 9]({record.figures[0]}) ![Fig. 10]({record.figures[1]})", "",
        f"**Distinct feature statistics per cluster** (Sec. IX-B1, last paragraph): x ~ N(0, Sigma_c) with Sigma_1 = "
        f"{p['noniid_covariances'][0]}, Sigma_2 = {p['noniid_covariances'][1]}, p_in = {p['p_in']}, p_out = "
        f"{p['noniid_p_out']}, rho = {p['noniid_rho']}, noise-free (we read the paper's 'eps = 0' as sigma = 0: an "
        f"SBM has no bridge weight). Paper: Algorithm 1 4.53e-06, MOCHA 1.33e-01; measured (mean of "
        f"{p['repetitions']}): nLasso {fmt(alg1)}, MOCHA (squared penalty) {fmt(mocha)}.",
        "", _md_table(noniid, ["penalty", "p_out", "mse_mean", "mse_std", "worst_rel_gap"]), "",
        f"**Fig. 11, unbalanced clusters** (Sec. IX-B2): |C1| = {p['fig11_first']}, |C2| = N2 in {p['fig11_sizes']}, "
        f"rho = {p['fig11_rho']}, sigma = 0, p_out = {p['fig11_p_out']} (not stated for Fig. 11; the previous "
        "experiment's value), i.i.d. weights and perturbed ones w_i = w_c + 1e-3 e_i / ||w_c|| (non-i.i.d.); "
        "Algorithm 1 (nLasso) and MOCHA.",
        "", _md_table(fig11, ["weights", "penalty", "n2", "mse_mean", "mse_std", "worst_rel_gap"]), "",
        f"![Fig. 11]({record.figures[2]})", "",
        _appendix_reading(m, summary, fig11), ""]
    return "\n".join(lines)


def _appendix_reading(m, summary, fig11) -> str:
    text = (f"Reading: {int(m['solves'])} certified solves (largest rel. gap {fmt(m['max_rel_gap'])}). ")
    rho = summary[summary["family"] == "rho"]
    if len(rho):
        best = rho.loc[rho["mse_mean"].idxmin()]
        worst = rho.loc[rho["mse_mean"].idxmax()]
        text += (f"In the noise-free sweep the MSE ranges from {fmt(best['mse_mean'])} ({best['penalty']}, rho = "
                 f"{fmt(best['value'])}, p_out = {fmt(best['p_out'])}) to {fmt(worst['mse_mean'])} ({worst['penalty']}, "
                 f"rho = {fmt(worst['value'])}, p_out = {fmt(worst['p_out'])}). ")
    nl = fig11[fig11["penalty"] == "norm2"]
    if len(nl):
        text += (f"With unbalanced clusters nLasso's MSE stays between {fmt(nl['mse_mean'].min())} and "
                 f"{fmt(nl['mse_mean'].max())} over N2 and both weight models.")
    return text


def star(record) -> str:
    """Appendix, Sec. IX-B3: the star graph, the exact critical lam and the paper's R-iteration protocol."""
    p, m, t, f = record.params, record.measured, record.tables, record.facts
    lines = [
        "**The paper's protocol** (002, Sec. IX-B3, Figs. 12-13): a star of n = 50 nodes (centre connected to 49 "
        "peripheral nodes, A_e = 1), true weights w_i ~ N(0, I) i.i.d. per node, features N(0, I), noisy labels (37), "
        "loss (1/m_i) sum (x^T w - y)^2, Algorithm 1 with R = 1000 iterations; Fig. 13 shows that above a critical "
        "lam all local models coincide, which the paper attributes to Theorem 2. **Not found**: d, m_i, the noise "
        f"level, the penalty and the lam values of Fig. 13. Chosen: n = {p['n_nodes']}, d = {p['d']} (scatter "
        f"plots), m_i = {p['m']}, sigma = {p['sigma']}, {p['penalty']}. Seed {p['seed']}.",
        "",
        f"The critical lam is computed exactly (`gtvcvx.clustering.lam_max` on this GTV problem: the pooled model "
        f"must be stationary with the flows D^T U = -grad L(w_pool) inside the capacities lam A_e; on a star the "
        f"flow is unique): lam_crit = {fmt(m['lam_critical'])} ({f.get('lam_max_status', '')}, "
        f"{f.get('lam_max_method', '')}). The certified solutions along lam / lam_crit:",
        "", _md_table(t["star"], ["lam_over_critical", "lam", "distinct_models", "spread", "mse", "rel_gap",
                                  "iterations", "seconds"]), "",
        "The paper's protocol, plain Algorithm 1 for R iterations just above lam_crit (`spread` = max_i "
        "||w_i - mean||, 0 when all models coincide):",
        "", _md_table(t["star_protocol"], ["lam_over_critical", "iterations", "spread", "rel_gap", "seconds"]), "",
        f"![Fig. 13]({record.figures[0]})", "",
        f"Reading: below lam_crit the certified models never all coincide (smallest spread "
        f"{fmt(m['min_spread_below'])}); from lam_crit on they do (largest spread {fmt(m['max_spread_above'])}), "
        "exactly as the flow characterization says. Theorem 2's condition (35) is not what decides it here: with "
        "one model per node there is no cluster to be well connected; the threshold is the congestion of the "
        "unique star flow. " + _star_protocol_reading(t["star_protocol"], m), ""]
    return "\n".join(lines)


def _star_protocol_reading(protocol, m) -> str:
    if not len(protocol):
        return ""
    r = int(protocol["iterations"].max())
    spread = m["algorithm1_max_spread"]
    if spread <= 1e-6:
        return (f"Plain Algorithm 1 also fuses the models within R = {r} iterations above lam_crit (spread at most "
                f"{fmt(spread)}), so on this instance the paper's protocol and the certified solution agree.")
    return (f"After R = {r} plain iterations the spread is still up to {fmt(spread)}: the paper's fixed-R protocol "
            "shows the fusion only approximately.")


def fl_algorithms(record) -> str:
    """The lecture notes' FL algorithms on Table I: rounds, bytes and certified gaps, and the privacy trade-off."""
    p, f, t = record.params, record.facts, record.tables
    lines = [
        f"The Table I data (SBM {f.get('table1_sizes')}, seed {f.get('table1_seed')}, n = {f.get('n')}, d = "
        f"{f.get('d')}, |E| = {f.get('n_edges')}) under the algorithms of the FL lecture notes (000: FedRelax Sec. 9.1 "
        "Alg. 1, FedAvg Sec. 9.3 Algs. 3-4 and projected GD on (85), privacy Sec. 11.1 Alg. 5) and the FedAvg slides "
        "(001: Algs. 1-2), as implemented in `gtvcvx.fl`. Each algorithm is certified against the GTV problem it "
        f"converges to: FedRelax against GTV with the squared penalty ||u||^2/2 and lam = {p['lam']} (its update "
        "(82) drops the neighbours' copies of each edge term, so its fixed point is the notes' (79) with lam/2); "
        "FedAvg variants against the pooled model, i.e. GTV at a lam above lam_max (FedSGD and E local steps weigh "
        "clients by n_k/n, a different pooled objective: no GTV certificate). `bytes` counts float64 numbers sent "
        "(each message once per receiver); `gtvcvx.solve` (its automatic method choice, and the first-order "
        "Halpern core for contrast) is counted as message passing, 3 |E| d numbers per iteration (CG iteration for "
        f"the quadratic solver). Stopping: relative model change <= {p['tol']} or {p['max_rounds']} rounds "
        f"({p['prox_max_rounds']} for the prox FedAvg); gtvcvx.solve to a certified rel. gap {p['core_tol']} within "
        f"{p['core_time_limit']} s.",
        "", _md_table(t["fl_algorithms"], ["algorithm", "target", "rounds", "bytes", "rel_gap", "mse", "seconds",
                                           "note"]), "",
        f"Privacy-accuracy trade-off (Alg. 5, {p['private_rounds']} rounds, mean of {p['private_repetitions']} seeds): "
        "excess objective over the certified optimum and the MSE of the weights against the noise sigma of the "
        "shared models.", "",
        _md_table(t["fl_privacy"], ["sigma", "rounds", "excess_objective_mean", "mse_mean", "rel_gap_mean"]), "",
        f"![privacy trade-off]({record.figures[0]})", "", _fl_reading(t["fl_algorithms"]), ""]
    return "\n".join(lines)


def _fl_reading(t) -> str:
    relax = t[t["algorithm"] == "FedRelax (Alg. 1)"]
    squared = t[t["target"] == "GTV, squared penalty"]
    auto = squared[squared["algorithm"].str.contains("'auto'")]
    halpern = squared[squared["algorithm"].str.contains("'halpern'")]
    if not (len(relax) and len(auto) and len(halpern)):
        return ""
    r, a, h = relax.iloc[0], auto.iloc[0], halpern.iloc[0]
    return (f"Reading: on the squared-penalty target FedRelax certifies rel. gap {fmt(r['rel_gap'])} after "
            f"{int(r['rounds'])} rounds ({fmt(r['bytes'] / 1e6)} MB, {fmt(r['seconds'])} s); gtvcvx.solve picks its "
            f"direct quadratic solver ({a['algorithm'].split('-> ')[-1].rstrip(')')}): {fmt(a['rel_gap'])} after "
            f"{int(a['rounds'])} CG iterations ({fmt(a['seconds'])} s), while the first-order Halpern core reaches "
            f"{fmt(h['rel_gap'])} after {int(h['rounds'])} iterations ({fmt(h['seconds'])} s, {h['note']}): on this "
            "smooth problem exact local or global linear algebra beats first-order steps. The squared penalty does "
            "not recover the clusters (its MSE is far above nLasso's in Table I).")


#: The summary's sections: (heading, study), in order.
SUMMARY_SECTIONS = (
    ("Table I: two-cluster SBM", "paper_sbm_table1"),
    ("Fig. 2: MSE versus the number of clusters", "paper_sbm_k_clusters"),
    ("Figs. 3-4: chain of two clusters", "paper_chain"),
    ("Real data: handwritten digits with logistic local models", "paper_digits"),
    ("Regularization guidance (lam) and the flow conditions behind Theorem 2", "paper_lam_guidance"),
    ("Appendix: SBM with d = 2 (Figs. 9-11, per-cluster covariances)", "paper_appendix_sbm"),
    ("Appendix: star graph and the critical lam (Figs. 12-13)", "paper_star"),
    ("The lecture notes' FL algorithms on Table I", "paper_fl_algorithms"),
)


def comparison_table(table1_record, k_clusters_record=None, appendix_record=None, records=None) -> pd.DataFrame:
    """Every number the paper states (Table I, the appendix's covariance study), with what was measured and why
    they differ; with ``records`` (study name -> record) also a row per figure the text only plots."""
    rows = _comparison_rows(table1_record, k_clusters_record)
    if appendix_record is not None:
        m, p = appendix_record.measured, appendix_record.params
        setting = (f"MSE (39), certified, mean of {p['repetitions']} realizations: SBM 2 x {p['cluster_size']}, "
                   f"p_out = {p['noniid_p_out']}, rho = {p['noniid_rho']}, per-cluster covariances")
        for quantity, key, paper in (("Appendix IX-B1, distinct covariances: Algorithm 1 (nLasso)", "noniid_norm2_mse",
                                      4.53e-6),
                                     ("Appendix IX-B1, distinct covariances: MOCHA", "noniid_squared_norm2_mse", 1.33e-1)):
            value = m.get(key)
            rows.append({"quantity": quantity, "paper": paper, "measured": value, "measured_as": setting,
                         "comment": _ratio_text(value, paper) + (". The paper ran Algorithm 1 for a fixed R; this is "
                                                                 "the certified minimizer on our draws.")})
    if records:
        rows += _figure_rows(records)
    return pd.DataFrame(rows)


def _figure_rows(records) -> list[dict]:
    """One row per figure (and Theorem 2) whose values the paper's text does not state: what we measured, under
    which protocol, and how it reads against the paper's description."""
    def m(study, key):
        record = records.get(study)
        return record.measured.get(key) if record is not None else None

    rows = []
    if "paper_sbm_k_clusters" in records:
        rows.append({"quantity": "Fig. 2: MSE versus k (plot only)", "paper": None,
                     "measured": m("paper_sbm_k_clusters", "max_algorithm1_mse"),
                     "measured_as": f"largest MSE (39) over k after R = "
                                    f"{records['paper_sbm_k_clusters'].params.get('paper_iterations', 2000)} plain "
                                    "Algorithm 1 iterations (the paper's protocol, R = 2000; the certified minimizer's "
                                    f"largest: {fmt(m('paper_sbm_k_clusters', 'max_gtv_mse'))})",
                     "comment": f"GTV recovers the clusters at {int(m('paper_sbm_k_clusters', 'gtv_recovered_ks') or 0)} "
                                f"k values of the sweep; see the Fig. 2 section."})
    if "paper_chain" in records:
        rows.append({"quantity": "Figs. 3-4: chain, MSE versus eps (plots only)", "paper": None,
                     "measured": m("paper_chain", "norm2_small_eps_mse"),
                     "measured_as": "nLasso MSE (39) at the largest rho for eps <= 0.5, certified minimizers (the paper: "
                                    "R = 2000 iterations)",
                     "comment": "the squared penalty uses the legends' ||u||^2 scaling (our lam = 2 x legend lam)."})
    if "paper_digits" in records:
        rows.append({"quantity": "Figs. 5-7 and Table II: MNIST (plots only)", "paper": None,
                     "measured": m("paper_digits", "gtv_best_val_accuracy"),
                     "measured_as": "best GTV validation accuracy on scikit-learn's 8x8 digits (MNIST is not "
                                    "available offline)",
                     "comment": "the paper: R = 50 iterations, lam = 1, 4-nearest-node graph; ours: certified lam "
                                "sweep, digit pairs of Table II; see the digits section."})
    if "paper_lam_guidance" in records:
        rows.append({"quantity": "Theorem 2, condition (35) on the Table I instance", "paper": None,
                     "measured": m("paper_lam_guidance", "thm2_n_holding"),
                     "measured_as": "lams of the sweep at which (35) holds for both clusters",
                     "comment": "the exact flow conditions certify recovery where (35) does not apply; see the lam "
                                "guidance section."})
    if "paper_appendix_sbm" in records:
        rows.append({"quantity": "Figs. 9-11: appendix SBM (plots only)", "paper": None,
                     "measured": m("paper_appendix_sbm", "max_rel_gap"),
                     "measured_as": "largest certified relative gap over the appendix's solves",
                     "comment": "certified minimizers instead of R = 3000 / 2000 iterations; see the appendix section."})
    if "paper_star" in records:
        rows.append({"quantity": "Figs. 12-13: critical lam on the star (plot only)", "paper": None,
                     "measured": m("paper_star", "lam_critical"),
                     "measured_as": "lam above which all local models coincide, exact (unique star flow)",
                     "comment": "the paper shows the fusion in scatter plots after R = 1000 iterations."})
    return rows


def summary(record, studies: dict, render_study) -> str:
    """The summary page: paper versus measured, setup details, every study's section, runtime.

    Parameters
    ----------
    record : StudyRecord
        The summary's own record (tables ``paper_vs_measured`` and ``runtime``, fact ``ran_here``).
    studies : dict of str -> StudyRecord
        The five studies' records, by study name.
    render_study : callable
        ``render_study(record) -> Markdown`` of one study (the registered renderers).
    """
    runtime = record.tables["runtime"]
    total = float(runtime["seconds"].sum())
    ran_here = list(record.facts.get("ran_here") or [])
    lines = [
        "Reproduction of the experiments of Y. SarcheshmehPour, Y. Tian, L. Zhang, A. Jung, \"Clustered federated "
        "learning via generalized total variation minimization\", IEEE Trans. Signal Processing 71, 2023 "
        "(arXiv 2105.12769), with federated-learning baselines (`gtvcvx.baselines`) and a real-data study. Every GTV "
        "solution below is computed by the fast core and *certified* by a duality gap unless it is labelled "
        "\"plain Algorithm 1, k iterations\". Regenerate with `gtvcvx report problems/paper --out reports` "
        "(add `--full` for the paper's repetition counts and sweeps).",
        "",
        "## Paper versus measured",
        "",
        "The numbers the paper states in its text are those of Table I (GTV 1.42e-5, IFCA 2.82, FedAvg 2.86; the "
        "authors' notebook prints the same values) and the appendix's covariance study (Algorithm 1 4.53e-6, MOCHA "
        "1.33e-1). Figs. 2-4 and 9-13 are plots whose values the text conversion does not contain, so only our "
        "measurements are shown there.",
        "",
        _md_table(record.tables["paper_vs_measured"], ["quantity", "paper", "measured", "measured_as", "comment"]),
        "",
        "## Setup details: found and chosen",
        "",
        _found_and_chosen(studies),
        "",
    ]
    for title, name in SUMMARY_SECTIONS:
        lines += [f"## {title}", "", render_study(studies[name]).strip(), ""]
    lines += ["## Runtime", "",
              f"Measured on this machine (2 shared cores, BLAS limited to one thread): {total:.0f} s for the "
              f"{len(runtime)} studies" + (f" (run here: {', '.join(ran_here)})." if ran_here else "."), "",
              _md_table(runtime, ["study", "seconds"]), ""]
    return "\n".join(lines)
