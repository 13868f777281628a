"""The report in a real headless Chromium: it loads with no console error, every section is in the
DOM, the sortable tables sort (the page's own #selftest), and a screenshot is not blank.

How errors are caught: the page's first script records uncaught errors, rejected promises and
console.error calls into ``#js-errors``, which ``--dump-dom`` prints; Chromium's own log on stderr
(``--enable-logging=stderr``) is searched for "Uncaught" as well. A deliberately broken page checks
that this catches what it should. Skipped only where no Chromium is installed (.ci/run installs one).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_inputs import EXAMPLE_PROFILE, EXAMPLE_RESULTS, a100_topology, example_profile, with_stalls

from collbench.profile.document import Profile
from collbench.report.assets import ERROR_TRAP_JS
from collbench.report.page import SECTION_IDS, ReportInputs, write_report
from collbench.results.io import read_rows, write_rows
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.units import size_label

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


# Run in the page after its own scripts: every chart's text inside its drawing, and in the busbw
# charts, read from the drawn marks, the axis spanning the measured busbw and no bar above the fastest
# iteration's busbw (FASTEST: per "algo size", the busbw of the fastest iteration of its rows).
# Findings go to #js-errors; the counts of labels and bars checked to <body data-geometry>/data-bars.
GEOMETRY_JS = r"""
(function(){
  var checked=0,nbars=0;
  function box(el){var r=el.getBoundingClientRect();return r;}
  document.querySelectorAll('svg').forEach(function(svg){
    var frame=box(svg);
    svg.querySelectorAll('text').forEach(function(t){
      var r=box(t);
      if(!t.textContent.trim()){return;}
      if(r.left<frame.left-1||r.right>frame.right+1||r.top<frame.top-1||r.bottom>frame.bottom+1){
        window.collbenchRecord('clipped label: '+t.textContent+' in '+(svg.getAttribute('aria-label')||'svg'));}
      checked++;
    });
  });
  document.querySelectorAll('svg.chart').forEach(function(svg){
    var label=svg.getAttribute('aria-label')||'';
    if(!/busbw$/.test(label)){return;}
    var ticks=Array.prototype.filter.call(svg.querySelectorAll('text.tick'),function(t){
      return t.getAttribute('text-anchor')==='end';}).map(function(t){
      var r=box(t);return {y:(r.top+r.bottom)/2,v:Math.log10(parseFloat(t.textContent))};});
    var a=ticks[0],b=ticks[ticks.length-1];
    function value(y){return Math.pow(10,a.v+(y-a.y)*(b.v-a.v)/(b.y-a.y));}
    var bars=svg.querySelectorAll('line.spread');
    var dots=Array.prototype.filter.call(svg.querySelectorAll('circle'),function(c){return !c.getAttribute('class');});
    var top=0,bottom=Infinity;
    dots.forEach(function(dot,i){
      var tip=dot.querySelector('title').textContent;
      var fastest=FASTEST[tip.split(':')[0]];
      if(fastest===undefined){window.collbenchRecord('no such point: '+tip);return;}
      var barTop=value(box(bars[i]).top);
      if(barTop>fastest*1.08){window.collbenchRecord('bar above the fastest iteration: '+tip+' drawn to '+barTop);}
      top=Math.max(top,fastest);
      bottom=Math.min(bottom,value(box(bars[i]).bottom));
      nbars++;
    });
    var values=ticks.map(function(t){return Math.pow(10,t.v);});
    if(Math.max.apply(null,values)>10*top||Math.min.apply(null,values)<bottom/10){
      window.collbenchRecord('busbw axis '+values.join(',')+' beyond the measured '+bottom+'..'+top);}
  });
  document.body.setAttribute('data-geometry',String(checked));
  document.body.setAttribute('data-bars',String(nbars));
})();
"""


def test_the_charts_as_drawn(page: Path, tmp_path: Path) -> None:
    """In the browser's layout: no label cut at its drawing's edge, the busbw axis spans what was
    measured, and no bar rises above its fastest iteration's busbw."""
    rows = read_rows(EXAMPLE_RESULTS)
    factor = Op.parse("all-reduce").spec.busbw_factor(4)
    fastest: dict[str, float] = {}
    for r in rows:
        key = f"{r.algo} {size_label(r.size_bytes)}"
        fastest[key] = max(fastest.get(key, 0.0), factor * r.size_bytes / r.time_us_min / 1e3)
    probe = tmp_path / "probe.html"
    script = f"var FASTEST={json.dumps(fastest)};{GEOMETRY_JS}"
    probe.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    run = _chromium(tmp_path, "--window-size=1280,2000", "--dump-dom", probe.as_uri())
    assert _errors(run.stdout) == ""
    checked = re.search(r'data-geometry="(\d+)"', run.stdout)
    bars = re.search(r'data-bars="(\d+)"', run.stdout)
    assert checked is not None and int(checked.group(1)) > 50, "the probe did not run"
    assert bars is not None and int(bars.group(1)) > 100, "no busbw bars checked"


PAYLOAD = (
    "x\"'><script>document.title='PWNED';document.documentElement.setAttribute('data-pwned','1')</script>"
    "<img src=x onerror=\"document.title='PWNED';document.documentElement.setAttribute('data-pwned','1')\">"
    "</script><!--<svg onload=\"document.documentElement.setAttribute('data-pwned','1')\">"
)


def _hostile_rows() -> list[ResultRow]:
    fields = ("backend", "host", "layout", "torch_version", "device_name", "nccl_algo", "source")
    rows = [r for r in read_rows(EXAMPLE_RESULTS) if r.algo in ("ring", "tree")]
    hostile: dict[str, Any] = dict.fromkeys(fields, PAYLOAD)  # text fields only, whatever replace's types say
    return [replace(r, **hostile) for r in rows]


def test_a_hostile_results_file_runs_no_script(tmp_path: Path) -> None:
    """Markup in a results file's text fields (and a topology's names) is shown, never run."""
    results = tmp_path / "hostile.jsonl"
    write_rows(results, _hostile_rows())
    topo = a100_topology()
    topo = replace(topo, host=PAYLOAD, devices=tuple(replace(d, name=PAYLOAD) for d in topo.devices))
    out = tmp_path / "report.html"
    write_report(out, ReportInputs(rows=tuple(read_rows(results)), profile=example_profile(), topology=topo))
    run = _chromium(tmp_path, "--dump-dom", out.as_uri())
    assert re.search(r'<body[^>]*data-js="ready"', run.stdout), run.stderr[-2000:]
    assert not re.search(r"<(html|body)[^>]*data-pwned", run.stdout) and "<title>PWNED</title>" not in run.stdout
    assert "&lt;script&gt;document.title=" in run.stdout  # shown as text
    # The probe works: the same payload pasted raw into a page does run.
    raw = tmp_path / "raw.html"
    raw.write_text(f"<!DOCTYPE html><html><head><title>t</title></head><body><p>{PAYLOAD}</p></body></html>")
    control = _chromium(tmp_path, "--dump-dom", raw.as_uri())
    assert re.search(r"<html[^>]*data-pwned", control.stdout)


def test_a_report_of_the_new_ops_loads_and_sorts(tmp_path: Path) -> None:
    # Barrier's section has no chart and a table of fewer columns; all-to-all's has both charts.
    from new_op_rows import barrier_rows, data_op_rows

    rows = [*data_op_rows(Op.ALL_TO_ALL, "pairwise", 4, 30.0, 5.0, seed=1), *barrier_rows("tree", 4, 41.5)]
    rows += barrier_rows("dissemination", 4, 35.0)
    out = tmp_path / "new-ops.html"
    write_report(out, ReportInputs(rows=tuple(rows)))
    run = _chromium(tmp_path, "--dump-dom", out.as_uri() + "#selftest")
    dom = run.stdout
    assert run.returncode == 0, run.stderr[-2000:]
    assert _errors(dom) == "" and "Uncaught" not in run.stderr
    assert re.search(r'<body[^>]*data-js="ready"', dom), "the page's script did not run to its end"
    checked = re.search(r'data-selftest="(\d+)"', dom)
    assert checked is not None and int(checked.group(1)) > 0
    assert 'id="op-barrier-gloo-4"' in dom and 'id="op-all-to-all-gloo-4"' in dom
    assert dom.count('class="chart"') == 2  # all-to-all's busbw and time; none for barrier


# Run in the page at the window's width: every table's right edge, and the page's own width, against
# the window; each table box that scrolls sideways is counted. Findings go to #js-errors.
WIDTH_JS = r"""
(function(){
  document.querySelectorAll('details').forEach(function(d){d.open=true;});
  var window_px=document.documentElement.clientWidth,boxes=0;
  if(document.documentElement.scrollWidth>window_px){
    window.collbenchRecord('the page scrolls sideways: '+document.documentElement.scrollWidth+' px in '+window_px);}
  document.querySelectorAll('table').forEach(function(t){
    var box=t.closest('.table-box');
    var right=(box||t).getBoundingClientRect().right;
    if(right>window_px){window.collbenchRecord('table.'+t.className+' ends at '+right+' px in '+window_px);}
    if(WHOLE&&t.getBoundingClientRect().right>window_px){
      window.collbenchRecord('table.'+t.className+' is cut at '+window_px+' px');}
    if(box&&box.scrollWidth>box.clientWidth){boxes++;}
  });
  document.body.setAttribute('data-tables',String(document.querySelectorAll('table').length));
  document.body.setAttribute('data-scrolling',String(boxes));
})();
"""


@pytest.mark.parametrize(("width_px", "whole"), [(1200, True), (900, False)])
def test_the_tables_fit_the_window(tmp_path: Path, width_px: int, whole: bool) -> None:
    """A tune's profile.html at 1200 px: its rules table ran 28 px past the window's edge (60 px with the
    profiles/ example), the page scrolling sideways. At 1200 px every table fits whole; narrower, a wide
    table scrolls inside its own box and the page never does."""
    golden = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
    out = tmp_path / "report.html"
    write_report(
        out,
        ReportInputs(
            rows=tuple(read_rows(golden / "tune-quick-results.jsonl")),
            profile=Profile.load(golden / "tune-quick" / "profile.yaml"),
            topology=a100_topology(),
        ),
    )
    probe = tmp_path / "probe.html"
    script = f"var WHOLE={json.dumps(whole)};{WIDTH_JS}"
    probe.write_text(out.read_text().replace("</body>", f"<script>{script}</script></body>"))
    run = _chromium(tmp_path, f"--window-size={width_px},900", "--dump-dom", probe.as_uri())
    assert _errors(run.stdout) == ""
    tables = re.search(r'data-tables="(\d+)"', run.stdout)
    scrolling = re.search(r'data-scrolling="(\d+)"', run.stdout)
    assert tables is not None and int(tables.group(1)) >= 4, "the probe did not run"
    assert scrolling is not None and (int(scrolling.group(1)) == 0) == whole, scrolling.group(1)
