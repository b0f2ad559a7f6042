"""The README's Python examples run as written (they are the package's front page)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_examples_run(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name specs relative to the repository
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [chunk.split("```", 1)[0] for chunk in text.split("```python")[1:]]
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    assert namespace["result"].status == "optimal" and namespace["result"].rel_gap <= 1e-6
    assert namespace["res"].n_clusters == 3
    assert namespace["clf"].status_ == "optimal"
    assert namespace["solved"].status == "optimal" and namespace["solved"].rel_gap <= 1e-6
