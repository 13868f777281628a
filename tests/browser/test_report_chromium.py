"""The report in a real headless Chromium: it loads with no console error, every section is in the
DOM, the sortable tables sort (the page's own #selftest), and a screenshot is not blank.

How errors are caught: the page's first script records uncaught errors, rejected promises and
console.error calls into ``#js-errors``, which ``--dump-dom`` prints; Chromium's own log on stderr
(``--enable-logging=stderr``) is searched for "Uncaught" as well. A deliberately broken page checks
that this catches what it should. Skipped only where no Chromium is installed (.ci/run installs one).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from report_inputs import EXAMPLE_PROFILE, EXAMPLE_RESULTS, a100_topology, example_profile, with_stalls

from collbench.report.assets import ERROR_TRAP_JS
from collbench.report.page import SECTION_IDS, ReportInputs, write_report
from collbench.results.io import read_rows

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER = next((b for b in BROWSERS if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no Chromium here (.ci/run installs Debian's chromium)")


def _chromium(tmp_path: Path, *args: str, settle: bool = True) -> subprocess.CompletedProcess[str]:
    assert BROWSER is not None
    cmd = [
        BROWSER,
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--disable-extensions",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        # Lets the page's scripts finish before the DOM is dumped. Not for screenshots: with it,
        # Chromium (156 here) may capture before the lower part of a long page is painted.
        *(["--virtual-time-budget=5000"] if settle else []),
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def _errors(dom: str) -> str:
    found = re.search(r'<pre id="js-errors">(.*?)</pre>', dom, flags=re.S)
    assert found is not None, "the page lost its #js-errors element"
    return found.group(1)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    rows = with_stalls(read_rows(EXAMPLE_RESULTS))
    write_report(
        out,
        ReportInputs(
            rows=tuple(rows),
            profile=example_profile(),
            topology=a100_topology(),
            sources=(str(EXAMPLE_RESULTS), str(EXAMPLE_PROFILE)),
        ),
    )
    return out


def test_the_error_trap_catches_a_broken_script(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(
        f"<!DOCTYPE html><html><head><script>{ERROR_TRAP_JS}</script></head><body>"
        '<pre id="js-errors"></pre><script>console.error("said so");</script>'
        "<script>notDefinedAnywhere();</script></body></html>"
    )
    run = _chromium(tmp_path, "--dump-dom", broken.as_uri())
    errors = _errors(run.stdout)
    assert "notDefinedAnywhere" in errors and "console.error: said so" in errors
    assert "Uncaught" in run.stderr


def test_the_page_loads_without_errors_and_sorts(page: Path, tmp_path: Path) -> None:
    run = _chromium(tmp_path, "--dump-dom", page.as_uri() + "#selftest")
    dom = run.stdout
    assert run.returncode == 0, run.stderr[-2000:]
    assert _errors(dom) == ""
    assert "Uncaught" not in run.stderr
    assert re.search(r'<body[^>]*data-js="ready"', dom), "the page's script did not run to its end"
    checked = re.search(r'data-selftest="(\d+)"', dom)
    assert checked is not None and int(checked.group(1)) >= 2 * 14  # every column of the table, both ways
    for section in (*SECTION_IDS, "op-all-reduce-gloo-4"):
        assert f'id="{section}"' in dom
    # Drawn, not just sent: the SVGs are in the live DOM with their marks.
    assert dom.count('class="chart"') == 2 and 'class="machine"' in dom and 'class="band"' in dom


def test_a_screenshot_is_not_blank(page: Path, tmp_path: Path) -> None:
    import matplotlib.image

    shot = tmp_path / "shot.png"
    run = _chromium(
        tmp_path, "--hide-scrollbars", "--window-size=1280,1600", f"--screenshot={shot}", page.as_uri(), settle=False
    )
    assert shot.exists(), run.stderr[-2000:]
    pixels = matplotlib.image.imread(str(shot))[:, :, :3]
    assert pixels.shape[:2] == (1600, 1280)
    flat = (pixels.reshape(-1, 3) * 255).round().astype(np.uint8)
    colours = np.unique(flat, axis=0)
    not_white = float(np.mean(flat.min(axis=1) < 240))
    # Charts, bands and the drawing give hundreds of colours; a blank or unstyled page gives a few.
    assert len(colours) > 200, len(colours)
    assert 0.05 < not_white < 0.9, not_white
    lower = flat.reshape(1600, 1280, 3)[800:]
    assert float(np.mean(lower.min(axis=2) < 240)) > 0.02, "the lower half of the page was not painted"
