"""Untrusted specs cannot make a report leak local files or carry scripts."""

import base64
import re
from pathlib import Path

import pytest

from gtvcvx.cli import main
from gtvcvx.render.html import embed_image, markdown_to_html, safe_href, sanitize_markdown

SECRET = "aws_secret_access_key = SECRETMARKER42"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


def _spec(folder: Path, name: str, description: str) -> Path:
    text = (Path(__file__).parents[1] / "problems" / "quick" / "sbm_nlasso.toml").read_text()
    text = text.replace('name = "quick_sbm_nlasso"', f"name = {name!r}")
    text = text.replace(text.splitlines()[1], f"description = {description!r}")
    path = folder / "spec.toml"
    path.write_text(text)
    return path


def _secret_leaked(text: str) -> bool:
    b64 = base64.b64encode(SECRET.encode()).decode()
    return "SECRETMARKER42" in text or b64[:24] in text


@pytest.fixture
def secret(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text(SECRET)
    fake_png = tmp_path / "logo.png"  # right suffix, not an image, outside the report
    fake_png.write_text(SECRET)
    return outside, fake_png


def test_report_of_a_hostile_spec_embeds_no_local_file_and_no_script(tmp_path, secret):
    outside, fake_png = secret
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "link.png").symlink_to(fake_png)
    description = (f"![a]({outside}) ![b](../secret.txt) ![c](../../secret.txt) ![d](link.png) "
                   f"![e](file://{outside}) [x](javascript:alert(1)) [y](JaVaScRiPt&#58;alert(2)) "
                   "[z]( java\tscript:alert(3)) [ok](https://example.org) <script>alert(4)</script> "
                   "<img src=x onerror=alert(5)>")
    spec = _spec(specs, "evil <script>alert(6)</script>", description)
    out = tmp_path / "out"
    code = main(["report", str(spec), "--out", str(out), "--solvers", "fast", "--quiet", "--format", "md,html"])
    assert code == 0
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in {".html", ".md"}:
            text = path.read_text(errors="replace")
            assert not _secret_leaked(text), path
            low = text.lower()
            assert "<script" not in low and "javascript:" not in low, path
            assert "<img src=x" not in low, path  # only its escaped, inert form
            assert "](javascript" not in low and 'href="javascript' not in low, path
    html_text = (out / "index.html").read_text()
    assert 'href="https://example.org"' in html_text
    index_md = (out / "index.md").read_text()
    assert "evil &lt;script>" in index_md and "&amp;lt;" not in index_md  # the tag opener escaped once, shown as typed


@pytest.mark.parametrize("target", ["javascript:alert(1)", "JAVASCRIPT:x", " javascript:x", "java\nscript:x",
                                    "javascript&#58;x", "&#106;avascript:x", "data:text/html,x", "vbscript:x",
                                    "file:///etc/passwd", "weird+scheme:x"])
def test_unsafe_link_targets_are_dropped(target):
    assert safe_href(target) is None
    assert "href" not in markdown_to_html(f"[click]({target})")
    assert re.search(r"(?<!\\)\]\(", sanitize_markdown(f"[click]({target})")) is None  # no live link


@pytest.mark.parametrize("target", ["https://example.org/a", "http://x", "mailto:a@b.c", "specs/a/report.md", "#top"])
def test_safe_link_targets_are_kept(target):
    assert safe_href(target) == target


def test_images_are_embedded_only_from_inside_the_report(tmp_path, secret):
    outside, fake_png = secret
    out = tmp_path / "out"
    out.mkdir()
    (out / "fig.png").write_bytes(PNG)
    (out / "fake.png").write_text(SECRET)      # inside, but not an image
    (out / "link.png").symlink_to(fake_png)    # a symlink leaving the directory
    html_text = markdown_to_html(f"![ok](fig.png) ![f](fake.png) ![l](link.png) ![abs]({outside}) "
                                 "![up](../logo.png)", base=out)
    assert html_text.count("data:image/png;base64") == 1
    assert not _secret_leaked(html_text)
    assert embed_image(outside, root=out) is None and embed_image(out / "link.png", root=out) is None


def test_raw_html_in_markdown_text_is_escaped():
    text = sanitize_markdown("a <b onclick=x>bold</b> & ![i](/etc/passwd)")
    assert "<b" not in text and "&lt;b" in text and "/etc/passwd" not in text


def _data_spec(folder: Path, file_value: str) -> Path:
    spec = folder / "data_spec.toml"
    spec.write_text(f'''name = "data_path"
[graph]
generator = "chain"
n = 3
[data]
file = {file_value!r}
[problem]
loss = "squared_distance"
penalty = "norm2"
lam = 0.1
''')
    return spec


@pytest.fixture
def points_file(tmp_path):
    import numpy as np

    outside = tmp_path / "outside.npz"
    np.savez(outside, points=np.zeros((3, 2)))
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "link.npz").symlink_to(outside)
    return outside, folder


@pytest.mark.parametrize("which", ["absolute", "dotdot", "symlink"])
def test_spec_data_paths_are_confined_to_the_spec_folder(points_file, which, capsys):
    outside, folder = points_file
    value = {"absolute": str(outside), "dotdot": "../outside.npz", "symlink": "link.npz"}[which]
    spec = _data_spec(folder, value)
    assert main(["solve", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "data.file" in err and "--allow-outside" in err
    assert main(["solve", str(spec), "--allow-outside"]) == 0
    from gtvcvx import load_spec
    from gtvcvx.spec import SpecError

    with pytest.raises(SpecError, match="own folder"):
        load_spec(spec)
    assert load_spec(spec, allow_outside=True).problem.n == 3


def test_confinement_error_does_not_quote_the_target(tmp_path, capsys):
    secret = tmp_path / "credentials"
    secret.write_text(SECRET)
    folder = tmp_path / "specs"
    folder.mkdir()
    spec = folder / "graph_spec.toml"
    spec.write_text(f'name = "g"\n[graph]\nfile = {str(secret)!r}\n[data]\ngenerator = "blobs"\nsizes = [2]\nd = 2\n'
                    '[problem]\nloss = "squared_distance"\npenalty = "norm2"\nlam = 0.1\n')
    for args in (["solve", str(spec)], ["solve", str(spec), "--allow-outside"], ["check", str(spec)]):
        main(args)
        captured = capsys.readouterr()
        assert "SECRETMARKER42" not in captured.out + captured.err


# --------------------------------------------------------------------------- control characters
def _chain_spec(folder: Path, filename: str = "spec.toml", header: str = 'name = "chain"\n', problem: str = "") -> Path:
    path = folder / filename
    path.write_text(f'{header}[graph]\ngenerator = "chain"\nn = 3\n[data]\ngenerator = "blobs"\nsizes = [3]\nd = 2\n'
                    f'[problem]\nloss = "squared_distance"\npenalty = "norm2"\nlam = 0.1\n{problem}')
    return path


def test_printable_escapes_what_could_rewrite_a_terminal_or_break_xml():
    from gtvcvx._text import first_unsafe, printable

    hostile = "a\r\x1b[2K\x00\x07\x7f\x9b\u202e\u2066\udcff\ufffe\uffffz"
    escaped = printable(hostile)
    assert escaped == "a\\x0d\\x1b[2K\\x00\\x07\\x7f\\x9b\\u202e\\u2066\\udcff\\ufffe\\uffffz"
    assert first_unsafe(escaped) is None and first_unsafe(hostile) == (1, "\r")
    assert printable("tab\tnew\nline é 漢 ∑") == "tab\tnew\nline é 漢 ∑"  # text stays as written
    assert printable(3.5) == "3.5"


@pytest.mark.parametrize("header, problem, key, shown", [
    ('name = "ok\\u001b[2K\\r\\u001b[32mPASS"\n', "", "name", "'\\x1b' at position 2"),
    ('name = "chain"\ndescription = "abc\\u202edef"\n', "", "description", "'\\u202e' at position 3"),
    ('name = "chain"\n', '"lo\\u0007ss_weight" = 1\n', "problem.lo\\x07ss_weight", "'\\x07' at position 2"),
])
def test_control_characters_in_a_spec_are_refused_by_key(tmp_path, capsys, header, problem, key, shown):
    from gtvcvx import load_spec
    from gtvcvx.spec import SpecError

    spec = _chain_spec(tmp_path, header=header, problem=problem)
    with pytest.raises(SpecError, match="control character") as err:
        load_spec(spec)
    assert f"{spec}: {key}: " in str(err.value) and shown in str(err.value)
    assert main(["check", str(spec)]) == 2
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err and "\x07" not in captured.out + captured.err
    assert key in captured.err


def test_tabs_and_newlines_in_a_spec_are_text(tmp_path):
    from gtvcvx import load_spec

    spec = _chain_spec(tmp_path, header='name = "chain"\ndescription = """two\r\nlines\tand a tab"""\n')
    assert load_spec(spec).description == "two\nlines\tand a tab"


def test_hostile_file_names_are_escaped_on_the_terminal_in_junit_and_in_reports(tmp_path, capsys):
    import json
    import xml.etree.ElementTree as ET

    folder = tmp_path / "specs"
    folder.mkdir()
    name = "st\x1b[31mat\udcffions`<b>.toml"  # \udcff: the undecodable byte 0xff of a file name
    spec = _chain_spec(folder, filename=name)
    shown = "st\\x1b[31mat\\udcffions"

    assert main(["solve", str(spec)]) == 0
    out = capsys.readouterr().out
    assert shown in out and "\x1b" not in out

    junit, record = tmp_path / "junit.xml", tmp_path / "check.json"
    assert main(["check", str(folder), "--junit", str(junit), "--json", str(record)]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "\x1b" not in out
    suite = next(ET.parse(junit).iter("testsuite"))  # well-formed XML despite the name
    assert shown in suite.get("file")
    json.loads(record.read_text())

    report = tmp_path / "report"
    assert main(["report", str(folder), "--out", str(report), "--solvers", "fast", "--quiet",
                 "--format", "md,html"]) == 0
    index = (report / "index.md").read_text()
    assert shown + "\\x60<b>.toml`" in index and "\x1b" not in index  # the code span is not closed early
    assert "<b>" not in (report / "index.html").read_text()
