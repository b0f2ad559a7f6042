"""The one table writer: compact numbers, Markdown tables, and CSV/JSON table files.

Every Markdown table of gtvcvx (reports, experiments, benchmarks) is written by
:func:`markdown_table`, and every table file by :func:`write_table`, so numbers look the same
everywhere and CSV files keep full precision (``%.17g``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import numpy as np

from .html import sanitize_markdown

__all__ = ["format_number", "json_value", "records", "markdown_table", "write_table", "csv_cells", "TABLE_FORMATS"]

#: File formats :func:`write_table` writes.
TABLE_FORMATS = ("csv", "json", "md")


def format_number(value, digits: int = 4, *, nan: str = "") -> str:
    """Compact text of one cell: ``nan`` -> ``nan`` argument, floats with ``digits`` significant digits.

    Integers (and floats that are integers below 1e6) print without a decimal point, booleans
    as ``yes`` / empty, infinities as ``inf`` / ``-inf``; anything else through ``str``.
    """
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else ""
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return nan
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value == int(value) and abs(value) < 1e6:
            return str(int(value))
        return f"{value:.{digits}g}"
    return str(value)


def json_value(value):
    """A JSON-safe scalar: numpy scalars to Python, ``nan`` to ``None``, infinities to ``"inf"``."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else (None if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


def records(table) -> list[dict]:
    """Rows of a DataFrame (or a list of dicts) as JSON-safe dictionaries."""
    rows = table.to_dict(orient="records") if hasattr(table, "to_dict") else list(table)
    return [{k: json_value(v) for k, v in row.items()} for row in rows]


def markdown_table(table, columns=None, digits: int = 4, *, nan: str = "",
                   decorate: Callable[[str, object, dict], str | None] | None = None, sanitize: bool = False) -> str:
    """A Markdown table of a DataFrame or a list of dicts, with compact numbers.

    Parameters
    ----------
    table : pandas.DataFrame or list of dict
    columns : list of str, optional
        Columns to show, in order (missing ones are dropped); default all.
    digits : int
        Significant digits of floats (:func:`format_number`).
    nan : str
        Text of a missing number (default empty).
    decorate : callable, optional
        ``decorate(column, value, row)`` returns the cell text, or None for the default.
    sanitize : bool
        Untrusted cells: every text value goes through
        :func:`~gtvcvx.render.html.sanitize_markdown` (no raw HTML, no unsafe links) before
        ``decorate`` and formatting; column names too.

    Notes
    -----
    Cell text is escaped for Markdown tables (``|`` and newlines), so values cannot break
    the table or inject markup rows.
    """
    rows = records_of(table)
    if not rows:
        return "(no rows)"
    present = list(dict.fromkeys(k for r in rows for k in r))
    columns = [c for c in (columns or present) if c in present]
    header = [sanitize_markdown(c) if sanitize else str(c) for c in columns]
    lines = ["| " + " | ".join(h.replace("|", "\\|").replace("\n", " ") for h in header) + " |",
             "|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for c in columns:
            value = row.get(c)
            if sanitize and isinstance(value, str):
                value = sanitize_markdown(value)
            text = decorate(c, value, row) if decorate is not None else None
            if text is None:
                text = format_number(value, digits, nan=nan)
            cells.append(str(text).replace("|", "\\|").replace("\n", " "))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def records_of(table) -> list[dict]:
    """Rows of a DataFrame or list of dicts as plain dictionaries (values untouched)."""
    if table is None:
        return []
    if hasattr(table, "to_dict"):
        return table.to_dict(orient="records")
    return list(table)


#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP "CSV injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cells(df):
    """A copy of DataFrame ``df`` whose text cells cannot run as spreadsheet formulas.

    A text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a
    leading ``'`` (OWASP's advice against CSV injection); numbers are unchanged.
    """
    def inert(value):
        return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_STARTS) else value

    df = df.copy()
    for column in df.columns:
        if df[column].dtype == object or str(df[column].dtype) in ("string", "str"):
            df[column] = df[column].map(inert)
    return df


def write_table(table, stem, formats=("csv",)) -> list[Path]:
    """Write ``table`` as ``stem.csv`` / ``stem.json`` / ``stem.md`` for the requested formats.

    CSV keeps full float precision (``%.17g``) and its text cells cannot run as spreadsheet
    formulas (:func:`csv_cells`); JSON holds :func:`records`. Files are written atomically and
    are readable by others (mode 0644 under a normal umask).
    """
    import pandas as pd

    from ..io import atomic_write_text

    df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(records_of(table))
    stem = Path(stem)
    written = []
    if "csv" in formats:
        atomic_write_text(stem.with_suffix(".csv"), csv_cells(df).to_csv(index=False, float_format="%.17g"))
        written.append(stem.with_suffix(".csv"))
    if "json" in formats:
        atomic_write_text(stem.with_suffix(".json"), json.dumps(records(df), indent=1) + "\n")
        written.append(stem.with_suffix(".json"))
    if "md" in formats:
        atomic_write_text(stem.with_suffix(".md"), markdown_table(df) + "\n")
        written.append(stem.with_suffix(".md"))
    return written
