"""The documented commands: `$ collbench ...` blocks read from README.md and docs/*.md, run, and matched.

docs/development.md ("The documented commands are tests") is the user-facing statement of every rule
here: which blocks are commands, the markers, and how shown output is matched.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!--\s*doc-test:\s*(?P<options>.*?)\s*-->\s*$")
SKIP_REASONS = ("gpu", "cluster", "network")
ELISION = "..."
# Every number a shown line of a measured block holds (1,234; 0.146; 1e-05; 64 in 64K), with a stall
# mark after it or not.
NUMBER = r"[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:e[-+]?\d+)?\*?"
_NUMBER_IN_DOC = re.compile(
    r"(?<![0-9A-Za-z])[0-9a-f]{12}(?![0-9A-Za-z])|[-+]?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:e[-+]?\d+)?\*?"
)
# A fingerprint (12 hex digits: topology or machine) names the machine that ran the command.
FINGERPRINT = r"[0-9a-f]{12}"


@dataclass(frozen=True)
class Markers:
    """What the HTML comment before a block says (docs/development.md lists them)."""

    skip: str | None = None
    slow: bool = False
    measured: bool = False
    findings: re.Pattern[str] | None = None
    exit_code: int = 0


@dataclass(frozen=True)
class Command:
    """One `$ ...` line (with its `\\` continuations) and the output lines shown after it."""

    page: str
    line: int
    text: str
    shown: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    markers: Markers
    commands: tuple[Command, ...] = field(default_factory=tuple)


class DocError(ValueError):
    """A page's block or marker that this test cannot read: the page says something it should not."""


def parse_markers(text: str, where: str) -> Markers:
    """Reads a marker's options (`skip gpu`, `slow`, `measured`, `findings: REGEX`, `exit N`), ';'-separated."""
    skip: str | None = None
    slow = measured = False
    findings: re.Pattern[str] | None = None
    exit_code = 0
    # findings takes the rest of the marker (its regular expression may hold ';'), so it comes last
    text, has_findings, pattern = text.partition("findings:")
    if has_findings:
        try:
            findings = re.compile(pattern.strip())
        except re.error as exc:
            raise DocError(f"{where}: findings is not a regular expression: {exc}") from exc
    for raw in filter(str.strip, text.split(";")):
        option = raw.strip()
        word, _, rest = option.partition(" ")
        if word == "skip":
            if rest.strip() not in SKIP_REASONS:
                raise DocError(f"{where}: skip needs one of {', '.join(SKIP_REASONS)}, got {rest.strip()!r}")
            skip = rest.strip()
        elif option == "slow":
            slow = True
        elif option == "measured":
            measured = True
        elif word == "exit" and rest.strip().isdigit():
            exit_code = int(rest.strip())
        else:
            raise DocError(f"{where}: unknown doc-test option {option!r}")
    return Markers(skip=skip, slow=slow, measured=measured, findings=findings, exit_code=exit_code)


def read_blocks(path: Path, page: str) -> list[Block]:
    """The page's fenced blocks that hold a `$ collbench` command, in order, with their markers."""
    lines = path.read_text(encoding="utf-8").split("\n")
    for n, line in enumerate(lines):
        # a marker that marks nothing would leave its block run (or unchecked) without a word
        if "doc-test" in line and line.lstrip().startswith("<!--"):
            if not MARKER.match(line):
                raise DocError(f"{page}:{n + 1}: a doc-test marker reads <!-- doc-test: OPTIONS -->")
            if n + 1 >= len(lines) or not lines[n + 1].startswith("```"):
                raise DocError(f"{page}:{n + 1}: a doc-test marker stands on the line just before a block's fence")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        start = i
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise DocError(f"{page}:{start + 1}: a fence that never closes")
        body = lines[start + 1 : end]
        i = end + 1
        if not any(line.startswith("$ collbench") for line in body):
            continue
        before = lines[start - 1] if start > 0 else ""
        found = MARKER.match(before)
        markers = parse_markers(found.group("options"), f"{page}:{start}") if found else Markers()
        blocks.append(Block(page, start + 1, markers, tuple(_commands(body, page, start + 2))))
    return blocks


def _commands(body: list[str], page: str, first_line: int) -> list[Command]:
    commands: list[Command] = []
    k = 0
    while k < len(body):
        if not body[k].startswith("$ "):
            if not commands:
                raise DocError(f"{page}:{first_line + k}: output before any `$` command")
            k += 1
            continue
        line_no = first_line + k
        text = body[k][2:]
        while text.endswith("\\") and k + 1 < len(body):
            k += 1
            text = text[:-1] + " " + body[k].strip()
        k += 1
        shown: list[str] = []
        while k < len(body) and not body[k].startswith("$ "):
            shown.append(body[k].rstrip())
            k += 1
        commands.append(Command(page, line_no, text, tuple(shown)))
    return commands


def line_pattern(shown: str, measured: bool) -> re.Pattern[str]:
    """The pattern an output line must match in full (trailing spaces dropped) to be the shown one."""
    if not measured:
        return re.compile(re.escape(shown.rstrip()))
    parts: list[str] = []
    last = 0
    for m in _NUMBER_IN_DOC.finditer(shown):
        parts.append(_spaced(shown[last : m.start()], between=last > 0))
        word = m.group()
        parts.append(FINGERPRINT if len(word) == 12 and not word.isdigit() and word.isalnum() else NUMBER)
        last = m.end()
    parts.append(_spaced(shown[last:].rstrip()))
    return re.compile("".join(parts))


def _spaced(text: str, between: bool = False) -> str:
    """Literal text whose runs of spaces match any run (columns widen and narrow with their figures)."""
    words = text.split()
    if not words:  # spaces between two figures keep them apart; at either end of the line, any
        return r"\s+" if between and text else r"\s*"
    # a table's rule (────) is as wide as its widest figure
    inner = r"\s+".join(re.sub("─+", "─+", re.escape(word)) for word in words)
    return (r"\s*" if text[0].isspace() else "") + inner + (r"\s*" if text[-1].isspace() else "")


def missing_lines(command: Command, markers: Markers, stdout: str, stderr: str) -> list[str]:
    """The shown lines found in neither stream, each stream read in the page's order ([] when all are there).

    A page shows stdout and stderr as a terminal interleaves them; captured apart, their interleaving is
    lost, so each shown line is looked for after the last match in stdout, then after the last in stderr.
    """
    streams = [[line.rstrip() for line in text.split("\n")] for text in (stdout, stderr)]
    at = [0, 0]
    missing: list[str] = []
    for shown in command.shown:
        if not shown.strip() or shown.strip() == ELISION:
            continue
        if markers.findings is not None and markers.findings.search(shown):
            continue
        pattern = line_pattern(shown, markers.measured)
        for s, got in enumerate(streams):
            hit = next((j for j in range(at[s], len(got)) if pattern.fullmatch(got[j])), None)
            if hit is not None:
                at[s] = hit + 1
                break
        else:
            missing.append(shown)
    return missing


def copy_clone(dest: Path) -> Path:
    """The repository's tracked files (as a fresh clone has them) copied under ``dest``."""
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=False, timeout=60)
    if listed.returncode == 0 and listed.stdout:
        names = [name for name in listed.stdout.decode().split("\0") if name]
        for name in names:
            source = REPO / name
            if source.is_file():
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    else:  # a source tree without git (an sdist): everything but what builds and runs leave
        shutil.copytree(
            REPO,
            dest,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", ".mypy_cache"),
        )
    return dest


def run(command: Command, cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Runs the command as a user would type it, through bash, with this interpreter's collbench first on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["COLUMNS"] = "80"
    env.pop("LINES", None)
    return subprocess.run(
        ["bash", "-c", command.text],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def pages() -> list[tuple[str, Path]]:
    found = [("README.md", REPO / "README.md")]
    found += [(f"docs/{p.name}", p) for p in sorted((REPO / "docs").glob("*.md"))]
    return found
