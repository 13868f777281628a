"""Texts that differ in a few words, said once: the words every one holds, and per text what stands in
each place where they differ.

predict prices each size from one basis (NCCL's model, its fitted latency scale and bus bandwidth, the
channels) in which a few words change with the size (the algorithm and protocol NCCL picks, what the
model misses there, a floor it was raised to). Eight sizes printed eight near-identical paragraphs of
five lines; :func:`factor` finds the shared words, so that they print once with numbered gaps
(``picks [1]; ...; [2] for what it misses``) and each size gives only what fills the gaps. The texts
are the model's own words: nothing here knows what they say, so a basis worded differently tomorrow
factors the same way.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

MAX_GAPS = 4
"""The most places the texts may differ in and still be factored: more, and each reads better whole."""
MIN_SHARED = 0.5
"""The least share of the shortest text's words the shared part must hold to be worth saying once."""

# Words, with a ';' or ',' that ends a clause as a word of its own ("tree/LL;" is "tree/LL" and ";"),
# so that a gap never swallows the punctuation around it; a comma inside a number (1,440) stays in it.
_WORD = re.compile(r"[;,](?=\s|$)|(?:[^\s;,]|[;,](?!\s|$))+")


@dataclass(frozen=True, slots=True)
class Factored:
    """What the texts share, with ``[1]``, ``[2]``, ... where they differ, and per text what each holds
    there (``""`` where it holds nothing)."""

    template: str
    fills: tuple[tuple[str, ...], ...]

    @property
    def gaps(self) -> int:
        return len(self.fills[0]) if self.fills else 0


def _joined(words: Sequence[str]) -> str:
    text = ""
    for word in words:
        text += word if not text or word in (";", ",") else f" {word}"
    return text


def _shared(texts: Sequence[list[str]]) -> tuple[list[str], list[list[int]]]:
    """The words every text holds in the same order, and where each stands in each text. Each text in
    turn narrows what the ones before share to the longest runs it holds too (difflib's matching
    blocks: runs, not scattered words, so that a gap is a place the texts differ, not a lone 'the')."""
    first = texts[0]
    shared = list(first)
    where = [list(range(len(first)))]
    for words in texts[1:]:
        blocks = SequenceMatcher(None, shared, words, autojunk=False).get_matching_blocks()
        kept = [(a + k, b + k) for a, b, size in blocks for k in range(size)]
        shared = [shared[a] for a, _ in kept]
        where = [[places[a] for a, _ in kept] for places in where] + [[b for _, b in kept]]
    return shared, where


def factor(texts: Sequence[str]) -> Factored | None:
    """``texts`` as one template and each one's fills, or None where they share too little to be worth
    it (under :data:`MIN_SHARED` of the shortest, nothing at all, or more than :data:`MAX_GAPS` gaps)."""
    split = [_WORD.findall(text) for text in texts]
    if len(split) < 2 or not all(split):
        return None
    shared, where = _shared(split)
    if not shared or len(shared) < MIN_SHARED * min(len(words) for words in split):
        return None
    # The words of each text before the first shared word, between each two, and after the last.
    between: list[list[str]] = []
    for words, places in zip(split, where, strict=True):
        bounds = [-1, *places, len(words)]
        between.append([_joined(words[lo + 1 : hi]) for lo, hi in itertools.pairwise(bounds)])
    gaps = [i for i in range(len(shared) + 1) if any(fills[i] for fills in between)]
    if not gaps or len(gaps) > MAX_GAPS:
        return None
    out: list[str] = []
    for i in range(len(shared) + 1):
        if i in gaps:
            out.append(f"[{gaps.index(i) + 1}]")
        if i < len(shared):
            out.append(shared[i])
    return Factored(_joined(out), tuple(tuple(fills[i] for i in gaps) for fills in between))


__all__ = ["MAX_GAPS", "Factored", "factor"]
