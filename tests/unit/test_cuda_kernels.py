"""The CUDA kernel and timer modules on a machine without CUDA: where sources are, when they answer False."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from collbench.runtime.cuda import kernels as cuda_kernels
from collbench.runtime.cuda.timing import CudaEventTimer

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answers of a machine without CUDA")


def test_sources_ship_in_the_package() -> None:
    src = cuda_kernels.csrc_dir()
    assert src.parent.name == "collbench"
    for name in (*cuda_kernels.SOURCE_FILES, "collbench_reduce.h"):
        text = (src / name).read_text()
        assert text.startswith("/*"), f"{name} must open with its header comment"
        assert "What it does" in text and "What it needs" in text and "When collbench uses it" in text


def test_redop_codes_match_the_c_header() -> None:
    header = (cuda_kernels.csrc_dir() / "collbench_reduce.h").read_text()
    for name, code in cuda_kernels.REDOP_CODES.items():
        assert f"CB_REDOP_{name.upper()} = {code}" in header


def test_cache_dir_honours_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLLBENCH_CACHE_DIR", str(tmp_path))
    assert cuda_kernels.cache_dir().parent == tmp_path / "torch_extensions"
    monkeypatch.delenv("COLLBENCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cuda_kernels.cache_dir().is_relative_to(tmp_path / "xdg" / "collbench")


def test_cpu_tensors_are_not_for_the_kernels() -> None:
    dst = torch.ones(8)
    assert cuda_kernels.reduce_many_cuda(dst, [torch.ones(8)], "sum") is False
    assert cuda_kernels.reduce_cuda(dst, [torch.ones(8)], "avg") is False
    assert torch.equal(dst, torch.ones(8))  # untouched: the caller's torch fallback does the work


def test_unknown_reduction_and_no_sources() -> None:
    with pytest.raises(ValueError, match="unknown reduction"):
        cuda_kernels.reduce_many_cuda(torch.ones(2), [torch.ones(2)], "xor")
    with pytest.raises(ValueError, match="at least one source"):
        cuda_kernels.reduce_cuda(torch.ones(2), [], "sum")
    assert cuda_kernels.reduce_many_cuda(torch.ones(2), [], "sum") is True


@needs_no_cuda
def test_extension_unavailable_is_said_once() -> None:
    assert cuda_kernels.unavailable_reason() is not None
    cuda_kernels.load_extension.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="own algorithms reduce with torch's ops"):
            assert cuda_kernels.load_extension() is None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert cuda_kernels.load_extension() is None
        assert not caught  # cached: said once per process
    finally:
        cuda_kernels.load_extension.cache_clear()


def test_kernels_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLBENCH_NO_CUDA_KERNELS", "1")
    assert cuda_kernels.kernels_disabled()
    monkeypatch.setenv("COLLBENCH_NO_CUDA_KERNELS", "0")
    assert not cuda_kernels.kernels_disabled()


@needs_no_cuda
def test_event_timer_needs_cuda() -> None:
    with pytest.raises(RuntimeError, match="needs CUDA"):
        CudaEventTimer().time_iterations(lambda: None, 3)


def test_event_timer_rejects_no_iterations() -> None:
    with pytest.raises(ValueError, match="iters"):
        CudaEventTimer(cuda_graph=True).time_iterations(lambda: None, 0)
