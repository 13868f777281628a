"""Every `$ collbench` command of README.md and docs/*.md runs as shown (issue 34, item 2).

Each page's commands run in the page's order in a copy of the repository's tracked files under
tmp_path (never in the folder the tests start from); docs/development.md says how blocks are marked
and how shown output is matched. The fast test leaves out blocks marked `slow`; the slow test runs
every page that has one, all its blocks in order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs._documented import Block, Command, copy_clone, missing_lines, pages, read_blocks, run

FAST_TIMEOUT_S = 600.0
SLOW_TIMEOUT_S = 3600.0

PAGES = {name: read_blocks(path, name) for name, path in pages()}
SLOW_PAGES = [name for name, blocks in PAGES.items() if any(b.markers.slow and not b.markers.skip for b in blocks)]


def _check(command: Command, block: Block, cwd: Path, timeout_s: float) -> str | None:
    done = run(command, cwd, timeout_s)
    where = f"{command.page}:{command.line}: $ {command.text}"
    if done.returncode != block.markers.exit_code:
        return (
            f"{where}\nexited {done.returncode}, the page shows {block.markers.exit_code}\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
    missing = missing_lines(command, block.markers, done.stdout, done.stderr)
    if missing:
        shown = "\n".join(f"  {line}" for line in missing)
        return (
            f"{where}\nthese shown lines are not in its output (in order):\n{shown}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-2000:]}"
        )
    return None


def _run_page(page: str, tmp_path: Path, *, slow: bool) -> None:
    blocks = [b for b in PAGES[page] if b.markers.skip is None and (slow or not b.markers.slow)]
    if not blocks:
        pytest.skip(f"{page}: no `$ collbench` block to run here (none, or all marked skip or slow)")
    clone = copy_clone(tmp_path / "clone")
    failures = []
    for block in blocks:
        for command in block.commands:
            failure = _check(command, block, clone, SLOW_TIMEOUT_S if slow else FAST_TIMEOUT_S)
            if failure is not None:
                failures.append(failure)
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("page", list(PAGES))
def test_documented_commands_run_as_shown(page: str, tmp_path: Path) -> None:
    _run_page(page, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("page", SLOW_PAGES)
def test_documented_commands_run_as_shown_with_the_slow_ones(page: str, tmp_path: Path) -> None:
    _run_page(page, tmp_path, slow=True)
