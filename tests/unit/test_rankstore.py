"""The signed JSON the ranks send their launcher through the store (torch's HashStore stands in
for the TCPStore: the same ``Store`` API, set/get/check, without a socket)."""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import pytest
import torch.distributed as dist
from synthetic_rows import point_row

from collbench.results.row import ResultRow
from collbench.runtime.launch.rankstore import SignedStore, StoreValueError, decode, encode, new_token, run_prefix
from collbench.runtime.probe import PairMeasure


def _row(**changes: object) -> ResultRow:
    base = point_row("ring", 1024, 10.0, spread=0.1, in_place=False, iters=5)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_rows_and_plain_data_round_trip() -> None:
    store = SignedStore(dist.HashStore(), new_token())
    value = {"status": "ok", "value": [_row(), _row(size_bytes=4096, segment_bytes=512)], "n": (1, 2.5, None)}
    store.put("result/0", value)
    assert store.has("result/0") and not store.has("result/1")
    got = store.get("result/0", (ResultRow,))
    assert got == {"status": "ok", "value": [_row(), _row(size_bytes=4096, segment_bytes=512)], "n": [1, 2.5, None]}


def test_keys_live_under_a_prefix_that_does_not_reveal_the_token() -> None:
    token = new_token()
    raw = dist.HashStore()
    SignedStore(raw, token).put("doing/0", "measuring")
    prefix = run_prefix(token)
    assert raw.check([prefix + "doing/0"])
    assert token.hex() not in prefix and run_prefix(new_token()) != prefix


def test_a_value_written_without_the_token_is_rejected_and_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "executed"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (Path.touch, (str(marker),))  # type: ignore[return-value]

    raw = dist.HashStore()
    store = SignedStore(raw, new_token())
    for value in (pickle.dumps(Payload()), b"deadbeef." + json.dumps({"status": "ok"}).encode(), b""):
        raw.set(store.prefix + "result/1", value)
        with pytest.raises(StoreValueError, match="not signed"):
            store.get("result/1")
    assert not marker.exists()


def test_a_signed_value_cannot_be_moved_to_another_key() -> None:
    raw = dist.HashStore()
    store = SignedStore(raw, new_token())
    store.put("result/0", {"status": "ok", "value": 1})
    raw.set(store.prefix + "result/1", raw.get(store.prefix + "result/0"))
    with pytest.raises(StoreValueError, match="not signed"):
        store.get("result/1")


def test_a_store_of_another_token_does_not_verify() -> None:
    raw = dist.HashStore()
    token = new_token()
    SignedStore(raw, token).put("event/1", {"kind": "plan"})
    other = SignedStore(raw, new_token())
    raw.set(other.prefix + "event/1", raw.get(SignedStore(raw, token).prefix + "event/1"))
    with pytest.raises(StoreValueError):
        other.get("event/1")


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
