"""A small Markdown -> self-contained HTML converter for reports (no extra dependency).

It understands the subset the reports use: ATX headings, paragraphs, pipe tables, bullet
and numbered lists, fenced code, horizontal rules, and inline code, bold, italics, links and
images. Images are embedded as ``data:`` URIs so that the page is self-contained, but only
files the report may show: inside the report's own directory after resolving symlinks, with an
image suffix and matching magic bytes. Anything else (absolute paths, ``..``, symlinks leaving
the directory, a credentials file named ``logo.png``) is rendered as its alt text.

Input is untrusted (spec names and descriptions come from pull requests): all text is
HTML-escaped (no raw HTML passes), and links keep only ``http``, ``https``, ``mailto`` and
relative targets; ``javascript:``, ``data:``, ``vbscript:``, ``file:`` and any other scheme
(also hidden by entities, case or control characters) become plain text.
:func:`sanitize_markdown` applies the same rules to text written into Markdown files.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from urllib.parse import unquote

__all__ = ["markdown_to_html", "html_page", "embed_image", "safe_href", "sanitize_markdown", "plain_text"]

_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif"}
_MAGIC = {".png": (b"\x89PNG\r\n\x1a\n",), ".jpg": (b"\xff\xd8\xff",), ".jpeg": (b"\xff\xd8\xff",),
          ".gif": (b"GIF87a", b"GIF89a")}
_SAFE_SCHEMES = ("http", "https", "mailto")
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):")

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


def embed_image(path, root=None) -> str | None:
    """``data:`` URI of an image file the report may show, or None.

    ``path`` must resolve (symlinks followed) to a file inside ``root`` (default: its own
    directory), have a PNG/JPEG/GIF suffix and start with that format's magic bytes.
    """
    path = Path(path)
    try:
        resolved = path.resolve(strict=True)
        allowed = Path(root if root is not None else path.parent).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    suffix = resolved.suffix.lower()
    if not resolved.is_file() or not resolved.is_relative_to(allowed) or suffix not in _MIME:
        return None
    data = resolved.read_bytes()
    if not data.startswith(_MAGIC[suffix]):
        return None
    return f"data:{_MIME[suffix]};base64,{base64.b64encode(data).decode('ascii')}"


def safe_href(target: str) -> str | None:
    """``target`` if it is an http(s)/mailto or relative link, else None (never a script)."""
    decoded = html.unescape(html.unescape(target))
    cleaned = re.sub(r"[\x00-\x20\x7f-\x9f]+", "", decoded).lower()
    match = _SCHEME.match(cleaned)
    if match:
        return target if match.group(1) in _SAFE_SCHEMES else None
    if ":" in cleaned.split("/", 1)[0] or cleaned.startswith("\\"):
        return None  # something a browser might still read as a scheme
    return target


def _local_image(src: str) -> bool:
    """Whether an image target is a relative path inside the page's directory tree (no scheme, no ``..``)."""
    cleaned = re.sub(r"[\x00-\x20\x7f-\x9f]+", "", html.unescape(unquote(src))).lower()
    return (safe_href(src) is not None and not _SCHEME.match(cleaned) and not cleaned.startswith(("/", "\\"))
            and ".." not in re.split(r"[/\\]", cleaned))


def sanitize_markdown(text: str, *, keep_images: bool = False) -> str:
    """Untrusted text made inert for Markdown files: no raw HTML, no unsafe links, no images.

    Outside code spans a ``<`` that could open an HTML tag, comment or autolink (followed by a letter,
    ``/``, ``!`` or ``?``) and a ``&`` that could start an entity become entities; ``0 < eps < 1``
    stays as typed, and so does everything inside a code span, which Markdown shows literally
    (``<spec>`` in a command, not ``&lt;spec&gt;``); an image becomes its alt text
    (``keep_images`` keeps images of relative paths without ``..``, e.g. an experiment's own figures);
    a link with an unsafe target becomes its text.
    """
    text = str(text)

    def inert(segment: str) -> str:  # no raw HTML, and no brackets that could still form a link or image
        return _markup_escaped(segment).replace("[", "\\[").replace("]", "\\]")

    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(inert(text[pos:m.start()]))
        if m.group("code"):
            out.append(m.group(0))  # (a backtick ends the span: its content cannot leave it)
        elif m.group("img"):
            keep = keep_images and _local_image(m.group("src"))
            out.append(_markup_escaped(m.group(0)) if keep else inert(m.group("alt")))
        elif m.group("link"):
            keep = safe_href(m.group("href"))
            out.append(_markup_escaped(m.group(0)) if keep else inert(m.group("text")))
        else:
            out.append(inert(m.group(0)))
        pos = m.end()
    out.append(inert(text[pos:]))
    return "".join(out)


#: What Markdown could read as raw HTML or an entity: ``<`` opening a tag, comment or autolink; ``&`` of an entity.
_MARKUP = re.compile(r"<(?=[A-Za-z/!?])|&(?=#?[A-Za-z0-9]+;)")


def _markup_escaped(text: str) -> str:
    """``text`` with :data:`_MARKUP`'s characters as entities (``&lt;`` / ``&amp;``)."""
    return _MARKUP.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", text)


def plain_text(text: str) -> str:
    """The text of :func:`sanitize_markdown`'s output as typed, for data files (CSV): entities
    decoded and the backslashes before brackets removed."""
    return html.unescape(str(text).replace("\\[", "[").replace("\\]", "]"))


_INLINE = re.compile(
    r"(?P<code>`[^`]+`)"
    r"|(?P<img>!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\))"
    r"|(?P<link>\[(?P<text>[^\]]+)\]\((?P<href>[^)\s]+)\))"
    r"|(?P<bold>\*\*(?P<btext>.+?)\*\*)"
    r"|(?P<em>(?<![\w*])\*(?P<etext>[^*\s][^*]*?)\*(?![\w*]))"
)


def _text(text: str, quote: bool = False) -> str:
    """Markdown text as HTML: entities decoded as a Markdown renderer does, then everything escaped
    (so ``&lt;`` written by :func:`sanitize_markdown` shows as ``<``, never as ``&amp;lt;``)."""
    return html.escape(html.unescape(text), quote=quote)


def _inline(text: str, base: Path | None) -> str:
    out = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(_text(text[pos:m.start()]))
        if m.group("code"):
            out.append(f"<code>{html.escape(m.group('code')[1:-1], quote=False)}</code>")
        elif m.group("img"):
            src = m.group("src")
            local = base is not None and not _SCHEME.match(src.lower()) and not src.startswith(("/", "\\"))
            uri = embed_image(base / unquote(src), root=base) if local else None
            if uri:
                out.append(f'<img alt="{_text(m.group("alt"), quote=True)}" src="{uri}">')
            else:  # never a reference to a file or host the report did not produce
                out.append(f'<span class="missing-image">[image: {_text(m.group("alt"))}]</span>')
        elif m.group("link"):
            href = safe_href(m.group("href"))
            text = _inline(m.group("text"), base)
            out.append(f'<a href="{html.escape(href)}">{text}</a>' if href else text)
        elif m.group("bold"):
            out.append(f"<strong>{_inline(m.group('btext'), base)}</strong>")
        else:
            out.append(f"<em>{_inline(m.group('etext'), base)}</em>")
        pos = m.end()
    out.append(_text(text[pos:]))
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
