"""Whether a calibration's latency scale was told by the sizes, and the basis that says so.

``nccl_calibrate`` fits NCCL's latency scale only where latency takes at least
``LATENCY_SHARE_TO_FIT`` of the time at the smallest size measured; below that the scale stays NCCL's
own, 1. The 20-rack GB200 log (tests/fixtures/real/SOURCES.md; a GB200 "node" is an NVL72 rack,
benchmarks/README.md) starts at 512 MiB, where its ring and tree are bandwidth: its basis said
"latencies x1 (fitted)", a scale no size told. The rack's log starts at 512 MiB too, but its ring's
142 NVLink hops take a share of the time there that tells one (x1.19, test_nccl_nvls_calibration).
"""

from __future__ import annotations

from gb200_logs import RACKS, gb200

from collbench.models.nccl_graph import NodeFacts
from collbench.models.predict import price_fits
from collbench.models.predict_native import nccl_machine_for
from collbench.models.priced import Shapes

NVLS_OFF = NodeFacts(nvls=False)
"""``predict --no-nvls``: the GB200 runs' own setting (NCCL_NVLS_ENABLE=0, benchmarks/README.md)."""
OWN = "NCCL's own latencies (no size tells them)"


def test_the_calibration_records_whether_a_size_told_the_latency() -> None:
    twenty, _ = gb200(1440)
    rack, _ = gb200(72)
    for facts in (NVLS_OFF, NodeFacts()):
        untold = nccl_machine_for(twenty, 20, "blackwell", True, facts)  # the ring's fit (_fit_ring)
        assert not untold.latency_measured and untold.latency_scale == 1.0
    told = nccl_machine_for(rack, 1, "blackwell", True, NVLS_OFF)  # _fit_ring, the latency told
    assert told.latency_measured and told.latency_scale > 1.1
    # With NVLS on, NCCL ran NVLS at every size of the rack's log: _fit_nvls fits the latency, and
    # at 512 MiB NVLS's 25 us is no share of the time: NCCL's own.
    nvls = nccl_machine_for(rack, 1, "blackwell", True, NodeFacts())
    assert nvls.nvls is not None and nvls.nvls_measured
    assert not nvls.latency_measured and nvls.latency_scale == 1.0
    # NCCL's own figures are its own latencies, never a fit's.
    own = told.own_figures()
    assert own is not None and not own.latency_measured


def test_the_basis_says_nccls_own_latencies_where_no_size_told_them() -> None:
    twenty, _ = gb200(1440)
    rack, _ = gb200(72)
    kw = {"shapes": Shapes(RACKS), "nccl_arch": "blackwell", "nccl_facts": NVLS_OFF}
    for ranks, nodes in ((1440, 20), (2880, 40)):
        (entry,), _, _ = price_fits([twenty], ranks, nodes, **kw)
        for size in (1 << 29, 1 << 33):
            assert OWN in entry.basis(size) and "latencies x1 (fitted)" not in entry.basis(size)
    (fitted,), _, _ = price_fits([rack], 72, 1, **kw)
    assert "latencies x1.2 (fitted)" in fitted.basis(1 << 30) and OWN not in fitted.basis(1 << 30)
