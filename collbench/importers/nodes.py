"""The node count of imported rows: what the user says (``--nodes N``), else what the log's devices imply.

A log that names too few hosts leaves its rows' node count unknown (``NODES_UNKNOWN``); predict then
cannot keep the measured ranks a node, and 1,440 ranks would be predicted on one node. Both ``import``
and ``fit`` settle it here, the same way, so that rows written by ``import`` and fitted later keep the
node count a direct ``fit`` of the log would give.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from pathlib import Path

from collbench.errors import ConfigError, InputFileError
from collbench.importers.nccl_tests_infer import ranks_per_node_from_devices
from collbench.results.row import NODES_UNKNOWN, ResultRow
from collbench.units import check_nodes, counted

NODES_LEFT_UNKNOWN = "node count left unknown (0)"
"""How the reader's note on a log whose node count it cannot tell ends (``importers/nccl_tests.py``); a
note so ending is dropped once ``--nodes`` or the devices settle the count (:func:`settle_log_nodes`)."""


def check_nodes_option(nodes: int | None, ranks: int | None = None, command: str = "fit") -> None:
    """Raise ConfigError for ``--nodes`` below 1 (``--nodes 0: fit needs at least 1 node``), or one that
    does not divide ``--ranks``."""
    if nodes is None:
        return
    check_nodes(nodes, command)
    if ranks is not None and ranks % nodes:
        raise ConfigError(f"--ranks {ranks} do not spread evenly over --nodes {nodes}")


def given_nodes(rows: Iterable[ResultRow], nodes: int, where: str) -> Iterator[ResultRow]:
    """The rows with ``nodes`` where they did not say their node count.

    Raises InputFileError (naming ``where``) for a row that says another node count (the file wins
    over a guess, and silently replacing what was measured would lose it), or whose ranks do not
    spread evenly over ``nodes``.
    """
    for row in rows:
        if row.nodes == NODES_UNKNOWN:
            if row.world_size % nodes:
                raise InputFileError(where, f"{row.world_size} ranks do not spread evenly over --nodes {nodes}")
            row = dataclasses.replace(row, nodes=nodes)
        elif row.nodes != nodes:
            raise InputFileError(where, f"its rows say {counted(row.nodes, 'node')}, not {nodes}; drop --nodes")
        yield row


def nodes_from_devices(path: Path, rows: list[ResultRow], notes: list[str]) -> list[ResultRow]:
    """Rows of one log with an unknown node count given the one its rank lines' devices imply, said in
    a note (:func:`ranks_per_node_from_devices`); rows that know theirs are kept as they are."""
    if all(r.nodes != NODES_UNKNOWN for r in rows):
        return rows
    per_node = ranks_per_node_from_devices(path)
    if per_node is None:
        return rows
    out = []
    for row in rows:
        if row.nodes == NODES_UNKNOWN and row.world_size % per_node == 0:
            row = dataclasses.replace(row, nodes=row.world_size // per_node)
        out.append(row)
    worlds = sorted({r.world_size for r in out if r.nodes != NODES_UNKNOWN})
    notes.append(
        f"{path}: its rank lines reach device {per_node - 1}: taken as {per_node} ranks a node "
        f"({', '.join(f'{w} ranks on {w // per_node} nodes' for w in worlds)})"
    )
    return out


def settle_log_nodes(path: Path, rows: list[ResultRow], nodes: int | None, notes: list[str]) -> list[ResultRow]:
    """One log's rows with their node count: ``nodes`` (``--nodes``) where given, else the devices'.

    Where that settles every row, the reader's note that the log left the count unknown is dropped:
    'import --nodes 2' said 'node count left unknown (0)' above '16 ranks on 2 nodes'.
    """
    settled = list(given_nodes(rows, nodes, str(path))) if nodes is not None else nodes_from_devices(path, rows, notes)
    if all(r.nodes != NODES_UNKNOWN for r in settled):
        notes[:] = [n for n in notes if not (n.startswith(f"{path}: ") and n.endswith(NODES_LEFT_UNKNOWN))]
    return settled
