"""Rule sets predicted from a profile's fitted models, for communicator shapes nobody measured.

``collbench tune --predict-ranks 8,16`` and ``collbench profile predict P --ranks 8,16`` add them: per
op, the algorithm the fitted models (the fits measured at the largest world size, re-evaluated at the
predicted one, as ``collbench predict`` does) price fastest, switching where their predictions cross.
Such sets are marked ``predicted`` in the profile, in the terminal table and in every export.

Apart from tuning/shapes.py, which measures: pricing a fit needs no torch, and ``profile predict`` (a
file in, a file out) should not wait for it (about 10 s on a loaded machine) or fail where it is not
importable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from collbench.errors import ConfigError
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import AlgoRef, Rule
from collbench.schedules.ops import Op
from collbench.tuning.shape_args import Shape
from collbench.units import ranks_on_nodes

if TYPE_CHECKING:
    from collbench.models.fitted import Fit
    from collbench.models.nccl_graph import NodeFacts

PREDICT_PARAMS = {"segment_bytes": None, "layout": "rank-order"}
"""Predicted rules run unsegmented on rank order: no layout or segment size was measured at that shape."""


def fits_of(profile: Profile) -> list[Fit]:
    return list(profile.fits)


def shape_nodes(shape: Shape, measured: Mapping[int, int], option: str) -> tuple[int, str | None]:
    """The nodes ``shape`` is predicted on, and where it names none the line that says what was assumed.

    Without ``:NODES`` the measured ranks a node are kept, as ``collbench predict`` keeps them without
    ``--nodes`` (``default_nodes``: 8 ranks of a profile measured at 4 ranks on 1 node go on 2 nodes);
    ``measured`` maps a measured world size to its nodes (``Profile.nodes_measured``). Raises ConfigError
    where no measured shape holds a whole number of ranks a node, saying to give ``RANKS:NODES``.
    """
    if shape.nodes is not None:
        return shape.nodes, None
    from collbench.models.predict_defaults import default_nodes

    world = shape.world_size
    return default_nodes(
        world,
        measured,
        unasked=f"{option} {world} names no nodes",
        ask=f"give {world}:NODES (the nodes to predict {world} ranks on)",
    )


def assumed_nodes(profile: Profile, shapes: Sequence[Shape], option: str = "--predict-ranks") -> list[str]:
    """One line per shape that names no nodes: the nodes it is predicted on, and the measured shape
    whose ranks a node they keep (``shape_nodes``; raises what it raises)."""
    measured = profile.nodes_measured()
    return [line for shape in shapes if (line := shape_nodes(shape, measured, option)[1]) is not None]


def predicted_rule_set(
    fits: Sequence[Fit],
    ops: Sequence[str],
    world_size: int,
    nodes: int,
    measured: Mapping[int, int] | None = None,
    facts: NodeFacts | None = None,
) -> RuleSet:
    """Rules at ``world_size`` ranks from the fits: per op, the fastest predicted algorithm per size.

    Fits that may not be used (``Fit.distrust``) are left out, as in ``collbench predict``, and so is
    a native whose algorithm is unknown (not NCCL's). Each other algorithm is priced at ``world_size``
    from its own structure (``models/predict.py``), and the rules switch where the fastest one changes
    between the smallest and the largest size measured; the first rule runs from 0, the last to
    unbounded. ``predicted_us`` is the model's time at ``at_bytes`` (the geometric middle of the range's
    part inside the sizes measured: never a size no fit saw), ``gain_vs_native`` native's predicted time
    over the chosen one's there, where native is predicted. ``measured`` maps a fit's world size to its
    nodes; ``facts`` what NCCL's model of native is told of the nodes (``--no-nvls``: the runs set
    NCCL_NVLS_ENABLE=0). Raises ConfigError when no op has a fit to use, naming why.
    """
    from collbench.models.predict import Shapes, predicted_ranges

    rules: list[Rule] = []
    why: list[str] = []
    for op in ops:
        ranges, refused, _ = predicted_ranges(
            fits, op, world_size, nodes, shapes=Shapes(dict(measured or {})), nccl_facts=facts
        )
        why.extend(refused)
        for r in ranges:
            gain = None if r.native_us is None or r.time_us <= 0 else r.native_us / r.time_us
            params = dict(PREDICT_PARAMS)
            # Barrier's one point is at 0 bytes whatever size its prediction was asked at.
            at = r.at_bytes if Op.parse(op).spec.payload else 0
            rule = Rule(Op.parse(op), r.min_bytes, r.max_bytes, AlgoRef(r.algo), params, at, r.time_us, None, gain)
            rules.append(rule)
    if not rules:
        reason = "; ".join(why) or "the profile has none for " + ", ".join(ops)
        raise ConfigError(f"no fitted model to predict {world_size} ranks from ({reason})")
    return RuleSet(world_size, nodes, tuple(rules), predicted=True)


def prediction_notes(
    profile: Profile, shapes: Sequence[Shape], option: str = "--predict-ranks", facts: NodeFacts | None = None
) -> list[str]:
    """What the predicted rule sets of ``shapes`` leave out and assume, one line each, without repeats:
    fits not used and why (``Fit.distrust``, a native whose algorithm is unknown), and where the
    predictions assume the measured links (``models/predict.py``). The nodes of a shape that names
    none are said by :func:`assumed_nodes`; nodes named that the ranks do not spread evenly over here
    (``uneven_note``). ``facts`` as :func:`with_predictions` takes them."""
    from collbench.models.predict import Shapes as MeasuredShapes
    from collbench.models.predict import price_fits
    from collbench.models.predict_defaults import uneven_note

    known = profile.nodes_measured()
    measured = MeasuredShapes(known)
    lines: list[str] = []
    for shape in shapes:
        nodes, _ = shape_nodes(shape, known, option)
        if shape.nodes is not None and (uneven := uneven_note(shape.world_size, nodes, known)) is not None:
            lines.append(uneven)
        _, refused, notes = price_fits(
            fits_of(profile), shape.world_size, nodes, ops=profile.ops, shapes=measured, nccl_facts=facts
        )
        lines.extend(f"not used for predictions: {line}" for line in refused)
        lines.extend(notes)
    return list(dict.fromkeys(lines))


def with_predictions(
    profile: Profile, shapes: Sequence[Shape], option: str = "--predict-ranks", facts: NodeFacts | None = None
) -> Profile:
    """``profile`` with a predicted rule set added per shape (nodes: :func:`shape_nodes`, the measured
    ranks a node kept where a shape names none; ``option`` names the shapes' option in errors; ``facts``
    what NCCL's model of native is told of the nodes, for the measured runs and the predicted shapes
    alike, as ``collbench predict`` takes them: ``--no-nvls``, the runs set NCCL_NVLS_ENABLE=0).

    Raises ConfigError for a shape the profile measured already, for one that names no nodes where no
    measured shape holds a whole number of ranks a node, or when the profile carries no fit that
    explains its data (``Fit.distrust``): those are never extrapolated.
    """
    if not shapes:
        return profile
    every = fits_of(profile)
    if not every:
        raise ConfigError("the profile has no fitted models to predict other shapes from")
    # A fit that does not explain its own data is not extrapolated (Fit.distrust): far from the sizes
    # and ranks it was measured at, its misfit only grows.
    fits = [f for f in every if not f.distrust()]
    if not fits:
        from collbench.models.predict_defaults import refusals_briefly

        why = refusals_briefly([f"{f.op} {f.algo}: {f.distrust()}" for f in every])
        raise ConfigError(f"no fit explains its data well enough to predict other shapes from ({why})")
    added: list[RuleSet] = []
    measured = profile.nodes_measured()
    for shape in shapes:
        nodes, _ = shape_nodes(shape, measured, option)
        there = next((s for s in profile.rule_sets if s.shape == (shape.world_size, nodes)), None)
        if there is not None:
            held = "predicted in the profile" if there.predicted else "measured"
            raise ConfigError(
                f"{option} {shape.world_size}: {ranks_on_nodes(shape.world_size, nodes)} are {held} already"
            )
        if any(s.shape == (shape.world_size, nodes) for s in added):
            # 8 and 8:2 where 8 ranks keep the measured 4 a node: one rule set, asked for twice.
            raise ConfigError(f"{option}: {ranks_on_nodes(shape.world_size, nodes)} are asked for twice")
        added.append(predicted_rule_set(fits, profile.ops, shape.world_size, nodes, measured, facts))
    return dataclasses.replace(profile, rule_sets=(*profile.rule_sets, *added))
