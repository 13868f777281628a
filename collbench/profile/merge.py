"""Joining profiles of one machine and backend into one profile with every communicator shape.

Tuning one shape at a time (``collbench tune --ranks 8``, then ``--ranks 64`` on another allocation)
gives several files; a job wants one. Profiles join only when they were measured on the same machine
(topology fingerprint) with the same backend: rules measured elsewhere say nothing about this one.
``collbench profile merge`` joins files (:func:`merge_profiles`); ``collbench tune --ranks 2,4`` joins
each shape's profile into the ones before it. Both keep shapes and fits by :func:`join_shapes`.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from collbench.errors import ConfigError, UserError
from collbench.models.fitted import Fit
from collbench.profile.document import Profile, RuleSet

Prefer = Literal["none", "newer", "later"]
PREFER_CHOICES: tuple[Prefer, ...] = ("none", "newer")
"""What ``profile merge --prefer`` accepts. ``later`` (the later input's set) is a tune's own: the
shapes it joins were measured in turn, so the later one is the newer by construction."""


@dataclass(frozen=True, slots=True)
class Merged:
    """The joined profile, and one line per shape that two inputs both had, saying which was kept."""

    profile: Profile
    notes: tuple[str, ...]


def merge_profiles(inputs: Sequence[tuple[str, Profile]], *, prefer: str = "none", command: str = "") -> Merged:
    """Join ``(name, profile)`` pairs, in order: the first input's default shape stays the default.

    A shape in two inputs is a conflict (UserError naming both) unless one of the two was predicted and
    the other measured (the measured one is kept: a prediction only stands in for a measurement), or
    ``prefer`` is ``"newer"`` (the one from the profile created later is kept; on a tie, the later
    input). Fits of every input are kept, once each. Raises UserError when fewer than two profiles
    are given or their machines or backends differ, ConfigError for an unknown ``prefer``.
    """
    choice = next((c for c in PREFER_CHOICES if c == prefer), None)
    if choice is None:
        raise ConfigError(f"--prefer must be one of {', '.join(PREFER_CHOICES)}, got {prefer!r}")
    if len(inputs) < 2:
        raise UserError("profile merge needs at least two profiles")
    seen: dict[str, str] = {}
    for name, _ in inputs:
        # 'merge a.yaml a.yaml' said both had rules for every shape and offered --prefer newer.
        key = os.path.realpath(name)
        if key in seen:
            said = f"{name} is" if seen[key] == name else f"{seen[key]} and {name} are"
            raise UserError(f"{said} one profile given twice; give each once")
        seen[key] = name
    first_name, first = inputs[0]
    for name, profile in inputs[1:]:
        if profile.fingerprint != first.fingerprint:
            same_host = profile.host and profile.host == first.host and profile.host != "unknown"
            raise UserError(
                f"{name} was measured on machine {profile.fingerprint!r}, {first_name} on {first.fingerprint!r}: "
                "profiles of different machines do not merge"
                # One host tuned twice, once with `--topology` from `discover --probe` (measured links) and
                # once without: the fingerprints of the two descriptions differ, and 'different machines'
                # alone left a user looking for a second machine.
                + (
                    f" (both name host {profile.host!r}: if that is one machine, they were tuned from different "
                    "descriptions of it, as a topology from `discover --probe` (measured links) has another "
                    "fingerprint than the one discovered without it: tune both from the same topology to merge them)"
                    if same_host
                    else ""
                )
            )
        if profile.backend != first.backend:
            raise UserError(
                f"{name} was measured with {profile.backend}, {first_name} with {first.backend}: "
                "profiles of different backends do not merge"
            )
    joined = join_shapes(inputs, prefer=choice)
    newest = max((p for _, p in inputs), key=lambda p: p.created)
    merged = Profile(
        fingerprint=first.fingerprint,
        host=first.host,
        backend=first.backend,
        rule_sets=joined.rule_sets,
        fits=joined.fits,
        versions=dict(newest.versions),
        command=command,
        created=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        selection=dict(newest.selection),
    )
    return Merged(merged, joined.notes)


@dataclass(frozen=True, slots=True)
class Joined:
    """The rule sets and fits of several profiles, and one note per shape two of them both had."""

    rule_sets: tuple[RuleSet, ...]
    fits: tuple[Fit, ...]
    notes: tuple[str, ...]


def join_shapes(inputs: Sequence[tuple[str, Profile]], *, prefer: Prefer = "none") -> Joined:
    """The rule sets of ``(name, profile)`` pairs, each shape once, in input order, and their fits.

    A shape in two inputs keeps the measured set over a predicted one; between two alike, ``prefer``
    decides: ``"newer"`` the profile created later (on a tie, the later input), ``"later"`` the later
    input, ``"none"`` raises UserError naming both. Fits of every input are kept, once each.
    """
    kept: dict[tuple[int, int], tuple[int, RuleSet]] = {}
    notes: list[str] = []
    for index, (name, profile) in enumerate(inputs):
        for rule_set in profile.rule_sets:
            held = kept.get(rule_set.shape)
            if held is None:
                kept[rule_set.shape] = (index, rule_set)
                continue
            held_index, held_set = held
            held_name, held_profile = inputs[held_index]
            together = _ops_joined(held_set, rule_set)
            if together is not None:
                kept[rule_set.shape] = (held_index, together)
                notes.append(
                    f"{rule_set.shape_label}: joined {held_name}'s {', '.join(held_set.ops)} and {name}'s "
                    f"{', '.join(rule_set.ops)}"
                )
                continue
            if held_set.predicted != rule_set.predicted:
                winner = (index, rule_set) if held_set.predicted else held
                why = "measured beats predicted"
            elif prefer == "newer":
                newer = profile.created >= held_profile.created
                winner = (index, rule_set) if newer else held
                why = "the newer profile"
            elif prefer == "later":
                winner = (index, rule_set)
                why = "the later profile"
            else:
                raise UserError(
                    f"{held_name} and {name} both have rules for {rule_set.shape_label}: "
                    "pass --prefer newer to keep the newer profile's, or leave one out"
                )
            kept[rule_set.shape] = winner
            notes.append(f"{rule_set.shape_label}: kept {inputs[winner[0]][0]}'s ({why})")
    order = sorted(kept.values(), key=lambda item: item[0])  # stable: input order, then each input's order
    # Fits are frozen values: a dict keeps each once, in input order, in one pass (a list searched for
    # every fit took minutes for profiles of thousands of fits).
    fits: dict[Fit, None] = dict.fromkeys(f for _, profile in inputs for f in profile.fits)
    return Joined(tuple(rule_set for _, rule_set in order), tuple(fits), tuple(notes))


def _ops_joined(a: RuleSet, b: RuleSet) -> RuleSet | None:
    """One rule set of the same shape holding both sets' ops, where they are the rules of different ops
    (``tune --op all-reduce``, then ``tune --op all-to-all`` on the same ranks): neither replaces the
    other. None where they share an op, one was predicted and the other not, or they were measured on
    different layouts or with different selections (NCCL's own variants in one only), which one set of
    rules cannot say."""
    if set(a.ops) & set(b.ops) or a.predicted != b.predicted or a.layout != b.layout:
        return None
    if (a.nccl_rules is None) != (b.nccl_rules is None):
        return None
    nccl = None if a.nccl_rules is None or b.nccl_rules is None else (*a.nccl_rules, *b.nccl_rules)
    return replace(a, rules=(*a.rules, *b.rules), nccl_rules=nccl)
