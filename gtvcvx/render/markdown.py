"""Markdown helpers: moving a page's relative links when the page moves."""

from __future__ import annotations

import re

__all__ = ["rebase_markdown"]


def rebase_markdown(text: str, prefix: str, demote: int = 0) -> str:
    """Prefix relative link/image targets with ``prefix`` and demote headings by ``demote`` levels.

    Absolute URLs, anchors (``#...``) and absolute paths are left alone.
    """
    def link(m):
        target = m.group(2)
        if re.match(r"^([a-z]+:|#|/)", target):
            return m.group(0)
        return f"{m.group(1)}({prefix}/{target})"

    text = re.sub(r"(!?\[[^\]]*\])\(([^)\s]+)\)", link, text)
    if demote:
        text = re.sub(r"^(#{1,6})(?=\s)", lambda m: "#" * min(6, len(m.group(1)) + demote), text, flags=re.M)
    return text
