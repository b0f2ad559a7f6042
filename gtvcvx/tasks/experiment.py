"""The ``kind = "experiment"`` task: a named study from :mod:`gtvcvx.experiments`.

A study runs many solves and writes its own tables, figures and Markdown; its ``[check]``
thresholds ``max_<name>`` / ``min_<name>`` bound the values it measured.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import experiments
from .._validation import contained_path
from ..io import atomic_write_text
from ..render.html import sanitize_markdown
from ..render.markdown import rebase_markdown
from ..render.tables import json_value
from ..spec import SpecError, Table
from ._base import ReportContext, SpecReport, Task, register_task
from .checks import ERROR, CheckOutcome, compare_threshold, experiment_threshold

__all__ = ["ExperimentSpec", "ExperimentTask", "run_experiment", "rerender_experiment", "write_experiment_pages",
           "RESERVED_NAMES"]

#: Names in a report directory an experiment's ``output`` may not take.
RESERVED_NAMES = ("index.md", "index.html", "README.md", "specs")


@dataclass
class ExperimentSpec:
    """A ``kind = "experiment"`` spec: a named study from :mod:`gtvcvx.experiments` and its parameters."""

    name: str
    path: Path
    experiment: str
    params: dict = field(default_factory=dict)
    checks: dict = field(default_factory=dict)
    description: str = ""
    config: dict = field(default_factory=dict)
    kind: str = "experiment"
    #: Optional file name (relative to the report directory) where ``gtvcvx report`` also
    #: writes the experiment's Markdown, e.g. ``"paper.md"`` for the paper reproduction.
    output: str | None = None


def run_experiment(spec: ExperimentSpec, out_dir, *, scale: str = "default", studies=None):
    """Run an experiment spec's function with its params at ``scale`` (one of
    :data:`gtvcvx.experiments.SCALES`), writing its files into ``out_dir``.

    ``studies`` (a :class:`~gtvcvx.experiments.StudyStore`) is shared by the specs of one run.
    Returns the :class:`~gtvcvx.experiments.ExperimentOutput`.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    function = experiments.get_experiment(spec.experiment)
    return function(dict(spec.params), out_dir, scale=experiments.check_scale(scale), studies=studies)


class ExperimentTask(Task):
    """Studies: many solves, their own tables, figures and text."""

    kind = "experiment"
    description = "a named study from gtvcvx.experiments (paper reproductions, sweeps)"
    comparable = False
    overridable_gap = False

    def load(self, path, doc) -> ExperimentSpec:
        path = Path(path)
        top = Table(path, "", doc)
        top.used.add("kind")
        name = top.str("name", path.stem)
        description = top.str("description", "")
        experiment = top.str("experiment", choices=sorted(experiments.registry()))
        output = top.str("output") if top.has("output") else None
        if output is not None and (Path(output).is_absolute() or ".." in Path(output).parts
                                   or not output.endswith(".md")):
            raise SpecError(path, "output", f"expected a relative Markdown file name such as 'paper.md', got {output!r}")
        params = top.raw("params", {})
        if not isinstance(params, dict):
            raise SpecError(path, "params", "expected a table")
        protocol = experiments.protocol_of(experiment)
        if protocol is not None:  # (before anything runs; a study of several is checked when it runs)
            try:
                experiments.check_params(protocol, params, context=f"experiment {experiment!r}")
            except ValueError as exc:
                raise SpecError(path, "params", str(exc)) from None
        checks = top.raw("check", {})
        if not isinstance(checks, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                   for v in checks.values()):
            raise SpecError(path, "check", "expected a table of numeric thresholds")
        top.finish()
        return ExperimentSpec(name=name, path=path, experiment=experiment, params=params, checks=dict(checks),
                              description=description, config=doc, output=output)

    def validate_checks(self, spec, checks: dict) -> None:
        for key in checks:
            try:
                experiment_threshold(key)
            except ValueError as exc:
                raise SpecError(spec.path, f"check.{key}", str(exc)) from None

    def check(self, spec, checks: dict, outcome, *, scale="default", out_dir=None, studies=None, **_) -> None:
        outcome.solver = f"experiment {spec.experiment}"
        if out_dir is None:  # its files vanish with the directory: nothing for a later summary to reuse
            with tempfile.TemporaryDirectory(prefix="gtvcvx-check-") as tmp:
                output = run_experiment(spec, Path(tmp), scale=scale)
        else:
            output = run_experiment(spec, Path(out_dir), scale=scale, studies=studies)
        outcome.status = "ran"
        measured = output.measured or {}
        for key, threshold in checks.items():
            name, op = experiment_threshold(key)
            if name not in measured:
                outcome.outcomes.append(CheckOutcome(key, None, threshold, op, ERROR,
                                                     f"the experiment measured no {name!r}; it measured "
                                                     f"{sorted(measured)}"))
                continue
            outcome.outcomes.append(compare_threshold(key, float(measured[name]), threshold, op))

    def write_section(self, spec, rep: SpecReport, spec_dir: Path, ctx: ReportContext) -> None:
        """Run the study. Its figures go to ``OUT/<stem>/`` when the spec names an ``output``
        page ``<stem>.md``, else to
        ``OUT/specs/<name>/``; its tables, measured values and Markdown to ``OUT/specs/<name>/``."""
        out, formats = ctx.out, ctx.formats
        target = spec.output
        if target and (Path(target).parts[0] in RESERVED_NAMES or Path(target).name in RESERVED_NAMES):
            rep.notes.append(f"output {target!r} would overwrite the report's own files; not written")
            target = None
        exp_dir = (out / Path(target).with_suffix("")) if target else spec_dir
        if ctx.progress is not None:
            ctx.progress.start(f"{rep.name}: experiment {spec.experiment}")
        try:
            exp_dir.mkdir(parents=True, exist_ok=True)
            output = run_experiment(spec, exp_dir, scale=ctx.scale, studies=ctx.studies)
        finally:
            if ctx.progress is not None:
                ctx.progress.advance()
        rep.experiment_dir = ctx.relpath(exp_dir)
        rep.experiment_page = target or ""
        rep.experiment_markdown = f"## {output.title}\n\n{output.markdown.strip()}\n"
        rep.measured = {k: json_value(v) for k, v in (output.measured or {}).items()}
        if output.record is not None:  # its tables are CSV files next to the record (StudyRecord.save)
            rep.experiment_record = ctx.relpath(output.record)
            rep.files += [rep.experiment_record] + [
                ctx.relpath(output.record.with_name(f"{output.record.stem}.{key}.csv")) for key in output.tables]
        else:
            for key, df in (output.tables or {}).items():
                stem = spec_dir / re.sub(r"[^A-Za-z0-9_.-]+", "_", str(key))
                if "csv" in formats:
                    atomic_write_text(stem.with_suffix(".csv"), df.to_csv(index=False, float_format="%.17g"))
                    rep.files.append(ctx.relpath(stem.with_suffix(".csv")))
        if "json" in formats:
            atomic_write_text(spec_dir / "measured.json", json.dumps(rep.measured, indent=1, sort_keys=True) + "\n")
            rep.files.append(ctx.relpath(spec_dir / "measured.json"))
        rep.files += write_experiment_pages(rep, out, formats)
        for fig in output.figures or []:
            fig = Path(fig)
            if not fig.is_absolute() and not fig.is_file():  # relative to the experiment's directory
                fig = exp_dir / fig
            if fig.is_file() and fig.suffix.lower() in (".png", ".jpg", ".jpeg", ".gif", ".svg"):
                rel = ctx.relpath(fig)
                if rel not in rep.figures:
                    rep.figures.append(rel)


def write_experiment_pages(rep: SpecReport, out: Path, formats) -> list[str]:
    """Write an experiment spec's ``specs/<slug>/experiment.md`` and its ``output`` page from
    ``rep.experiment_markdown``; the files written, relative to ``out``."""
    if "md" not in formats or not rep.experiment_markdown:
        return []
    written = []
    spec_dir = out / "specs" / rep.slug
    # (a results file may come from someone else: inert like every other field, the study's figures kept)
    markdown = sanitize_markdown(rep.experiment_markdown, keep_images=True)
    page = markdown  # links relative to the experiment's directory
    if rep.experiment_dir != f"specs/{rep.slug}":
        page = rebase_markdown(page, "../../" + rep.experiment_dir)
    atomic_write_text(spec_dir / "experiment.md", page)
    written.append(f"specs/{rep.slug}/experiment.md")
    if rep.experiment_page:
        title, _, body = markdown.partition("\n")
        prefix = "../" * (len(Path(rep.experiment_page).parts) - 1) + rep.experiment_dir
        atomic_write_text(out / rep.experiment_page,
                          f"# {title.lstrip('#').strip()}\n\n" + rebase_markdown(body.strip(), prefix) + "\n")
        written.append(rep.experiment_page)
    return written


def rerender_experiment(rep: SpecReport, out: Path, formats) -> None:
    """Render an experiment spec's text again from its study record and rewrite its pages.

    Does nothing for an experiment without a record (its text is kept as the run wrote it).

    Raises
    ------
    ValueError
        The record path leaves the report directory, or the record cannot be read.
    """
    if not rep.experiment_record:
        return
    out = Path(out)
    for key in ("experiment_record", "experiment_dir", "experiment_page"):
        rel = getattr(rep, key)
        try:
            if rel:  # a results file may come from someone else: no way out of the report directory
                contained_path(rel, out, key)
        except ValueError as exc:
            raise ValueError(f"spec {rep.name!r}: path {rel!r} leaves the report directory ({exc})") from None
    if rep.experiment_page and not rep.experiment_page.endswith(".md"):
        raise ValueError(f"spec {rep.name!r}: output page {rep.experiment_page!r} is not a Markdown file")
    record = experiments.StudyRecord.load(out / rep.experiment_record)
    rep.experiment_markdown = f"## {record.title}\n\n{experiments.render_record(record).strip()}\n"
    write_experiment_pages(rep, out, formats)


register_task(ExperimentTask())
