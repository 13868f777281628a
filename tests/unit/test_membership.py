"""Node membership from the hosts the ranks report (host name plus boot id, as NCCL's getHostHash in
src/misc/utils.cc identifies a host), whatever order the launcher numbers ranks in."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.runtime.launch.membership import (
    ROW_BYTES,
    TEST_BOOT_ID_ENV,
    HostReport,
    boot_id,
    decode_report,
    encode_report,
    membership,
)

A = HostReport("gpu01", "0f6c5a52-6f2e-4c59-9b55-1d2c3b4a5f60")
B = HostReport("gpu02", "9a1d7e2b-3c44-4f1e-8d0b-7e6f5a4b3c21")
C = HostReport("gpu03", "5b2e8c1d-0a9f-4e3d-b2c1-a0f9e8d7c6b5")


def test_map_by_node_puts_every_other_rank_on_the_second_host() -> None:
    # mpirun --map-by node over two hosts: rank r on host r % 2. Open MPI's local ranks are r // 2.
    got = membership([A, B, A, B])
    assert got.node_of_rank == (0, 1, 0, 1)
    assert got.local_rank_of == (0, 0, 1, 1)
    assert got.nodes == 2 and got.ranks_on_node == (2, 2)
    assert [got.node_name(r) for r in range(4)] == ["gpu01", "gpu02", "gpu01", "gpu02"]


def test_uneven_nodes_count_each_host_once() -> None:
    # Two ranks on the first host, three on the second: world // local size gave one node here.
    got = membership([A, A, B, B, B])
    assert got.nodes == 2
    assert got.node_of_rank == (0, 0, 1, 1, 1)
    assert got.local_rank_of == (0, 1, 0, 1, 2)
    assert (got.local_size(0), got.local_size(4)) == (2, 3)


def test_a_host_name_shared_by_two_machines_is_two_nodes_by_their_boot_ids() -> None:
    twin = HostReport("gpu01", B.boot_id)
    got = membership([A, twin, C, A])
    assert got.nodes == 3
    assert got.node_names == ("gpu01", "gpu01#2", "gpu03")
    assert got.node_of_rank == (0, 1, 2, 0)


def test_reports_travel_as_fixed_rows_and_come_back_equal() -> None:
    long = HostReport("n" * 200, "b" * 60)
    for report in (A, HostReport("", ""), long):
        row = encode_report(report)
        assert len(row) == ROW_BYTES
    assert decode_report(encode_report(A)) == A
    cut = decode_report(encode_report(long))
    # Cut to their fields, alike on every rank: equal hosts still compare equal.
    assert cut == decode_report(encode_report(HostReport("n" * 200, "b" * 60)))
    assert len(cut.name) == 80 and len(cut.boot_id) == ROW_BYTES - 80


def test_the_boot_id_is_the_kernels_unless_a_test_stands_in_for_it(tmp_path: Path) -> None:
    path = tmp_path / "boot_id"
    path.write_text(A.boot_id + "\n")
    assert boot_id({}, path) == A.boot_id
    assert boot_id({TEST_BOOT_ID_ENV: "host-b"}, path) == "host-b"
    assert boot_id({}, tmp_path / "missing") == ""


@pytest.mark.skipif(not Path("/proc/sys/kernel/random/boot_id").exists(), reason="not Linux")
def test_this_machine_has_a_boot_id_of_the_kernels_form() -> None:
    # proc(5): boot_id is a UUID, 36 characters, made afresh at each boot.
    got = boot_id({})
    assert len(got) == 36 and got.count("-") == 4
