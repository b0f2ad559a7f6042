"""The README's Python examples run as written, each block on its own (they are the package's front page)."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = [chunk.split("```", 1)[0] for chunk in README.split("```python")[1:]]


def run_block(index: int) -> dict:
    namespace: dict = {}  # a fresh namespace: a block that needs an earlier one's names fails here
    exec(compile(BLOCKS[index], f"README.md python block {index + 1}", "exec"), namespace)  # noqa: S102
    return namespace


def test_the_readme_has_its_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=lambda i: f"block{i + 1}")
def test_every_readme_python_block_runs_on_its_own(index, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name specs and data relative to the repository
    namespace = run_block(index)
    if "result" in namespace:
        assert namespace["result"].status == "optimal" and namespace["result"].rel_gap <= 1e-6
    if "res" in namespace:
        assert namespace["res"].n_clusters == 3 and namespace["clf"].status_ == "optimal"
    if "solved" in namespace:
        assert namespace["solved"].status == "optimal" and namespace["solved"].rel_gap <= 1e-6
        assert namespace["clarabel"].rel_gap <= 1e-6  # certified although CVXPY computed it
    if "mine" in namespace:
        assert namespace["mine"].status == "optimal" and namespace["mine"].W.shape == (10, 2)


def test_every_cli_command_is_in_the_readme():
    from gtvcvx.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    for name in commands:
        assert f"`gtvcvx {name}" in README, name
    for bench in ("gtv", "gtv-methods", "clustering", "rkhs"):
        assert bench in README.split("`gtvcvx bench", 1)[1].split("\n", 1)[0], bench
    assert "pytest_plugin" in README and "gtvcvx_reference" in README
