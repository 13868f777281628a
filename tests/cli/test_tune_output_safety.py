"""tune never replaces what was measured unless asked: a profile or results file already at its outputs
is refused as sweep refuses a stream that holds rows (``--overwrite`` / ``--resume``), and ``--resume``
refuses partial rows of other sizes or another depth, which the resumed sweeps would drop."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import ConfigError
from collbench.profile.document import Profile
from collbench.results.io import read_rows
from collbench.tuning import config as tune_config
from collbench.tuning.config import TuneConfig, check_config, partial_paths, round_stream, segments_stream

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PROFILE_4RANKS = FIXTURES / "profiles" / "cpu-2core-gloo-4ranks.yaml"
GOLDEN_ROWS = FIXTURES / "golden" / "tune-quick-results.jsonl"
"""416 rows of a 2-rank gloo all-reduce ``tune --quick``: 512 B .. 2 MiB in x2 steps."""

TINY = ["--ranks", "2", "--backend", "gloo", "--op", "all-reduce", "--quick", "-b", "1K", "-e", "2K"]


def _measured_before(tmp_path: Path) -> tuple[Path, Path, bytes, bytes]:
    """A profile and its results where a tune writes (``o.yaml``, ``o-results.jsonl``)."""
    profile, results = tmp_path / "o.yaml", tmp_path / "o-results.jsonl"
    shutil.copyfile(PROFILE_4RANKS, profile)
    shutil.copyfile(GOLDEN_ROWS, results)
    return profile, results, profile.read_bytes(), results.read_bytes()


def test_a_tune_into_a_measured_profile_is_refused_and_keeps_both_files(tmp_path: Path) -> None:
    profile, results, profile_bytes, results_bytes = _measured_before(tmp_path)
    result = CliRunner().invoke(app, ["tune", *TINY, "-O", str(profile)])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())  # the console wraps long lines
    assert "Traceback" not in result.output
    assert f"{profile} holds a profile and {results} holds 416 measured rows" in line
    assert "pass --overwrite to replace them, --resume" in line
    assert profile.read_bytes() == profile_bytes and results.read_bytes() == results_bytes


@pytest.mark.parametrize("which", ["profile", "results"])
def test_either_file_alone_is_refused(tmp_path: Path, which: str) -> None:
    profile, results, _, _ = _measured_before(tmp_path)
    (results if which == "profile" else profile).unlink()
    config = TuneConfig(ranks=2, quick=True, output=profile)
    # One file held is 'it': 'q.yaml holds a profile; pass --overwrite to replace them' named one.
    with pytest.raises(ConfigError, match="pass --overwrite to replace it, --resume") as caught:
        check_config(config)
    assert "\n" not in str(caught.value)
    kept = profile if which == "profile" else results
    assert str(kept) in str(caught.value)


def test_a_results_file_elsewhere_is_checked_too(tmp_path: Path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("op,algo\n")
    with pytest.raises(ConfigError, match=f"{rows} holds measured rows"):
        check_config(TuneConfig(ranks=2, quick=True, output=tmp_path / "new.yaml", results_path=rows))


def test_empty_files_and_other_ranks_are_not_refused(tmp_path: Path) -> None:
    profile, results, _, _ = _measured_before(tmp_path)
    # Under a launcher ranks other than 0 check the options only: rank 0 alone writes the files.
    check_config(TuneConfig(ranks=2, quick=True, output=profile), files=False)
    profile.write_bytes(b"")
    results.write_bytes(b"")
    check_config(TuneConfig(ranks=2, quick=True, output=profile))  # nothing measured there to lose


def test_resume_and_overwrite_together_are_refused(tmp_path: Path) -> None:
    config = TuneConfig(ranks=2, quick=True, output=tmp_path / "o.yaml", resume=True, overwrite=True)
    with pytest.raises(ConfigError, match="give one of them"):
        check_config(config, files=False)


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_overwrite_replaces_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    short = dataclasses.replace(tune_config.QUICK, point_budget_s=0.01, warmup=0, max_rounds=2)
    monkeypatch.setattr(tune_config, "QUICK", short)
    profile, results, _, _ = _measured_before(tmp_path)
    result = CliRunner().invoke(app, ["tune", *TINY, "-O", str(profile), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert {s.world_size for s in Profile.load(profile).rule_sets} == {2}
    assert {r.size_bytes for r in read_rows(results)} == {1024, 2048}


def _interrupted(tmp_path: Path, stream: Path | None = None) -> tuple[TuneConfig, Path]:
    """A quick tune (512 B .. 2 MiB) stopped with the golden rows kept in ``stream`` (default: round 0's)."""
    config = TuneConfig(ranks=2, backend="gloo", output=tmp_path / "p.yaml", quick=True, resume=True)
    part = stream or partial_paths(config)[0]
    part.write_bytes(GOLDEN_ROWS.read_bytes())
    return config, part


def test_resume_with_other_sizes_is_refused_on_the_command_line_and_keeps_the_rows(tmp_path: Path) -> None:
    config, part = _interrupted(tmp_path)
    args = ["tune", "--resume", "--ranks", "2", "--op", "all-reduce", "--quick", "-b", "1M", "-e", "4M"]
    result = CliRunner().invoke(app, [*args, "-O", str(config.output)])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert "--resume: the interrupted tune in" in line and "rows at 11 sizes (512 B, 1 KiB" in line
    assert "that --quick -b 1048576 -e 4194304 does not measure" in line
    assert part.read_bytes() == GOLDEN_ROWS.read_bytes()
    assert not config.output.exists() and not config.rows_path.exists()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"min_bytes": 1024}, "rows at 1 size (512 B)"),
        ({"max_bytes": 1 << 20}, "rows at 1 size (2 MiB)"),
        ({"min_bytes": 768, "max_bytes": 3 << 20}, "rows at 13 sizes"),  # 768 B x2: none of the rows' sizes
    ],
)
def test_resume_with_sizes_that_leave_rows_out_is_refused(tmp_path: Path, change: dict[str, int], says: str) -> None:
    config, part = _interrupted(tmp_path)
    with pytest.raises(ConfigError, match="does not measure") as caught:
        check_config(dataclasses.replace(config, **change))
    assert says in str(caught.value) and str(part) in str(caught.value)
    assert part.read_bytes() == GOLDEN_ROWS.read_bytes()


def test_resume_with_the_same_sizes_or_more_is_allowed(tmp_path: Path) -> None:
    config, _ = _interrupted(tmp_path)
    check_config(config)
    check_config(dataclasses.replace(config, min_bytes=512, max_bytes=2 << 20))
    check_config(dataclasses.replace(config, min_bytes=256, max_bytes=8 << 20))  # every row still measured


def test_resume_of_another_depth_is_refused(tmp_path: Path) -> None:
    thorough = TuneConfig(ranks=2, backend="gloo", output=tmp_path / "p.yaml", resume=True)
    # A thorough tune's fifth round, and its second segment size: a quick tune runs neither.
    for stream in (round_stream(thorough, 5), segments_stream(thorough, 0)):
        _, part = _interrupted(tmp_path, stream)
        with pytest.raises(ConfigError, match=r"rounds \(.*\) that --quick -b 512 -e 2097152 does not run"):
            check_config(dataclasses.replace(thorough, quick=True))
        part.unlink()


def test_resume_at_another_segment_size_is_refused(tmp_path: Path) -> None:
    thorough = TuneConfig(ranks=2, backend="gloo", output=tmp_path / "p.yaml", resume=True)
    # The golden rows' segment size is the executor's 4 MiB; a thorough tune's second one is 256 KiB.
    _interrupted(tmp_path, segments_stream(thorough, 0))
    with pytest.raises(ConfigError, match="segment sizes 4 MiB of another depth"):
        check_config(dataclasses.replace(thorough, min_bytes=512, max_bytes=2 << 20))


def test_parquet_results_without_pyarrow_are_refused_before_a_rank_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tune writes its rows once every round is measured: without pyarrow, `--results r.parquet` measured
    # the whole tune and then failed to write them (sweep --output refuses it before any rank, 9f5bb43).
    import importlib.util

    import collbench.runtime.launch.ranks as launch_module

    def no_launch(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("no rank may start on bad input")

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else find_spec(name, *a)
    )
    monkeypatch.setattr(launch_module, "_launch_local", no_launch)
    rows = tmp_path / "r.parquet"
    result = CliRunner().invoke(app, ["tune", *TINY, "-O", str(tmp_path / "o.yaml"), "--results", str(rows)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Parquet needs pyarrow (pip install pyarrow" in errors[0], result.output
    assert f"--results {rows}" in " ".join(result.output.split()), result.output
    assert not rows.exists() and not (tmp_path / "o.yaml").exists()


def test_a_plot_already_there_is_refused_as_the_profile_is(tmp_path: Path) -> None:
    """'tune -O new.yaml --plot kept.png' replaced kept.png without a word, where a profile or results file
    there is refused; the plot is one of the tune's outputs too (tests/cli/test_outputs_not_replaced.py)."""
    kept = tmp_path / "kept.png"
    kept.write_bytes(b"\x89PNG an earlier tune's plot")
    config = TuneConfig(ranks=2, quick=True, output=tmp_path / "new.yaml", plot_path=kept)
    with pytest.raises(ConfigError) as caught:
        check_config(config)
    assert str(caught.value) == (
        f"{kept} is not empty; pass --overwrite to replace it, --resume to continue an interrupted tune, or "
        "-O/--results/--plot to write elsewhere"
    )
    assert kept.read_bytes() == b"\x89PNG an earlier tune's plot"
    check_config(dataclasses.replace(config, overwrite=True))
    # The default plot sits beside the profile (new.png): with the profile gone, it is still the tune's.
    default = dataclasses.replace(config, plot_path=None)
    (tmp_path / "new.png").write_bytes(b"\x89PNG")
    with pytest.raises(ConfigError, match=r"new\.png is not empty; pass --overwrite to replace it"):
        check_config(default)


def test_a_page_beside_the_profile_is_refused_as_the_profile_is(tmp_path: Path) -> None:
    """tune writes its report beside the profile (new.html for -O new.yaml): a page kept there, 'collbench
    report -O new.html' of another run say, was replaced without a word."""
    page = tmp_path / "new.html"
    page.write_text("<!DOCTYPE html><p>another run's report</p>\n")
    config = TuneConfig(ranks=2, quick=True, output=tmp_path / "new.yaml")
    with pytest.raises(ConfigError) as caught:
        check_config(config)
    assert str(caught.value) == (
        f"{page} is not empty; pass --overwrite to replace it, --resume to continue an interrupted tune, or "
        "-O/--results to write elsewhere"
    )
    assert page.read_text() == "<!DOCTYPE html><p>another run's report</p>\n"
    check_config(dataclasses.replace(config, overwrite=True))
