"""What a report records about the machine and the software it ran on."""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version

from .render.tables import markdown_table

__all__ = ["environment", "environment_markdown"]

_PACKAGES = ("gtvcvx", "numpy", "scipy", "pandas", "cvxpy", "clarabel", "scs", "matplotlib")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
        return round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def environment() -> dict:
    """Versions of gtvcvx and its numerical stack, Python, OS, CPU model, cores and memory."""
    info = {"python": platform.python_version(), "platform": platform.platform(), "cpu": _cpu_model(),
            "cores": os.cpu_count(), "memory_gib": _memory_gib()}
    for name in _PACKAGES:
        try:
            info[name] = version(name)
        except PackageNotFoundError:
            info[name] = "not installed"
    return info


def environment_markdown(info: dict | None = None) -> str:
    """The environment as a short Markdown table."""
    info = environment() if info is None else info
    return markdown_table([{"item": k, "value": str(v)} for k, v in info.items()])
