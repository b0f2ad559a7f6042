"""``gtvcvx report``: run every spec, write per-spec tables and figures and an index page.

Layout of the output directory ``OUT``::

    OUT/index.md, OUT/index.html        everything (HTML self-contained: figures as base64 PNG)
    OUT/specs/summary.csv               one row per spec x solver (all specs)
    OUT/specs/results.json              the run's results, everything the pages are rendered from
                                        (always written; ``gtvcvx render OUT`` re-renders from it)
    OUT/specs/report.json               the whole run as data (rows, measured values, environment)
    OUT/specs/<name>/report.md          one spec: description, solver table, figures, notes
    OUT/specs/<name>/comparison.csv     the full comparison table (and .json)
    OUT/specs/<name>/convergence.png    certified relative gap vs iteration and vs time
    OUT/specs/<name>/clusterpath.png    convex-clustering specs
    OUT/specs/<name>/decision_boundary.png   2-D RKHS specs
    OUT/specs/<name>/experiment.md, <table>.csv, measured.json, figures   experiment specs
    <experiment dir>/<study>.json, <study>.<table>.csv   a study's record (``gtvcvx render`` renders
                                        its text again from it)
    OUT/<output>                        an experiment spec's ``output`` Markdown (links rebased)

Every file is written atomically, so an interrupted run leaves complete files only. An entry of
``OUT`` is replaced only when a previous report wrote it (its ``specs/results.json`` lists it),
never when it is or holds an input spec, and never through a symbolic link. Data flows
one way: the tasks run the specs and fill :class:`SpecReport` records, the records go to
``specs/results.json``, and :func:`render_report` writes every page and summary from them, so a
report can be re-rendered (another format, a renderer fix) without solving again.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import re
import time
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from urllib.parse import quote

import numpy as np
import pandas as pd

from .._text import printable
from .._validation import contained_path
from ..environment import environment, environment_markdown
from ..experiments import StudyStore
from ..io import atomic_write_text
from ..render.html import html_page, markdown_to_html, plain_text, sanitize_markdown
from ..render.markdown import rebase_markdown
from ..render.tables import (csv_cells, format_number, json_value, markdown_table as _markdown_table, records,
                             write_table)
from ..tasks import ReportContext, SpecReport, find_specs, load_spec, run_experiment, task_for
from ..tasks.experiment import RESERVED_NAMES, rerender_experiment
from ..tasks.compare import REFERENCE_SIZE_LIMITS, REFERENCE_TIME_LIMIT, SKIPPED

__all__ = ["build_report", "render_report", "run_experiment", "SpecReport", "FORMATS", "write_table",
           "markdown_table", "RESULTS_FILE"]

#: Output formats of ``gtvcvx report --format``.
FORMATS = ("md", "csv", "html", "json")

_DISPLAY = ["solver", "status", "primal", "dual", "rel_gap", "objective_error", "solution_error", "mse", "ari",
            "n_clusters", "accuracy", "n_kernels", "n_critical", "iterations", "setup_time", "solve_time",
            "certify_time", "peak_rss_delta_mb", "peak_traced_mb"]

_LEGEND = {
    "primal": "P(W) evaluated by gtvcvx",
    "dual": "certified lower bound on the optimum (gtvcvx's certificate at a feasible flow; for CVXPY "
            "solutions the flow is built from W)",
    "rel_gap": "(primal - dual) / (1 + |primal| + |dual|)",
    "objective_error": "|P - P_ref| / max(1, |P_ref|) against the reference row (smallest certified gap)",
    "solution_error": "||W - W_ref|| / max(1, ||W_ref||) against the reference row",
    "mse": "mean squared error of the local models against the ground truth",
    "ari": "adjusted Rand index of the clusters against the true labels",
    "accuracy": "classification accuracy (logistic: training accuracy; RKHS: test accuracy)",
    "setup_time": "seconds (CVXPY: compilation)",
    "solve_time": "seconds",
    "certify_time": "seconds spent by gtvcvx certifying the solution",
    "peak_rss_delta_mb": "peak resident memory during the solve minus before it, MiB (freed memory trimmed "
                         "first, sampled every 5 ms; includes compiled backends; a lower bound)",
    "peak_traced_mb": "peak of Python's tracemalloc during the solve, MiB (NumPy included, native backend "
                      "memory not)",
}


# ---------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------
def _decorate(column, value, row):
    if column == "status" and value not in ("optimal", SKIPPED):
        return f"**{value}**"
    if column == "solver" and bool(row.get("reference", False)):
        return f"{value} (ref)"
    return None


def markdown_table(df: pd.DataFrame, columns=None, digits: int = 4) -> str:
    """A solver table in Markdown: non-optimal statuses in bold, the reference row marked; text
    cells sanitized (a results file may be hand-edited)."""
    return _markdown_table(df, columns, digits, decorate=_decorate, sanitize=True)


# ---------------------------------------------------------------------------------------
# per spec
# ---------------------------------------------------------------------------------------
#: Longest folder name of a spec (before a ``-2`` suffix), well below the file systems' 255 bytes.
SLUG_LENGTH = 80


def _slug(name: str, used: set) -> str:
    """The spec's folder name: safe characters, at most :data:`SLUG_LENGTH` (plus ``-k`` when taken)."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._")[:SLUG_LENGTH].rstrip("._") or "spec"
    slug, k = base, 2
    while slug in used:
        slug, k = f"{base}-{k}", k + 1
    used.add(slug)
    return slug


def _spec_markdown(rep: SpecReport, link_prefix: str = "", level: int = 1, *, full: bool = True,
                   seen_figures: dict | None = None, root: Path | None = None) -> str:
    """The Markdown section of one spec; ``link_prefix`` is how the page reaches ``OUT``.

    ``full=False`` (the index) leaves an experiment's own text to its page and lists its
    measured values and figures; ``seen_figures`` (content hash -> path) then skips figures
    whose bytes were already shown (a summary experiment copies its studies' figures).
    """
    h = "#" * level
    lines = [f"{h} {rep.name}", ""]  # name and description are sanitized when read
    if rep.description:
        lines += [rep.description, ""]
    facts = [f"spec `{_code_text(rep.path)}`", f"kind `{_code_text(rep.kind)}`"]
    if rep.seed is not None:
        facts.append(f"seed {_line_text(rep.seed)}")
    if rep.sizes:
        facts.append(", ".join(f"{_line_text(k)} = {_line_text(format_number(v))}" for k, v in rep.sizes.items()))
    lines += ["; ".join(facts), ""]
    if rep.error:
        lines += [f"**error:** {_line_text(rep.error)}", ""]
    if rep.table is not None:
        lines += [markdown_table(rep.table, _DISPLAY), ""]
        if rep.reference:
            lines += [f"Errors are measured against `{_code_text(rep.reference)}` (the smallest certified relative "
                      "gap).", ""]
        messages = [(r["solver"], r.get("message")) for _, r in rep.table.iterrows() if _present(r.get("message"))]
        for solver, message in messages:
            lines.append(f"- `{_code_text(solver)}`: {_line_text(message)}")
        if messages:
            lines.append("")
    if rep.experiment_markdown and full:  # gtvcvx's own Markdown, but read back from a file: made inert too
        text = sanitize_markdown(rep.experiment_markdown, keep_images=True)
        lines += [rebase_markdown(text, f"{link_prefix}{quote(rep.experiment_dir)}", demote=level), ""]
    elif rep.experiment_markdown:
        title = rep.experiment_markdown.splitlines()[0].lstrip("#").strip()
        lines += [f"Experiment: **{_line_text(title)}** ([full text]({link_prefix}specs/{rep.slug}/report.md)).",
                  ""]
    if rep.measured:
        lines += [_markdown_table([{"measured": k, "value": format_number(v, 6)} for k, v in rep.measured.items()],
                                  sanitize=True), ""]
    figures = rep.figures
    if rep.experiment_markdown and full:  # the experiment's text shows its figures; add the others
        figures = [f for f in rep.figures if Path(f).name not in rep.experiment_markdown]
    for fig in figures:
        if seen_figures is not None and root is not None and (root / fig).is_file():
            digest = hashlib.sha256((root / fig).read_bytes()).hexdigest()
            if digest in seen_figures:
                seen = seen_figures[digest]
                lines += [f"- `{_code_text(Path(fig).name)}`: the same figure as [{_line_text(seen)}]({link_prefix}"
                          f"{quote(seen)}) above", ""]
                continue
            seen_figures[digest] = fig
        lines += [f"![{_line_text(Path(fig).stem)}]({link_prefix}{quote(fig)})", ""]
    for note in rep.notes:
        lines.append(f"- {_line_text(note)}")
    if rep.notes:
        lines.append("")
    data_files = [f for f in rep.files if not f.endswith(".png")]
    if data_files:
        lines += ["Files: " + ", ".join(f"[{_line_text(Path(f).name)}]({link_prefix}{quote(f)})" for f in data_files),
                  ""]
    return "\n".join(lines)


def _present(value) -> bool:
    """Whether a table cell holds something (not missing, not empty text)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value)) and str(value) != ""


def _line_text(value) -> str:
    """Untrusted text for one line of Markdown: whitespace collapsed, control characters escaped,
    then made inert like spec names (:func:`sanitize_markdown`)."""
    return sanitize_markdown(printable(" ".join(str(value).split())))


def _float(value) -> float:
    """A table cell as a float (nan when it is not a number: a results file may be hand-edited)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _run_spec(spec, rep: SpecReport, ctx: ReportContext):
    spec_dir = ctx.out / "specs" / rep.slug
    spec_dir.mkdir(parents=True, exist_ok=True)
    task_for(spec).write_section(spec, rep, spec_dir, ctx)


# ---------------------------------------------------------------------------------------
# the whole report
# ---------------------------------------------------------------------------------------
def _summary_rows(reports) -> pd.DataFrame:
    """One row per spec x solver, spec names as typed (plain text, not Markdown)."""
    rows = []
    for rep in reports:
        if rep.table is None:
            continue
        for _, r in rep.table.iterrows():
            row = {"spec": plain_text(rep.name), "kind": rep.kind, "seed": rep.seed}
            row.update(r.to_dict())
            rows.append(row)
    return pd.DataFrame(rows)


def _overview(reports) -> str:
    rows = []
    for rep in reports:
        fast_status = fast_gap = fast_time = ref = ref_time = speedup = acc = ""
        if rep.table is not None and len(rep.table):
            t = rep.table
            fast = t[t["solver"] == "fast"]
            if len(fast):
                f = fast.iloc[0]
                fast_status, fast_gap = _line_text(f["status"]), format_number(_float(f.get("rel_gap")), 3)
                ft = _float(f.get("setup_time", np.nan)) + _float(f.get("solve_time", np.nan))
                fast_time = format_number(ft, 3)
            others = t[(t["solver"] != "fast") & (t["status"] == "optimal")]
            if len(others):
                o = others.iloc[0]
                ref = _line_text(o["solver"])
                ot = _float(o.get("setup_time", np.nan)) + _float(o.get("solve_time", np.nan))
                ref_time = format_number(ot, 3)
                if fast_time and ft > 0:
                    speedup = format_number(ot / ft, 3)
            for col in ("ari", "accuracy", "mse"):
                if col in t.columns and len(fast) and np.isfinite(_float(fast.iloc[0].get(col, np.nan))):
                    acc = f"{col} {format_number(_float(fast.iloc[0][col]), 4)}"
                    break
        elif rep.measured:
            acc = ", ".join(f"{_line_text(k)} {_line_text(format_number(v, 4))}"
                            for k, v in list(rep.measured.items())[:3])
        if rep.error:
            fast_status = "**error**"
        size = _line_text(format_number(rep.sizes.get("size"))) if rep.sizes else ""
        link = f"[report](specs/{rep.slug}/report.md)"
        anchor = re.sub(r'[^a-z0-9_-]+', '-', rep.name.lower()).strip('-')
        rows.append({"spec": f"[{rep.name}](#{anchor})", "kind": _line_text(rep.kind), "size": size,
                     "fast status": fast_status,
                     "fast rel gap": fast_gap, "fast time [s]": fast_time, "reference": ref,
                     "ref. time [s]": ref_time, "speed-up (ref/fast)": speedup, "accuracy": acc,
                     "spec time [s]": f"{rep.elapsed:.1f}", "files": link})
    return _markdown_table(rows)  # cells are formatted already; the one writer escapes them


def _index_markdown(reports, env: dict, *, command: str, elapsed: float, memory: str | None, rule: str,
                    root: Path, scale: str, site: Path) -> str:
    from .. import __version__

    lines = ["# gtvcvx report", "",
             f"Generated by `{_code_text(command)}` with gtvcvx {__version__}. Re-running it reproduces every number "
             "except timings and memory (seeds are fixed by the specs, and the solvers' schedules depend on "
             "iteration counts only).", "",
             "## Overview", "",
             "`speed-up (ref/fast)` is the reference's time divided by the fast core's (setup + solve): "
             "above 1 the fast core is faster, below 1 slower. The reference is the first CVXPY backend "
             "that reached `optimal`; instances above its size limit show none (see the solver selection "
             "rule below, and `reports/bench/` for the large ones).", "", _overview(reports), "",
             *_bench_headline(site),
             "## How to read the tables", "",
             "Every row is certified by gtvcvx itself: the dual value is a lower bound on the optimum "
             "obtained at a dual-feasible flow (for CVXPY solutions the flow is constructed from W by "
             "`gtvcvx.testing.certify`), so `rel_gap` bounds the suboptimality of every solver's answer "
             "in the same way.", ""]
    lines += [f"- `{k}`: {v}" for k, v in _LEGEND.items()]
    lines += ["", f"Solver selection: {_line_text(rule)}", "",
              f"Experiment specs ran at scale `{sanitize_markdown(scale)}`: " + SCALE_NOTE, ""]
    if memory:
        lines += [f"Memory is measured with `{_code_text(memory)}` (see the column legend).", ""]
    lines += ["## Specs", ""]
    seen: dict = {}
    for rep in reports:
        lines += [_spec_markdown(rep, link_prefix="", level=3, full=False, seen_figures=seen, root=root), ""]
    env = {_line_text(key): _line_text(value) for key, value in env.items()}
    lines += ["## Environment", "", environment_markdown(env), ""]
    lines += [_markdown_table([{"spec": r.name, "seed": "" if r.seed is None else _line_text(r.seed),
                                "file": f"`{_code_text(r.path)}`"} for r in reports])]
    lines += ["", f"Total run time: {elapsed:.1f} s.", ""]
    return "\n".join(lines)


#: Columns of the Table I benchmark shown in the index (from ``bench/gtv.csv``, ``part == "paper"``).
_BENCH_COLUMNS = {"solver": "solver", "status": "status", "certified_rel_gap": "certified rel gap",
                  "total_s": "time [s]", "time_ratio_vs_fast": "time / fast time", "peak_MiB": "peak [MiB]"}


def _bench_headline(root: Path) -> list[str]:
    """Index lines for the GTV paper's Table I instance as ``gtvcvx bench gtv`` measured it.

    That instance is above the CVXPY size limit of a report run (CLARABEL needs minutes and
    GiB on it), so the comparison comes from the benchmark's own file when the report directory
    holds one; nothing is shown otherwise.
    """
    path = Path(root) / "bench" / "gtv.csv"
    if not path.is_file():
        return []
    try:
        table = pd.read_csv(path)
        rows = table[table["part"] == "paper"][list(_BENCH_COLUMNS)].rename(columns=_BENCH_COLUMNS)
    except (ValueError, KeyError, OSError, pd.errors.ParserError):
        return ["(`bench/gtv.csv` could not be read as a `gtvcvx bench gtv` table; run the benchmark again.)", ""]
    if not len(rows):
        return []
    return ["## Headline: the GTV paper's Table I instance (from `gtvcvx bench gtv`)", "",
            "Too large for the references of a report run, so measured by the benchmark (every solver in a "
            "fresh process, same instance, certified by gtvcvx); details in [bench/README.md](bench/README.md).",
            "", _markdown_table(rows, digits=3, sanitize=True), ""]


SELECTION_RULE = ("the fast core always runs; a CVXPY reference (CLARABEL, SCS) runs when the instance "
                  "size n d + |E| d + samples is at most its limit ({limits}), otherwise its row says "
                  "'skipped' with the reason. `--solvers` runs exactly the solvers named; "
                  "`--max-reference-size` changes the limits. CVXPY runs get a time limit of "
                  "{time_limit:g} s unless the spec sets one.")


SCALE_NOTE = ("`full` runs the sources' protocols (every repetition and sweep point; `--full`), `default` "
              "smaller sweeps that keep this command within minutes, `quick` a smoke test (`--quick`). Each "
              "study states the parameters it used.")


def _check_formats(formats) -> tuple:
    formats = tuple(formats)
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"--format: unknown format(s) {sorted(unknown)}; expected some of {list(FORMATS)}")
    return formats


def _code_text(text) -> str:
    """Text shown in a Markdown code span (spec paths, the command line): unsafe characters escaped
    (see :mod:`gtvcvx._text`), backticks and line breaks written ``\\x60`` and ``\\x0a`` so that the
    span cannot be closed early (and never empty: ```` `` ```` would open a longer span)."""
    return printable(text).replace("`", "\\x60").replace("\n", "\\x0a") or " "


def build_report(paths, out_dir, *, solvers=None, formats=FORMATS, progress=None, scale: str = "default",
                 time_limit: float | None = None, size_limits: dict | None = None, memory: str | None = "rss",
                 command: str | None = None) -> list[SpecReport]:
    """Run every spec under ``paths`` and write the report into ``out_dir``.

    Parameters
    ----------
    paths : sequence of path
        Spec files or directories (searched recursively for ``*.toml``).
    out_dir : path
    solvers : sequence of str, optional
        Run exactly these solvers on every GTV/RKHS spec (default: :func:`select_solvers`'s rule).
    formats : sequence of str
        Among :data:`FORMATS`. ``md`` writes the Markdown pages, ``html`` the self-contained
        index page, ``csv`` and ``json`` the tables.
    progress : gtvcvx.progress.Progress, optional
    scale : {"quick", "default", "full"}
        Size of experiment specs (see :data:`gtvcvx.experiments.SCALES`).
    time_limit : float, optional
        Seconds per CVXPY run (default :data:`REFERENCE_TIME_LIMIT`) and per fast-core run
        (default none).
    size_limits : dict, optional
        Per-backend reference size limits (default :data:`REFERENCE_SIZE_LIMITS`).
    memory : {"rss", "tracemalloc", None}
    command : str, optional
        The command line recorded in the index.

    Returns
    -------
    list of SpecReport

    Raises
    ------
    SpecError
        A spec is malformed (raised before anything runs).
    ValueError
        ``out_dir`` is not a directory, holds an input spec, or holds an entry the report would
        replace that no previous gtvcvx report wrote (or a symbolic link); raised before anything runs.
    """
    formats = _check_formats(formats)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a directory")
    spec_paths = find_specs(paths)
    if not spec_paths:
        raise ValueError(f"no *.toml spec found in {', '.join(map(str, paths))}")
    specs = [load_spec(p) for p in spec_paths]  # every spec is validated before anything runs
    _check_inputs_outside(out, spec_paths)
    _check_replaceable(out, _generated_entries(specs))
    t0 = time.perf_counter()
    used: set = set()
    reports = []
    plans = []
    for spec, path in zip(specs, spec_paths):
        task = task_for(spec)
        rep = SpecReport(name=sanitize_markdown(spec.name), slug=_slug(spec.name, used), path=_code_text(Path(path).as_posix()),
                         kind=task.kind,
                         description=sanitize_markdown(" ".join(str(getattr(spec, "description", "") or "").split())),
                         seed=getattr(spec, "seed", None), sizes=task.sizes(spec))
        reports.append(rep)
        plans.append(task.units(spec, solvers, size_limits))
    if progress is not None:
        progress.total = sum(plans)
    final = out
    with _staging(final) as out:
        _write_report(specs, reports, out, final, paths=paths, solvers=solvers, formats=formats,
                      progress=progress, scale=scale, time_limit=time_limit, size_limits=size_limits,
                      memory=memory, command=command, t0=t0)
    return reports


@contextmanager
def _report_lock(final: Path):
    """Refuse a concurrent run into ``final`` (a lock file), for the duration of the block."""
    final.mkdir(parents=True, exist_ok=True)
    lock = final / ".gtvcvx-report.lock"
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise ValueError(f"{final}: another gtvcvx report is being written here (remove {lock} if no run "
                         "is active)") from None
    try:
        yield
    finally:
        os.close(fd)
        lock.unlink(missing_ok=True)


#: Entries of a report directory that every report writes (besides its experiments' pages and folders).
_REPORT_ENTRIES = ("index.md", "index.html", "specs")


def _generated_entries(specs) -> set:
    """Names of the entries of the report directory a run of ``specs`` may write (known before it runs;
    ``index.*`` whatever the formats: a report directory's index pages are the report's)."""
    names = set(_REPORT_ENTRIES)
    for spec in specs:
        output = getattr(spec, "output", None)
        if output and Path(output).parts[0] not in RESERVED_NAMES and Path(output).name not in RESERVED_NAMES:
            names |= {Path(output).parts[0], Path(output).with_suffix("").parts[0]}
    return names


def _owned_entries(doc: dict) -> set:
    """Names of the entries of a report directory that the report whose results are ``doc`` wrote."""
    names = set(_REPORT_ENTRIES)
    for record in doc.get("specs") if isinstance(doc.get("specs"), list) else []:
        if not isinstance(record, dict):
            continue
        paths = [record.get(key) for key in ("experiment_dir", "experiment_page", "experiment_record")]
        for key in ("figures", "files"):
            paths += record.get(key) if isinstance(record.get(key), list) else []
        for path in paths:
            if isinstance(path, str) and path and not PurePosixPath(path).is_absolute():
                names.add(PurePosixPath(path).parts[0])
    return names - {".."}


def _previous_entries(final: Path) -> set:
    """Entries of ``final`` written by a previous gtvcvx report (none without its results file)."""
    path = final / RESULTS_FILE
    if path.is_symlink() or (final / "specs").is_symlink() or not path.is_file():
        return set()
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return set()
    if not isinstance(doc, dict) or doc.get("format") != RESULTS_FORMAT:
        return set()
    return _owned_entries(doc)


def _check_replaceable(final: Path, names) -> None:
    """Refuse to replace an entry of ``final`` that no previous gtvcvx report wrote, or a link."""
    _refuse_links(final, names)
    existing = sorted(name for name in names if (final / name).exists())
    if not existing:
        return
    previous = _previous_entries(final)
    for name in existing:
        if name not in previous:
            raise ValueError(f"--out {final}: {name} exists and was not written by gtvcvx report (no "
                             f"{RESULTS_FILE} of a previous report lists it); the report would replace it: "
                             "choose another --out directory or move it away")


def _refuse_links(root: Path, names) -> None:
    """Refuse symbolic links at or below the entries ``names`` of a report directory (the report
    would write through them, outside the directory)."""
    for name in sorted(names):
        top = root / name
        if top.is_symlink():
            raise ValueError(f"{top}: is a symbolic link; a report directory may not hold links (gtvcvx never "
                             "writes through them): remove it")
        if not top.is_dir():
            continue
        for folder, dirs, files in os.walk(top):  # links are listed, never followed
            for entry in dirs + files:
                if os.path.islink(os.path.join(folder, entry)):
                    raise ValueError(f"{os.path.join(folder, entry)}: is a symbolic link; a report directory may "
                                     "not hold links (gtvcvx never writes through them): remove it")


def _check_inputs_outside(out: Path, spec_paths) -> None:
    """Refuse an output directory that is, or holds, one of the input specs (a report replaces its entries)."""
    target = out.resolve()
    for path in spec_paths:
        path = Path(path)
        # the spec file itself (a link among the input specs too) and what it resolves to
        for spec in (path.parent.resolve() / path.name, path.resolve()):
            if spec == target or spec.is_relative_to(target):
                raise ValueError(f"--out {out}: holds the input spec {path}; write the report to a directory "
                                 "without input specs")


@contextmanager
def _staging(final: Path):
    """Build a report in a private sibling directory, then swap it into ``final``.

    Each entry the run generates (``index.*``, ``specs/``, experiment folders) replaces the one
    of the same name as a whole, so ``final`` never mixes two runs' files; other files there
    are left alone, and an existing entry is replaced only when a previous gtvcvx report wrote it
    (:func:`_check_replaceable`). A lock file refuses a concurrent run into the same directory; an
    interrupted run (Ctrl-C, error) leaves ``final`` as it was and removes its temporary folder.
    """
    with _report_lock(final):
        staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        try:
            staging.chmod(0o755)
            yield staging
            _check_replaceable(final, [entry.name for entry in staging.iterdir()])
            for entry in sorted(staging.iterdir()):
                dest = final / entry.name
                if dest.is_dir() and not dest.is_symlink():
                    old = Path(tempfile.mkdtemp(prefix=f".{entry.name}.old-", dir=final))
                    os.replace(dest, old / entry.name)
                    os.replace(entry, dest)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.replace(entry, dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _write_report(specs, reports, out, final, *, paths, solvers, formats, progress, scale, time_limit,
                  size_limits, memory, command, t0):
    """Run the specs and write every file of the report under ``out`` (the staging folder)."""
    ctx = ReportContext(out=out, solvers=solvers, formats=formats, progress=progress, scale=scale,
                        time_limit=time_limit, size_limits=size_limits, memory=memory, studies=StudyStore())
    for spec, rep in zip(specs, reports):
        s0 = time.perf_counter()
        try:
            _run_spec(spec, rep, ctx)
        except Exception as exc:  # noqa: BLE001 - one failing spec never stops the report
            rep.error = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
            if progress is not None:
                progress.note(f"{rep.name}: {rep.error}")
        rep.elapsed = time.perf_counter() - s0
    limits = dict(REFERENCE_SIZE_LIMITS if size_limits is None else size_limits)
    rule = SELECTION_RULE.format(limits=", ".join(f"{k} {v:,}" for k, v in limits.items()),
                                 time_limit=time_limit if time_limit is not None else REFERENCE_TIME_LIMIT)
    doc = {"format": RESULTS_FORMAT,
           "command": command or "gtvcvx report " + " ".join(map(str, paths)) + f" --out {final}",
           "environment": environment(), "selection_rule": rule, "scale": scale,
           "memory": next((r.memory for r in reports if r.memory), None),
           "seconds": round(time.perf_counter() - t0, 3), "specs": [_report_record(r) for r in reports]}
    atomic_write_text(out / RESULTS_FILE, json.dumps(doc, indent=1) + "\n")
    _render(out, doc, formats, site=final)


# ---------------------------------------------------------------------------------------
# results file -> pages
# ---------------------------------------------------------------------------------------
#: Where a report keeps its results (relative to the report directory) and the format tag inside.
RESULTS_FILE = "specs/results.json"
RESULTS_FORMAT = "gtvcvx-report-results/1"
_RECORD_FIELDS = ("name", "slug", "path", "kind", "description", "reference", "memory", "figures", "files",
                  "notes", "experiment_markdown", "experiment_dir", "experiment_record", "experiment_page", "measured",
                  "error")


def _report_record(rep: SpecReport) -> dict:
    """One spec's results as JSON-safe data (the table as column names plus rows)."""
    record = {key: getattr(rep, key) for key in _RECORD_FIELDS}
    record["measured"] = {k: json_value(v) for k, v in rep.measured.items()}
    record.update(seed=json_value(rep.seed), sizes={k: json_value(v) for k, v in rep.sizes.items()},
                  seconds=round(rep.elapsed, 3),
                  columns=None if rep.table is None else [str(c) for c in rep.table.columns],
                  rows=None if rep.table is None else records(rep.table))
    return record


def _number(value):
    """Undo :func:`json_value` for a table cell: ``None`` -> nan, ``"inf"`` / ``"-inf"`` -> floats."""
    if value is None:
        return float("nan")
    if isinstance(value, str) and value in ("inf", "-inf"):
        return float(value)
    return value


#: Record fields that hold text, text or null, and lists of paths relative to the report directory.
_TEXT_FIELDS = ("name", "slug", "path", "kind", "description", "experiment_markdown", "experiment_dir",
                "experiment_record", "experiment_page", "error")
_OPTIONAL_TEXT_FIELDS = ("reference", "memory")
_PATH_LIST_FIELDS = ("figures", "files")
#: A file name's longest length on common file systems (a spec's folder name).
_NAME_MAX = 255


def _is_scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _is_number(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _check_record(record: dict, where: str, out: Path) -> None:
    """Refuse a spec record of a results file whose fields have the wrong types (a hand-edited
    or foreign file), naming the field: ``<file>: specs[0].figures: expected a list of paths``."""
    def expect(ok: bool, key: str, expected: str):
        if not ok:
            value = record[key]
            raise ValueError(f"{where}.{key}: expected {expected}, got {type(value).__name__} "
                             f"{printable(repr(value)[:60])}")

    for key in _TEXT_FIELDS:
        if key in record:
            expect(isinstance(record[key], str), key, "a string")
    for key in _OPTIONAL_TEXT_FIELDS:
        if key in record:
            expect(record[key] is None or isinstance(record[key], str), key, "a string or null")
    slug = record.get("slug")
    if not isinstance(slug, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", slug) or slug.startswith("."):
        raise ValueError(f"{where}.slug: unsafe folder name {printable(repr(slug)[:60])} (expected letters, "
                         "digits and _.- not starting with '.')")
    if len(slug) > _NAME_MAX:
        raise ValueError(f"{where}.slug: expected a folder name of at most {_NAME_MAX} characters, got {len(slug)}")
    for key in _PATH_LIST_FIELDS:
        if key in record:
            expect(isinstance(record[key], list) and all(isinstance(p, str) for p in record[key]), key,
                   "a list of paths")
            for k, path in enumerate(record[key]):  # never read or link outside the report directory
                contained_path(path, out, f"{where}.{key}[{k}]")
    if "notes" in record:
        expect(isinstance(record["notes"], list) and all(isinstance(n, str) for n in record["notes"]), "notes",
               "a list of strings")
    for key in ("sizes", "measured"):
        if record.get(key) is not None:
            expect(isinstance(record[key], dict) and all(_is_scalar(v) for v in record[key].values()), key,
                   "an object of numbers")
    if "seed" in record:
        expect(_is_scalar(record["seed"]), "seed", "a number or null")
    if "seconds" in record:
        expect(_is_number(record["seconds"]), "seconds", "a number")
    if record.get("columns") is not None:
        expect(isinstance(record["columns"], list) and all(isinstance(c, str) for c in record["columns"]),
               "columns", "a list of column names")
    if record.get("rows") is not None:
        expect(isinstance(record["rows"], list)
               and all(isinstance(r, dict) and all(_is_scalar(v) for v in r.values()) for r in record["rows"]),
               "rows", "a list of objects of numbers and strings")
        columns = record.get("columns") or sorted({k for r in record["rows"] for k in r})
        missing = [c for c in ("solver", "status") if c not in columns]
        if record["rows"] and missing:
            raise ValueError(f"{where}.columns: expected the columns 'solver' and 'status', missing {missing}")


def _report_from_record(record: dict, where: str, out: Path) -> SpecReport:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected an object per spec")
    _check_record(record, where, out)
    rep = SpecReport(**{key: record[key] for key in _RECORD_FIELDS if key in record})  # _render reports a TypeError
    # a results file may come from someone else: sanitize again (the plain text first keeps our own
    # already-sanitized text unchanged: sanitize(plain_text(sanitize(x))) == sanitize(x))
    rep.name = sanitize_markdown(plain_text(rep.name))
    rep.description = sanitize_markdown(plain_text(rep.description))
    rep.seed = record.get("seed")
    rep.sizes = dict(record.get("sizes") or {})
    rep.elapsed = float(record.get("seconds") or 0.0)
    rep.measured = {k: _number(v) for k, v in (record.get("measured") or {}).items()}
    if record.get("rows") is not None:
        rows = [{k: _number(v) for k, v in row.items()} for row in record["rows"]]
        rep.table = pd.DataFrame(rows, columns=record.get("columns"))
    return rep


def _check_document(doc: dict, where: Path) -> None:
    """Refuse top-level fields of a results file with the wrong types, naming the field."""
    for key, ok, expected in (("environment", lambda v: v is None or isinstance(v, dict), "an object"),
                              ("command", lambda v: isinstance(v, str), "a string"),
                              ("selection_rule", lambda v: isinstance(v, str), "a string"),
                              ("scale", lambda v: v is None or isinstance(v, str), "a string"),
                              ("memory", lambda v: v is None or isinstance(v, str), "a string or null"),
                              ("seconds", _is_number, "a number")):
        if key in doc and not ok(doc[key]):
            raise ValueError(f"{where}: {key}: expected {expected}, got {type(doc[key]).__name__} "
                             f"{printable(repr(doc[key])[:60])}")


def _render(out: Path, doc: dict, formats, site: Path | None = None, *, studies: bool = False) -> list[SpecReport]:
    """Write every page and summary of the report in ``out`` from its results ``doc``.

    ``site`` is the report directory the pages will live in (``out`` unless ``out`` is a staging
    folder); the index looks there for files other commands wrote (``bench/``). ``studies``
    renders the experiments' text again from their study records (``gtvcvx render``).
    """
    specs = doc.get("specs")
    if not isinstance(specs, list):
        raise ValueError(f"{out / RESULTS_FILE}: 'specs' must be a list")
    _check_document(doc, out / RESULTS_FILE)
    reports = []
    for i, record in enumerate(specs):
        where = f"{out / RESULTS_FILE}: specs[{i}]"
        try:
            reports.append(_report_from_record(record, where, out))
        except (TypeError, AttributeError, KeyError) as exc:  # a hand-edited or foreign file
            raise ValueError(f"{where}: not a spec record ({type(exc).__name__}: {exc})") from None
    if studies:
        for rep in reports:
            rerender_experiment(rep, out, formats)
    env = dict(doc.get("environment") or {})
    command, rule = str(doc.get("command", "")), str(doc.get("selection_rule", ""))
    if "md" in formats:
        for rep in reports:
            atomic_write_text(out / "specs" / rep.slug / "report.md", _spec_markdown(rep, link_prefix="../../", level=1))
    summary = _summary_rows(reports)
    if "csv" in formats and len(summary):
        atomic_write_text(out / "specs" / "summary.csv", csv_cells(summary).to_csv(index=False, float_format="%.17g"))
    if "json" in formats:
        public = {"command": command, "environment": env, "selection_rule": rule, "scale": doc.get("scale"),
                  "memory": doc.get("memory"),
                  "specs": [{key: r.get(key) for key in ("name", "path", "kind", "seed", "sizes", "reference", "rows",
                                                         "measured", "files", "notes", "error", "seconds")}
                            for r in specs]}
        for record in public["specs"]:
            record["rows"] = record["rows"] or []
        atomic_write_text(out / "specs" / "report.json", json.dumps(public, indent=1) + "\n")
    if "md" in formats or "html" in formats:
        index_md = _index_markdown(reports, env, command=command, elapsed=float(doc.get("seconds") or 0.0),
                                   memory=doc.get("memory"), rule=rule, root=out,
                                   scale=str(doc.get("scale") or "default"), site=site or out)
        if "md" in formats:
            atomic_write_text(out / "index.md", index_md)
        if "html" in formats:
            atomic_write_text(out / "index.html", html_page("gtvcvx report", markdown_to_html(index_md, base=out)))
    return reports


def render_report(out_dir, formats=FORMATS) -> list[SpecReport]:
    """Re-render the pages of a report directory from its results file, without solving.

    Experiments that left a study record (the GTV paper's studies) get their text rendered
    again from it (:func:`gtvcvx.experiments.render_record`); the others keep the text their
    run wrote.

    Parameters
    ----------
    out_dir : path
        A directory written by :func:`build_report` (it holds ``specs/results.json``).
    formats : sequence of str
        Among :data:`FORMATS`; the pages and summaries to write again.

    Returns
    -------
    list of SpecReport
        The records read back.

    Raises
    ------
    ValueError
        No results file, or one that is not a gtvcvx report's (or has fields of the wrong
        types), a study record that cannot be read or lies outside the report directory, or a
        symbolic link among the entries the pages are written into.
    """
    formats = _check_formats(formats)
    out = Path(out_dir)
    path = out / RESULTS_FILE
    _refuse_links(out, _REPORT_ENTRIES)  # before reading: specs/ must not lead elsewhere
    if not path.is_file():
        raise ValueError(f"{path}: no results file (write the report first with `gtvcvx report ... --out {out}`)")
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not readable as JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != RESULTS_FORMAT:
        raise ValueError(f"{path}: expected a gtvcvx report results file (format {RESULTS_FORMAT!r})")
    with _report_lock(out):
        pages = [r.get("experiment_page") for r in doc.get("specs") or [] if isinstance(r, dict)]
        _refuse_links(out, {PurePosixPath(page).parts[0] for page in pages if isinstance(page, str) and page
                            and not PurePosixPath(page).is_absolute()} - {".."})  # the pages render writes
        return _render(out, doc, formats, studies=True)
