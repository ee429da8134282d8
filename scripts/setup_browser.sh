#!/usr/bin/env bash
# Install the headless browser the report test drives: Debian's chromium (no browser
# download by playwright: the Python package only drives /usr/bin/chromium).
# Idempotent: does nothing when chromium is already installed.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    echo "chromium already installed: $(chromium --version 2>/dev/null || echo /usr/bin/chromium)"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "installed: $(chromium --version 2>/dev/null || echo /usr/bin/chromium)"
