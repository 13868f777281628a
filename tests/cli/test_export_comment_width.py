"""Exports keep their comments within 80 columns: to stdout, `collbench export nccl-tuner P` printed
comment lines of up to 166 columns (and `ompi-rules` 105), one line each, cut by no terminal but read
by none. A longer comment is broken at spaces into comment lines of its own (exporters/exported.py
wrap_comments), so the file stays what its consumer reads: NCCL's example tuner plugin skips a line
starting with `#` (plugins/tuner/example), Open MPI's rules reader skips from `#` to the end of the line
wherever it stands (ompi/mca/coll/base/coll_base_util.c, ompi_coll_base_file_getnext_long), and its
rankfile lexer takes `#.*\\n` after any white space (orte/mca/rmaps/rank_file/rmaps_rank_file_lex.l).
tests/mpi runs Open MPI itself on these files."""

from __future__ import annotations

from pathlib import Path

import pytest
from export_text import unwrapped
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.exporters.exported import TEXT_COLUMNS, wrap_comments

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"


@pytest.mark.parametrize(
    "args",
    [
        ["nccl-tuner", "--from-other-backend"],
        ["ompi-rules", "--from-other-backend"],
        ["env", "--from-other-backend"],
        ["ompi-rankfile"],
    ],
    ids=lambda args: args[0],
)
def test_every_comment_an_export_prints_fits_80_columns(args: list[str]) -> None:
    result = CliRunner().invoke(app, ["export", args[0], str(PROFILE), *args[1:]], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    comments = [line for line in lines if "#" in line]
    assert comments and all(len(line) <= TEXT_COLUMNS for line in comments), result.stdout
    # Every line is a comment or what it was: nothing of a comment starts a line of its own.
    for line in lines:
        assert line.lstrip().startswith("#") or not line.startswith(" " * 4 + "#"), line
    assert unwrapped(result.stdout).count("\n") < result.stdout.count("\n")  # something was long enough to break


def test_a_comment_is_broken_at_spaces_under_its_own_hash() -> None:
    long = "# " + " ".join(f"word{i}" for i in range(30))
    broken = wrap_comments(long).splitlines()
    assert len(broken) > 1 and all(len(line) <= TEXT_COLUMNS for line in broken)
    assert broken[0].startswith("# word0 ") and all(line.startswith("#   word") for line in broken[1:])
    assert unwrapped("\n".join(broken)) == long


def test_a_trailing_comment_keeps_its_entry_whole_and_continues_under_its_hash() -> None:
    entry = "    185364 4 0 0  # native:ring -> ring: measured at 262144 B: 1.882e+04 us against Open MPI's "
    entry += "fixed decision 4.302e+04 us, 2.29x, noise 18.3%"
    broken = wrap_comments(entry, trailing=True).splitlines()
    assert broken[0].startswith("    185364 4 0 0  # native:ring -> ring:")
    hash_at = broken[0].index("#")
    assert all(line.index("#") == hash_at and line[:hash_at].isspace() for line in broken[1:])
    assert all(len(line) <= TEXT_COLUMNS for line in broken)
    # Without trailing (NCCL's tuner config: `#` only starts a line), such a line is kept as it is.
    assert wrap_comments(entry) == entry


def test_what_has_no_place_to_break_is_kept_whole() -> None:
    rule = "allreduce,0,-1,ring,simple,-1,-1,-1" + ",0" * 40  # a rule line: no comment to break
    assert wrap_comments(rule) == rule
    word = "#   " + "x" * 120  # one word longer than a line: never cut
    assert wrap_comments(word) == word
