"""The profile: a machine's tuning answer, as a versioned YAML file (schema in profiles/schema.json).

A profile says, for one machine (its topology fingerprint), one backend and one world size, which
algorithm to run at which size, per op, with the evidence: the fitted models and, per rule, the
predicted and measured time and the gain over the backend's default. Jobs read it through
``Profile.load(path).select(op, nbytes)``; the exporters turn it into NCCL and Open MPI files.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from collbench.errors import InputFileError, UserError
from collbench.fileio import check_writable, parse_yaml, read_text_file
from collbench.schedules.ops import Op
from collbench.tuning.selection import Rule, check_coverage

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class ProfileLayout:
    """The ring orders and trees the rules were measured with (``params.layout`` names it)."""

    name: str
    rings: tuple[tuple[int, ...], ...] = ()
    trees: tuple[tuple[int, ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rings": [list(r) for r in self.rings], "trees": [list(t) for t in self.trees]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileLayout:
        return cls(
            name=str(data["name"]),
            rings=tuple(tuple(int(x) for x in r) for r in data.get("rings") or ()),
            trees=tuple(tuple(int(x) for x in t) for t in data.get("trees") or ()),
        )


@dataclass(frozen=True, slots=True)
class Profile:
    """Which algorithm at which size, for one machine, backend and world size.

    ``rules`` per op cover ``[0, unbounded)`` without gaps (checked on construction). ``fits`` are
    the fitted models as plain dicts (``collbench fit --json``'s fit objects, ``Fit.to_dict()``).
    """

    fingerprint: str
    host: str
    backend: str
    world_size: int
    nodes: int
    rules: tuple[Rule, ...]
    fits: tuple[dict[str, Any], ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    command: str = ""
    created: str = ""
    """ISO 8601 time the profile was made (UTC)."""
    selection: dict[str, Any] = field(default_factory=dict)
    """The selection settings used (thresholds), so a reader knows what "beyond noise" meant."""
    layout: ProfileLayout | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.world_size < 1 or self.nodes < 1:
            raise ValueError(f"world_size and nodes must be >= 1, got {self.world_size} and {self.nodes}")
        if not self.rules:
            raise ValueError("a profile needs at least one rule")
        check_coverage(self.rules)

    @property
    def ops(self) -> list[str]:
        """The ops the profile has rules for, in rule order."""
        return list(dict.fromkeys(r.op for r in self.rules))

    def rules_for(self, op: str | Op) -> list[Rule]:
        """The rules of one op, smallest sizes first; raise UserError when the profile has none."""
        name = (op if isinstance(op, Op) else Op.parse(op)).value
        found = [r for r in self.rules if r.op == name]
        if not found:
            raise UserError(
                f"the profile has no rules for {name}; it has: {', '.join(self.ops)} "
                f"(run `collbench tune --op {name}` to add them)"
            )
        return found

    def select(self, op: str | Op, nbytes: int) -> Rule:
        """The rule for ``op`` at a message of ``nbytes`` bytes (counted as nccl-tests counts size).

        Raises UnknownNameError for an unknown op, UserError when the profile has no rules for it, and
        ValueError for a negative size.
        """
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        for rule in self.rules_for(op):
            if rule.covers(nbytes):
                return rule
        raise AssertionError(f"rules of {op} do not cover {nbytes} bytes")  # coverage is checked at init

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "created": self.created,
            "command": self.command,
            "fingerprint": self.fingerprint,
            "host": self.host,
            "backend": self.backend,
            "world_size": self.world_size,
            "nodes": self.nodes,
            "versions": dict(self.versions),
            "selection": dict(self.selection),
            "layout": None if self.layout is None else self.layout.to_dict(),
            "fits": [dict(f) for f in self.fits],
            "rules": [r.to_dict() for r in self.rules],
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<profile>") -> Profile:
        """Build a profile from its YAML mapping; raise InputFileError naming what is wrong."""
        if not isinstance(data, dict):
            raise InputFileError(source, "not a collbench profile (expected a mapping at the top)")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise InputFileError(
                source,
                f"profile schema_version {version!r} is not supported (this collbench reads {SCHEMA_VERSION}); "
                "re-run `collbench tune` to make a new one",
            )
        missing = [k for k in ("fingerprint", "backend", "world_size", "nodes", "rules") if k not in data]
        if missing:
            raise InputFileError(source, f"profile lacks {', '.join(missing)}")
        try:
            rules = tuple(Rule.from_dict(r) for r in data["rules"])
            fits = tuple(dict(f) for f in data.get("fits") or ())
            layout = data.get("layout")
            return cls(
                fingerprint=str(data["fingerprint"]),
                host=str(data.get("host") or ""),
                backend=str(data["backend"]),
                world_size=int(data["world_size"]),
                nodes=int(data["nodes"]),
                rules=rules,
                fits=fits,
                versions={str(k): str(v) for k, v in (data.get("versions") or {}).items()},
                command=str(data.get("command") or ""),
                created=str(data.get("created") or ""),
                selection=dict(data.get("selection") or {}),
                layout=None if layout is None else ProfileLayout.from_dict(layout),
                schema_version=int(version),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputFileError(source, f"not a valid collbench profile ({exc})") from exc

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        """Read a profile YAML file; raise InputFileError when missing or malformed."""
        path = Path(path)
        if not path.exists():
            raise InputFileError(str(path), "no such profile; make one with `collbench tune`")
        text = read_text_file(path, "a profile YAML from `collbench tune`")
        data = parse_yaml(text, path)
        return cls.from_dict(data, source=str(path))

    def to_yaml(self) -> str:
        header = "# collbench tuning profile (schema: profiles/schema.json)\n"
        if self.command:
            header += f"# made by: {self.command}\n"
        return header + yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=100)

    def save(self, path: str | Path) -> Path:
        """Write the profile atomically: a temporary file beside ``path``, fsynced, then renamed over it.

        An existing profile at ``path`` is replaced whole or not at all. Returns the path.
        """
        path = Path(path)
        check_writable(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = self.to_yaml()
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            # mkstemp makes the file private (0600); a profile is meant to be shared: keep the mode of
            # the file it replaces, else the usual rw-r--r--.
            mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
            os.chmod(tmp_name, mode)
            os.replace(tmp_name, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise
        return path
