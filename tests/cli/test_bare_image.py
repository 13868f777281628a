"""collbench from a checkout on a Python that holds only the lent GPU machine's packages.

That machine (scripts/gpu-image-packages.txt) has no package index and no ``jsonschema``; collbench
runs there with ``PYTHONPATH`` at the checkout. Here a child Python gets the same view: a
``sitecustomize`` (imported by ``site`` at start-up) puts a finder first on ``sys.meta_path`` that
refuses every top-level module of an installed distribution that is neither in the image's list nor
required by one in it (pip would have installed those with it), and refuses network connections.
Standard-library modules and the checkout (``PYTHONPATH``) stay importable, as there. The CLI then
runs the commands that read profiles (export, report, profile merge, export nccl-plugin), and a
broken profile gets the same one-line error as with the library.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGE_LIST = REPO / "scripts" / "gpu-image-packages.txt"
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"

_SITECUSTOMIZE = """
import importlib.abc, json, os, socket, sys

_BLOCKED = frozenset(json.loads(os.environ["COLLBENCH_TEST_BLOCKED_MODULES"]))


class _NotInTheImage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the GPU image)", name=name)
        return None


def _no_network(self, address, *args):
    if self.family in (socket.AF_INET, socket.AF_INET6):
        raise OSError("no network on the GPU machine")
    return _connect(self, address, *args)


_connect = socket.socket.connect
socket.socket.connect = _no_network
sys.meta_path.insert(0, _NotInTheImage())
"""


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages() -> set[str]:
    """The image's distributions (normalised names), from the list kept beside gpu-wheels.sh."""
    lines = IMAGE_LIST.read_text(encoding="utf-8").splitlines()
    return {_norm(line.strip()) for line in lines if line.strip() and not line.startswith("#")}


def blocked_modules() -> set[str]:
    """Top-level modules of installed distributions the image would not have."""
    installed = {_norm(d.metadata["Name"]): d for d in metadata.distributions()}
    allowed = {name for name in image_packages() if name in installed}
    todo = list(allowed)
    while todo:
        for requirement in installed[todo.pop()].requires or []:
            if "extra ==" in requirement:
                continue
            name = _norm(re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0])
            if name in installed and name not in allowed:
                allowed.add(name)
                todo.append(name)
    blocked: set[str] = set()
    for module, owners in metadata.packages_distributions().items():
        # collbench itself comes from the checkout (PYTHONPATH), as there.
        if module != "collbench" and not any(_norm(owner) in allowed for owner in owners):
            blocked.add(module)
    return blocked


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("bare-site")
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "COLLBENCH"))}
    env.update(
        PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
        PYTHONNOUSERSITE="1",
        COLLBENCH_TEST_BLOCKED_MODULES=json.dumps(sorted(blocked_modules())),
        COLLBENCH_CACHE_DIR=str(tmp_path_factory.mktemp("cache")),
        COLUMNS="80",
    )
    return env


def run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collbench.cli.app", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_image_lacks_jsonschema_and_the_child_cannot_import_it(bare_python: dict[str, str], tmp_path: Path) -> None:
    assert "jsonschema" not in image_packages()
    probe = "import collbench, sys\ntry:\n import jsonschema\nexcept ImportError as e:\n print('refused', e)\n"
    probe += "print(collbench.__file__)\n"
    done = subprocess.run([sys.executable, "-c", probe], env=bare_python, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "refused No module named 'jsonschema'" in done.stdout
    assert done.stdout.splitlines()[-1] == str(REPO / "collbench" / "__init__.py")  # the checkout's


def test_export_report_profile_and_plugin_run_without_jsonschema(bare_python: dict[str, str], tmp_path: Path) -> None:
    tuner = run(bare_python, tmp_path, "export", "nccl-tuner", str(PROFILE), "--from-other-backend")
    assert tuner.returncode == 0, tuner.stderr
    assert "allreduce" in tuner.stdout.lower()
    rules = run(bare_python, tmp_path, "export", "ompi-rules", str(PROFILE), "--from-other-backend", "-O", "rules.conf")
    assert rules.returncode == 0, rules.stderr
    assert (tmp_path / "rules.conf").read_text().strip()
    report = run(bare_python, tmp_path, "report", str(RESULTS), "--profile", str(PROFILE), "-O", "r.html")
    assert report.returncode == 0, report.stderr
    assert "<html" in (tmp_path / "r.html").read_text(encoding="utf-8").lower()
    other = tmp_path / "copy.yaml"
    shutil.copyfile(PROFILE, other)
    merged = run(
        bare_python, tmp_path, "profile", "merge", str(PROFILE), str(other), "--prefer", "newer", "-O", "m.yaml"
    )
    assert merged.returncode == 0, merged.stderr
    assert (tmp_path / "m.yaml").is_file()
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here to build the NCCL tuner plugin")
    plugin = run(bare_python, tmp_path, "export", "nccl-plugin", str(PROFILE), "--from-other-backend", "-O", "plugin")
    assert plugin.returncode == 0, plugin.stderr
    assert "NCCL_TUNER_PLUGIN" in plugin.stdout and (tmp_path / "plugin" / "libnccl-tuner-collbench.so").is_file()


def test_a_broken_profile_gets_the_librarys_error_line_without_it(bare_python: dict[str, str], tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        PROFILE.read_text(encoding="utf-8").replace("world_size: 2", "world_size: 0", 1), encoding="utf-8"
    )
    without = run(bare_python, tmp_path, "export", "nccl-tuner", str(broken), "--from-other-backend")
    env = {**bare_python, "COLLBENCH_TEST_BLOCKED_MODULES": "[]"}
    with_library = run(env, tmp_path, "export", "nccl-tuner", str(broken), "--from-other-backend")
    assert without.returncode == with_library.returncode == 2
    assert without.stderr == with_library.stderr
    assert "world_size: 0 is less than the minimum of 1" in without.stderr
    assert "Traceback" not in without.stderr


def test_the_wheels_script_would_carry_what_pyproject_declares_beyond_the_image() -> None:
    # jsonschema is the one requirement (runtime or test) the image lacks; the script lists it
    # without downloading anything.
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu-wheels.sh"), "--list"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert [line.split(">=")[0] for line in done.stdout.split()] == ["jsonschema"]
