"""A fits file as a user makes one for ``predict --fits``: ``collbench fit SOURCE --json`` (a log or
result rows) through the CLI, written to a file; one home for the CLI tests that need one."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from collbench.cli.app import app


def fits_file(source: Path, out: Path) -> Path:
    """``collbench fit SOURCE --json`` written to ``out`` (asserting the fit succeeded); returns ``out``."""
    fitted = CliRunner().invoke(app, ["fit", str(source), "--json"])
    assert fitted.exit_code == 0, fitted.output
    out.write_text(fitted.stdout)
    return out
