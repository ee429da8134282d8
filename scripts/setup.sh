#!/usr/bin/env bash
# Set up facetlake on a fresh machine: a virtual environment in ./.venv with the CPU
# build of torch (pinned, so no multi-GB CUDA build is pulled), the package and its test
# dependencies, WordNet for METEOR (Debian packages, offline), and the system Chromium
# the report test drives. Idempotent: re-running it only checks.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
. .venv/bin/activate

# pip, minus its "WARNING: Location '...' is ignored: it is neither a file nor a directory"
# lines: a local package index configured for this machine (pip.conf) that lacks a given
# package's folder; nothing to act on. Every other warning and error is kept.
# Also without setuptools' "Editable installation" banner (a BuildBackendWarning printed for
# every editable install, from its first line to the `with strategy, WheelFile` line): it
# warns about folders named like the package, which is this repository's layout on purpose.
pip_install() {
  python -m pip install --quiet "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored: it is neither a file nor a directory" \
    | sed '/BuildBackendWarning: Editable installation/,/with strategy, WheelFile/d' >&2)
}
pip_install --upgrade pip
# torch first and pinned: the CPU wheel (an unpinned torch pulls the CUDA build)
pip_install "torch==2.13.0"
pip_install -e '.[test]'
# bytecode for the project's own modules, as pip writes it for installed packages (an editable
# install leaves them as sources: with PYTHONDONTWRITEBYTECODE set, every command would compile
# ~100 modules again, ~0.3 s of each `facetlake` start; issue 14)
python -m compileall -q pipelines assets resources metric_ops >/dev/null

for extra in scripts/setup_wordnet.sh scripts/setup_browser.sh; do
  if [[ -f "$extra" ]]; then bash "$extra"; fi
done
echo "facetlake is set up: .venv/bin/facetlake --help"
