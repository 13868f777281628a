"""Fits as they are stored (``fit --json`` output, a profile's ``fits:``) and as rows measured them:
loading and checking them, and the node counts and devices a fit's rows say.

The CLI's ``predict`` and ``fit`` parse options and render; what a fits file may hold is decided here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from collbench.errors import ConfigError, InputFileError
from collbench.fileio import read_text_file
from collbench.filekinds import FITS_KIND, PROFILE_KIND, misfiled
from collbench.models.fitted import MIXED_SOURCES, Fit
from collbench.results.fields import name_problem
from collbench.results.io import RESULT_SUFFIXES
from collbench.results.row import ResultRow
from collbench.topology.bandwidth import gpu_links
from collbench.units import counted
from collbench.yamljson import parse_json, parse_yaml

MAX_FIT_WORLD_SIZE = 1 << 20
"""The most ranks a stored fit may say it was measured at: more than any machine has run one job on."""
GroupsSeen = dict[tuple[str, str, str, int], tuple[set[int], set[str], set[str]]]
"""Per (op, algo, backend, world size): the node counts, devices and sources its rows said."""


def load_fits(path: Path) -> list[Fit]:
    """Fit objects from ``fit --json`` output (a profile's are its ``Profile.fits``, checked alike by
    :func:`checked_fits`). Raises InputFileError, and for a profile too: read for its fits alone, its
    rules went unchecked (a profile of a schema to come, or of broken rules, predicted, exit 0, as
    ``predict --profile`` once did) and the nodes its rule sets were measured on unsaid."""
    if path.suffix.lower() in RESULT_SUFFIXES:
        # Measured rows, not fits: parsing them as one JSON document said only "Extra data". (Rows given as
        # a profile are named by what they hold in Profile.load: filekinds.misfiled.)
        raise InputFileError(
            str(path),
            "results, not fits: fit them first (`collbench fit FILE -O fits.json`, then --fits fits.json)",
        )
    text = read_text_file(path, "`collbench fit --json` output")
    try:
        data: Any = parse_yaml(text, path) if path.suffix.lower() in (".yaml", ".yml") else parse_json(text, path)
        if not isinstance(data, dict) or not isinstance(data.get("fits"), list):
            raise InputFileError(str(path), "no 'fits' list (expected `collbench fit --json` output)")
    except InputFileError as exc:
        # Results, a topology or a log given for the fits: say which (JSON's "Extra data" said nothing).
        raise misfiled(path, text, FITS_KIND) or exc from None
    if "rule_sets" in data or "schema_version" in data:
        raise InputFileError(
            str(path),
            f"this is {PROFILE_KIND}: give it as --profile {path} (read whole: its rules checked, and the"
            " nodes its rule sets were measured on kept)",
        )
    fits = checked_fits(data["fits"], str(path))
    if not fits:
        raise InputFileError(str(path), "the 'fits' list is empty")
    return fits


def checked_fits(entries: list[Any], source: str) -> list[Fit]:
    """Fit objects from stored entries (``fit --json``'s ``fits``, a profile's ``fits:``), each checked
    (:func:`stored_fit_problem`, no negative cost). Raises InputFileError naming ``source`` and the fit."""
    for entry in entries:
        problem = stored_fit_problem(entry) if isinstance(entry, dict) else None
        if problem is not None:
            raise InputFileError(source, problem)
    try:
        fits = [Fit.from_dict(f) for f in entries]
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputFileError(source, f"a fit is malformed ({exc})") from exc
    for fit in fits:
        # A negative latency or per-byte cost predicts negative times: the file is wrong, not the world.
        for name in ("alpha_us", "beta_us_per_byte", "gamma_us_per_byte"):
            value = getattr(fit, name, None)
            if isinstance(value, (int, float)) and not (math.isfinite(value) and value >= 0):
                raise InputFileError(
                    source, f"fit {fit.op}/{fit.algo}: {name} is {value}; it must be a finite number >= 0"
                )
    return fits


def stored_fit_problem(entry: dict[str, Any]) -> str | None:
    """What is wrong with one stored fit's world size and bandwidths, or None.

    A bandwidth is absent or null where the fit has no such term; where present it must be a finite
    number above 0: 0, a negative or an infinite bandwidth would be read as a free transfer and a NaN
    poisons every time, so the file is wrong rather than the machine fast.
    """
    label = f"fit {entry.get('op')}/{entry.get('algo')}"
    for field in ("op", "algo"):
        # As a row's: a model of an op or algorithm collbench does not know was kept, and predict said
        # only that no fit explained its data.
        name = entry.get(field)
        problem = name_problem(field, name) if isinstance(name, str) else f"{field} is {name!r}, not a name"
        if problem:
            return f"{label}: {problem}"
    world = entry.get("world_size")
    if isinstance(world, bool) or not isinstance(world, int) or not 1 <= world <= MAX_FIT_WORLD_SIZE:
        return f"{label}: world_size is {world!r}; it must be a whole number 1 to {MAX_FIT_WORLD_SIZE}"
    usable = entry.get("usable")
    if usable is not None and not isinstance(usable, bool):
        # Read by its truth: a hand-edited "usable": "false" (or "no") was a fit predict used.
        return f"{label}: usable is {usable!r}; it must be true or false"
    low, high = entry.get("min_bytes"), entry.get("max_bytes")
    if isinstance(low, int) and isinstance(high, int) and not 0 <= low <= high:
        # The sizes the fit saw: predict says how far it extrapolates from them, which an upturned or
        # negative range made nonsense of, without a word.
        return f"{label}: min_bytes {low} and max_bytes {high} are no range of sizes (0 <= min_bytes <= max_bytes)"
    segments = entry.get("segments")
    if segments is not None and not isinstance(segments, list):
        return f"{label}: segments is {segments!r}; it must be a list (null: one segment)"
    parts = [("", entry)] + [(f" segment {i}", seg) for i, seg in enumerate(segments or ()) if isinstance(seg, dict)]
    for where, part in parts[1:]:
        alpha = part.get("alpha_us")
        if isinstance(alpha, (int, float)) and not (math.isfinite(alpha) and alpha >= 0):
            return f"{label}{where}: alpha_us is {alpha!r}; it must be a finite number >= 0"
    for where, part in parts:
        for name in ("beta_gbps", "gamma_gbps"):
            value = part.get(name)
            if value is None:
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and value > 0)
            ):
                return f"{label}{where}: {name} is {value!r}; it must be a finite number > 0 (null: no such term)"
    return None


def nodes_measured(fits: list[Fit], given: int | None, profile_nodes: dict[int, int] | None = None) -> dict[int, int]:
    """The nodes each fit's world size was measured on: ``--measured-nodes`` (``given``) for every fit,
    else a profile's (``Profile.nodes_measured``, given as ``profile_nodes``), else what the fits carry
    (``fit --json`` of rows that said it)."""
    if given is not None:
        bad = sorted({f.world_size for f in fits if f.world_size % given})
        if bad:
            raise ConfigError(f"--measured-nodes {given}: {bad[0]} ranks do not spread evenly over {given} nodes")
        return {f.world_size: given for f in fits}
    if profile_nodes is not None:
        return dict(profile_nodes)
    return {f.world_size: f.nodes for f in fits if f.nodes is not None}


def noting_groups(rows: Iterable[ResultRow], seen: GroupsSeen) -> Iterator[ResultRow]:
    """The rows unchanged, noting each group's node counts, devices and sources on the way (a stream is
    read once)."""
    for row in rows:
        nodes, devices, sources = seen.setdefault(_group(row), (set(), set(), set()))
        nodes.add(row.nodes)
        devices.add(row.device_name)
        sources.add(row.source)
        yield row


def with_group(fit: Fit, seen: GroupsSeen) -> Fit:
    """The fit with its measured node count and device where every row of its group gave the same known
    one, and its rows' source (MIXED_SOURCES where they came from more than one)."""
    counts, devices, sources = seen.get((fit.op, fit.algo, fit.backend, fit.world_size), (set(), set(), set()))
    if len(counts) == 1 and min(counts) >= 1:
        fit = dataclasses.replace(fit, nodes=min(counts))
    if len(devices) == 1 and min(devices):
        fit = dataclasses.replace(fit, device=min(devices))
    return with_source(fit, sources)


def _group(row: ResultRow) -> tuple[str, str, str, int]:
    """The (op, algo, backend, world size) a row is fitted with: one fit's group."""
    return (row.op, row.algo, row.backend, row.world_size)


def with_rows(fits: Iterable[Fit], rows: Iterable[ResultRow]) -> list[Fit]:
    """``fits`` with what the ``rows`` they were fitted from say of each (:func:`with_group`: node count,
    device, source), for fits made from rows in memory: tune's, stored in its profile, say it as fit's
    files do (predict reads a GPU's generation and links from the device)."""
    seen: GroupsSeen = {}
    for _ in noting_groups(rows, seen):
        pass
    return [with_group(f, seen) for f in fits]


def with_source(fit: Fit, sources: set[str]) -> Fit:
    """The fit with the source of its group's rows (``sources``): the one they all said, MIXED_SOURCES
    where they said more than one; unchanged where none was seen."""
    if not sources:
        return fit
    return dataclasses.replace(fit, source=min(sources) if len(sources) == 1 else MIXED_SOURCES)


FIT_NODES_ADVICE = "`fit --nodes {racks}` records that (predict: --measured-nodes {racks})"
"""What :func:`nvlink_domain_note` tells a reader of fits to do (``{racks}``: the racks' count)."""
ROWS_NODES_ADVICE = (
    "`predict --measured-nodes {racks}` prices it so (rows that record their hosts refuse `fit --nodes`; "
    "a log's: `import nccl-tests LOG --nodes {racks}`)"
)
""":data:`FIT_NODES_ADVICE` for a fit of rows: they record their node count, which `fit --nodes` does not
replace (importers/nodes.py, ``given_nodes``), so only predict, or the log imported again, takes the racks."""
PREDICT_NODES_ADVICE = "`--measured-nodes {racks}` prices it so (`fit LOG --nodes {racks}` records it in a log's fit)"
""":data:`FIT_NODES_ADVICE` for predict: its fits may be of rows or a profile, which `fit --nodes` does not
take (rows record their node count), so what works there comes first."""
LOGS_NODES_ADVICE = "`import nccl-tests LOG --nodes {racks}` records that for its log; fit the rows with the others"
""":data:`FIT_NODES_ADVICE` for a fit of several logs: one ``fit --nodes`` gives every log the same count (a
72-rank and a 1,440-rank log are 1 and 20 racks), so each log's racks are given where it is imported."""


def nvlink_domain_note(
    what: str, world_size: int, device: str, nodes: int | None, advice: str = FIT_NODES_ADVICE
) -> str | None:
    """What is said of ``what`` (``all-reduce native nccl x1440``), measured at ``world_size`` ranks on
    ``nodes`` hosts of GPU ``device`` whose NVLinks join the hosts of a rack (``GpuLinks.nvlink_domain``:
    a GB200 NVL72), where each host holds fewer GPUs than the domain; None elsewhere. ``advice`` ends
    it: how to record the racks (``{racks}`` their count).

    NCCL counts such a domain as one node (under multi-node NVLink its topology is fused over the
    NVLink clique, src/graph/topo.cc, and init.cc counts a node per ring graph), so its model prices
    crossing trays as NVLink, not as a network; counted by hosts, 72 GPUs in one rack were predicted as
    18 nodes over NICs (the published 1,440-rank run asked at 72 ranks: 2-4x the rack's time)."""
    gpu = gpu_links(device) if device else None
    if gpu is None or not gpu.nvlink_domain or nodes is None or nodes <= 1:
        return None
    if world_size // nodes >= gpu.nvlink_domain:
        return None
    racks = -(-world_size // gpu.nvlink_domain)
    rack = f"NVL{gpu.nvlink_domain} {'rack' if racks == 1 else 'racks'}"
    return (
        f"{what}: measured on {counted(nodes, 'host')}, but {gpu.name}'s NVLinks join the hosts of a rack "
        f"(up to {gpu.nvlink_domain} GPUs), which NCCL counts as one node; if the run spanned {racks} {rack}, "
        + advice.format(racks=racks)
    )


def fit_nvlink_domain_note(fit: Fit, nodes: int | None, advice: str = FIT_NODES_ADVICE) -> str | None:
    """:func:`nvlink_domain_note` of a fit measured on ``nodes`` nodes."""
    return nvlink_domain_note(
        f"{fit.op} {fit.algo} {fit.backend} x{fit.world_size}", fit.world_size, fit.device, nodes, advice
    )
