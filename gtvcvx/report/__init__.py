"""``gtvcvx report``: run every spec through its task and write the report (Markdown, CSV, JSON, HTML).

* :func:`build_report` - what ``gtvcvx report`` runs: every spec, per-spec tables and figures,
  an index page;
* :func:`render_report` - what ``gtvcvx render`` runs: the pages again from a report's results file,
  without solving;
* :func:`compare` - one pandas row per solver with certified gaps, errors against the best
  certified solution, accuracy against ground truth, times and peak memory (from
  :mod:`gtvcvx.tasks.compare`);
* :func:`run_experiment` - run a ``kind = "experiment"`` spec.
"""

from ..memory import MemoryMeter
from ..tasks.compare import (DEFAULT_SOLVERS, REFERENCE_SIZE_LIMITS, REFERENCE_TIME_LIMIT, Comparison, compare,
                             problem_size, run_comparison, select_solvers)
from ..tasks.gtv import truth_metrics
from .build import FORMATS, SpecReport, build_report, markdown_table, render_report, run_experiment

__all__ = ["compare", "run_comparison", "Comparison", "select_solvers", "problem_size", "truth_metrics",
           "MemoryMeter", "build_report", "render_report", "run_experiment", "SpecReport", "markdown_table", "FORMATS",
           "DEFAULT_SOLVERS", "REFERENCE_SIZE_LIMITS", "REFERENCE_TIME_LIMIT"]
