"""The task protocol and its registry: one object per spec kind.

A *task* knows one kind of spec (``kind = "gtv"``, ``"rkhs"``, ``"experiment"``, ...). It
loads the spec, runs solvers on it, measures the results (certified gaps, accuracy against
ground truth), evaluates the spec's ``[check]`` thresholds and renders its part of a report.
``gtvcvx solve``, ``check``, ``report`` and ``bench`` dispatch through :func:`task_for`, so no
layer above this one switches on the kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..spec import SpecError, allow_outside_paths, read_spec_document

__all__ = ["Task", "SpecReport", "ReportContext", "TASKS", "register_task", "get_task", "task_for", "load_spec",
           "DEFAULT_KIND"]

#: Kind of a spec without a ``kind`` key.
DEFAULT_KIND = "gtv"

#: Every registered task, by kind.
TASKS: dict[str, "Task"] = {}


@dataclass
class SpecReport:
    """One spec's part of a report: what its task ran and measured, and the files it wrote."""

    name: str
    slug: str
    path: str
    kind: str
    description: str = ""
    seed: object = None
    sizes: dict = field(default_factory=dict)
    table: pd.DataFrame | None = None
    reference: str | None = None
    memory: str | None = None
    figures: list = field(default_factory=list)  # paths relative to the output directory
    files: list = field(default_factory=list)  # paths relative to the output directory
    notes: list = field(default_factory=list)
    experiment_markdown: str = ""
    experiment_dir: str = ""  # where the experiment wrote its figures, relative to the output directory
    experiment_record: str = ""  # its study record (re-rendered by `gtvcvx render`), relative to the output directory
    experiment_page: str = ""  # the spec's ``output`` page, relative to the output directory
    measured: dict = field(default_factory=dict)
    error: str = ""
    elapsed: float = 0.0


@dataclass
class ReportContext:
    """How ``gtvcvx report`` asks a task to run and write one spec."""

    out: Path
    solvers: tuple | None = None
    formats: tuple = ("md", "csv", "html", "json")
    progress: object = None
    scale: str = "default"
    time_limit: float | None = None
    size_limits: dict | None = None
    memory: str | None = "rss"
    #: Study records of this run, shared by its experiment specs (see :class:`gtvcvx.experiments.StudyStore`).
    studies: object = None

    def relpath(self, path) -> str:
        """``path`` relative to the report directory, with forward slashes."""
        return Path(path).resolve().relative_to(self.out.resolve()).as_posix()


class Task:
    """What every spec kind provides. Subclasses set :attr:`kind` and implement the methods.

    Methods
    -------
    load(path, doc)
        The spec object of a parsed TOML document (errors are :class:`~gtvcvx.spec.SpecError`).
    solve(spec, solver, **options)
        One solver run: a result with ``status, primal, dual, gap, rel_gap``, times and ``to_row``.
    summarize(spec, result)
        The fields ``gtvcvx solve`` prints, as an ordered dictionary.
    units(spec, solvers, size_limits)
        How many progress steps a report of the spec takes.
    write_section(spec, rep, spec_dir, ctx)
        Run the spec for a report and write its files (tables, figures) under ``spec_dir``.
    validate_checks(spec, checks)
        Raise :class:`~gtvcvx.spec.SpecError` for a threshold that cannot be computed.
    check(spec, checks, outcome, **options)
        Run the spec and append :class:`~gtvcvx.tasks.checks.CheckOutcome` s to ``outcome``.
    sizes(spec)
        Facts about the instance shown in reports (``n``, ``d``, ...).
    """

    kind: str = ""
    #: One line saying what the kind is, for listings and error messages.
    description: str = ""

    def load(self, path: Path, doc: dict):
        raise NotImplementedError

    def solve(self, spec, solver: str = "fast", **options):
        raise ValueError(f"{spec.path}: a '{self.kind}' spec is not one problem; run it with 'gtvcvx report' "
                         "or 'gtvcvx check'")

    def certified(self, spec, result):
        """``result`` with a certified dual bound and gap (solvers that certify return it as is)."""
        return result

    def summarize(self, spec, result) -> dict:
        return {"spec": spec.name, "path": str(spec.path), **result.to_row()}

    def units(self, spec, solvers=None, size_limits=None) -> int:
        return 1

    def write_section(self, spec, rep: SpecReport, spec_dir: Path, ctx: ReportContext) -> None:
        raise NotImplementedError

    def validate_checks(self, spec, checks: dict) -> None:
        return None

    def check(self, spec, checks: dict, outcome, **options) -> None:
        raise NotImplementedError

    def sizes(self, spec) -> dict:
        return {}


def register_task(task: Task) -> Task:
    """Add ``task`` to :data:`TASKS` under ``task.kind`` (a kind is registered once)."""
    if not task.kind:
        raise ValueError(f"{type(task).__name__} has no kind")
    if task.kind in TASKS and type(TASKS[task.kind]) is not type(task):
        raise ValueError(f"spec kind {task.kind!r} is already registered by {type(TASKS[task.kind]).__name__}")
    TASKS[task.kind] = task
    return task


def get_task(kind: str) -> Task:
    """The task of a spec kind; ValueError naming the known kinds otherwise."""
    if kind not in TASKS:
        raise ValueError(f"unknown spec kind {kind!r}; expected one of {sorted(TASKS)}")
    return TASKS[kind]


def task_for(spec) -> Task:
    """The task of a loaded spec (by its ``kind`` attribute)."""
    return get_task(getattr(spec, "kind", DEFAULT_KIND))


def load_spec(path, *, allow_outside: bool | None = None):
    """Read a TOML spec of any kind and build it (problem, data, solve options, checks).

    Parameters
    ----------
    path : path-like
        The spec file. Its ``kind`` key (default ``"gtv"``) selects the task that reads it.
    allow_outside : bool, optional
        Let the spec name data files outside its own folder (refused by default, since specs
        may be untrusted; see :func:`gtvcvx.spec.allow_outside_paths`).

    Returns
    -------
    Spec, RKHSSpec or ExperimentSpec

    Raises
    ------
    SpecError
        A ``ValueError`` whose message names the file, the key and what was expected.

    Examples
    --------
    >>> import gtvcvx
    >>> spec = gtvcvx.load_spec("problems/quick/sbm_nlasso.toml")  # doctest: +SKIP
    >>> result = gtvcvx.solve_spec(spec)  # doctest: +SKIP
    """
    if allow_outside is not None:
        with allow_outside_paths(allow_outside):
            return load_spec(path)
    path = Path(path)
    doc = read_spec_document(path)
    kind = doc.get("kind", DEFAULT_KIND)
    if kind not in TASKS:
        raise SpecError(path, "kind", f"expected one of {sorted(TASKS)}, got {kind!r}")
    return TASKS[kind].load(path, doc)
