"""tuning/resume.py: a tune never starts over the rows an interrupted one kept, and says where they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.errors import ConfigError, InputFileError, RankError
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
