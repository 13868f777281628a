"""`collbench --help` and every command's --help import no heavy library: torch (1.5 s of CPU), scipy,
numpy (about 70 ms), pydantic, pandas, pyarrow, matplotlib, jinja2 are imported when a command needs
them, not to print its options.

A correctness check, not a timing: one fresh interpreter imports the CLI, asks each command for its
help in turn, and reports which heavy modules are loaded after each (sys.modules only grows, so the
first command that pulls one in is the one named). benchmarks/README.md reports the CPU time.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "scipy", "numpy", "pandas", "pyarrow", "matplotlib", "jinja2", "pydantic")

_PROBE = """
import contextlib, io, json, sys
from collbench.cli.app import app
from typer.main import get_command

def paths(command, prefix):
    # The names alone, from the root's table: getting a command would import its module.
    yield prefix
    if not prefix:
        from collbench.cli.app import COMMANDS, GROUPS
        from typer.main import get_group
        import importlib
        yield from ([name] for name in COMMANDS)
        for name, (module, _) in GROUPS.items():
            yield [name]
            group = get_group(importlib.import_module(f"collbench.cli.{module}").app)
            yield from ([name, sub] for sub in group.list_commands(None))

heavy = json.loads(sys.argv[1])
seen = {}
for path in paths(get_command(app), []):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            app([*path, "--help"], standalone_mode=False)
        except SystemExit:
            pass
    if "Usage:" not in out.getvalue():
        raise SystemExit(f"no help printed for {path}: {out.getvalue()!r}")
    seen[" ".join(path) or "collbench"] = [m for m in heavy if m in sys.modules]
    if not path:
        from collbench.cli.app import COMMANDS, GROUPS
        modules = {f"collbench.cli.{module}" for module, _ in [*COMMANDS.values(), *GROUPS.values()]}
        seen["commands loaded by collbench --help"] = sorted(modules & set(sys.modules))
print(json.dumps(seen))
"""


def test_every_help_imports_no_heavy_module() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(HEAVY)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout)
    # Every command and group is asked: the root, 9 commands, 3 groups and their commands.
    assert {"collbench", "sweep", "tune", "fit", "export nccl-plugin", "profile merge", "import nccl-tests"} <= set(
        seen
    )
    # `collbench --help` lists the commands without importing any of their modules.
    assert {path: loaded for path, loaded in seen.items() if loaded} == {}
