"""The profile: a machine's tuning answer, as a versioned YAML file (schema in profiles/schema.json).

A profile says, for one machine (:func:`machine_fingerprint`) and one backend, which algorithm to run at
which size, per op, for every communicator shape it knows (world size, nodes): one :class:`RuleSet`
per shape, measured or predicted from the fitted models. Each rule carries its evidence (predicted
and measured time, gain over the backend's default). Jobs read it through
``Profile.load(path).select(op, nbytes, world_size=..., nodes=...)``; the exporters turn it into NCCL
and Open MPI files, one entry per shape.

Each rule set keeps up to two selections. ``rules`` is chosen among everything measured (collbench's
algorithms and NCCL's variants alike): the Python API and the DDP hook run it. ``nccl_rules``, on a
profile measured over NCCL, is chosen among NCCL's own variants only (``native`` and ``native:...``):
every NCCL export is built from it, since NCCL can run nothing else. A rule set without ``nccl_rules``
(measured over another backend, predicted from fits, or written before collbench kept the second
selection) has one selection, ``rules``, and the NCCL exports map it as they always did.

Schema version 2 holds ``rule_sets``; version 1 files (one shape: ``world_size``, ``nodes``,
``layout`` and ``rules`` at the top) still load, as one measured rule set. Every file is checked
against the JSON Schema (``collbench/profile/schema.json``, linked as profiles/schema.json) with
the ``jsonschema`` library before it is built (collbench's own check of the same keywords, with the
same messages, where that library is not installed), so a bad file fails at load, naming the element.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from collbench.backends import backend_named
from collbench.errors import InputFileError, UnknownNameError, UserError
from collbench.fileio import atomic_write_text, read_text_file
from collbench.filekinds import PROFILE_KIND, misfiled
from collbench.layouts.model import Layout
from collbench.layouts.rings import MAX_CHANNELS
from collbench.models.fitted import Fit
from collbench.models.stored import checked_fits
from collbench.profile.bounds import profile_problem, tree_problem
from collbench.profile.rules import Rule, check_coverage
from collbench.profile.schema_check import SchemaChecker, where
from collbench.runtime.launch.launchers import MAX_WORLD_SIZE
from collbench.schedules.ops import Op
from collbench.units import counted, ranks_on_nodes
from collbench.yamljson import parse_yaml

if TYPE_CHECKING:
    from collbench.topology.model import Topology

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
SCHEMA_PATH = Path(__file__).with_name("schema.json")
MAX_PROFILE_BYTES = 8 << 20
"""The largest profile collbench reads: real ones are tens of kilobytes (a hundred shapes, a few hundred
KB); parsing and checking 8 MiB of YAML takes seconds, 23 MB took 46 s and 1.4 GB before."""


HOST_FACTS = ("host_cores", "host_numa_nodes", "host_memory_bytes")
"""The facts of a CPU host that tell two machines apart when their ranks' devices look alike."""


def machine_fingerprint(topology: Topology) -> str:
    """The fingerprint of the machine ``topology`` was taken from, whatever number of ranks it kept.

    A topology's own fingerprint counts its rank devices, so tunes of one machine at 2 and 4 ranks
    (or topologies cut to the first 2 or 4 GPUs) would look like two machines, and their profiles
    would not merge. Subsets keep the first rank devices and every other device (NICs, CPUs), so
    the topology cut to its first two ranks is the same for any cut of one machine: its fingerprint,
    with a CPU host's cores, NUMA nodes and memory (its CPU ranks' devices are alike on any host of
    that CPU model), is the machine's. 12 hex digits, like the topology's.
    """
    ranks = topology.rank_devices
    first = topology.subset(min(2, len(ranks))) if ranks else topology
    facts = sorted({(key, value) for device in ranks for key, value in device.extra if key in HOST_FACTS})
    payload = {"first_ranks": first.fingerprint, "host": facts}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class ProfileLayout:
    """The ring orders and trees the rules were measured with (``params.layout`` names it)."""

    name: str
    rings: tuple[tuple[int, ...], ...] = ()
    trees: tuple[tuple[int, ...], ...] = ()
    _executed: Layout | None = field(default=None, init=False, repr=False, compare=False)
    """:meth:`as_layout`'s, made on first use."""

    def as_layout(self) -> Layout:
        """The layout a rule measured on this one runs with (its rings and trees), made once: the Python
        API asks for it at every call, and building one checks every ring, O(ranks log ranks). Call it
        on a layout a :class:`RuleSet` holds (checked there)."""
        made = self._executed
        if made is None:
            made = Layout(rings=self.rings, trees=self.trees, name=self.name)
            object.__setattr__(self, "_executed", made)
        return made

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rings": [list(r) for r in self.rings], "trees": [list(t) for t in self.trees]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileLayout:
        return cls(
            name=str(data["name"]),
            rings=tuple(tuple(int(x) for x in r) for r in data.get("rings") or ()),
            trees=tuple(tuple(int(x) for x in t) for t in data.get("trees") or ()),
        )


def check_rule_algorithm(rule: Rule) -> None:
    """Raise ValueError when ``rule.algo`` is not an algorithm collbench knows for ``rule.op``.

    A profile naming an algorithm nothing can run must fail when it is loaded, not inside the job.
    """
    from collbench.backends import forced_problem
    from collbench.schedules.registry import algorithm_names, get_algorithm

    if rule.algo.native:
        # A backend library's own algorithm, forced (tune over NCCL, Open MPI, MPICH): the backends say.
        problem = forced_problem(rule.algo)
        if problem is not None:
            raise ValueError(f"{rule.op} rule at {rule.min_bytes} bytes: {problem}")
        return
    try:
        spec = get_algorithm(rule.algo)
    except UnknownNameError:
        raise ValueError(
            f"{rule.op} rule at {rule.min_bytes} bytes names unknown algorithm {rule.algo!r}; "
            f"known: {', '.join(algorithm_names())}"
        ) from None
    if not spec.supports(Op.parse(rule.op)):
        raise ValueError(f"{rule.op} rule at {rule.min_bytes} bytes names {rule.algo}, which does not do {rule.op}")


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The rules of one communicator shape: ``world_size`` ranks on ``nodes`` nodes.

    ``rules`` per op cover ``[0, unbounded)`` without gaps or overlaps (checked on construction), and
    name algorithms collbench knows for their op. ``predicted`` is True when the rules come from the
    fitted models rather than from measurements at this shape. ``layout`` is the ring orders and trees
    the rules were measured with (rules name it in ``params.layout``), when recorded.

    ``nccl_rules`` is the second selection, among NCCL's own variants only, where one was made (a tune
    over NCCL); None where there is none (the module's docstring says what that means). They cover
    their ops as ``rules`` do and name only ``native`` and ``native:...``.
    """

    world_size: int
    nodes: int
    rules: tuple[Rule, ...]
    predicted: bool = False
    layout: ProfileLayout | None = None
    nccl_rules: tuple[Rule, ...] | None = None

    def __post_init__(self) -> None:
        if self.world_size < 1 or self.nodes < 1:
            raise ValueError(f"world_size and nodes must be >= 1, got {self.world_size} and {self.nodes}")
        if self.nodes > self.world_size:
            raise ValueError(f"{self.world_size} ranks cannot span {self.nodes} nodes")
        if not self.predicted and self.world_size > MAX_WORLD_SIZE:
            raise ValueError(f"a measured rule set of {self.world_size} ranks: collbench runs at most {MAX_WORLD_SIZE}")
        if self.layout is not None:
            _check_layout(self.layout, self.world_size)
        if not self.rules:
            raise ValueError(f"the rule set for {self.shape_label} needs at least one rule")
        for rule in self.rules:
            Op.parse(rule.op)
            check_rule_algorithm(rule)
        check_coverage(self.rules)
        if self.nccl_rules is not None:
            _check_nccl_rules(self.nccl_rules, self.shape_label)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.world_size, self.nodes)

    @property
    def shape_label(self) -> str:
        return ranks_on_nodes(self.world_size, self.nodes) + (" (predicted)" if self.predicted else "")

    @property
    def ops(self) -> list[str]:
        """The ops this set has rules for, in rule order."""
        return list(dict.fromkeys(r.op for r in self.rules))

    def rules_for(self, op: str | Op) -> list[Rule]:
        """The rules of one op, smallest sizes first; raise UserError when the set has none."""
        name = (op if isinstance(op, Op) else Op.parse(op)).value
        found = [r for r in self.rules if r.op == name]
        if not found:
            raise UserError(
                f"the profile has no rules for {name} at {self.shape_label}; it has: {', '.join(self.ops)} "
                f"(run `collbench tune --op {name}` to add them)"
            )
        return found

    def select(self, op: str | Op, nbytes: int) -> Rule:
        """The rule for ``op`` at a message of ``nbytes`` bytes (see :meth:`Profile.select`)."""
        size = _check_nbytes(nbytes)
        for rule in self.rules_for(_check_op(op)):
            if rule.covers(size):
                return rule
        raise AssertionError(f"rules of {op} do not cover {size} bytes")  # coverage is checked at init

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "world_size": self.world_size,
            "nodes": self.nodes,
            "predicted": self.predicted,
            "layout": None if self.layout is None else self.layout.to_dict(),
            "rules": [r.to_dict() for r in self.rules],
        }
        if self.nccl_rules is not None:
            # Only where there is a second selection: a file without one reads as before, in older collbench too.
            out["nccl_rules"] = [r.to_dict() for r in self.nccl_rules]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RuleSet:
        layout = data.get("layout")
        nccl_rules = data.get("nccl_rules")
        return cls(
            world_size=int(data["world_size"]),
            nodes=int(data["nodes"]),
            rules=tuple(Rule.from_dict(r) for r in data["rules"]),
            predicted=bool(data.get("predicted", False)),
            layout=None if layout is None else ProfileLayout.from_dict(layout),
            nccl_rules=None if nccl_rules is None else tuple(Rule.from_dict(r) for r in nccl_rules),
        )


def _check_layout(layout: ProfileLayout, world_size: int) -> None:
    """ValueError unless each ring orders every rank ``0..world_size-1`` once and each tree gives every
    rank a parent (a rank, or -1 for the root).

    A rankfile and the ring a job runs are built from these lists: a repeated rank would put two ranks
    on one slot, and a ring shorter than the world leaves ranks nowhere.
    """
    for kind, orders in (("rings", layout.rings), ("trees", layout.trees)):
        if len(orders) > MAX_CHANNELS:
            raise ValueError(
                f"layout {layout.name!r} has {len(orders)} {kind}, more than {MAX_CHANNELS} (NCCL's channels)"
            )
    for i, ring in enumerate(layout.rings):
        # The length first: a predicted shape may be far larger than the ring, and no list of its ranks is made.
        if len(ring) != world_size or sorted(ring) != list(range(world_size)):
            shown = list(ring[:8]) + (["..."] if len(ring) > 8 else [])
            raise ValueError(
                f"layout {layout.name!r} ring {i} {shown} is not an order of the ranks 0..{world_size - 1} "
                f"(each exactly once)"
            )
    for i, tree in enumerate(layout.trees):
        problem = tree_problem(list(tree), world_size)
        if problem is not None:
            raise ValueError(f"layout {layout.name!r} tree {i} {problem}")


def _check_nccl_rules(rules: tuple[Rule, ...], shape: str) -> None:
    """ValueError unless ``rules`` are a selection among NCCL's variants covering their ops."""

    if not rules:
        raise ValueError(f"the NCCL selection for {shape} is empty; leave nccl_rules out instead")
    for rule in rules:
        Op.parse(rule.op)
        if not rule.algo.native:
            raise ValueError(
                f"nccl_rules at {shape}: the {rule.op} rule at {rule.min_bytes} bytes names {rule.algo}, which is "
                "not one of NCCL's own variants (native, native:...); collbench's algorithms belong in rules"
            )
        try:
            check_rule_algorithm(rule)
        except ValueError as exc:
            raise ValueError(f"nccl_rules at {shape}: {exc}") from None
    try:
        check_coverage(rules)
    except ValueError as exc:
        raise ValueError(f"nccl_rules at {shape}: {exc}") from None


def _check_native_rules(backend: str, rule_sets: tuple[RuleSet, ...]) -> None:
    """ValueError for a rule naming a variant its backend does not run (an NCCL variant,
    ``native:ring/simple@16ch``, in a backend ``mpi`` profile: exported as Open MPI rules it would be read
    as a different algorithm). A backend that is not one here (an imported log's) is not checked."""
    named = backend_named(backend)
    if named is None:
        return
    for rule_set in rule_sets:
        for rule in (*rule_set.rules, *(rule_set.nccl_rules or ())):
            why = named.foreign_native(rule.algo)
            if why is not None:
                raise ValueError(f"{rule.op} rule at {rule.min_bytes} bytes names {rule.algo!r}, {why}")


def _check_op(op: Any) -> str | Op:
    """``op`` as given when it is an op's name or an Op; ValueError for anything else (None, a number),
    which would otherwise fail deep inside name parsing with an AttributeError."""
    if not isinstance(op, (str, Op)):
        raise ValueError(f"op must be an op name such as 'all-reduce' (or an Op), got {op!r}")
    return op


def _check_shape(name: str, value: Any) -> int | None:
    """``world_size``/``nodes`` as given when None or a whole number; ValueError otherwise."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{name} must be a whole number or None, got {value!r}")
    return value


def _check_nbytes(nbytes: Any) -> int:
    """``nbytes`` as an int; ValueError for a negative, fractional, infinite or NaN size, or a non-number."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)):
        raise ValueError(f"nbytes must be a whole number of bytes, got {nbytes!r}")
    if isinstance(nbytes, float) and not (math.isfinite(nbytes) and nbytes.is_integer()):
        raise ValueError(f"nbytes must be a whole number of bytes, got {nbytes!r}")
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    return int(nbytes)


@dataclass(frozen=True, slots=True)
class Profile:
    """Which algorithm at which size, for one machine and backend, per communicator shape.

    ``rule_sets`` hold one :class:`RuleSet` per (world size, nodes), each shape once, at least one of
    them measured; the first measured set is the profile's default shape (``world_size``, ``nodes``,
    ``rules`` and ``layout`` are its, for callers that know one shape). ``fits`` are the fitted models
    of every shape (in the file: ``collbench fit --json``'s fit objects).
    """

    fingerprint: str
    host: str
    backend: str
    rule_sets: tuple[RuleSet, ...]
    fits: tuple[Fit, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    command: str = ""
    created: str = ""
    """ISO 8601 time the profile was made (UTC)."""
    selection: dict[str, Any] = field(default_factory=dict)
    """The selection settings used (thresholds), so a reader knows what "beyond noise" meant."""
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.rule_sets:
            raise ValueError("a profile needs at least one rule set")
        shapes = [s.shape for s in self.rule_sets]
        repeated = sorted({s for s in shapes if shapes.count(s) > 1})
        if repeated:
            listed = ", ".join(ranks_on_nodes(w, n) for w, n in repeated)
            raise ValueError(f"a profile holds each communicator shape once; repeated: {listed}")
        if all(s.predicted for s in self.rule_sets):
            raise ValueError("a profile needs at least one measured rule set (all are predicted)")
        _check_native_rules(self.backend, self.rule_sets)

    @property
    def default_set(self) -> RuleSet:
        """The first measured rule set: what ``select`` uses when no shape is given."""
        return next(s for s in self.rule_sets if not s.predicted)

    @property
    def world_size(self) -> int:
        return self.default_set.world_size

    @property
    def nodes(self) -> int:
        return self.default_set.nodes

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self.default_set.rules

    @property
    def layout(self) -> ProfileLayout | None:
        return self.default_set.layout

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """Every (world size, nodes) the profile has a rule set for, in file order."""
        return [s.shape for s in self.rule_sets]

    @property
    def ops(self) -> list[str]:
        """The ops the profile has rules for (in any shape), in rule order."""
        return list(dict.fromkeys(op for s in self.rule_sets for op in s.ops))

    def nodes_measured(self) -> dict[int, int]:
        """The nodes each measured world size ran on: its fits' where they say, then its measured rule
        sets' (what ``predict --profile`` and ``--predict-ranks`` keep the ranks a node of)."""
        out = {f.world_size: f.nodes for f in self.fits if f.nodes is not None}
        out.update({s.world_size: s.nodes for s in self.rule_sets if not s.predicted})
        return out

    def shapes_label(self) -> str:
        return ", ".join(s.shape_label for s in self.rule_sets)

    def rule_set(self, world_size: int | None = None, nodes: int | None = None) -> RuleSet:
        """The rule set of a communicator shape; None picks the default shape's value.

        With ``world_size`` alone, the set of that size (the measured one, then the one that keeps the
        measured ranks a node, as ``profile predict`` without nodes makes it, then the fewest nodes, when
        several have it). Raises UserError naming the shapes the profile has when none matches.
        """
        if world_size is None and nodes is None:
            return self.default_set
        candidates = [
            s
            for s in self.rule_sets
            if (world_size is None or s.world_size == world_size) and (nodes is None or s.nodes == nodes)
        ]
        if not candidates:
            asked = (counted(world_size, "rank") if world_size is not None else "any number of ranks") + (
                f" on {counted(nodes, 'node')}" if nodes is not None else ""
            )
            shape = f"{world_size or 'N'}" + (f":{nodes}" if nodes is not None else "")
            advice = (
                "measure it with `collbench tune` on that shape, or add it predicted from the profile's fits: "
                f"`collbench profile predict PROFILE --ranks {shape}`"
            )
            if world_size == 1:
                # The API on a group of one rank said to add it predicted, which profile predict refuses.
                advice = "a collective of one rank moves no data: a profile holds shapes of 2 ranks or more"
            raise UserError(f"the profile has no rules for {asked}; it has: {self.shapes_label()} ({advice})")
        from collbench.models.predict_defaults import kept_nodes

        measured = {s.world_size: s.nodes for s in self.rule_sets if not s.predicted}
        kept = None if world_size is None else kept_nodes(world_size, measured)
        return min(candidates, key=lambda s: (s.predicted, s.nodes != kept, s.nodes, s.world_size))

    def rules_for(self, op: str | Op) -> list[Rule]:
        """The default shape's rules of one op, smallest sizes first; UserError when it has none."""
        return self.default_set.rules_for(op)

    def select(self, op: str | Op, nbytes: int, *, world_size: int | None = None, nodes: int | None = None) -> Rule:
        """The rule for ``op`` at a message of ``nbytes`` bytes (counted as nccl-tests counts size).

        ``world_size`` and ``nodes`` pick the communicator shape (None: the default shape). Raises
        UnknownNameError for an unknown op, UserError when the profile has no rules for that op or
        shape, and ValueError for an op that is not a name or an Op (None), a shape that is not a whole
        number, or a size that is negative, fractional, infinite or NaN.
        """
        op = _check_op(op)
        size = _check_nbytes(nbytes)
        shape = self.rule_set(_check_shape("world_size", world_size), _check_shape("nodes", nodes))
        return shape.select(op, size)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "created": self.created,
            "command": self.command,
            "fingerprint": self.fingerprint,
            "host": self.host,
            "backend": self.backend,
            "versions": dict(self.versions),
            "selection": dict(self.selection),
            "fits": [f.to_dict() for f in self.fits],
            "rule_sets": [s.to_dict() for s in self.rule_sets],
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<profile>") -> Profile:
        """Build a profile from its YAML mapping (schema version 1 or 2); raise InputFileError naming what
        is wrong: a schema violation (with the element's path), overlapping or gapped rules, an unknown
        algorithm, or a repeated shape."""
        if not isinstance(data, dict):
            raise InputFileError(source, "not a collbench profile (expected a mapping at the top)")
        version = data.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise InputFileError(
                source,
                f"profile schema_version {version!r} is not supported (this collbench reads "
                f"{', '.join(map(str, READABLE_VERSIONS))}); re-run `collbench tune` to make a new one",
            )
        if version == 1:
            data = upgrade_v1(data)
        problem = schema_problem(data)
        if problem is not None:
            raise InputFileError(source, f"not a valid collbench profile: {problem}")
        problem = profile_problem(data)
        if problem is not None:
            raise InputFileError(source, f"not a profile collbench uses: {problem}")
        try:
            return cls(
                fingerprint=str(data["fingerprint"]),
                host=str(data.get("host") or ""),
                backend=str(data["backend"]),
                rule_sets=tuple(RuleSet.from_dict(s) for s in data["rule_sets"]),
                fits=tuple(checked_fits(data.get("fits") or [], source)),
                versions={str(k): str(v) for k, v in (data.get("versions") or {}).items()},
                command=str(data.get("command") or ""),
                created=str(data.get("created") or ""),
                selection=dict(data.get("selection") or {}),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputFileError(source, f"not a valid collbench profile ({exc})") from exc

    @classmethod
    def load(cls, path: str | Path) -> Profile:
        """Read a profile YAML file; raise InputFileError when missing or malformed."""
        path = Path(path)
        if not os.path.lexists(path):  # a link that loops is said by the reader (exists() is False for it)
            raise InputFileError(str(path), "no such profile; make one with `collbench tune`")
        text = read_text_file(path, "a profile YAML from `collbench tune`", max_bytes=MAX_PROFILE_BYTES)
        try:
            return cls.from_dict(parse_yaml(text, path), source=str(path))
        except InputFileError as exc:
            # Results, a topology or a log given for the profile: say so, not YAML's or the schema's words.
            raise misfiled(path, text, PROFILE_KIND) or exc from None

    def to_yaml(self) -> str:
        header = "# collbench tuning profile (schema: profiles/schema.json)\n"
        if self.command:
            header += f"# made by: {self.command}\n"
        return header + yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=100)

    def save(self, path: str | Path) -> Path:
        """Write the profile atomically (``fileio.atomic_output``): an existing profile at ``path`` is
        replaced whole or not at all, and keeps its permissions. Returns the path; raises InputFileError
        when the place cannot be written."""
        path = Path(path)
        atomic_write_text(path, self.to_yaml())
        return path


def nccl_selection_view(profile: Profile) -> Profile | None:
    """``profile`` with each rule set's selection among NCCL's own variants as its rules, for showing
    it as the rules are shown; only the shapes that have one. None where no shape has one."""
    sets = tuple(
        RuleSet(s.world_size, s.nodes, s.nccl_rules, predicted=s.predicted, layout=s.layout)
        for s in profile.rule_sets
        if s.nccl_rules is not None
    )
    if not sets or all(s.predicted for s in sets):
        return None
    return dataclasses.replace(profile, rule_sets=sets)


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-version-1 mapping (one shape at the top level) as a version-2 mapping with one rule set.

    Keys a version-1 file lacks are left out, so the schema check names them.
    """
    shape_keys = ("world_size", "nodes", "layout", "rules")
    rule_set: dict[str, Any] = {k: data[k] for k in shape_keys if k in data}
    rule_set["predicted"] = False
    out = {k: v for k, v in data.items() if k not in shape_keys}
    out["schema_version"] = SCHEMA_VERSION
    out["rule_sets"] = [rule_set]
    return out


@cache
def _validator() -> Any:
    """jsonschema's validator of the profile schema where the library is installed, else collbench's own
    check (:mod:`collbench.profile.schema_check`), which names the same first violation in the same words."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    try:
        import jsonschema
    except ImportError:
        # A machine lent bare (a GPU image without it, no package index): the same check without it.
        return SchemaChecker(schema)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def schema_problem(data: Any) -> str | None:
    """The first violation of the profile schema by ``data`` as one line (path: message), or None."""
    validator = _validator()
    if isinstance(validator, SchemaChecker):
        found = validator.best(data)
        if found is None:
            return None
        path, raw = found.path, found.message
    else:
        import jsonschema

        error = jsonschema.exceptions.best_match(validator.iter_errors(data))
        if error is None:
            return None
        path, raw = tuple(error.absolute_path), str(error.message)
    message = " ".join(raw.split())
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{where(path)}: {message}"
