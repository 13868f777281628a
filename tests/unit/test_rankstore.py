"""The signed JSON the ranks send their launcher through the store (torch's HashStore stands in
for the TCPStore: the same ``Store`` API, queues included, without a socket)."""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import pytest
import torch.distributed as dist
from synthetic_rows import point_row

from collbench.results.row import ResultRow
from collbench.runtime.launch.rankstore import (
    ITEM_BYTES,
    MAX_ITEM_BYTES,
    SignedStore,
    StoreValueError,
    decode,
    encode,
    new_token,
    run_prefix,
)
from collbench.runtime.probe import PairMeasure


def _row(**changes: object) -> ResultRow:
    base = point_row("ring", 1024, 10.0, spread=0.1, in_place=False, iters=5)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_rows_and_plain_data_round_trip() -> None:
    store = SignedStore(dist.HashStore(), new_token())
    value = {"status": "ok", "value": [_row(), _row(size_bytes=4096, segment_bytes=512)], "n": (1, 2.5, None)}
    store.put("result/0", value)
    assert store.has("result/0") and not store.has("result/1")
    got = store.take("result/0", (ResultRow,))
    assert got == [{"status": "ok", "value": [_row(), _row(size_bytes=4096, segment_bytes=512)], "n": [1, 2.5, None]}]
    assert store.take("result/0") == [] and store.take("result/1") == []


def test_values_come_out_in_order_and_the_latest_is_kept() -> None:
    store = SignedStore(dist.HashStore(), new_token())
    for what in ("joining", "measuring 1 KiB", "measuring 4 KiB"):
        store.put("doing/0", what)
    assert store.latest("doing/0") == "measuring 4 KiB"
    assert store.latest("doing/0") == "measuring 4 KiB"  # kept once taken
    assert store.latest("doing/1") is None
    for n in range(3):
        store.put("events", {"n": n})
    assert store.take("events") == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_a_long_value_travels_in_items_and_waits_for_its_last_one() -> None:
    raw = dist.HashStore()
    store = SignedStore(raw, new_token())
    long_text = "x" * (2 * ITEM_BYTES + 17)
    store.put("result/0", {"status": "ok", "value": long_text})
    full = store.prefix + "result/0"
    assert raw.queue_len(full) == 3
    last = raw.queue_pop(full, False), raw.queue_pop(full, False), raw.queue_pop(full, False)
    raw.queue_push(full, last[0])
    raw.queue_push(full, last[1])
    assert store.take("result/0") == []  # the rank is still writing
    raw.queue_push(full, last[2])
    assert store.take("result/0") == [{"status": "ok", "value": long_text}]


def test_keys_live_under_a_prefix_that_does_not_reveal_the_token() -> None:
    token = new_token()
    raw = dist.HashStore()
    SignedStore(raw, token).put("doing/0", "measuring")
    prefix = run_prefix(token)
    assert raw.queue_len(prefix + "doing/0") == 1
    assert token.hex() not in prefix and run_prefix(new_token()) != prefix


def test_a_value_written_without_the_token_is_rejected_and_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "executed"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (Path.touch, (str(marker),))  # type: ignore[return-value]

    raw = dist.HashStore()
    store = SignedStore(raw, new_token())
    for value in (pickle.dumps(Payload()), b"deadbeef." + json.dumps({"status": "ok"}).encode(), b""):
        raw.queue_push(store.prefix + "result/1", value)
        with pytest.raises(StoreValueError, match="not signed"):
            store.take("result/1")
    assert not marker.exists()


def test_a_signed_value_cannot_be_moved_to_another_key() -> None:
    raw = dist.HashStore()
    store = SignedStore(raw, new_token())
    store.put("result/0", {"status": "ok", "value": 1})
    raw.queue_push(store.prefix + "result/1", raw.queue_pop(store.prefix + "result/0", False))
    with pytest.raises(StoreValueError, match="not signed"):
        store.take("result/1")


def test_a_store_of_another_token_does_not_verify() -> None:
    raw = dist.HashStore()
    token = new_token()
    SignedStore(raw, token).put("events", {"kind": "plan"})
    other = SignedStore(raw, new_token())
    raw.queue_push(other.prefix + "events", raw.queue_pop(SignedStore(raw, token).prefix + "events", False))
    with pytest.raises(StoreValueError):
        other.take("events")


class _Recording:
    """A store that records the longest value any read handed to its caller."""

    def __init__(self, inner: dist.Store) -> None:
        self.inner = inner
        self.longest_read = 0

    def _seen(self, value: bytes) -> bytes:
        self.longest_read = max(self.longest_read, len(value))
        return value

    def get(self, key: str) -> bytes:
        return self._seen(self.inner.get(key))

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        return self._seen(self.inner.queue_pop(key, block))

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_key_grown_without_bound_by_a_stranger_is_never_read() -> None:
    """``append`` grows any key 8 MiB at a time and ``get`` returns all of it (800 MB values made
    the launcher grow to 6 GB): the launcher reads only queued items, each checked before use."""
    raw = dist.HashStore()
    recording = _Recording(raw)
    store = SignedStore(recording, new_token())  # type: ignore[arg-type]
    store.put("result/1", {"status": "ok", "value": 1})
    store.put("doing/1", "measuring")
    chunk = b"A" * (8 << 20)
    for key in ("result/1", "doing/1", "events", "event/1"):
        for _ in range(4):
            raw.append(store.prefix + key, chunk)
    assert store.latest("result/1") == {"status": "ok", "value": 1}
    assert store.latest("doing/1") == "measuring"
    assert store.take("events") == []
    assert recording.longest_read < 1024


def test_an_item_longer_than_any_rank_writes_is_refused_before_it_is_checked() -> None:
    raw = dist.HashStore()
    store = SignedStore(raw, new_token())
    raw.queue_push(store.prefix + "result/1", b"0" * (MAX_ITEM_BYTES + 1))
    with pytest.raises(StoreValueError, match="more than the"):
        store.take("result/1")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"__dataclass__": "Popen", "fields": {"args": ["sh"]}}, "does not accept"),
        ({"__dataclass__": "ResultRow", "fields": {**_row().to_dict(), "time_us": "fast"}}, "time_us"),
        ({"__dataclass__": "ResultRow", "fields": {**_row().to_dict(), "wrong": True}}, "wrong"),
        ({"__dataclass__": "ResultRow", "fields": {**_row().to_dict(), "evil": 1}}, "unknown field"),
        ({"__dataclass__": "ResultRow", "fields": {"op": "all-reduce"}}, "does not check"),
        ({"__dataclass__": "ResultRow", "fields": [1]}, "without its fields"),
        ({"__dataclass__": "PairMeasure", "fields": {"src": 0, "dst": 1, "latency_us": 1.0}}, "does not check"),
    ],
)
def test_decode_checks_every_field_against_the_annotations(data: object, message: str) -> None:
    with pytest.raises(StoreValueError, match=message):
        decode(data, (ResultRow, PairMeasure))


def test_encode_refuses_what_json_cannot_carry() -> None:
    with pytest.raises(TypeError):
        encode({1: "a"})
    with pytest.raises(TypeError):
        encode(object())
    measure = PairMeasure(src=0, dst=1, latency_us=3.0, bandwidth_gbps=1.5)
    assert decode(json.loads(json.dumps(encode([measure]))), (PairMeasure,)) == [measure]
