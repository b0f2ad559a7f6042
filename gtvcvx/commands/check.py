"""``gtvcvx check SPEC_OR_DIR...``: the CI oracle.

Solves every spec, compares the certified gap, accuracy and (optionally) the agreement with a
CVXPY reference against the thresholds of the spec's ``[check]`` table, prints one line per
spec and check, and writes JUnit XML / JSON for CI systems.

Exit codes: 0 every check passed, 1 some check failed, 2 bad input or usage (a malformed spec,
a threshold that cannot be computed for the spec, an unknown solver): one line on stderr
naming the file and the key, no traceback.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from .._text import printable
from ._scale import add_scale_arguments, scale_of
from .report import check_output_path

NAME = "check"
HELP = "solve specs and compare them with the thresholds of their [check] tables (CI oracle; JUnit/JSON output)"

_MARK = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "error": "ERROR"}


def add_arguments(parser) -> None:
    parser.add_argument("--allow-outside", action="store_true",
                        help="let specs read data files outside their own folder (refused by default: "
                             "specs may be untrusted)")
    parser.add_argument("paths", nargs="+", metavar="SPEC_OR_DIR", help="TOML specs or directories of specs")
    parser.add_argument("--solver", default=None,
                        help="'fast' (default, or the spec's [solve] solver) or a CVXPY backend")
    parser.add_argument("--max-rel-gap", type=float, default=None, metavar="X",
                        help="require a certified relative gap <= X (overrides the specs' max_rel_gap)")
    parser.add_argument("--reference", default=None, metavar="BACKEND",
                        help="also solve with this CVXPY backend (e.g. CLARABEL) and compare: objective and "
                             "solution errors, overlap of the certified bounds")
    parser.add_argument("--junit", default=None, metavar="FILE", help="write JUnit XML here")
    parser.add_argument("--json", default=None, metavar="FILE", help="write a JSON record here")
    parser.add_argument("--cache-dir", default=None, metavar="DIR",
                        help="cache reference solutions here (keyed by spec contents, gtvcvx version, solver)")
    add_scale_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="print only failures and the summary")


def _check_backend(name: str, flag: str, allow_fast: bool) -> None:
    from ..reference import installed_backends

    if allow_fast and name.lower() == "fast":
        return
    installed = installed_backends()
    if name.upper() not in installed:
        expected = "'fast' or an installed CVXPY backend" if allow_fast else "an installed CVXPY backend"
        raise ValueError(f"{flag} {name!r}: expected {expected} ({', '.join(installed)})")


def junit_xml(results, elapsed: float) -> bytes:
    """JUnit XML: one ``<testsuite>`` per spec, one ``<testcase>`` per check."""
    from .. import __version__

    def count(outcome):
        return sum(1 for r in results for o in r.outcomes if o.outcome == outcome)

    root = ET.Element("testsuites", name="gtvcvx check", tests=str(sum(len(r.outcomes) for r in results)),
                      failures=str(count("failed")), errors=str(count("error")), skipped=str(count("skipped")),
                      time=f"{elapsed:.3f}")
    for r in results:
        name, path = printable(r.name), printable(r.path)
        suite = ET.SubElement(root, "testsuite", name=name, tests=str(len(r.outcomes)),
                              failures=str(sum(o.outcome == "failed" for o in r.outcomes)),
                              errors=str(sum(o.outcome == "error" for o in r.outcomes)),
                              skipped=str(sum(o.outcome == "skipped" for o in r.outcomes)),
                              time=f"{r.time:.3f}", file=path)
        props = ET.SubElement(suite, "properties")
        for key, value in (("path", path), ("kind", r.kind), ("solver", r.solver), ("status", r.status),
                           ("reference", r.reference or ""), ("gtvcvx", __version__)):
            ET.SubElement(props, "property", name=key, value=printable(value))
        share = r.time / max(len(r.outcomes), 1)
        for o in r.outcomes:
            case = ET.SubElement(suite, "testcase", classname=f"gtvcvx.check.{name}", name=o.name,
                                 file=path, time=f"{share:.3f}")
            described = printable(o.describe())
            text = f"{name} ({path}): {o.name}: {described}"
            if o.outcome == "failed":
                ET.SubElement(case, "failure", message=described, type="threshold").text = text
            elif o.outcome == "error":
                ET.SubElement(case, "error", message=described, type="bad_input").text = text
            elif o.outcome == "skipped":
                ET.SubElement(case, "skipped", message=described)
            else:
                ET.SubElement(case, "system-out").text = text
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def run(args) -> int:
    from ..spec import allow_outside_paths

    with allow_outside_paths(getattr(args, "allow_outside", False)):
        return _run(args)


def _run(args) -> int:
    from .. import __version__
    from ..environment import environment
    from ..experiments import StudyStore
    from ..io import atomic_write, atomic_write_text
    from ..tasks import find_specs, load_spec
    from ..tasks.checks import run_checks, validate_checks
    from ..testing import ReferenceCache

    if args.solver is not None:
        _check_backend(args.solver, "--solver", allow_fast=True)
    if args.reference is not None:
        _check_backend(args.reference, "--reference", allow_fast=False)
    if args.max_rel_gap is not None and not args.max_rel_gap >= 0:
        raise ValueError(f"--max-rel-gap must be >= 0, got {args.max_rel_gap}")
    for option, value in (("--junit", args.junit), ("--json", args.json)):
        if value:
            check_output_path(value, option)
    paths = find_specs(args.paths)
    if not paths:
        raise ValueError(f"no *.toml spec found in {', '.join(args.paths)}")
    specs = [load_spec(p) for p in paths]  # bad input stops everything before any solve (exit 2)
    for spec in specs:
        validate_checks(spec, max_rel_gap=args.max_rel_gap)
    cache = ReferenceCache(args.cache_dir) if args.cache_dir else None

    t0 = time.perf_counter()
    results = []
    width = max(len(s.name) for s in specs)
    # experiments write their files under one directory that lives for the whole run, and a
    # summary experiment reuses the records of the studies run before it with its parameters
    studies = StudyStore()
    with tempfile.TemporaryDirectory(prefix="gtvcvx-check-") as scratch:
        for k, spec in enumerate(specs):
            r = run_checks(spec, solver=args.solver, reference=args.reference, max_rel_gap=args.max_rel_gap,
                           scale=scale_of(args), cache=cache, out_dir=Path(scratch) / f"{k:03d}", studies=studies)
            results.append(r)
            for o in r.outcomes:
                if args.quiet and o.outcome in ("passed", "skipped"):
                    continue
                print(printable(f"{_MARK[o.outcome]:<5} {r.name:<{width}}  {o.name:<20} {o.describe()}"), flush=True)
    elapsed = time.perf_counter() - t0

    n = {k: sum(1 for r in results for o in r.outcomes if o.outcome == k)
         for k in ("passed", "failed", "skipped", "error")}
    errors = [(r, o) for r in results for o in r.outcomes if o.outcome == "error"]
    code = 2 if errors else (1 if n["failed"] else 0)
    if args.junit:
        with atomic_write(args.junit, "wb") as fh:
            fh.write(junit_xml(results, elapsed))
    if args.json:
        doc = {"gtvcvx": __version__, "exit_code": code, "passed": code == 0, "counts": n,
               "time": elapsed, "solver": args.solver or "fast", "reference": args.reference,
               "specs": [r.to_dict() for r in results], "environment": environment()}
        atomic_write_text(args.json, json.dumps(doc, indent=1) + "\n")
    summary = (f"gtvcvx check: {len(results)} spec(s), {n['passed']} passed, {n['failed']} failed, "
               f"{n['skipped']} skipped, {n['error']} error(s) in {elapsed:.1f} s")
    print(summary)
    for r, o in errors:
        print(printable(f"gtvcvx check: error: {r.path}: check.{o.name}: {o.message}"), file=sys.stderr)
    return code
