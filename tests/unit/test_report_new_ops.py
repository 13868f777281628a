"""The results tables and the HTML report with the new ops: barrier as a time in microseconds with no
bandwidth anywhere, the data-moving ops with their busbw as nccl-tests computes it."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

from new_op_rows import barrier_rows
from rich.console import Console
from synthetic_rows import point_row

from collbench.cli.render.results import nccl_tests_text, results_tables
from collbench.report.ops import group_rows, op_section
from collbench.report.page import ReportInputs, build_report
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op


def _render(rows: list[ResultRow]) -> str:
    console = Console(width=100, file=StringIO(), color_system=None, legacy_windows=False)
    for table in results_tables(rows):
        console.print(table)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def _barrier() -> list[ResultRow]:
    return barrier_rows("dissemination", 4, 41.5) + barrier_rows("native", 4, 87.25)


def _all_to_all() -> list[ResultRow]:
    # 4 ranks, 1 MiB in 100 us: algbw 10.49 GB/s, busbw 3/4 of it (nccl-tests' alltoall.cu).
    row = point_row("pairwise", 1 << 20, 100.0, world_size=4, op="all-to-all", in_place=False)
    algbw = (1 << 20) / 100.0 / 1e3
    factor = Op.ALL_TO_ALL.spec.busbw_factor(4)
    return [
        ResultRow.from_dict({**row.to_dict(), "algbw_gbps": algbw, "busbw_gbps": algbw * factor}),
    ]


def test_barrier_table_is_time_only() -> None:
    out = _render(_barrier())
    assert "barrier · dissemination · gloo · 4 ranks · no data, time only" in out
    assert "41.50" in out and "87.25" in out
    for word in ("algbw", "busbw", "size", "count", "wrong"):
        assert word not in out
    text = nccl_tests_text(_barrier())
    assert "41.50" in text and "algbw" not in text and "busbw" not in text and "Avg bus bandwidth" not in text
    assert "# barrier moves no data: time only, no bandwidth" in text


def test_all_to_all_table_has_nccl_tests_columns() -> None:
    out = _render(_all_to_all())
    assert re.search(r"1M\s+262144\s+100\.0\s+10\.486\s+7\.864\s+0", out), out


def test_report_barrier_section_has_no_bandwidth_and_the_fastest_first(tmp_path: Path) -> None:
    ((key, rows),) = group_rows(_barrier()).items()
    html = op_section(key, rows, [], [])
    assert "busbw" not in html and "algbw" not in html and "<svg" not in html
    assert html.index(">dissemination<") < html.index(">native<")
    assert "41.50" in html and "87.25" in html
    assert "moves no data" in html
    page = build_report(ReportInputs(rows=(*_barrier(), *_all_to_all())))
    assert 'id="op-barrier-gloo-4"' in page and 'id="op-all-to-all-gloo-4"' in page
    a2a = page[page.index('id="op-all-to-all-gloo-4"') :]
    assert "busbw" in a2a[: a2a.index("</section>")]


def test_plots_of_barrier_draw_time_only(tmp_path: Path) -> None:
    # Barrier's rows sit at 0 bytes: a log size axis or a busbw of 0 on a log axis cannot draw them.
    from collbench.models.fit import fit_results
    from collbench.models.fit_points import summarize
    from collbench.report.plots import plot_fits

    rows = barrier_rows("dissemination", 4, 41.5) + barrier_rows("tree", 4, 60.0)
    report = fit_results(rows, crossovers=False)
    assert {f.algo for f in report.fits} == {"dissemination", "tree"}
    out = plot_fits(summarize(rows).points(), report.fits, tmp_path / "fits.png")
    assert out.stat().st_size > 1000


def test_out_of_place_only_table_keeps_its_title_on_one_line() -> None:
    # One mode's four columns are narrower than the title: Rich wraps a title to its table's width.
    rows = _all_to_all()
    first = rows[0]
    out = _render(rows)
    title = f"all-to-all · pairwise · gloo · 4 ranks · {first.dtype} · none"
    assert title in out.splitlines()[0], out
    assert "10.486" in out and "7.864" in out  # algbw, busbw: still whole


def test_the_nccl_tests_table_says_which_time_it_shows() -> None:
    # The charts plot the p25 and the profile's "measured" is the p25; the table's time column is the
    # row's time_us: the p50 of collbench's rows, the mean an nccl-tests log printed. A reader saw one
    # point at 88.9 us in the profile and 146.80 us in the table, with no word why.
    from collbench.importers.nccl_tests import read_nccl_tests

    ((key, rows),) = group_rows(_all_to_all()).items()
    html = op_section(key, rows, [], [])
    summary = html[html.index("<summary>") : html.index("</summary>")]
    assert "time: collbench&#x27;s rows: the p50 of the slowest rank&#x27;s iterations" in summary, summary
    assert "mean" not in summary
    log = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "all_reduce_perf-2080ti-x2-autodl.log"
    imported = read_nccl_tests(log, notes=[])
    ((key, rows),) = group_rows(imported).items()
    html = op_section(key, rows, [], [])
    summary = html[html.index("<summary>") : html.index("</summary>")]
    assert "time: nccl-tests&#x27; rows: the mean over iterations, as the log prints it" in summary, summary
    assert "p50" not in summary
    ((key, rows),) = group_rows(_barrier()).items()
    html = op_section(key, rows, [], [])
    assert "the p50 of the slowest rank" in html[html.index("<summary>") : html.index("</summary>")]


def test_a_size_of_whole_blocks_shows_its_bytes_not_a_rounded_label() -> None:
    # reduce-scatter native over 3 ranks rounds 16 KiB down to whole blocks, 16380 B (count 4095): the
    # table said '16.0K', which reads as 16384. A label that is the size stays (64K, 1.5M).
    rows = [
        point_row("native", size, 100.0, world_size=3, op="reduce-scatter")
        for size in (16380, 65536, 1536 * 1024, 262140)
    ]
    out = _render(rows)
    for cell in ("16380B", "64K", "1.5M", "262140B"):
        assert re.search(rf"^\s*{re.escape(cell)}\s", out, re.M), out
    assert "16.0K" not in out and "256.0K" not in out


def test_a_one_rank_table_says_1_rank() -> None:
    # `sweep --ranks 1` (which it allows, with a note) titled its table 'all-reduce · ring · gloo · 1 ranks'.
    out = _render([point_row("ring", 1024, 2.0, world_size=1), *barrier_rows("native", 1, 3.0)])
    assert "all-reduce · ring · gloo · 1 rank · float32" in out and "barrier · native · gloo · 1 rank ·" in out, out
    assert "1 ranks" not in out
    assert "· 4 ranks ·" in _render(_barrier())


def test_rows_of_two_reductions_are_two_lines() -> None:
    # A sweep of -o sum and one of -o max streamed into one file were drawn as one 'native' line, the
    # faster row at each size, without a word. An all-gather's rows keep the sweep's -o unapplied: one line.
    from dataclasses import replace

    sums = [point_row("native", size, 100.0 + size / 1000) for size in (1024, 4096, 16384)]
    assert {r.redop for r in sums} == {"sum"}
    maxes = [replace(r, redop="max", time_us=r.time_us * 2) for r in sums]
    ((key, rows),) = group_rows(sums + maxes).items()
    html = op_section(key, rows, [], [])
    assert ">native max<" in html and ">native sum<" in html, html
    gathers = [replace(r, op="all-gather") for r in sums + maxes]
    ((key, rows),) = group_rows(gathers).items()
    html = op_section(key, rows, [], [])
    assert ">native<" in html and "native max" not in html and "native sum" not in html


def test_files_sharing_two_reductions_of_a_series_name_each(tmp_path: Path) -> None:
    # Two files each holding a sum and a max sweep of one series: the note named the series twice in the
    # same words ('all-reduce native float32 at 4 ranks over gloo; all-reduce native ...'), now once each.
    from dataclasses import replace

    from collbench.cli.report import shared_series

    sums = [point_row("native", size, 100.0 + size / 1000) for size in (1024, 4096)]
    rows = sums + [replace(r, redop="max") for r in sums]
    (note,) = shared_series([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], [rows, rows])
    series = note.split("hold the same series, ")[1].split(": the page")[0].split("; ")
    assert len(series) == 2 and len(set(series)) == 2, note
    assert {s.split()[3] for s in series} == {"sum", "max"}, series
    # One reduction only: the series is named without it, as before.
    (plain,) = shared_series([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], [sums, sums])
    assert "float32 at" in plain and " sum " not in plain, plain
