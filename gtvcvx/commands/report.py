"""``gtvcvx report SPEC_OR_DIR... --out DIR``: compare solvers on every spec and write a report.

Exit codes: 0 every spec ran (a solver that failed is a row of the report, not an error),
1 some spec could not be run (its section says why), 2 bad input or usage.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from .._text import printable
from ._scale import add_scale_arguments, scale_of

NAME = "report"
HELP = ("run every spec (solver comparison, experiments) and write Markdown/CSV/JSON tables, convergence "
        "plots and a self-contained HTML index")


def _split(values) -> list[str]:
    out = []
    for value in values or []:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return out


def check_output_path(value, option: str, *, directory: bool = False) -> None:
    """Refuse an output path that cannot be written, before anything runs (one line naming ``option``).

    Parameters
    ----------
    value : str or Path
        The path given on the command line.
    option : str
        The option it came from, for the message (e.g. ``"--junit"``).
    directory : bool
        Whether ``value`` names a directory (``--out``) rather than a file.

    Raises
    ------
    ValueError
        ``value`` is a directory where a file is expected (or the reverse), or one of its
        parents exists and is not a directory.
    """
    path = Path(value)
    if directory and path.exists() and not path.is_dir():
        raise ValueError(f"{option} {value}: exists and is not a directory")
    if not directory and path.is_dir():
        raise ValueError(f"{option} {value}: is a directory, expected a file path")
    for parent in path.parents:  # the nearest existing parent must be a directory
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise ValueError(f"{option} {value}: {parent} exists and is not a directory")
            break


def add_arguments(parser) -> None:
    parser.add_argument("--allow-outside", action="store_true",
                        help="let specs read data files outside their own folder (refused by default: "
                             "specs may be untrusted)")
    parser.add_argument("paths", nargs="+", metavar="SPEC_OR_DIR", help="TOML specs or directories of specs")
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--solvers", action="append", metavar="LIST",
                        help="comma-separated solvers to run on every spec, e.g. fast,CLARABEL,SCS "
                             "(default: fast always; CVXPY references below a size limit)")
    parser.add_argument("--format", action="append", metavar="LIST", dest="formats",
                        help="comma-separated output formats among md,csv,html,json (default: all)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_scale_arguments(parser)
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="time limit per solver run (default: 300 s for CVXPY references, none for fast)")
    parser.add_argument("--max-reference-size", type=int, default=None, metavar="N",
                        help="run CVXPY references on instances of size n d + |E| d + samples <= N "
                             "(default: CLARABEL 100000, SCS 50000)")
    parser.add_argument("--memory", choices=("rss", "tracemalloc", "none"), default="rss",
                        help="how peak memory is measured (default: rss)")


def _command_line(args) -> str:
    """The command line that reproduces this report (recorded in the index)."""
    parts = ["gtvcvx", "report", *map(str, args.paths), "--out", str(args.out)]
    if args.solvers:
        parts += ["--solvers", ",".join(_split(args.solvers))]
    if args.formats:
        parts += ["--format", ",".join(_split(args.formats))]
    if scale_of(args) != "default":
        parts.append(f"--{scale_of(args)}")
    if getattr(args, "allow_outside", False):
        parts.append("--allow-outside")
    if args.time_limit is not None:
        parts += ["--time-limit", f"{args.time_limit:g}"]
    if args.max_reference_size is not None:
        parts += ["--max-reference-size", str(args.max_reference_size)]
    if args.memory != "rss":
        parts += ["--memory", args.memory]
    return " ".join(shlex.quote(p) for p in parts)


def run(args) -> int:
    from ..spec import allow_outside_paths

    with allow_outside_paths(getattr(args, "allow_outside", False)):
        return _run(args)


def _run(args) -> int:
    from ..progress import Progress
    from ..reference import installed_backends
    from ..report import FORMATS, build_report
    from ..tasks.compare import DEFAULT_SOLVERS

    solvers = _split(args.solvers) or None
    if solvers:
        installed = installed_backends()
        for solver in solvers:
            if solver.lower() != "fast" and solver.upper() not in installed:
                raise ValueError(f"--solvers: {solver!r} is neither 'fast' nor an installed CVXPY backend "
                                 f"({', '.join(installed)})")
    formats = _split(args.formats) or list(FORMATS)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"--format: unknown format(s) {unknown}; expected some of {','.join(FORMATS)}")
    if args.time_limit is not None and not args.time_limit > 0:
        raise ValueError(f"--time-limit must be positive, got {args.time_limit}")
    size_limits = None
    if args.max_reference_size is not None:
        if args.max_reference_size < 0:
            raise ValueError(f"--max-reference-size must be >= 0, got {args.max_reference_size}")
        size_limits = {s: args.max_reference_size for s in DEFAULT_SOLVERS if s != "fast"}
    check_output_path(args.out, "--out", directory=True)
    command = _command_line(args)
    progress = Progress(0, enabled=not args.quiet)
    with progress:
        reports = build_report(args.paths, args.out, solvers=solvers, formats=formats, progress=progress,
                               scale=scale_of(args), time_limit=args.time_limit, size_limits=size_limits,
                               memory=None if args.memory == "none" else args.memory, command=command)
    failed = [r for r in reports if r.error]
    if not args.quiet:
        written = [f for f in ("index.md", "index.html") if (f[-4:] == "html" and "html" in formats)
                   or (f[-2:] == "md" and "md" in formats)]
        print(f"gtvcvx report: {len(reports)} spec(s) -> {args.out}"
              + (f" ({', '.join(written)})" if written else ""), file=sys.stderr)
    for rep in failed:
        print(printable(f"gtvcvx report: {rep.path}: {rep.error}"), file=sys.stderr)
    return 1 if failed else 0
