"""NCCL variants, forcing environment, TUNING log parsing and the no-GPU errors (no CUDA needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from collbench.errors import BackendUnavailableError, ConfigError, UnknownNameError
from collbench.nccl.algorithms import ALGORITHMS, PROTOCOLS, algorithms_for
from collbench.nccl.tuning_log import TuningChoice, choice_for, parse_tuning_line, parse_tuning_log
from collbench.nccl.variants import (
    NativeVariant,
    all_variants,
    channel_bounds,
    check_variant_supported,
    is_native,
    max_channels_for,
    parse_native_variant,
    parse_version,
    variant_env,
    variant_process_env,
)
from collbench.runtime.cuda import nccl

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"


@pytest.mark.parametrize(
    ("name", "algo", "proto"),
    [
        ("native", None, None),
        ("NATIVE", None, None),
        ("native:ring", "Ring", None),
        ("native:Tree", "Tree", None),
        ("native:tree/ll128", "Tree", "LL128"),
        ("native:RING/simple", "Ring", "Simple"),
        ("native:nvls", "NVLS", None),
        ("native:nvlstree", "NVLSTree", None),
        ("native:nvls-tree", "NVLSTree", None),
        ("native:collnet_direct", "CollNetDirect", None),
        ("native:collnetchain/simple", "CollNetChain", "Simple"),
        ("native:pat", "PAT", None),
        ("native:*/ll", None, "LL"),
        ("native:/LL128", None, "LL128"),
        ("  native:ring/ll  ", "Ring", "LL"),
    ],
)
def test_parse_native_variant(name: str, algo: str | None, proto: str | None) -> None:
    assert parse_native_variant(name) == NativeVariant(algo, proto)


def test_unknown_algorithm_lists_known_ones() -> None:
    with pytest.raises(UnknownNameError) as info:
        parse_native_variant("native:butterfly")
    message = str(info.value)
    assert "butterfly" in message
    for algo in ALGORITHMS:
        assert algo.lower() in message


def test_unknown_protocol_lists_known_ones() -> None:
    with pytest.raises(UnknownNameError) as info:
        parse_native_variant("native:ring/ll64")
    assert "ll64" in str(info.value)
    assert "ll128" in str(info.value) and "simple" in str(info.value)


def test_not_native_and_forcing_nothing_are_errors() -> None:
    with pytest.raises(UnknownNameError):
        parse_native_variant("ring")
    with pytest.raises(ConfigError):
        parse_native_variant("native:")
    with pytest.raises(ConfigError):
        parse_native_variant("native:*")


def test_variant_validates_its_fields() -> None:
    with pytest.raises(UnknownNameError):
        NativeVariant("ring")  # must be NCCL's spelling; parse_native_variant normalises user text


@given(st.sampled_from((None, *ALGORITHMS)), st.sampled_from((None, *PROTOCOLS)))
def test_name_round_trips(algo: str | None, proto: str | None) -> None:
    variant = NativeVariant(algo, proto)
    assert parse_native_variant(variant.name) == variant
    assert variant.forced == (algo is not None or proto is not None)


def test_variant_env() -> None:
    assert variant_env(NativeVariant()) == {}
    assert variant_env(parse_native_variant("native:ring")) == {"NCCL_ALGO": "Ring"}
    assert variant_env(parse_native_variant("native:tree/ll128")) == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"}
    assert variant_env(parse_native_variant("native:*/simple")) == {"NCCL_PROTO": "Simple"}
    assert variant_env(parse_native_variant("native:collnet-direct")) == {"NCCL_ALGO": "CollNetDirect"}


def test_all_variants_cover_every_algorithm() -> None:
    variants = all_variants()
    assert variants[0] == NativeVariant()
    assert [v.algo for v in variants[1:]] == list(ALGORITHMS)
    assert all(is_native(v.name) for v in variants)
    assert not is_native("ring")


def test_algorithms_by_nccl_version() -> None:
    assert algorithms_for((2, 12, 12)) == ("Ring", "Tree")
    assert "NVLS" in algorithms_for((2, 17, 1)) and "NVLSTree" not in algorithms_for((2, 17, 1))
    assert "PAT" not in algorithms_for((2, 22, 3))
    assert algorithms_for((2, 23, 4)) == tuple(ALGORITHMS)


def test_check_variant_supported() -> None:
    check_variant_supported(parse_native_variant("native:pat"), (2, 23, 4))
    check_variant_supported(NativeVariant(), (2, 10, 3))
    check_variant_supported(parse_native_variant("native:*/ll128"), (2, 10, 3))
    with pytest.raises(UnknownNameError) as info:
        check_variant_supported(parse_native_variant("native:pat"), (2, 21, 5))
    message = str(info.value)
    assert "2.21.5" in message and "2.23" in message and "'pat'" in message and "nvlstree" in message


def test_parse_version() -> None:
    assert parse_version("2.21.5") == (2, 21, 5)
    assert parse_version("2.18") == (2, 18, 0)
    with pytest.raises(ValueError):
        parse_version("two")


def test_applied_env_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_PROTO", "LL")
    monkeypatch.delenv("NCCL_ALGO", raising=False)
    with nccl.applied_env({"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}):
        assert os.environ["NCCL_ALGO"] == "Tree"
        assert os.environ["NCCL_PROTO"] == "Simple"
    assert "NCCL_ALGO" not in os.environ
    assert os.environ["NCCL_PROTO"] == "LL"


def test_parse_tuning_log_v2_24_upper_case_spellings() -> None:
    # NCCL 2.24 src/enqueue.cc prints ncclAlgoToString/ncclProtoToString (src/collectives.cc): RING,
    # SIMPLE; rows keep ncclAlgoStr's spelling (Ring, Simple), which NCCL_ALGO and exporters take.
    choices = parse_tuning_log((FIXTURES / "tuning_v2_24.log").read_text())
    assert [(c.func, c.size_bytes, c.algo, c.proto) for c in choices] == [
        ("AllReduce", 8, "Ring", "LL"),
        ("AllReduce", 1048576, "Ring", "LL128"),
        ("AllReduce", 1048576, "Ring", "LL128"),
        ("AllReduce", 134217728, "Ring", "Simple"),
        ("AllGather", 131072, "Ring", "Simple"),
        ("AllReduce", 4194304, "NVLS", "Simple"),
    ]
    assert choices[3].channels == 32
    assert (choices[3].channel_lo, choices[3].channel_hi) == (0, 31)
    assert choices[0].device == 0 and choices[0].pid == 2113


def test_parse_tuning_log_v2_27_underscored_names_and_symmetric() -> None:
    # NCCL 2.27.7 src/collectives.cc ncclAlgoToString: NVLS_TREE, COLLNET_DIRECT; src/enqueue.cc:1429
    # the [Symmetric] line without nWorks.
    choices = parse_tuning_log((FIXTURES / "tuning_v2_27.log").read_text())
    assert [(c.func, c.size_bytes, c.algo, c.proto) for c in choices] == [
        ("AllReduce", 8192, "Tree", "LL"),
        ("AllReduce", 33554432, "NVLS", "Simple"),
        ("AllReduce", 268435456, "NVLSTree", "Simple"),
        ("ReduceScatter", 1048576, "CollNetDirect", "Simple"),
        ("Broadcast", 65536, "Ring", "LL128"),
        ("AllReduce", 65536, "Symmetric", ""),
    ]
    assert choices[5].kernel == "AllReduce_AGxLL_R" and choices[5].channels == 4
    assert choice_for(choices, "allreduce", 268435456, 8) == ("NVLSTree", "Simple")


def test_parse_tuning_log_v2_30_every_path() -> None:
    # NCCL 2.30.7: src/enqueue.cc:822 (PAT, COLLNET_CHAIN), src/scheduler/symmetric_sched.cc:356
    # ([Symmetric] ... nWorks), src/ce_coll.cc:1431/1435 (CE paths); the chunk-size line is not a choice.
    choices = parse_tuning_log((FIXTURES / "tuning_v2_30.log").read_text())
    assert [(c.func, c.size_bytes, c.algo, c.proto) for c in choices] == [
        ("AllGather", 2097152, "PAT", "Simple"),
        ("AllReduce", 4194304, "CollNetChain", "Simple"),
        ("Reduce", 1024, "Ring", "LL"),
        ("AllReduce", 131072, "Symmetric", ""),
        ("AllGather", 33554432, "CopyEngine", ""),
        ("AllGather", 67108864, "HierarchicalCE", ""),
    ]
    assert choices[3].channels == 8
    assert choices[4].channels is None


def test_parse_tuning_log_numbered_formats() -> None:
    choices = parse_tuning_log((FIXTURES / "tuning_v2_20_to_2_23.log").read_text())
    assert choices == [
        TuningChoice("", 1048576, "Ring", "Simple", predicted_time_us=21.344, device=1, pid=771),
        TuningChoice("", 8, "Tree", "LL", predicted_time_us=6.8, device=1, pid=771),
        TuningChoice("AllReduce", 2097152, "PAT", "LL128", predicted_time_us=30.125, device=1, pid=771),
        TuningChoice("ReduceScatter", 262144, "NVLS", "Simple", predicted_time_us=12.0, device=1, pid=771),
    ]


def test_parse_tuning_line_variants() -> None:
    # The symmetric line of 2.27 had no nWorks; a line without NCCL's prefix is read as well.
    line = (
        "h:1:1 [3] NCCL INFO ReduceScatter [Symmetric]: 4096 Bytes -> Kernel ReduceScatter_LL nchannels 2 nthreads 256"
    )
    choice = parse_tuning_line(line)
    assert choice is not None and choice.algo == "Symmetric" and choice.device == 3 and choice.channels == 2
    bare = parse_tuning_line("Broadcast: 64 Bytes -> Algo Ring proto LL channel{Lo..Hi}={0..1}")
    assert bare == TuningChoice("Broadcast", 64, "Ring", "LL", 0, 1)
    assert parse_tuning_line("h:1:1 [0] NCCL INFO Using network Socket") is None
    assert parse_tuning_line("h:1:1 [0] NCCL INFO AllReduce: tuner chunk size 9 exceeds buffer max 8, clamping") is None
    odd = parse_tuning_line("4 Bytes -> Algo 9 proto 7 time 1.0")
    assert odd is not None and (odd.algo, odd.proto) == ("#9", "#7")


def test_choice_for() -> None:
    choices = parse_tuning_log((FIXTURES / "tuning_v2_24.log").read_text())
    assert choice_for(choices, "allreduce", 1048576, 8) == ("Ring", "LL128")
    # All-gather's line counts one rank's share: 131072 x 8 ranks = 1 MiB as nccl-tests counts it.
    assert choice_for(choices, "allgather", 1048576, 8) == ("Ring", "Simple")
    assert choice_for(choices, "broadcast", 1048576, 8) is None
    old = parse_tuning_log((FIXTURES / "tuning_v2_20_to_2_23.log").read_text())
    assert choice_for(old, "allreduce", 8, 2) == ("Tree", "LL")


def test_tuning_log_env_and_read(tmp_path: Path) -> None:
    env = nccl.tuning_log_env(tmp_path)
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "TUNING"
    assert env["NCCL_DEBUG_FILE"].startswith(str(tmp_path)) and "%p" in env["NCCL_DEBUG_FILE"]
    (tmp_path / "nccl.host.11.log").write_text((FIXTURES / "tuning_v2_24.log").read_text())
    (tmp_path / "nccl.host.12.log").write_text("h:12:12 [1] NCCL INFO Channel 00/02 : 0 1\n")
    assert len(nccl.read_tuning_logs(tmp_path)) == 6
    assert nccl.read_tuning_logs(tmp_path / "absent") == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the errors of a machine without CUDA")
def test_check_nccl_usable_without_cuda() -> None:
    with pytest.raises(BackendUnavailableError) as info:
        nccl.check_nccl_usable(2)
    message = str(info.value)
    assert "\n" not in message
    assert "--backend gloo" in message


def test_check_nccl_usable_more_ranks_than_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pretend to be a CUDA build with 2 GPUs and NCCL, so the rank count is what fails.
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    nccl.check_nccl_usable(2)
    nccl.check_nccl_usable(16, local_world_size=2)
    with pytest.raises(BackendUnavailableError) as info:
        nccl.check_nccl_usable(4)
    assert "4 ranks" in str(info.value) and "it has 2" in str(info.value) and "--ranks 2" in str(info.value)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: False)
    with pytest.raises(BackendUnavailableError, match="without NCCL"):
        nccl.check_nccl_usable(1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BackendUnavailableError, match="none is usable"):
        nccl.check_nccl_usable(1)


def test_check_nccl_usable_bad_world_size() -> None:
    with pytest.raises(ConfigError):
        nccl.check_nccl_usable(0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer of a machine without CUDA")
def test_nccl_versions_without_cuda() -> None:
    versions = nccl.nccl_versions()
    assert versions["torch_version"] == str(torch.__version__)
    assert versions["backend_version"] == "" and versions["device_name"] == "" and versions["driver_version"] == ""
    assert set(versions) == {"torch_version", "backend_version", "cuda_version", "driver_version", "device_name"}


def test_tuning_log_reader_returns_only_new_lines(tmp_path: Path) -> None:
    reader = nccl.TuningLogReader(tmp_path)
    assert reader.new_choices() == []
    log = tmp_path / "nccl.h.5.log"
    log.write_text("h:5:5 [0] NCCL INFO AllReduce: 64 Bytes -> Algo Ring proto LL channel{Lo..Hi}={0..0}\n")
    assert [c.size_bytes for c in reader.new_choices()] == [64]
    with log.open("a") as f:
        f.write("h:5:5 [0] NCCL INFO AllReduce: 128 Bytes -> Algo Tree proto LL channel{Lo..Hi}={0..1}\n")
        f.write("h:5:5 [0] NCCL INFO AllReduce: 256 Bytes -> Algo Tr")  # torn: NCCL is mid-line
    assert [(c.size_bytes, c.algo) for c in reader.new_choices()] == [(128, "Tree")]
    with log.open("a") as f:
        f.write("ee proto LL channel{Lo..Hi}={0..1}\n")
    assert [(c.size_bytes, c.algo) for c in reader.new_choices()] == [(256, "Tree")]
    assert reader.new_choices() == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("native:ring/simple@16ch", NativeVariant("Ring", "Simple", 16)),
        ("native:tree/LL128@4CH", NativeVariant("Tree", "LL128", 4)),
        ("native:nvls @ 32ch", NativeVariant("NVLS", None, 32)),
        ("native:*@8ch", NativeVariant(None, None, 8)),
        ("native@8ch", NativeVariant(None, None, 8)),
        ("native:ring/ll@64ch", NativeVariant("Ring", "LL", 64)),
    ],
)
def test_parse_channel_count(name: str, expected: NativeVariant) -> None:
    assert parse_native_variant(name) == expected
    assert is_native(name)


@pytest.mark.parametrize("name", ["native:ring@0ch", "native:ring@65ch", "native:ring@4", "native:ring@ch", "native@x"])
def test_bad_channel_count_is_one_line(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_native_variant(name)
    assert "\n" not in str(info.value) and "ch" in str(info.value)


def test_variant_refuses_a_channel_count_nccl_cannot_hold() -> None:
    for bad in (0, 65, True):
        with pytest.raises(ConfigError):
            NativeVariant("Ring", "Simple", bad)


@given(
    st.sampled_from((None, *ALGORITHMS)),
    st.sampled_from((None, *PROTOCOLS)),
    st.one_of(st.none(), st.integers(min_value=1, max_value=64)),
)
def test_name_round_trips_with_channels(algo: str | None, proto: str | None, channels: int | None) -> None:
    variant = NativeVariant(algo, proto, channels)
    assert parse_native_variant(variant.name) == variant
    assert is_native(variant.name)
    assert variant.forced == (algo is not None or proto is not None or channels is not None)


def test_channel_count_is_forced_per_communicator_not_through_the_environment() -> None:
    # NCCL_MIN/MAX_NCHANNELS are NCCL_PARAMs, cached in a function-local static the first time NCCL
    # reads them (src/include/param.h): set around a second communicator of a process they do nothing.
    # The communicator's ncclConfig_t minCTAs/maxCTAs is read per communicator (src/graph/connect.cc).
    variant = parse_native_variant("native:ring/simple@16ch")
    assert variant_env(variant) == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}
    assert channel_bounds(variant) == (16, 16)
    assert channel_bounds(parse_native_variant("native:ring/simple")) is None
    assert variant_process_env(variant) == {
        "NCCL_ALGO": "Ring",
        "NCCL_PROTO": "Simple",
        "NCCL_MIN_NCHANNELS": "16",
        "NCCL_MAX_NCHANNELS": "16",
    }


def test_check_variant_supported_channel_counts() -> None:
    check_variant_supported(parse_native_variant("native:ring/simple@32ch"), (2, 17, 1))
    check_variant_supported(parse_native_variant("native:ring/simple@64ch"), (2, 25, 1))
    with pytest.raises(ConfigError) as info:
        check_variant_supported(parse_native_variant("native:ring/simple@4ch"), (2, 16, 5))
    assert "minCTAs" in str(info.value) and "2.17" in str(info.value)
    with pytest.raises(ConfigError) as info:
        check_variant_supported(parse_native_variant("native:ring/simple@64ch"), (2, 24, 3))
    assert "at most 32" in str(info.value)
    assert max_channels_for((2, 24, 3)) == 32 and max_channels_for((2, 25, 0)) == 64
