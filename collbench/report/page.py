"""``collbench report``: one self-contained HTML page (inline SVG, CSS and a little JS; no network).

Sections, each an element with a fixed id so tests and links find them: ``machine`` (topology matrix,
drawing, rings and trees), ``ops`` (per op charts and the nccl-tests table), ``profile`` (rules as
bands over size, with their evidence) and ``provenance`` (versions, commands, dates, fingerprints).
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from collbench.errors import UserError
from collbench.fileio import atomic_write_text
from collbench.models.crossover import Crossover, find_crossovers
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.profile.document import Profile, machine_fingerprint
from collbench.profile.rules import GAIN_LEGEND, Rule, gain_text
from collbench.report.assets import CSS, ERROR_TRAP_JS, PAGE_JS, table_box
from collbench.report.machine import drawing_svg, matrix_html
from collbench.report.ops import group_rows, op_section, section_id
from collbench.report.svg import Band, band_chart, color_map
from collbench.results.row import ResultRow
from collbench.topology.model import Topology
from collbench.units import counted, ranks_on_nodes, size_label
from collbench.version import __version__

SECTION_IDS = ("machine", "ops", "profile", "provenance")


@dataclass(frozen=True, slots=True)
class ReportInputs:
    """What a report is made from. ``rows`` must not be empty."""

    rows: tuple[ResultRow, ...]
    profile: Profile | None = None
    topology: Topology | None = None
    command: str = ""
    """The command line that made the report."""
    sources: tuple[str, ...] = ()
    """The result files read (names only, for the provenance section)."""
    notes: list[str] = field(default_factory=list)


def _fits(inputs: ReportInputs, notes: list[str]) -> list[Fit]:
    """The profile's fitted models; without a profile, models fitted to the rows here."""
    if inputs.profile is not None and inputs.profile.fits:
        return list(inputs.profile.fits)
    try:
        return fit_results(list(inputs.rows), crossovers=False).fits
    except UserError as exc:
        notes.append(f"no models: {exc}")
        return []


def marked_crossovers(found: Sequence[Crossover], inputs: ReportInputs, notes: list[str]) -> list[Crossover]:
    """The models' crossovers the report marks: those the profile's rules agree with.

    A profile's rules are chosen from the measurements; between two measured sizes they switch where
    the models cross when the models hold there (``tuning/selection/ranges.py``). Where the models
    cross from X to Y and the rules of that shape switch from X to Y inside the same gap between
    measured sizes, the two agree, and the mark is put at the rules' boundary. Where the rules of
    that shape switch between X and Y only elsewhere, or not at all, the models contradict what was
    measured: no mark, and a note says so. Without a profile, or for a shape it has no rules for,
    every crossover of the usable models is marked.
    """
    profile = inputs.profile
    if profile is None:
        return list(found)
    boundaries: dict[tuple[str, int], list[tuple[int, str, str]]] = {}
    for world, _, rules, _ in rule_sets(profile):
        for rule in rules:
            boundaries.setdefault((rule.op, world), [])
        for below, above in itertools.pairwise(rules):
            if below.op == above.op and below.algo != above.algo:
                boundaries[(below.op, world)].append((above.min_bytes, below.algo, above.algo))
    out = []
    for c in found:
        shape = boundaries.get((c.op, c.world_size))
        if shape is None or c.backend != profile.backend:
            out.append(c)
            continue
        sizes = sorted({r.size_bytes for r in inputs.rows if (r.op, r.world_size) == (c.op, c.world_size)})
        pair = [b for b, lo, hi in shape if (lo, hi) == (c.below, c.above)]
        same = [b for b in pair if _gap(sizes, b) == _gap(sizes, c.size_bytes)]
        if same:
            out.append(dataclasses.replace(c, size_bytes=same[0]))
            continue
        where = (
            f"switch from {c.below} to {c.above} at {', '.join(size_label(b) for b in pair)}"
            if pair
            else "do not switch between them"
        )
        notes.append(
            f"{c.op} x{c.world_size}: the models cross from {c.below} to {c.above} at {size_label(c.size_bytes)}; "
            f"the profile's rules, chosen from the measurements, {where}: the crossing is not marked"
        )
    return out


def _gap(sizes: Sequence[int], size: int) -> int:
    """Which gap between measured sizes ``size`` falls in: the count of measured sizes below it."""
    return bisect.bisect_left(sizes, size)


def build_report(inputs: ReportInputs, *, now: dt.datetime | None = None) -> str:
    """The report's HTML text. Raises UserError when there are no rows."""
    if not inputs.rows:
        raise UserError("no result rows to report on")
    now = now or dt.datetime.now(dt.timezone.utc)
    notes = list(inputs.notes)
    fits = _fits(inputs, notes)
    # A fit that does not follow its own points draws no curve and places no crossover (Fit.distrust).
    usable = [f for f in fits if f.usable]
    crossovers = marked_crossovers(find_crossovers(usable), inputs, notes) if usable else []
    groups = group_rows(inputs.rows)
    rule_algos = [[r.algo for r in rules] for _, _, rules, _ in rule_sets(inputs.profile)] if inputs.profile else []
    colors = color_map([r.algo for r in inputs.rows] + [a for rules in rule_algos for a in rules])
    nav = "".join(f'<a href="#{s}">{s}</a>' for s in SECTION_IDS)
    # A mixed report (two backends, or collbench rows beside a log) has two sections of one op and
    # rank count: their links name the backend, or they would read the same.
    shared = Counter((k[0], k[2]) for k in groups)
    labels = {k: f"{k[0]} x{k[2]}" + (f" ({k[1]})" if shared[(k[0], k[2])] > 1 else "") for k in groups}
    op_links = "".join(f'<a href="#{section_id(k)}">{escape(label)}</a>' for k, label in labels.items())
    body = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>collbench report: {escape(_machine_name(inputs))}</title>",
        f"<script>{ERROR_TRAP_JS}</script>",
        f"<style>{CSS}</style>",
        "</head><body>",
        f"<header><h1>collbench report</h1><p>{escape(_summary_line(inputs))}</p><nav>{nav}{op_links}</nav></header>",
        _machine_section(inputs, notes),
        '<section id="ops"><h2>Collectives</h2>',
        *(op_section(k, v, fits, crossovers, colors) for k, v in groups.items()),
        "</section>",
        _profile_section(inputs, colors),
        _provenance_section(inputs, fits, crossovers, now),
    ]
    if notes:
        body.append('<section id="notes"><h2>Notes</h2><ul>')
        body += [f"<li>{escape(n)}</li>" for n in notes]
        body.append("</ul></section>")
    body += [
        '<pre id="js-errors"></pre>',
        f"<script>{PAGE_JS}</script>",
        "</body></html>",
    ]
    return "\n".join(body) + "\n"


def write_report(path: Path, inputs: ReportInputs) -> Path:
    """Build the report and write it atomically to ``path``; InputFileError when it cannot be written."""
    atomic_write_text(path, build_report(inputs))
    return path


def _machine_name(inputs: ReportInputs) -> str:
    hosts = sorted({r.host for r in inputs.rows if r.host})
    return ", ".join(hosts) or (inputs.topology.host if inputs.topology else "results")


def _summary_line(inputs: ReportInputs) -> str:
    rows = inputs.rows
    ops = ", ".join(dict.fromkeys(r.op for r in rows))
    backends = ", ".join(sorted({r.backend for r in rows}))
    sizes = sorted({r.size_bytes for r in rows})
    ranks = ", ".join(str(w) for w in sorted({r.world_size for r in rows}))
    return (
        f"{len(rows)} measured rows on {_machine_name(inputs)}: {ops} over {backends}, {ranks} ranks, "
        f"{size_label(sizes[0])} to {size_label(sizes[-1])}"
    )


def _layout(
    inputs: ReportInputs, notes: list[str]
) -> tuple[str, tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """(where it came from, rings, trees) for the largest rank count measured: the layout the profile
    recorded for that shape, else the one planned on the topology. A profile of several shapes has a
    layout per shape; the machine drawn is the largest shape's, so its rings are that shape's too."""
    world = max(r.world_size for r in inputs.rows)
    if inputs.profile is not None:
        recorded = [s for s in inputs.profile.rule_sets if s.layout is not None and s.world_size == world]
        if recorded and recorded[0].layout is not None:
            lay = recorded[0].layout
            return f"the profile's layout {lay.name!r} for {world} ranks", lay.rings, lay.trees
    if inputs.topology is None:
        return "", (), ()
    from collbench.layouts.plan import plan_layout

    try:
        planned = plan_layout(inputs.topology, min(world, len(inputs.topology.rank_devices)))
    except UserError as exc:
        notes.append(f"no layout drawn: {exc}")
        return "", (), ()
    return f"the layout collbench plans on this topology for {world} ranks", planned.rings, planned.trees


def _topology_line(topo: Topology) -> str:
    """The machine section's first line: what the topology holds, its source and fingerprints."""
    # Links said per pair of hosts (node_links) stand for many pairs of ranks: counted apart.
    between = f" and {counted(len(topo.node_links), 'link')} between hosts" if topo.node_links else ""
    return (
        f"<p>{escape(topo.host)}: {counted(len(topo.gpus), 'GPU')}, {counted(len(topo.cpus), 'CPU rank device')}, "
        f"{counted(len(topo.nics), 'NIC')}, {counted(len(topo.links), 'link')}{between}; "
        f"source {escape(topo.source)}, "
        # Named as discover names them: the page's profile carries the machine's, not this one.
        f"fingerprints: topology <code>{escape(topo.fingerprint)}</code> (in result rows), "
        f"machine <code>{escape(machine_fingerprint(topo))}</code> (in profiles).</p>"
    )


def _machine_section(inputs: ReportInputs, notes: list[str]) -> str:
    source, rings, trees = _layout(inputs, notes)
    out = ['<section id="machine"><h2>Machine</h2>']
    topo = inputs.topology
    if topo is None:
        out.append(
            '<p class="note">No topology given (pass <code>--topology FILE</code>, a file from '
            "<code>collbench discover -O</code>): no matrix or drawing.</p>"
        )
    else:
        out.append(_topology_line(topo))
        out.append('<div class="machine-view">')
        out.append(drawing_svg(topo, rings, trees))
        out.append(matrix_html(topo))
        out.append("</div>")
    if rings or trees:
        items = [f"<li>ring {i}: {' &rarr; '.join(str(r) for r in ring)}</li>" for i, ring in enumerate(rings)]
        items += [f"<li>tree {i} (parent of each rank, -1 the root): {list(t)}</li>" for i, t in enumerate(trees)]
        out.append(f"<p>Rings and trees: {escape(source)}.</p><ul>{''.join(items)}</ul>")
    out.append("</section>")
    return "\n".join(out)


def rule_sets(profile: Profile) -> list[tuple[int, int, tuple[Rule, ...], bool]]:
    """(world size, nodes, rules, predicted) per communicator shape of the profile."""
    return [(s.world_size, s.nodes, s.rules, s.predicted) for s in profile.rule_sets]


_RULE_KEYS = (
    "op",
    "min_bytes",
    "max_bytes",
    "algo",
    "params",
    "at_bytes",
    "measured_us",
    "predicted_us",
    "gain_vs_native",
)


def _fmt_us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1e3:.4g} ms" if value >= 1e4 else f"{float(value):.4g} us"


def _profile_section(inputs: ReportInputs, algos: dict[str, str]) -> str:
    profile = inputs.profile
    out = ['<section id="profile"><h2>Profile</h2>']
    if profile is None:
        out.append(
            '<p class="note">No profile given (pass <code>--profile FILE</code>, from <code>collbench tune</code>).</p>'
        )
        out.append("</section>")
        return "\n".join(out)
    shapes = rule_sets(profile)
    # The legend for predicted shapes only where the profile has one: a measured profile has no hatching.
    legend = (
        " Hatched bands and rules marked <em>predicted</em> come from the models at a world size not measured."
        if any(predicted for _, _, _, predicted in shapes)
        else ""
    )
    out.append(
        f"<p>{escape(profile.backend)} on machine <code>{escape(profile.fingerprint)}</code>, "
        f"{counted(len(shapes), 'shape')}: " + ", ".join(ranks_on_nodes(w, n) for w, n, _, _ in shapes) + "."
        f"{legend}</p>"
    )
    sizes = [r.size_bytes for r in inputs.rows] or [1]
    for world, nodes, rules, predicted in shapes:
        status = "predicted" if predicted else "measured"
        out.append(f'<div class="ruleset" data-ranks="{world}" data-nodes="{nodes}">')
        out.append(f"<h3>{counted(world, 'rank')}, {counted(nodes, 'node')}: {status}</h3>")
        for op in dict.fromkeys(r.op for r in rules):
            mine = [r for r in rules if r.op == op]
            bounds = [r.max_bytes for r in mine if r.max_bytes is not None]
            lo = max(1.0, min(sizes) / 2)
            hi = max([*sizes, *bounds]) * 4.0
            bands = [
                Band(
                    r.min_bytes,
                    r.max_bytes,
                    r.algo,
                    algos[r.algo],
                    f"{op} {size_label(r.min_bytes)}-{'∞' if r.max_bytes is None else size_label(r.max_bytes)}: "
                    f"{r.algo} ({status})",
                    hatched=predicted,
                )
                for r in mine
            ]
            out.append(band_chart(bands, lo=lo, hi=hi, title=f"{op}, {world} ranks: which algorithm where"))
            out.append(_rules_table(mine, status))
        out.append("</div>")
    out.append("</section>")
    return "\n".join(out)


def _plain(value: object) -> str:
    """A value a rule carries, as text: lists joined by commas, mappings as ``key value``."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_plain(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _evidence(r: Rule) -> str:
    """Why the rule chose what it did, in words: how far the runner-up was, the noise the measurements
    could not resolve, and the variants it tied with. Keys other engineers add to rules are shown too,
    as ``key: value``, never dropped."""
    parts = []
    if r.separation is not None:
        if abs(r.separation) < 0.005:
            parts.append("the next fastest as fast")
        elif r.separation > 0:
            parts.append(f"the next fastest {100 * r.separation:.0f}% slower")
        else:
            parts.append(f"{100 * -r.separation:.0f}% slower than the fastest, kept as the simpler choice")
    if r.noise is not None:
        parts.append(f"noise {100 * r.noise:.0f}%")
    if r.tie_with:
        # Variant labels spell segment sizes in bytes ("ring (seg=4194304, topology)"): shown as 4M.
        tied = (re.sub(r"seg=(\d+)", lambda m: _segments_text(int(m.group(1)), r), t) for t in r.tie_with)
        # A runner-up beyond the noise at the rule's own size: its ties were at the range's other sizes
        # ("the next fastest 33% slower; tied with ..." read as a contradiction).
        apart = r.separation is not None and r.noise is not None and r.separation > r.noise
        parts.append(("tied at other sizes of the range with " if apart else "tied with ") + ", ".join(tied))
    data = r.to_dict()
    known = {*_RULE_KEYS, "gain_err", "tie_with", "separation", "noise"}
    parts += [f"{k}: {_plain(v)}" for k, v in data.items() if k not in known and v not in (None, (), [], {})]
    return "; ".join(parts) or "-"


def _segments_text(segment_bytes: int, rule: Rule) -> str:
    """A segment size as the rule's sizes ran with it: a message no larger than one segment goes whole
    ("segments of 4M" was said of a rule from 45.3K to 724.1K, every size of it one segment)."""
    seg = size_label(segment_bytes)
    if rule.max_bytes is not None and rule.max_bytes <= segment_bytes:
        return f"one segment of up to {seg}"
    if rule.min_bytes < segment_bytes:
        return f"one segment up to {seg}, segments of {seg} above"
    return f"segments of {seg}"


def _params_text(rule: Rule) -> str:
    out = []
    for k, v in (rule.params or {}).items():
        if v is None:
            continue
        if k == "segment_bytes" and isinstance(v, int):
            out.append(_segments_text(v, rule))
        else:
            out.append(f"{k.replace('_', ' ')} {_plain(v)}")
    return ", ".join(out) or "-"


def _rules_table(rules: Sequence[Rule], status: str) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in ("from", "to", "algorithm", "params", "at", "measured", "predicted", "vs native", "source", "evidence")
    )
    body = []
    for r in rules:
        rule_status = status if status == "predicted" or r.measured_us is not None else "from the models"
        gain = gain_text(r)
        # The params and the evidence wrap (their own classes); the figures do not.
        cells = (
            ("", f"{r.min_bytes} ({size_label(r.min_bytes)})"),
            ("", "∞" if r.max_bytes is None else f"{r.max_bytes} ({size_label(r.max_bytes)})"),
            ("", r.algo),
            ("params", _params_text(r)),
            ("", "-" if r.at_bytes is None else size_label(r.at_bytes)),
            ("", _fmt_us(r.measured_us)),
            ("", _fmt_us(r.predicted_us)),
            ("", gain),
            ("", rule_status),
            ("evidence", _evidence(r)),
        )
        tds = "".join(f'<td class="{c}">{escape(t)}</td>' if c else f"<td>{escape(t)}</td>" for c, t in cells)
        body.append(f"<tr>{tds}</tr>")
    legend = f'<p class="note">{escape(GAIN_LEGEND)}</p>' if any(r.gain_err is not None for r in rules) else ""
    return (
        table_box(f'<table class="rules"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>') + legend
    )


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _provenance_section(
    inputs: ReportInputs, fits: Sequence[Fit], crossovers: Sequence[Crossover], now: dt.datetime
) -> str:
    rows = inputs.rows
    items: list[tuple[str, str]] = [
        ("report made", now.strftime("%Y-%m-%d %H:%M:%S UTC")),
        ("report command", inputs.command or "-"),
        ("collbench", __version__),
        ("result files", ", ".join(inputs.sources) or "-"),
        ("rows", f"{len(rows)} ({', '.join(sorted({r.source for r in rows}))})"),
    ]
    stamps = [r.timestamp for r in rows if r.timestamp > 0]
    if stamps:
        items.append(("measured", f"{_when(min(stamps))} to {_when(max(stamps))}"))
    for label, attr in (
        ("hosts", "host"),
        ("backends", "backend"),
        ("torch", "torch_version"),
        ("backend version", "backend_version"),
        ("CUDA", "cuda_version"),
        ("driver", "driver_version"),
        ("devices", "device_name"),
        ("topology fingerprint of the rows", "topology_fingerprint"),
    ):
        values = sorted({str(getattr(r, attr)) for r in rows if getattr(r, attr)})
        if values:
            items.append((label, ", ".join(values)))
    profile = inputs.profile
    if profile is not None:
        items += [
            ("profile command", profile.command or "-"),
            ("profile made", profile.created or "-"),
            ("profile fingerprint", profile.fingerprint),
            ("profile versions", ", ".join(f"{k} {v}" for k, v in profile.versions.items()) or "-"),
            ("profile schema", str(profile.schema_version)),
        ]
        # How the rules were chosen, a row per setting in words (it was one row of raw JSON).
        items += [(f"selection: {k.replace('_', ' ')}", _plain(v)) for k, v in (profile.selection or {}).items()]
    if inputs.topology is not None:
        items.append(("topology fingerprint", inputs.topology.fingerprint))
    items.append(
        (
            "models",
            f"{len(fits)} fitted ({'from the profile' if profile and profile.fits else 'here, from the rows'}), "
            + counted(len(crossovers), "crossover"),
        )
    )
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in items)
    return f'<section id="provenance"><h2>How it was made</h2><table class="kv">{body}</table></section>'


def page_beside(profile_path: Path) -> Path:
    """Where ``collbench tune`` writes its report: the profile's name with ``.html`` (tune refuses a file
    there as it refuses its other outputs, tuning/config.py)."""
    return profile_path.with_suffix(".html")


def write_beside_profile(
    profile_path: Path,
    rows: Sequence[ResultRow],
    profile: Profile,
    topology: Topology | None,
    results_paths: Sequence[Path],
) -> tuple[Path | None, str | None]:
    """``collbench tune``'s report: ``profile_path`` with ``.html``. Returns (path, None), or (None, why)
    when it could not be written: the profile is saved already, so a report that fails is a note.
    ``results_paths`` are the files the rows were written to (one per shape of a multi-shape tune)."""
    path = page_beside(profile_path)
    inputs = ReportInputs(
        rows=tuple(rows),
        profile=profile,
        topology=topology,
        command=profile.command,
        sources=tuple(str(p) for p in dict.fromkeys(results_paths)),
    )
    try:
        write_report(path, inputs)
    except UserError as exc:
        return None, f"no report: {exc}"
    return path, None
