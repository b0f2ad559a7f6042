"""Compare solvers on specs and write reports (Markdown, CSV, JSON, self-contained HTML).

* :func:`compare` - one pandas row per solver with certified gaps, errors against the best
  certified solution, accuracy against ground truth, times and peak memory;
* :func:`build_report` - what ``gtvcvx report`` runs: every spec, per-spec tables and figures,
  an index page;
* :func:`run_experiment` - run a ``kind = "experiment"`` spec.
"""

from .build import FORMATS, SpecReport, build_report, markdown_table, run_experiment
from .compare import (DEFAULT_SOLVERS, REFERENCE_SIZE_LIMITS, REFERENCE_TIME_LIMIT, Comparison, MemoryMeter,
                      compare, problem_size, run_comparison, select_solvers, truth_metrics)

__all__ = ["compare", "run_comparison", "Comparison", "select_solvers", "problem_size", "truth_metrics",
           "MemoryMeter", "build_report", "run_experiment", "SpecReport", "markdown_table", "FORMATS",
           "DEFAULT_SOLVERS", "REFERENCE_SIZE_LIMITS", "REFERENCE_TIME_LIMIT"]
