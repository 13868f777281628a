"""ninja and Python.h, checked before torch's extension loader is asked to build the CUDA kernels.

The contract faked here is torch's (torch/utils/cpp_extension.py, torch 2.13): ``_jit_compile`` runs
``_write_ninja_file_and_build_library`` whenever the extension is new to the process (a fresh
process, even with the library built), which calls ``verify_ninja_availability`` (``ninja
--version`` by name, from ``PATH``) and runs ``ninja -v``; the compile lines include
``sysconfig.get_path('include', scheme='posix_prefix')`` "which gives us the location of Python.h".
Without ninja torch raises "Ninja is required to load C++ extensions"; without Python.h the compiler
fails mid-build. Here the lookups are faked: ``PATH``, the interpreter's directory, and sysconfig.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

from collbench.runtime.cuda import kernel_build
from collbench.runtime.cuda.kernel_build import BuildTools, build, find_build_tools, missing_tools_reason

FALLBACK = "collbench's CUDA reduction kernels are not used: {}; own algorithms reduce with torch's ops"


def _program(folder: Path, name: str, text: str = "#!/bin/sh\necho 1.11.1\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def _include(tmp_path: Path, with_header: bool) -> Path:
    include = tmp_path / "include" / "python3.x"
    include.mkdir(parents=True, exist_ok=True)
    if with_header:
        (include / "Python.h").write_text("/* the header */\n")
    return include


def test_ninja_is_found_on_path_else_beside_the_interpreter(tmp_path: Path) -> None:
    on_path = _program(tmp_path / "path", "ninja")
    venv_bin = tmp_path / "venv" / "bin"
    include = _include(tmp_path, with_header=True)
    found = find_build_tools(path=str(tmp_path / "path"), python_bin=venv_bin, include_dir=str(include))
    assert found == BuildTools(ninja=on_path, python_h=include / "Python.h")
    # pip's ninja lives in .venv/bin, on PATH only when the environment is activated.
    beside = _program(venv_bin, "ninja")
    assert find_build_tools(path=str(tmp_path / "empty"), python_bin=venv_bin, include_dir=str(include)).ninja == beside
    beside.chmod(0o644)  # not a program
    assert find_build_tools(path=str(tmp_path / "empty"), python_bin=venv_bin, include_dir=str(include)).ninja is None


def test_python_h_is_looked_for_where_torch_compiles_against() -> None:
    tools = find_build_tools()
    assert tools.python_h == Path(sysconfig.get_path("include", scheme="posix_prefix")) / "Python.h"


def test_what_is_missing_is_named_with_how_to_get_it(tmp_path: Path) -> None:
    header = _include(tmp_path, with_header=True) / "Python.h"
    nowhere = tmp_path / "none" / "Python.h"
    ninja = tmp_path / "ninja"
    assert missing_tools_reason(BuildTools(ninja, header), compiles=True) is None
    assert missing_tools_reason(BuildTools(None, header), compiles=True) == (
        "ninja is missing for torch's extension loader (pip install ninja)"
    )
    py = f"python{sys.version_info.major}.{sys.version_info.minor}-dev"
    assert missing_tools_reason(BuildTools(None, nowhere), compiles=True) == (
        "ninja and Python.h are missing for torch's extension loader (pip install ninja; no "
        f"{nowhere}: install this Python's development headers ({py} on Debian and Ubuntu))"
    )
    # A built library is loaded without compiling: only ninja is needed then.
    assert missing_tools_reason(BuildTools(ninja, nowhere), compiles=False) is None
    assert missing_tools_reason(BuildTools(None, nowhere), compiles=False) is not None


def test_build_falls_back_in_one_line_before_asking_torch(tmp_path: Path) -> None:
    said: list[str] = []

    def never() -> ModuleType:
        raise AssertionError("torch's loader must not be asked: it would fail mid-build")

    tools = BuildTools(ninja=None, python_h=tmp_path / "missing" / "Python.h")
    result = build(tmp_path / "b", "ext", never, said.append, torch_cuda="13.0", cuda_home=None, tools=tools)
    assert result.module is None and result.reason.startswith("ninja and Python.h are missing")
    assert said == [FALLBACK.format(result.reason)]


def test_build_puts_ninja_beside_the_interpreter_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    ninja = _program(venv_bin, "ninja")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    header = _include(tmp_path, with_header=True) / "Python.h"

    def load() -> ModuleType:
        # torch runs `ninja` by name: it must resolve to the one found.
        assert shutil.which("ninja") == str(ninja)
        return ModuleType("ext")

    result = build(
        tmp_path / "b",
        "ext",
        load,
        lambda _line: None,
        torch_cuda="13.0",
        cuda_home=None,
        tools=BuildTools(ninja, header),
    )
    assert result.module is not None
    assert os.environ["PATH"].split(os.pathsep) == [str(venv_bin), str(tmp_path / "empty")]


def test_build_extension_checks_python_h_before_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real entry point (kernels.build_extension), with torch's CUDA facts and the lookups faked."""
    import torch
    from torch.utils import cpp_extension

    from collbench.runtime.cuda import kernels

    cuda_home = tmp_path / "cuda"
    _program(cuda_home / "bin", "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.48'\n")
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", str(cuda_home))
    _program(tmp_path / "path", "ninja")  # ninja there: `ninja --version` answers
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    include = _include(tmp_path, with_header=False)  # no Python.h: a Python without its -dev package
    real_get_path = sysconfig.get_path
    monkeypatch.setattr(
        sysconfig,
        "get_path",
        lambda name, *args, **kwargs: str(include) if name == "include" else real_get_path(name, *args, **kwargs),
    )
    monkeypatch.setenv("COLLBENCH_CACHE_DIR", str(tmp_path / "cache"))

    def never() -> ModuleType:
        raise AssertionError("torch's loader must not be asked without Python.h")

    monkeypatch.setattr(kernels, "_load_module", never)
    said: list[str] = []
    result = kernels.build_extension(said.append)
    assert result.module is None
    assert said == [FALLBACK.format(result.reason)]
    assert result.reason.startswith(f"Python.h is missing for torch's extension loader (no {include / 'Python.h'}")


def test_the_fallback_line_is_the_only_line(tmp_path: Path) -> None:
    # One line for the user however many things are missing: no "building ..." before it.
    said: list[str] = []
    build(
        tmp_path / "b",
        "ext",
        lambda: ModuleType("ext"),
        said.append,
        torch_cuda="13.0",
        cuda_home=None,
        tools=BuildTools(None, tmp_path / "Python.h"),
    )
    assert len(said) == 1 and "\n" not in said[0]
    assert not (tmp_path / "b").exists()  # nothing created for a build that cannot start
    assert kernel_build.built_library(tmp_path / "b", "ext").exists() is False


def test_a_first_build_without_nvcc_in_cuda_home_falls_back(tmp_path: Path) -> None:
    # torch's _find_cuda_home takes $CUDA_HOME as given; its nvcc would fail mid-build.
    said: list[str] = []
    empty = tmp_path / "no-toolkit"
    empty.mkdir()

    def never() -> ModuleType:
        raise AssertionError("torch's loader must not be asked without nvcc")

    result = build(tmp_path / "b", "ext", never, said.append, torch_cuda="13.0", cuda_home=str(empty))
    assert result.reason == f"no nvcc at {empty / 'bin' / 'nvcc'} (set CUDA_HOME to the directory holding bin/nvcc)"
    assert said == [FALLBACK.format(result.reason)]
    # A library already built loads without compiling: nvcc is not needed then.
    (tmp_path / "b").mkdir()
    kernel_build.built_library(tmp_path / "b", "ext").write_bytes(b"")
    loaded = build(
        tmp_path / "b", "ext", lambda: ModuleType("ext"), said.append, torch_cuda="13.0", cuda_home=str(empty)
    )
    assert loaded.module is not None
