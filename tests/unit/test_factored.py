"""Texts that differ in a few words factor into the words they share and what fills each gap
(cli/render/factored.py): predict says an algorithm's basis once, not once per size."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from collbench.cli.render.factored import _WORD, MAX_GAPS, factor

_BASE = (
    "NCCL's model (NVIDIA/nccl v2.30.7 src/graph/tuning.cc, hopper) picks {pick}; fitted: latencies x5.4, "
    "bus 268 GB/s; {miss} for what it misses at the measured shape{held}; 16 channels assumed (the NICs not known)"
)


def _basis(pick: str, miss: str, held: bool = False) -> str:
    return _BASE.format(pick=pick, miss=miss, held=" (held from the nearest measured size)" if held else "")


def test_the_shared_words_print_once_with_numbered_gaps() -> None:
    texts = [_basis("tree/LL", "x0.81", held=True), _basis("tree/LL128", "x1.07"), _basis("ring/Simple", "x0.944")]
    factored = factor(texts)
    assert factored is not None
    assert factored.template == _BASE.format(pick="[1]", miss="[2]", held=" [3]")
    assert factored.fills == (
        ("tree/LL", "x0.81", "(held from the nearest measured size)"),
        ("tree/LL128", "x1.07", ""),
        ("ring/Simple", "x0.944", ""),
    )


def test_a_clause_one_size_adds_is_a_gap_of_its_own_with_a_number_whole() -> None:
    raised = _basis("tree/Simple", "x0.9") + "; raised from 1.2 ms to the links' floor: 1,440 ranks"
    factored = factor([_basis("tree/LL", "x1.1"), raised])
    assert factored is not None
    assert factored.fills[0] == ("tree/LL", "x1.1", "")
    assert factored.fills[1] == ("tree/Simple", "x0.9", "; raised from 1.2 ms to the links' floor: 1,440 ranks")


def test_texts_that_share_little_are_left_whole() -> None:
    assert factor(["the fit itself, at the shape it was measured at", "its own structure: 6 steps"]) is None
    assert factor(["a"]) is None and factor(["", "a"]) is None
    many = [" ".join(f"w{i}{'x' * (i == j)}" for i in range(2 * MAX_GAPS + 2)) for j in range(0, 2 * MAX_GAPS + 2, 2)]
    assert factor(many) is None  # a word of each of five places differs: more gaps than MAX_GAPS


@given(
    st.lists(
        st.lists(st.sampled_from(["tree/LL;", "x0.9,", "ring", "a", "the", "held", "1,440"]), max_size=3),
        min_size=2,
        max_size=6,
    )
)
def test_each_text_is_its_template_with_its_fills(variants: list[list[str]]) -> None:
    # Whatever the texts, filling the template's gaps with one text's fills gives that text back.
    texts = [f"shared start; {' '.join(v)} middle words here; {' '.join(reversed(v))} end" for v in variants]
    factored = factor(texts)
    if factored is None:
        return
    for text, fills in zip(texts, factored.fills, strict=True):
        rebuilt = factored.template
        for i, fill in enumerate(fills, start=1):
            rebuilt = rebuilt.replace(f"[{i}]", fill, 1)
        assert _WORD.findall(rebuilt) == _WORD.findall(text)
