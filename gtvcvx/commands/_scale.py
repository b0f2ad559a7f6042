"""``--quick`` / ``--full``: the size experiment specs run at (shared by ``report`` and ``check``)."""

from __future__ import annotations


def add_scale_arguments(parser) -> None:
    """Add the mutually exclusive ``--quick`` and ``--full`` flags to ``parser``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true",
                       help="run experiment specs as a smoke test (small sizes, seconds each)")
    group.add_argument("--full", action="store_true",
                       help="run experiment specs at the sources' full protocol (every repetition and sweep "
                            "point; several times longer than the default)")


def scale_of(args) -> str:
    """``"quick"``, ``"full"`` or ``"default"`` from parsed arguments."""
    if getattr(args, "quick", False):
        return "quick"
    return "full" if getattr(args, "full", False) else "default"
