"""tune's PNG: bars from the fastest iteration to the p50 (one 80 ms stall does not stretch the axis
over decades), and the legend beside the axes, off the data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import pytest
from report_inputs import EXAMPLE_RESULTS, example_profile

from collbench.report.plots import plot_tune
from collbench.results.io import read_rows

T = TypeVar("T")


def _kept_figure(monkeypatch: pytest.MonkeyPatch, draw: Callable[[], T]) -> tuple[T, Any]:
    """What ``draw`` returns and the one figure it drew, kept open (plots close their figures)."""
    import matplotlib.pyplot as plt

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    drawn = draw()
    monkeypatch.setattr(plt, "close", close)
    (fig,) = figures
    return drawn, fig


def test_tune_plot_bars_and_legend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_rows(EXAMPLE_RESULTS) if r.op == "all-reduce"]
    # One stall: a slowest iteration 300x the p50, as a busy machine gives.
    rows = [replace(r, time_us_max=300 * r.time_us) if i == 3 else r for i, r in enumerate(rows)]
    path, fig = _kept_figure(monkeypatch, lambda: plot_tune(rows, [], example_profile(), tmp_path / "tune.png"))
    assert path.stat().st_size > 10_000
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in fig.axes:
        top = ax.get_ylim()[1]
        assert top <= 3 * max(r.time_us for r in rows), top
        assert "p50" in ax.get_ylabel() and "p25" in ax.get_ylabel()
        legend = ax.get_legend()
        assert legend is not None
        # Off the data: the legend's box does not overlap the axes' box.
        box, frame = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
        assert box.x0 >= frame.x1 or box.y1 <= frame.y0 or box.y0 >= frame.y1
    plt.close(fig)


def test_fit_plot_draws_no_curve_for_a_fit_that_misses_its_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from synthetic_rows import make_rows

    from collbench.models.fit import fit_results
    from collbench.models.fit_points import PointSummaries
    from collbench.report.plots import plot_fits

    rows = make_rows("ring", 8, 10.0, 1e-3 / 5, 0.0, noise=0.0, seed=0)
    # Falling with size: no non-decreasing model follows it.
    rows += [replace(r, algo="recursive-doubling", time_us=1e5 / (1 + r.size_bytes) ** 0.3) for r in rows]
    points = PointSummaries().extend(rows)
    report = fit_results(points)
    assert [f.usable for f in report.fits] == [False, True]  # recursive-doubling, ring
    _, fig = _kept_figure(monkeypatch, lambda: plot_fits(points.points(), report.fits, tmp_path / "fits.png"))
    top = fig.axes[0]
    assert [line.get_label() for line in top.get_lines()] == ["ring"]
    legend = top.get_legend()
    assert legend is not None
    assert "recursive-doubling\n(not usable: no curve)" in [t.get_text() for t in legend.get_texts()]
    plt.close(fig)


def test_fit_plot_legend_covers_no_measured_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example results (eight algorithms on 4 ranks, four not usable) fill the time panel from
    corner to corner: the legend inside it, where matplotlib found 'best', covered measured points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from collbench.models.fit import fit_results
    from collbench.models.fit_points import PointSummaries
    from collbench.report.plots import plot_fits

    points = PointSummaries().extend(read_rows(EXAMPLE_RESULTS))
    report = fit_results(points)
    assert any(not f.usable for f in report.fits) and any(f.usable for f in report.fits)
    _, fig = _kept_figure(monkeypatch, lambda: plot_fits(points.points(), report.fits, tmp_path / "fits.png"))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    top = fig.axes[0]
    box = top.get_legend().get_window_extent(renderer)
    drawn = np.concatenate([c.get_offsets() for c in top.collections if len(c.get_offsets())])
    assert len(drawn) >= len(report.fits) * 10
    on_screen = top.transData.transform(drawn)
    inside = (box.x0 <= on_screen[:, 0]) & (on_screen[:, 0] <= box.x1)
    inside &= (box.y0 <= on_screen[:, 1]) & (on_screen[:, 1] <= box.y1)
    assert not inside.any(), drawn[inside]
    # and within the figure, every label whole
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1
    plt.close(fig)


def test_fit_plot_of_no_usable_fit_draws_no_error_axes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A published log no model follows: its error panel was empty axes of 1B-8B and 0-1 %.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from typer.testing import CliRunner

    from collbench.cli.app import app

    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    log = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "all_reduce_perf-16rank-k8s-roce-legacy.log"
    result = CliRunner().invoke(app, ["fit", str(log), "--plot", str(tmp_path / "fits.png")])
    assert result.exit_code == 0, result.output
    (fig,) = figures
    errors = fig.axes[2]
    assert not errors.axison and not errors.collections and not errors.get_lines()
    assert [t.get_text() for t in errors.texts] == ["no usable fit: no model error"]


def _titles_inside(fig: object) -> None:
    """Every title of ``fig`` (the figure's and each axes') lies inside the figure, as drawn."""
    fig.canvas.draw()  # type: ignore[attr-defined]
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    frame = fig.bbox  # type: ignore[attr-defined]
    titles = [fig._suptitle] if fig._suptitle is not None else []  # type: ignore[attr-defined]
    titles += [ax.title for ax in fig.axes if ax.get_title()]  # type: ignore[attr-defined]
    assert titles
    for title in titles:
        box = title.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and box.y1 <= frame.y1, (title.get_text(), box, frame)


def test_fit_plot_titles_fit_the_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fit --plot` of one shape is one 6.5-inch column: its sentence of a title was cut at both ends."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from typer.testing import CliRunner

    from collbench.cli.app import app

    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    results = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
    result = CliRunner().invoke(app, ["fit", str(results), "--plot", str(tmp_path / "fits.png")])
    assert result.exit_code == 0, result.output
    (fig,) = figures
    sentence = "measured (points; crosses: set aside as their measurement marks them) and fitted (lines)"
    assert " ".join(fig._suptitle.get_text().split()) == sentence  # whole: wrapped where it must, not cut
    _titles_inside(fig)


def test_tune_plot_titles_fit_the_figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    plot_tune(read_rows(EXAMPLE_RESULTS), [], example_profile(), tmp_path / "tune.png")
    (fig,) = figures
    _titles_inside(fig)


def test_fit_plot_errors_are_the_fit_tables_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The error panel draws the points and figure the fit table summarises: its median and worst
    absolute values are the table's (issue 32: the panel showed +45% where the table said 16%, drawing
    each point's p50 against the model where the table reads its p25)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from synthetic_rows import make_rows

    from collbench.models.fit import fit_results
    from collbench.models.fit_points import PointSummaries
    from collbench.report.plots import plot_fits

    rows = make_rows("ring", 8, 10.0, 1e-3 / 5, 0.0, noise=0.15, seed=2)
    # Every row's p50 1.6x its p25, as a loaded machine gives: the fit reads the p25.
    rows = [replace(r, time_us_p25=r.time_us, time_us=1.6 * r.time_us) for r in rows]
    points = PointSummaries().extend(rows)
    (fit,) = fit_results(points).fits
    _, fig = _kept_figure(monkeypatch, lambda: plot_fits(points.points(), [fit], tmp_path / "fits.png"))
    drawn = np.abs(np.asarray(fig.axes[2].collections[0].get_offsets())[:, 1])
    assert len(drawn) == fit.points
    assert float(np.median(drawn)) == pytest.approx(fit.median_abs_pct_error, abs=1e-9)
    assert float(np.max(drawn)) == pytest.approx(fit.max_abs_pct_error, abs=1e-9)
    plt.close(fig)


def test_size_and_time_ticks_read_as_sizes_and_plain_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A new user's plots: tune's said 2^9 ... 2^21 under the points, fit's 10^3 and 10^4 for sizes and
    # 3x10^2, 4x10^2, 6x10^2 for times (a panel of less than a decade).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from typer.testing import CliRunner

    from collbench.cli.app import app

    figures = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    plot_tune(read_rows(EXAMPLE_RESULTS), [], example_profile(), tmp_path / "tune.png")
    results = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
    result = CliRunner().invoke(app, ["fit", str(results), "--plot", str(tmp_path / "fits.png")])
    assert result.exit_code == 0, result.output
    known = {"B", "K", "M", "G"}
    for fig in figures:
        fig.canvas.draw()
        for ax in fig.axes:
            if ax.get_xscale() != "log":
                continue
            sizes = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
            assert len(sizes) >= 3, sizes
            for text in sizes:  # 512B, 8K, 1M: a whole number and a unit, as nccl-tests writes them
                assert text[:-1].isdigit() and text[-1] in known, sizes
            values = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
            if ax.get_yscale() == "log":
                assert values and all(float(v) > 0 for v in values), values  # plain numbers: float() reads them


@pytest.mark.parametrize(
    ("limits", "shown"),
    [
        # tune --quick --ranks 3 on the VM: 170-4,500 us, where the decades gave one number, 1000.
        ((170.0, 4500.0), {"200", "500", "1000", "2000"}),
        ((30.0, 900.0), {"50", "100", "200", "500"}),
        # Two decades or more in view: their powers of ten alone, as before.
        ((20.0, 30000.0), {"100", "1000", "10000"}),
    ],
)
def test_a_time_axis_of_about_a_decade_says_more_than_one_number(limits: tuple[float, float], shown: set[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from collbench.report.plots import _readable_axes

    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.set_ylim(*limits)
    _readable_axes(ax, sizes=False)
    fig.canvas.draw()
    low, high = limits
    read = {
        t.get_text()
        for minor in (False, True)
        for t in ax.get_yticklabels(minor=minor)
        if t.get_text() and low <= float(t.get_text()) <= high
    }
    plt.close(fig)
    assert read == shown, read
