#!/usr/bin/env bash
# Download, here, the wheels of what collbench declares (runtime and test requirements) that the lent
# GPU machine's image lacks, for that machine's Python (CPython 3.12, manylinux x86-64), into .whl/
# (ignored by git), so that a run there, where no package index can be reached, installs them with
#
#     python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#
# and runs with PYTHONPATH=/tmp/site:$PWD. The image's packages are listed in
# scripts/gpu-image-packages.txt; wheels of packages in that list are not kept (another version there
# would shadow the image's own). Today that leaves jsonschema and what it needs; collbench also runs
# without them (it checks profiles with its own copy of the schema check, same messages).
#
#     scripts/gpu-wheels.sh [DIR]      # default DIR: .whl at the repository's root
#     scripts/gpu-wheels.sh --list     # only print the requirements it would download, one a line
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
list_only=0
if [ "${1:-}" = "--list" ]; then
    list_only=1
    shift
fi
dest="${1:-$repo/.whl}"
python="${PYTHON:-python3}"

# The requirements of pyproject.toml (dependencies and the test extra) whose distribution is not in
# the image's list, one per line, as written there.
wanted="$("$python" - "$repo" <<'EOF'
import re
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: its backport
    import tomli as tomllib

repo = Path(sys.argv[1])
project = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["project"]
lines = (repo / "scripts" / "gpu-image-packages.txt").read_text(encoding="utf-8").splitlines()


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


image = {norm(line.strip()) for line in lines if line.strip() and not line.startswith("#")}
for requirement in [*project["dependencies"], *project["optional-dependencies"].get("test", [])]:
    name = re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0]
    if norm(name) not in image:
        print(requirement)
EOF
)"

if [ "$list_only" = 1 ]; then
    [ -z "$wanted" ] || echo "$wanted"
    exit 0
fi
if [ -z "$wanted" ]; then
    echo "the image holds every requirement of collbench: nothing to download"
    exit 0
fi
mkdir -p "$dest"
echo "downloading for CPython 3.12 manylinux x86-64 into $dest: $(echo "$wanted" | tr '\n' ' ')"
mapfile -t specs <<<"$wanted"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
    platforms+=(--platform "$p")
done
"$python" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$dest" "${specs[@]}"

# Drop the wheels of packages the image has (pip downloads every requirement, those too).
"$python" - "$repo" "$dest" <<'EOF'
import re
import sys
from pathlib import Path

repo, dest = Path(sys.argv[1]), Path(sys.argv[2])
lines = (repo / "scripts" / "gpu-image-packages.txt").read_text(encoding="utf-8").splitlines()


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


image = {norm(line.strip()) for line in lines if line.strip() and not line.startswith("#")}
kept = []
for wheel in sorted(dest.glob("*.whl")):
    if norm(wheel.name.split("-")[0]) in image:
        wheel.unlink()
    else:
        kept.append(wheel)
total = sum(w.stat().st_size for w in kept)
for wheel in kept:
    print(f"  {wheel.name}")
print(f"{len(kept)} wheel(s), {total / 2**20:.1f} MiB, in {dest}: carry it (the run tool's carry: [\".whl\"])")
EOF
