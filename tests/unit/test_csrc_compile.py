"""The CUDA kernels compile with nvcc alone for sm_80 and sm_90, without spilling registers.

Skips where nvcc is absent. (The torch binding needs a CUDA build of torch to compile; GPU machines
build it on first use, and tests/gpu runs it.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[2] / "csrc"
NVCC = shutil.which("nvcc")

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")


def _nvcc(*args: str) -> subprocess.CompletedProcess[str]:
    assert NVCC is not None
    return subprocess.run([NVCC, *args], capture_output=True, text=True, timeout=300, check=False)


def _torch_nvcc_flags() -> list[str]:
    """The flags torch's extension builder adds (no implicit half conversions, relaxed constexpr)."""
    from torch.utils import cpp_extension

    return list(getattr(cpp_extension, "COMMON_NVCC_FLAGS", []))


@pytest.mark.parametrize("arch", ["80", "90"])
def test_kernels_compile(arch: str, tmp_path: Path) -> None:
    out = tmp_path / f"reduce_sm{arch}.o"
    # sm_90 as torch's extension builder compiles it; sm_80 with nvcc's defaults alone.
    flags = _torch_nvcc_flags() if arch == "90" else []
    result = _nvcc(
        *flags,
        "-c",
        "-O3",
        "-std=c++17",
        f"-gencode=arch=compute_{arch},code=sm_{arch}",
        "-Xptxas",
        "-v",
        "-I",
        str(CSRC),
        str(CSRC / "reduce_kernels.cu"),
        "-o",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert out.stat().st_size > 0
    report = result.stderr
    # 3 dtypes x 4 kernel ops (avg is sum with a divisor) x k = 1..8.
    entries = re.findall(r"Compiling entry function '(\w+)' for 'sm_(\d+)'", report)
    assert len(entries) == 96 and {a for _, a in entries} == {arch}
    frames = [int(n) for n in re.findall(r"(\d+) bytes stack frame", report)]
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill stores", report)]
    assert len(frames) == 96 and not any(frames), "a kernel keeps registers in local memory (slow)"
    assert not any(spills)
    assert "warning" not in report.lower()


def test_c_header_is_plain_c_and_cxx(tmp_path: Path) -> None:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), str(Path(NVCC or "").resolve().parents[1])]
    found = [Path(r) / "include" for r in [*roots, "/usr/local/cuda"] if r]
    found = [d for d in found if (d / "cuda_runtime_api.h").is_file()]
    if not found:
        pytest.skip("CUDA headers not found (set CUDA_HOME)")
    cuda_include = found[0]
    probe = tmp_path / "probe.c"
    probe.write_text('#include "collbench_reduce.h"\nint main(void) { return CB_REDOP_AVG - 4; }\n')
    for compiler, src in (("cc", probe), ("c++", probe)):
        exe = shutil.which(compiler)
        if exe is None:
            continue
        lang = ["-x", "c++"] if compiler == "c++" else []
        result = subprocess.run(
            [exe, *lang, "-fsyntax-only", "-Wall", "-Werror", "-I", str(CSRC), "-I", str(cuda_include), str(src)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr


def test_kernels_on_the_host(tmp_path: Path) -> None:
    # The kernels' per-thread code, run for every thread of each grid on the CPU (no GPU needed):
    # every dtype, reduction, k = 1..17, odd sizes, unaligned offsets, dst among the sources.
    exe = tmp_path / "host_check"
    result = _nvcc(
        "-O2",
        "-std=c++17",
        "-DCB_HOST_EMULATION",
        "-I",
        str(CSRC),
        str(Path(__file__).with_name("csrc_host_check.cu")),
        str(CSRC / "reduce_kernels.cu"),
        "-o",
        str(exe),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout[-4000:]
    assert run.stdout.strip().splitlines()[-1].startswith("OK: 14404 cases, 0 failed")
