"""What ``tune --ranks``, ``--predict-ranks`` and ``profile predict --ranks`` are given: rank counts and
communicator shapes, parsed and checked.

Its own module, importing nothing heavy: a tune refused for its options is refused before torch is
imported (10 s on a loaded machine), and ``profile predict`` never needs torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.errors import CommandLineError, ConfigError
from collbench.units import MAX_RANKS, check_ranks


@dataclass(frozen=True, slots=True)
class Shape:
    """A communicator shape to predict: ``world_size`` ranks on ``nodes`` nodes (None: as many as keep
    the measured ranks a node, :func:`collbench.tuning.predicted_shapes.shape_nodes`)."""

    world_size: int
    nodes: int | None = None


def _shown(text: str) -> str:
    """``text`` quoted for an error line, cut to 60 characters: the option's value may be of any length."""
    return repr(text if len(text) <= 60 else text[:57] + "...")


def parse_ranks(text: str, option: str = "--ranks", command: str = "tune") -> tuple[int, ...]:
    """``"4"`` or ``"2,4,8"`` as rank counts, each at least 2, none twice; ConfigError otherwise."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        # A digit string past MAX_RANK_DIGITS is no world size, and int() refuses one past 4,300 digits.
        # A negative count is a count too small, said as 0 is (--ranks 0: tune needs at least 2 ranks).
        if part.isdigit() and len(part) > MAX_RANK_DIGITS:
            # A whole number still: said as too many, as check_ranks says 2,000,000 ("each value must be a
            # whole number of ranks, at least 2, got '1000000000'" was no reason).
            shown = part if len(part) <= 60 else _shown(part)
            raise CommandLineError(f"{option} {shown}: {command} takes fewer than 2^20 ({MAX_RANKS:,}) ranks")
        if not part.removeprefix("-").isdigit() or len(part) > MAX_RANK_DIGITS:
            raise CommandLineError(
                f"{option} {_shown(text)}: each value must be a whole number of ranks, at least 2, got {_shown(part)}"
            )
        check_ranks(int(part), 2, command, option)
        if int(part) in out:
            raise CommandLineError(f"{option} {_shown(text)}: {part} is given twice")
        out.append(int(part))
    return tuple(out)


MAX_RANK_DIGITS = 9
"""The most digits a rank count may have (under a billion ranks)."""

MAX_PREDICTED_SHAPES = 64
"""The most shapes one ``--predict-ranks``/``profile predict --ranks`` may add: each is priced from
every fit at every crossing (about 0.1 s), and a profile of hundreds of shapes is slow to load in
every job that reads it."""


def parse_shapes(text: str, option: str = "--predict-ranks") -> tuple[Shape, ...]:
    """``--predict-ranks``: ``"8,16"`` or with nodes ``"8:1,64:8"`` (ranks:nodes, as ``predict --nodes``
    takes them: nodes the ranks do not spread evenly over are said by :func:`prediction_notes`);
    ConfigError otherwise, and for more than ``MAX_PREDICTED_SHAPES`` shapes (counted before any is
    parsed or priced)."""
    parts = text.split(",")
    if len(parts) > MAX_PREDICTED_SHAPES:
        raise ConfigError(
            f"{option}: {len(parts)} shapes given; at most {MAX_PREDICTED_SHAPES} can be predicted at once"
        )
    shapes: list[Shape] = []
    for part in parts:
        ranks_text, _, nodes_text = part.strip().partition(":")
        if not ranks_text.strip():  # ':8' was said as "--ranks '': ...", the value given nowhere
            raise ConfigError(f"{option} {_shown(text)}: each shape is RANKS or RANKS:NODES, got {_shown(part)}")
        (ranks,) = parse_ranks(ranks_text, option, "a predicted shape")
        nodes: int | None = None
        if nodes_text:
            if not nodes_text.isdigit() or len(nodes_text) > MAX_RANK_DIGITS or not 1 <= int(nodes_text) <= ranks:
                raise ConfigError(
                    f"{option} {_shown(text)}: nodes must be 1..{ranks} for {ranks} ranks, got {_shown(part)}"
                )
            nodes = int(nodes_text)
        if any(s.world_size == ranks and s.nodes == nodes for s in shapes):
            raise ConfigError(f"{option} {_shown(text)}: {part.strip()} is given twice")
        shapes.append(Shape(ranks, nodes))
    return tuple(shapes)
