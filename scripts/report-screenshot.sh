#!/usr/bin/env bash
# Regenerates docs/report.png, docs/tour.md's picture of `collbench report`: the committed example
# profile, its results and its machine's topology, rendered by headless Chromium, cropped to the
# top of the page and reduced to a 256-colour palette so the PNG stays small (< 300 KB).
# The page is written under docs/ with paths relative to the repository (and removed after), so the
# picture's provenance shows the command a reader would type, not a temporary folder.
# Needs collbench on PATH (or python -m) and Debian's chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
page=docs/report.html
trap 'rm -rf "$tmp" "$page"' EXIT
python -m collbench.cli.app report profiles/cpu-2core-gloo-2ranks-results.jsonl \
  --profile profiles/cpu-2core-gloo-2ranks.yaml --topology docs/cpu-2core-gloo-2ranks-topology.yaml \
  --output "$page"
chromium --headless --disable-gpu --no-sandbox --hide-scrollbars --user-data-dir="$tmp/chromium" \
  --window-size=1280,2150 --screenshot="$tmp/full.png" "file://$PWD/$page" \
  >/dev/null 2>&1
mkdir -p docs
python - "$tmp/full.png" docs/report.png <<'PY'
import sys

from PIL import Image

image = Image.open(sys.argv[1]).convert("RGB")
image.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(sys.argv[2], optimize=True)
PY
ls -l docs/report.png
