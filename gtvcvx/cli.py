"""The ``gtvcvx`` command line: ``gtvcvx solve | report | check | bench``.

Exit codes: 0 success, 1 a solve or check failed, 2 bad input or usage (one line on stderr,
no traceback unless ``--debug``).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import pkgutil
import sys

from . import commands
from ._text import printable

__all__ = ["main", "build_parser", "run"]

#: Exit code after Ctrl-C (128 + SIGINT), as shells report it.
EXIT_INTERRUPTED = 130


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{commands.__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="gtvcvx", description="Convex optimization over networks of local datasets, with certificates.")
    parser.add_argument("--version", action="version", version=f"gtvcvx {__version__}")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in _command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def run() -> None:
    """The process entry point (the ``gtvcvx`` console script and ``python -m gtvcvx``).

    :func:`main` with its exit code; after Ctrl-C the process ends through ``os._exit(130)`` once the
    ``atexit`` handlers have run and the streams are flushed, skipping the interpreter's finalization:
    that would wait for every non-daemon thread and force-unwind the daemon ones, and a thread inside
    compiled code (CVXPY's C++ compiler, a backend) turned that into an abort ("FATAL: exception not
    rethrown", exit -6) in about one run of four under load, even when no backend worker was alive
    any more to be noticed by :func:`main`.
    """
    code = main()
    if code == EXIT_INTERRUPTED:
        atexit._run_exitfuncs()
        _flush_streams()
        os._exit(code)
    sys.exit(code)


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed or replaced stream: nothing to flush
            pass


def main(argv=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) in this process; returns the exit code."""
    try:
        parser = build_parser()  # imports every command: Ctrl-C can arrive here too
        args = parser.parse_args(argv)
        return _dispatch(args)
    except KeyboardInterrupt:
        print("gtvcvx: interrupted", file=sys.stderr)
        backend = sys.modules.get("gtvcvx.reference.backend")  # (imported only if a reference solve ran)
        if backend is not None and backend.workers_running():
            # a backend's daemon thread is still in compiled code (CVXPY's C++ compiler, CLARABEL): the
            # interpreter's shutdown would wait for the GIL it holds, then force-unwind it, which glibc
            # turns into an abort ("FATAL: exception not rethrown", exit -6) when C++ catches everything
            _flush_streams()
            os._exit(EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED


def _dispatch(args) -> int:
    """The chosen command; bad input and exhausted memory become exit code 2 and one line."""
    try:
        return int(args._run(args))
    except MemoryError as exc:
        if args.debug:
            raise
        print(f"gtvcvx {args.command}: error: out of memory ({exc or 'allocation failed'}); the input is too "
              "large for this machine (GTVCVX_MAX_MEMORY sets the budget checked before allocating)",
              file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        if args.debug:
            raise
        message = printable(" ".join(str(exc).split()) or type(exc).__name__)
        print(f"gtvcvx {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    run()
