"""A failed kernel build names the compiler's own error lines and keeps the whole output.

Torch's loader reports a failed build as ``RuntimeError("Error building extension 'NAME': " + ninja's
output)`` (``_run_ninja_build`` in torch/utils/cpp_extension.py), whose first line is ninja's first
command (``[1/2] c++ -MMD ...``): what collbench used to show. Here real compilers fail on real broken
sources: gcc through torch's own loader (it builds C++ extensions with this CPU-only torch), and nvcc
(this torch cannot build CUDA sources: its loader has no CUDA_HOME without a CUDA build) run as
ninja would run it, its output wrapped as the loader wraps it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from collbench.runtime.cuda import kernel_build
from collbench.runtime.cuda.kernel_build import build, compiler_errors


def test_gcc_through_torchs_loader(tmp_path: Path) -> None:
    if shutil.which("c++") is None or shutil.which("ninja") is None:
        pytest.skip("needs a C++ compiler and ninja")
    from torch.utils import cpp_extension

    source = tmp_path / "broken.cpp"
    source.write_text("int f() {\n  return undeclared_name + 1;\n}\nint g() { return also_missing; }\n")
    build_dir = tmp_path / "build"
    build_dir.mkdir()

    def load() -> ModuleType:
        module: ModuleType = cpp_extension.load(
            name="collbench_broken_ext", sources=[str(source)], build_directory=str(build_dir), verbose=False
        )
        return module

    said: list[str] = []
    result = build(build_dir, "collbench_broken_ext", load, said.append, torch_cuda=None, cuda_home=None)
    assert result.module is None
    fallback_line = said[1]
    assert "building them failed: " in fallback_line and "[1/2]" not in fallback_line
    assert "broken.cpp:2:10: error: " in fallback_line and "undeclared_name" in fallback_line
    assert "(2 compiler error lines, below)" in fallback_line
    assert said[2].startswith("  ") and "broken.cpp:4:" in said[2] and "also_missing" in said[2]
    kept = (build_dir / kernel_build.FAILURE_LOG).read_text()
    assert "Error building extension 'collbench_broken_ext'" in kept and "ninja: build stopped" in kept
    assert f"the whole build output is in {build_dir / kernel_build.FAILURE_LOG}" in fallback_line


def test_nvccs_errors_in_the_loaders_message(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc")
    source = tmp_path / "broken.cu"
    source.write_text("__global__ void k(float* x) {\n  x[0] = undeclared_cuda;\n}\n")
    command = [nvcc, "-c", str(source), "-o", str(tmp_path / "broken.o")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    ninja_output = (
        f"[1/3] {' '.join(command)}\nFAILED: broken.o\n{' '.join(command)}\n{done.stdout}{done.stderr}"
        "ninja: build stopped: subcommand failed.\n"
    )

    def load() -> ModuleType:
        raise RuntimeError(f"Error building extension 'collbench_reduce_ext': {ninja_output}")

    said: list[str] = []
    build_dir = tmp_path / "build"
    result = build(build_dir, "collbench_reduce_ext", load, said.append, torch_cuda=None, cuda_home=None)
    assert result.module is None
    assert f'{source}(2): error: identifier "undeclared_cuda" is undefined' in said[1]
    assert "[1/3]" not in said[1]
    assert done.stderr.strip().splitlines()[0] in (build_dir / kernel_build.FAILURE_LOG).read_text()


def test_error_lines_of_each_compiler_and_nothing_else() -> None:
    output = "\n".join(
        [
            "[1/3] c++ -c a.cpp -o a.o",
            "FAILED: a.o",
            "a.cpp: In function 'int f()':",
            "a.cpp:2:10: error: 'x' was not declared in this scope",
            "a.cpp:3:1: warning: no return statement",
            'k.cu(7): error: identifier "y" is undefined',
            "nvcc fatal   : Unsupported gpu architecture 'compute_100a'",
            "/usr/bin/ld: a.o: in function `g': undefined reference to `h'",
            "collect2: error: ld returned 1 exit status",
            "a.cpp:2:10: error: 'x' was not declared in this scope",
            "ninja: build stopped: subcommand failed.",
        ]
    )
    assert compiler_errors(output) == [
        "a.cpp:2:10: error: 'x' was not declared in this scope",
        'k.cu(7): error: identifier "y" is undefined',
        "nvcc fatal   : Unsupported gpu architecture 'compute_100a'",
        "/usr/bin/ld: a.o: in function `g': undefined reference to `h'",
        "collect2: error: ld returned 1 exit status",
    ]


def test_many_errors_are_cut_with_a_count(tmp_path: Path) -> None:
    errors = [f"k.cu({i}): error: bad {i}" for i in range(1, 21)]

    def load() -> ModuleType:
        raise RuntimeError("Error building extension 'e': [1/1] nvcc k.cu\n" + "\n".join(errors))

    said: list[str] = []
    build(tmp_path / "b", "e", load, said.append, torch_cuda=None, cuda_home=None)
    assert "(20 compiler error lines, below)" in said[1]
    assert said[2:-1] == [f"  {e}" for e in errors[1 : kernel_build.MAX_ERROR_LINES]]
    assert said[-1] == f"  ... {20 - kernel_build.MAX_ERROR_LINES} more in {tmp_path / 'b' / kernel_build.FAILURE_LOG}"
