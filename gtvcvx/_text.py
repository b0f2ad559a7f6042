"""Text from untrusted input (spec names, file names, data) made safe to print and to embed.

A spec may come from someone else's repository: its name, keys and file names reach the
terminal (``gtvcvx check`` prints one line per check) and JUnit XML read by CI systems. Control
characters there could rewrite a terminal line (``"\\r\\x1b[2K"`` turns a ``FAIL`` into a
``PASS``), make the XML unreadable (XML 1.0 forbids most of them), or, as lone surrogates from
undecodable file names, raise ``UnicodeEncodeError`` on output. Specs refuse them on load
(:func:`gtvcvx.spec.read_spec_document`); every other text printed or embedded is escaped with
:func:`printable`.
"""

from __future__ import annotations

import re

__all__ = ["printable", "first_unsafe"]

# C0 controls but tab and newline, DEL and the C1 controls, the bidirectional embeddings,
# overrides and isolates ("Trojan Source", CVE-2021-42574), lone surrogates (undecodable file
# names) and the two noncharacters XML 1.0 excludes.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text) -> str:
    r"""``str(text)`` with every unsafe character written as its escape (``\x1b``, ``\u202e``).

    Tabs and newlines are kept; everything else is unchanged.

    Examples
    --------
    >>> printable("ok\r\x1b[32mPASS")
    'ok\\x0d\\x1b[32mPASS'
    """
    return _UNSAFE.sub(_escape, str(text))


def first_unsafe(text: str) -> tuple[int, str] | None:
    """Position and character of the first unsafe character of ``text`` (None when there is none)."""
    match = _UNSAFE.search(text)
    return None if match is None else (match.start(), match.group())
