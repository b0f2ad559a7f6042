"""The HTML report in a real browser (headless Chromium through Playwright).

Skipped when Playwright or its Chromium is not installed (``python -m pip install playwright &&
python -m playwright install --with-deps chromium``, or a system
``chromium`` on the PATH). At 1280 px: every table has a header cell
per column, nothing overflows horizontally, every figure loads, the speed-up direction is stated.
A screenshot of the page is kept in pytest's temporary directory for a human look.
"""

import shutil
from pathlib import Path

import pytest

from gtvcvx.cli import main

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        system = shutil.which("chromium") or shutil.which("chromium-browser")  # e.g. apt's chromium
        try:
            instance = playwright.chromium.launch(executable_path=system) if system else playwright.chromium.launch()
        except Exception as exc:  # noqa: BLE001 - no browser binary on this machine
            pytest.skip(f"headless Chromium is not available: {type(exc).__name__}")
        yield instance
        instance.close()


def test_the_html_report_reads_well_at_1280_px(tmp_path, browser):
    out = tmp_path / "report"
    specs = [str(ROOT / "problems/quick"), str(ROOT / "problems/rkhs/quick.toml"),
             str(ROOT / "problems/own_data/stations.toml")]
    assert main(["report", *specs, "--out", str(out), "--quiet"]) == 0
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto((out / "index.html").as_uri())
    page.screenshot(path=str(tmp_path / "index.png"), full_page=True)
    tables = page.eval_on_selector_all("table", """tables => tables.map(t => {
        const head = t.querySelectorAll('thead th');
        const row = t.querySelector('tbody tr');
        return {headers: Array.from(head).map(h => h.textContent.trim()),
                cells: row ? row.children.length : 0};
    })""")
    assert tables, "no table in the page"
    for table in tables:
        assert len(table["headers"]) == table["cells"] and all(table["headers"]), table
    overview = tables[0]["headers"]
    assert overview[-1] == "files" and "speed-up (ref/fast)" in overview
    assert "above 1 the fast core is faster" in page.inner_text("body")
    width = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"the page overflows horizontally: {width}"
    # the overview table fits without its own scroll bar (the last column used to be cut off)
    fits = page.eval_on_selector("table", "t => [t.scrollWidth, t.clientWidth]")
    assert fits[0] <= fits[1] + 1, f"the overview table is wider than the page: {fits}"
    images = page.eval_on_selector_all("img", "imgs => imgs.map(i => [i.alt, i.complete && i.naturalWidth > 0])")
    assert images and all(ok for _, ok in images), [alt for alt, ok in images if not ok]
    page.close()
