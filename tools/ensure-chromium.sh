#!/usr/bin/env bash
# Install headless Chromium (Debian package `chromium`) when it is missing, for
# tests/test_report.py (the HTML report opened in a real browser). Without it that
# test is skipped with a reason. Needs root or sudo for apt-get; does nothing when
# chromium (or chromium-browser) is already on PATH.
#
#   bash tools/ensure-chromium.sh
set -euo pipefail
for exe in chromium chromium-browser; do
  if command -v "$exe" >/dev/null 2>&1; then
    echo "chromium present: $(command -v "$exe")"
    exit 0
  fi
done
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "chromium is missing and this user cannot run apt-get (no root, no sudo): the browser test will be skipped" >&2
    exit 0
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/tmp/shiftbench-chromium.log 2>&1
$SUDO apt-get install -y -q --no-install-recommends chromium >>/tmp/shiftbench-chromium.log 2>&1 || {
  tail -20 /tmp/shiftbench-chromium.log >&2; exit 1; }
echo "chromium installed: $(command -v chromium)"
