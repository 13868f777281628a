"""tuning/resume.py: a tune never starts over the rows an interrupted one kept, and says where they are."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from collbench.errors import ConfigError, InputFileError, RankError
from collbench.tuning.config import TuneConfig, check_config, partial_paths
from collbench.tuning.resume import check_partials, kept_rows_hint, with_hint


def test_partials_refuse_a_fresh_start_and_allow_resume(tmp_path: Path) -> None:
    parts = [tmp_path / "r.partial-0.jsonl", tmp_path / "r.partial-1.jsonl"]
    check_partials(parts, resume=False)  # nothing kept: a fresh tune may start
    with pytest.raises(ConfigError, match="no rows of an interrupted tune"):
        check_partials(parts, resume=True)
    parts[1].write_text('{"x": 1}\n')
    with pytest.raises(ConfigError, match=f"left its measured rows in {parts[1]}; add --resume"):
        check_partials(parts, resume=False)
    check_partials(parts, resume=True)


def test_resume_of_a_tune_stopped_before_its_first_point_says_so(tmp_path: Path) -> None:
    # Ctrl-C while the ranks started left partial-0 empty, and --resume said it 'looked for' that very file.
    parts = [tmp_path / "r.partial-0.jsonl", tmp_path / "r.partial-1.jsonl"]
    parts[0].touch()
    check_partials(parts, resume=False)  # a fresh tune may start over an empty file
    with pytest.raises(ConfigError) as refused:
        check_partials(parts, resume=True)
    assert str(refused.value) == (
        f"--resume: no rows of an interrupted tune to continue ({parts[0]} holds none: it stopped before its "
        "first point); run it without --resume"
    )


def test_hint_keeps_the_error_class_and_its_fields(tmp_path: Path) -> None:
    part = tmp_path / "r.partial-0.jsonl"
    assert kept_rows_hint([part]) == ""
    part.write_text('{"x": 1}\n')
    hint = kept_rows_hint([part])
    assert str(part) in hint and "--resume" in hint
    rank = with_hint(RankError(1, "h", "measuring", "died"), hint)
    assert isinstance(rank, RankError) and rank.rank == 1 and rank.problem == "died" + hint
    file = with_hint(InputFileError("o.csv", "cannot write", line=3), hint)
    assert isinstance(file, InputFileError) and str(file) == f"o.csv:3: cannot write{hint}"
    config = with_hint(ConfigError("bad"), hint)
    assert isinstance(config, ConfigError) and str(config) == f"bad{hint}"


def test_a_failed_sweep_that_named_its_rows_gets_only_the_way_on(tmp_path: Path) -> None:
    # The tune's sweep said where its rows are (runtime/sweep/files.kept_rows_note); the tune added the
    # same file again: "the 3 rows measured so far are in F; the rows measured so far are in F; ...".
    part = tmp_path / "p-results.partial-0.jsonl"
    part.write_text('{"x": 1}\n')
    said = f"RuntimeError: injected fault; the 3 rows measured so far are in {part}"
    rank = with_hint(RankError(1, "h", "measuring all-reduce ring 512 B in-place", said), kept_rows_hint([part]))
    assert isinstance(rank, RankError)
    assert rank.problem == f"{said}; the same tune with --resume continues from them"
    assert str(rank).count(str(part)) == 1
    other = tmp_path / "p-results.partial-1.jsonl"
    other.write_text('{"x": 1}\n')
    both = kept_rows_hint([part, other])  # the sweep named one: the other is said as another round's
    assert with_hint(RankError(1, "h", "measuring", said), both).problem == (
        f"{said}; the other rounds' rows are in {other}; the same tune with --resume continues from them"
    )
    elsewhere = f"RuntimeError: injected fault; the 3 rows measured so far are in {tmp_path / 'mine.jsonl'}"
    assert with_hint(RankError(1, "h", "measuring", elsewhere), both).problem == elsewhere + both  # none named


GOLDEN_ROWS = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "tune-quick-results.jsonl"


def _interrupted(tmp_path: Path) -> tuple[TuneConfig, Path]:
    """A 2-rank all-reduce gloo tune that stopped with its first round's rows kept."""
    config = TuneConfig(ranks=2, output=tmp_path / "p.yaml", quick=True, resume=True)
    part = partial_paths(config)[0]
    part.write_bytes(GOLDEN_ROWS.read_bytes())
    return config, part


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"ranks": 4}, "2 ranks, not --ranks 4"),
        ({"ops": ("all-gather",)}, "--op all-reduce, not all-gather"),
        ({"backend": "nccl"}, "--backend gloo, not nccl"),
    ],
)
def test_resume_as_another_tune_is_refused_and_keeps_the_rows(
    tmp_path: Path, change: dict[str, object], says: str
) -> None:
    config, part = _interrupted(tmp_path)
    before = part.read_bytes()
    with pytest.raises(ConfigError) as caught:
        check_config(dataclasses.replace(config, **change))  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message and says in message and str(part) in message
    assert part.read_bytes() == before


def test_resume_as_the_same_tune_is_allowed(tmp_path: Path) -> None:
    config, _ = _interrupted(tmp_path)
    check_config(config)
    check_config(dataclasses.replace(config, ops=("all_reduce", "all-gather")))  # more ops: the rows still count
    check_config(dataclasses.replace(config, ops=("all",), ranks=None, backend="auto"))


def test_partial_rows_outlive_the_saving_of_the_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tune stopped while it saves (SIGTERM there exits 143) must leave its rows for --resume."""
    from collbench.results.io import read_rows
    from collbench.tuning import pipeline
    from collbench.tuning.placement import Placement

    config, part = _interrupted(tmp_path)
    config = dataclasses.replace(config, resume=False)
    part.unlink()
    rows = read_rows(GOLDEN_ROWS)

    def measured(*_args: object) -> list[object]:
        part.write_bytes(GOLDEN_ROWS.read_bytes())  # the round streams its rows as it measures
        return list(rows)

    monkeypatch.setattr(pipeline, "plan_placement", lambda *_args: Placement())
    monkeypatch.setattr(pipeline, "fixed_rounds", measured)
    monkeypatch.setattr(pipeline, "extra_rounds", lambda *_args: ([], None))
    seen: list[bool] = []

    def stopped(_profile: object) -> None:
        seen.append(part.exists())
        raise SystemExit(143)

    with pytest.raises(SystemExit):
        pipeline.run_tune(config, save=stopped)
    assert seen == [True] and part.read_bytes() == GOLDEN_ROWS.read_bytes()
    assert config.rows_path.exists()  # the results were written before the profile


@pytest.mark.parametrize("text", [b"garbage\n", b"\x00\xff", b""])
def test_a_damaged_depth_file_is_said_as_such(tmp_path: Path, text: bytes) -> None:
    # It read 'the interrupted tune ... measured \x00\ufffd, not --quick' (or 'measured , not --quick').
    from collbench.tuning.resume import partial_depth_path

    config, part = _interrupted(tmp_path)
    depth = partial_depth_path(config.rows_path)
    depth.write_bytes(text)
    with pytest.raises(InputFileError) as caught:
        check_config(config)
    message = str(caught.value)
    assert message.startswith(f"{depth}: says '") and "\n" not in message
    assert "no depth of a tune ('--quick' or 'a thorough tune (no --quick)')" in message
    assert part.read_bytes() == GOLDEN_ROWS.read_bytes() and depth.read_bytes() == text
    depth.write_text("--quick\n")
    check_config(config)
