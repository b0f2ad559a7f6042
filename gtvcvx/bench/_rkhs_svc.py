"""``gtvcvx bench rkhs --svc``: the kernel-sparse classifier against scikit-learn's ``SVC(kernel="rbf")``.

Run as users run them: default parameters of both estimators (and ``SVC(C=1000)``, the hard-ish margin
the issue measured), the machine's default BLAS threads (no environment set), every fit in its own
spawned process (wall time and peak memory). Instances: the paper's ellipses at growing N (a
5,000-sample test set drawn separately) and scikit-learn's breast-cancer data (standardized in a
pipeline, 70/30 stratified split). Reported side by side: fit seconds, test accuracy, model size
(kernels with a nonzero coefficient vs support vectors), the certified relative gap and status.
"""

from __future__ import annotations

import time

from .. import rkhs  # its estimator (and scikit-learn) load on first use: `gtvcvx bench` stays light
from ..progress import Progress
from ..rkhs.data import ellipses
from .harness import format_table, ratio, run_isolated, write_bench_report

TARGET = "rkhs_svc"
SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (300, 1_000)


def build(kind: str, n: int, seed: int):
    """``(X_train, y_train, X_test, y_test)`` of one instance (built before the clock starts)."""
    import sklearn.svm  # noqa: F401  (warm imports, untimed)

    rkhs.SparseKernelClassifier  # noqa: B018  (loads the estimator module)

    if kind == "ellipses":
        train, test = ellipses(n, seed=seed), ellipses(5_000, seed=seed + 1)
        return train.X, train.y, test.X, test.y
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y)
    return Xtr, ytr, Xte, yte


def _fit_score(estimator, data) -> dict:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    Xtr, ytr, Xte, yte = data
    model = make_pipeline(StandardScaler(), estimator)
    start = time.perf_counter()
    model.fit(Xtr, ytr)
    fit_s = time.perf_counter() - start
    return {"fit_s": fit_s, "accuracy": float(model.score(Xte, yte)), "model": model[-1]}


def call_svc(data, C: float = 1.0) -> dict:
    """Fit ``SVC(kernel="rbf", C=C)`` (``gamma="scale"``); its size is the number of support vectors."""
    from sklearn.svm import SVC

    out = _fit_score(SVC(kernel="rbf", C=C), data)
    return {"fit_s": out["fit_s"], "accuracy": out["accuracy"], "size": int(out["model"].support_.size),
            "status": "optimal", "rel_gap": float("nan"), "message": ""}


def call_gtvcvx(data, time_limit: float | None = None, **params) -> dict:
    """Fit ``SparseKernelClassifier(**params)`` (its defaults when empty); its size is the number of kernels used."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a non-optimal status is reported in the table instead
        out = _fit_score(rkhs.SparseKernelClassifier(time_limit=time_limit, **params), data)
    model = out["model"]
    return {"fit_s": out["fit_s"], "accuracy": out["accuracy"], "size": int(model.n_kernels_),
            "status": str(model.status_), "rel_gap": float(model.rel_gap_), "message": model.result_.message[:160]}


def run(args) -> int:
    sizes = QUICK_SIZES if args.quick else SIZES
    instances = [("ellipses", n) for n in sizes] + [("breast_cancer", 398)]
    plan = [("SVC (defaults, C=1)", call_svc, {"C": 1.0}), ("SVC (C=1000)", call_svc, {"C": 1000.0}),
            ("gtvcvx SparseKernelClassifier (defaults)", call_gtvcvx, {"time_limit": args.fit_time}),
            ("gtvcvx SparseKernelClassifier (atom_weight=None: 1/n_centers)", call_gtvcvx,
             {"time_limit": args.fit_time, "atom_weight": None})]
    started = time.strftime("%Y-%m-%d %H:%M")
    rows, ok = [], True
    bar = Progress(len(instances) * len(plan))
    try:
        for kind, n in instances:
            svc_time = None
            for label, call, call_kw in plan:
                bar.start(f"{kind} N={n}: {label}")
                r = run_isolated(label, build, {"kind": kind, "n": n, "seed": args.seed}, call, call_kw,
                                 timeout=args.timeout)
                bar.advance()
                ok &= r.ok
                d = r.data
                row = {"instance": kind, "n_train": n, "estimator": label,
                       "status": d.get("status", "crashed" if not r.ok else ""), "fit_s": d.get("fit_s", float("nan")),
                       "accuracy": d.get("accuracy", float("nan")), "model_size": d.get("size"),
                       "certified_rel_gap": d.get("rel_gap", float("nan")), "peak_mb": r.peak_mb,
                       "note": r.error or d.get("message", "")}
                if label.startswith("SVC (defaults"):
                    svc_time = row["fit_s"]
                row["fit_ratio_vs_svc_default"] = ratio(row["fit_s"], svc_time)
                rows.append(row)
                bar.note(f"[bench rkhs --svc] {kind} N={n} {label}: fit {row['fit_s']:.3g} s, accuracy "
                         f"{row['accuracy']:.4f}, size {row['model_size']}, {row['status']}")
    finally:
        bar.close()
    cols = ["instance", "n_train", "estimator", "status", "fit_s", "fit_ratio_vs_svc_default", "accuracy",
            "model_size", "certified_rel_gap", "peak_mb"]
    lines = [
        "## rkhs --svc: SparseKernelClassifier vs scikit-learn SVC (RBF)",
        "",
        f"Command: `gtvcvx bench rkhs --svc{' --quick' if args.quick else ''} --fit-time {args.fit_time:g} "
        f"--seed {args.seed} --out {args.out}` (started "
        f"{started}). Both estimators at their defaults inside `make_pipeline(StandardScaler(), ...)`, plus "
        "`SVC(C=1000)` and gtvcvx with `atom_weight=None` (the quadrature weights 1 / n_centers, the "
        "default before 2026-11-25; see the estimator's docstring); the machine's default BLAS threads (no thread variables set); every fit in its own "
        "spawned process. `fit_s` is the pipeline's fit, `model_size` the kernels with a nonzero "
        "coefficient (gtvcvx) or the support vectors (SVC), `certified_rel_gap` gtvcvx's certified relative "
        f"duality gap (fits stop at `time_limit` = {args.fit_time:g} s). Instances: the paper's ellipses "
        f"(seed {args.seed}; test set 5,000 samples of seed {args.seed + 1}) and scikit-learn's breast-cancer "
        "data (70/30 stratified split).",
        "",
        format_table(rows, cols),
        "",
    ]
    lines += [f"* {r['instance']} N={r['n_train']} {r['estimator']}: {r['note']}" for r in rows if r["note"]]
    section = write_bench_report(args.out, TARGET, "\n".join(lines), rows)
    print("\n".join(lines))
    print(f"[bench rkhs --svc] wrote {section}")
    return 0 if ok else 1
