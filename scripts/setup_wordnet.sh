#!/usr/bin/env bash
# Make WordNet 3.0 visible to NLTK offline, for the METEOR metric.
#
# 1. installs the Debian packages wordnet-base and wordnet-sense-index when
#    /usr/share/wordnet lacks them (needs root or sudo; skipped when present);
# 2. builds <target>/corpora/wordnet/ (default target: ./.nltk_data under the repo)
#    with the dictionary files, index.sense and a `lexnames` file (the 45 standard
#    WordNet 3.0 lexicographer file names) -- NLTK reads WordNet only from an
#    nltk_data/corpora/wordnet/ folder.
#
# Idempotent: running it again changes nothing. metric_ops finds the folder through
# NLTK_DATA or this default. With internet, `python -m nltk.downloader wordnet` is an
# alternative.
#
# usage: scripts/setup_wordnet.sh [TARGET_NLTK_DATA_DIR]
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${1:-${REPO}/.nltk_data}"
SRC=/usr/share/wordnet
DEST="${TARGET}/corpora/wordnet"

if [[ ! -f "${SRC}/data.noun" || ! -f "${SRC}/index.sense" ]]; then
  SUDO=""
  if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
  echo "installing wordnet-base and wordnet-sense-index with apt-get (its log: ${TMPDIR:-/tmp}/facetlake-apt-wordnet.log)" >&2
  LOG="${TMPDIR:-/tmp}/facetlake-apt-wordnet.log"
  # apt's progress goes to the log; on failure the log's tail is shown
  export DEBIAN_FRONTEND=noninteractive
  { ${SUDO} apt-get install -y -qq --no-install-recommends wordnet-base wordnet-sense-index >"${LOG}" 2>&1 || {
      ${SUDO} apt-get update -qq >>"${LOG}" 2>&1 && \
      ${SUDO} apt-get install -y -qq --no-install-recommends wordnet-base wordnet-sense-index >>"${LOG}" 2>&1
    }; } || { tail -20 "${LOG}" >&2; exit 1; }
fi

mkdir -p "${DEST}"
for f in adj.exc adv.exc noun.exc verb.exc \
         data.adj data.adv data.noun data.verb \
         index.adj index.adv index.noun index.verb index.sense \
         cntlist cntlist.rev; do
  if [[ -f "${SRC}/${f}" ]] && ! cmp -s "${SRC}/${f}" "${DEST}/${f}"; then
    cp "${SRC}/${f}" "${DEST}/${f}"
  fi
done

# lexnames: NN<TAB>name<TAB>pos (1 noun, 2 verb, 3 adjective, 4 adverb), WordNet 3.0 lexnames(5WN)
python3 - "${DEST}/lexnames" <<'PY'
import sys
names = (
    [("adj.all", 3), ("adj.pert", 3), ("adv.all", 4)]
    + [(f"noun.{n}", 1) for n in (
        "Tops act animal artifact attribute body cognition communication event feeling food "
        "group location motive object person phenomenon plant possession process quantity "
        "relation shape state substance time").split()]
    + [(f"verb.{n}", 2) for n in (
        "body change cognition communication competition consumption contact creation "
        "emotion motion perception possession social stative weather").split()]
    + [("adj.ppl", 3)]
)
assert len(names) == 45, len(names)
text = "".join(f"{i:02d}\t{name}\t{pos}\n" for i, (name, pos) in enumerate(names))
path = sys.argv[1]
try:
    old = open(path).read()
except FileNotFoundError:
    old = None
if old != text:
    open(path, "w").write(text)
PY
echo "WordNet ready for NLTK under ${TARGET} (export NLTK_DATA=${TARGET} or keep the default)"
