"""``gtvcvx render DIR``: write a report's pages again from its results file, without solving.

``gtvcvx report`` keeps every number it measured in ``DIR/specs/results.json``; this command
rebuilds ``index.md``, ``index.html``, the per-spec pages and the summaries from it (e.g. in
another format, or after a renderer fix). Exit codes: 0 done, 2 no usable results file (missing,
a field of the wrong type, named in the message) or a symbolic link where the pages are written.
"""

from __future__ import annotations

import sys

from .report import _split

NAME = "render"
HELP = "re-render a report directory's pages from its results file (no solving)"


def add_arguments(parser) -> None:
    parser.add_argument("out", metavar="DIR", help="a directory written by `gtvcvx report --out DIR`")
    parser.add_argument("--format", action="append", metavar="LIST", dest="formats",
                        help="comma-separated output formats among md,csv,html,json (default: all)")
    parser.add_argument("--quiet", action="store_true", help="no summary line")


def run(args) -> int:
    from ..report import FORMATS, render_report

    formats = _split(args.formats) or list(FORMATS)
    reports = render_report(args.out, formats)
    if not args.quiet:
        print(f"gtvcvx render: {len(reports)} spec(s) in {args.out} ({', '.join(formats)})", file=sys.stderr)
    return 0
