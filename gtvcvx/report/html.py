"""A small Markdown -> self-contained HTML converter for reports (no extra dependency).

It understands the subset the reports use: ATX headings, paragraphs, pipe tables, bullet
and numbered lists, fenced code, horizontal rules, and inline code, bold, italics, links and
images. Images that exist on disk are embedded as ``data:image/png;base64`` URIs so that the
page is self-contained; links to local files stay relative.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

__all__ = ["markdown_to_html", "html_page", "embed_image"]

_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
         ".svg": "image/svg+xml"}

_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 78em; padding: 0 1em; color: #222; line-height: 1.45; }
h1, h2, h3, h4 { line-height: 1.2; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: 0.86em; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
code { background: #f4f4f4; padding: 0 .2em; border-radius: 3px; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; }
img { max-width: 100%; }
.fail { color: #b00020; font-weight: bold; }
"""


def embed_image(path) -> str | None:
    """``data:`` URI of an image file, or None when it does not exist."""
    path = Path(path)
    if not path.is_file():
        return None
    mime = _MIME.get(path.suffix.lower(), "application/octet-stream")
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


_INLINE = re.compile(
    r"(?P<code>`[^`]+`)"
    r"|(?P<img>!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\))"
    r"|(?P<link>\[(?P<text>[^\]]+)\]\((?P<href>[^)\s]+)\))"
    r"|(?P<bold>\*\*(?P<btext>.+?)\*\*)"
    r"|(?P<em>(?<![\w*])\*(?P<etext>[^*\s][^*]*?)\*(?![\w*]))"
)


def _inline(text: str, base: Path | None) -> str:
    out = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[pos:m.start()], quote=False))
        if m.group("code"):
            out.append(f"<code>{html.escape(m.group('code')[1:-1], quote=False)}</code>")
        elif m.group("img"):
            src = m.group("src")
            uri = embed_image(base / src) if base is not None and not re.match(r"^[a-z]+:", src) else None
            out.append(f'<img alt="{html.escape(m.group("alt"))}" src="{html.escape(uri or src)}">')
        elif m.group("link"):
            out.append(f'<a href="{html.escape(m.group("href"))}">{_inline(m.group("text"), base)}</a>')
        elif m.group("bold"):
            out.append(f"<strong>{_inline(m.group('btext'), base)}</strong>")
        else:
            out.append(f"<em>{_inline(m.group('etext'), base)}</em>")
        pos = m.end()
    out.append(html.escape(text[pos:], quote=False))
    return "".join(out)


def _split_row(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells = re.split(r"(?<!\\)\|", line)
    return [c.strip().replace("\\|", "|") for c in cells]


_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


def markdown_to_html(text: str, base=None) -> str:
    """Convert Markdown ``text`` to an HTML fragment; images relative to ``base`` are embedded."""
    base = Path(base) if base is not None else None
    lines = text.splitlines()
    out: list[str] = []
    para: list[str] = []
    i = 0

    def flush():
        if para:
            out.append(f"<p>{_inline(' '.join(s.strip() for s in para), base)}</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            block = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                block.append(lines[i])
                i += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(block), quote=False)}</code></pre>")
            i += 1
            continue
        if not stripped:
            flush()
            i += 1
            continue
        heading = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", stripped)
        if heading:
            flush()
            level = len(heading.group(1))
            title = heading.group(2)
            anchor = re.sub(r"[^a-z0-9_-]+", "-", title.lower()).strip("-")
            out.append(f'<h{level} id="{anchor}">{_inline(title, base)}</h{level}>')
            i += 1
            continue
        if re.match(r"^(-{3,}|\*{3,})$", stripped):
            flush()
            out.append("<hr>")
            i += 1
            continue
        if stripped.startswith("|") and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1]):
            flush()
            header = _split_row(stripped)
            i += 2
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                rows.append(_split_row(lines[i]))
                i += 1
            parts = ["<table>", "<thead><tr>" + "".join(f"<th>{_inline(c, base)}</th>" for c in header)
                     + "</tr></thead>", "<tbody>"]
            for row in rows:
                parts.append("<tr>" + "".join(f"<td>{_inline(c, base)}</td>" for c in row) + "</tr>")
            parts.append("</tbody></table>")
            out.append("\n".join(parts))
            continue
        bullet = re.match(r"^([-*+]|\d+\.)\s+(.*)$", stripped)
        if bullet:
            flush()
            ordered = bullet.group(1)[0].isdigit()
            items = []
            while i < len(lines):
                m = re.match(r"^\s*([-*+]|\d+\.)\s+(.*)$", lines[i])
                if m:
                    items.append(m.group(2))
                elif lines[i].strip() and lines[i].startswith((" ", "\t")) and items:
                    items[-1] += " " + lines[i].strip()
                else:
                    break
                i += 1
            tag = "ol" if ordered else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{_inline(it, base)}</li>" for it in items) + f"</{tag}>")
            continue
        para.append(line)
        i += 1
    flush()
    return "\n".join(out)


def html_page(title: str, body: str) -> str:
    """A complete, self-contained HTML document."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")
