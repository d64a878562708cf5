#!/usr/bin/env bash
# Install shiftbench with its test dependencies and run the default test suite.
#
#   bash tools/test.sh            # what CI runs (.ci/run)
#   bash tools/test.sh -k fog     # extra arguments go to pytest
#
# 1. a virtual environment in .venv (CPU build of PyTorch 2.13),
# 2. the "peers" environment with the reference ImageNet-C code, for the pixel
#    fidelity tests (tools/reference-env.sh; built once, ~10 min, then cached in
#    ~/.cache; needs apt for ImageMagick's MagickWand),
# 3. ruff (lint + import order) over src/, tests/, tools/ and perf/, then pytest on one worker per CPU
#    (pytest-xdist), without the tests marked slow (run those with: pytest -m slow).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[test,demo]"

PEERS=${SHIFTBENCH_PEERS_VENV:-$HOME/.cache/peers-venv}
if ! "$PEERS/bin/python" -c "import imagenet_c, wand.image" >/dev/null 2>&1; then
  echo "building the reference (peers) environment in $PEERS (first run only) ..."
  VENV="$PEERS" bash tools/reference-env.sh > /tmp/shiftbench-reference-env.log 2>&1 || {
    tail -40 /tmp/shiftbench-reference-env.log; exit 1; }
fi
# headless Chromium for the report's browser test (Debian package; skipped with a reason if it cannot be had)
bash tools/ensure-chromium.sh || echo "warning: chromium could not be installed; the report's browser test will be skipped" >&2
export SHIFTBENCH_PEERS_VENV="$PEERS"
export SHIFTBENCH_REQUIRE_ORACLE=${SHIFTBENCH_REQUIRE_ORACLE:-1}
# lint and import order (the configuration is in pyproject.toml)
ruff check src tests tools perf
# one worker per CPU; a file's tests stay on one worker (the examples of one document share a namespace)
exec python -m pytest -m "not slow" -n auto --dist loadfile "$@"
