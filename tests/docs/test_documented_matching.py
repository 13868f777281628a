"""How documented commands are read and their shown output matched (the rules of docs/development.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs._documented import Command, DocError, Markers, missing_lines, parse_markers, read_blocks

PAGE = """# A page

<!-- doc-test: measured; slow; findings: ^stalls:|^x; y -->
```
$ collbench sweep --ranks 2 \\
    -b 1K
 size  count  out us
 ───────────────────
   1K    256   406.1
...
stalls: 1 of 3 points stalled
$ collbench fit rows.jsonl
```

```bash
collbench tune   # a shell block with no `$ collbench` line: not a command
```

<!-- doc-test: exit 2 -->
```
$ collbench export nccl-tuner p.yaml
error: this profile was measured over gloo
```
"""


def _page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_blocks_commands_continuations_and_markers_are_read(tmp_path: Path) -> None:
    blocks = read_blocks(_page(tmp_path, PAGE), "page.md")
    assert [b.line for b in blocks] == [4, 20]
    first, second = blocks
    assert first.markers.measured and first.markers.slow and first.markers.skip is None
    assert first.markers.findings is not None and first.markers.findings.search("x; y")
    assert [c.text for c in first.commands] == ["collbench sweep --ranks 2  -b 1K", "collbench fit rows.jsonl"]
    assert first.commands[0].shown[0] == " size  count  out us"
    assert first.commands[0].line == 5
    assert second.markers == Markers(exit_code=2)


@pytest.mark.parametrize(
    ("marker", "says"),
    [("skip laptop", "skip needs one of gpu, cluster, network"), ("fast", "unknown doc-test option 'fast'")],
)
def test_a_marker_this_test_does_not_know_is_an_error(marker: str, says: str) -> None:
    with pytest.raises(DocError, match=says):
        parse_markers(marker, "page.md:3")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("<!-- doc-test: slow -->\n\n```\n$ collbench layout\n```\n", "just before a block's fence"),
        ("<!-- doc-test slow -->\n```\n$ collbench layout\n```\n", "reads <!-- doc-test: OPTIONS -->"),
    ],
)
def test_a_marker_that_marks_no_block_is_an_error(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(DocError, match=says):
        read_blocks(_page(tmp_path, text), "page.md")


def test_a_fence_that_never_closes_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DocError, match="never closes"):
        read_blocks(_page(tmp_path, "```\n$ collbench layout\n"), "page.md")


def _command(*shown: str) -> Command:
    return Command("page.md", 1, "collbench x", shown)


def test_deterministic_output_matches_exactly_and_in_order() -> None:
    command = _command("a  1", "...", "c  3")
    plain = Markers()
    assert missing_lines(command, plain, "a  1   \nb\nc  3\n", "") == []
    assert missing_lines(command, plain, "a  2\nc  3\n", "") == ["a  1"]
    assert missing_lines(command, plain, "c  3\na  1\n", "") == ["c  3"]  # out of order
    assert missing_lines(command, plain, "a 1\nc  3\n", "") == ["a  1"]  # spacing counts too


def test_measured_output_matches_any_figure_but_the_same_words() -> None:
    measured = Markers(measured=True)
    command = _command(
        "  64K    16384  450.4*  0.146      0",
        " ────────────",
        "all-reduce, gloo, 2 on 1 node(s), machine 72aa8412369e",
    )
    out = "\n".join(
        [
            "  64K    16384   86.29  0.759      0",
            " ──────────────────",
            "all-reduce, gloo, 2 on 1 node(s), machine e45422f42bb4",
        ]
    )
    assert missing_lines(command, measured, out, "") == []
    assert missing_lines(command, measured, out.replace("gloo", "nccl"), "") == [command.shown[2]]
    assert missing_lines(_command("wrong elements: 0 (OK)"), measured, "wrong elements: 3 (FAILED)\n", "") == [
        "wrong elements: 0 (OK)"
    ]


def test_findings_are_shown_not_checked() -> None:
    markers = Markers(measured=True, findings=parse_markers("findings: ^stalls:", "p").findings)
    command = _command("stalls: 3 of 24 points stalled", "wrong elements: 0 (OK)")
    assert missing_lines(command, markers, "wrong elements: 0 (OK)\n", "") == []


def test_stdout_and_stderr_are_each_read_in_order() -> None:
    command = _command("note: skipped", "table", "error: late")
    assert missing_lines(command, Markers(), "table\n", "note: skipped\nerror: late\n") == []
    assert missing_lines(command, Markers(), "table\n", "error: late\nnote: skipped\n") == ["error: late"]
