"""Rendering helpers shared by every task: tables (Markdown, CSV, JSON), HTML pages and figures.

* :mod:`gtvcvx.render.tables` - the one table writer (compact numbers, Markdown, CSV/JSON files);
* :mod:`gtvcvx.render.html` - Markdown to self-contained, escaped HTML (input may be untrusted);
* :mod:`gtvcvx.render.plots` - convergence, clusterpath and decision-boundary figures
  (matplotlib is imported lazily);
* :mod:`gtvcvx.render.paper` - the text of the GTV paper's studies, from their study records.

Renderers read results (tables, arrays, result files); they never solve anything.
"""

from .tables import format_number, json_value, markdown_table, records, write_table

__all__ = ["format_number", "json_value", "markdown_table", "records", "write_table"]
