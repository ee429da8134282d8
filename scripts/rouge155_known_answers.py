"""Produce ROUGE-1.5.5 known answers for facetlake's tests (issue 15, kind 8).

Not run by the test suite: it needs the ROUGE-1.5.5 Perl script, which the project does
not ship. To regenerate ``pipelines/crossval/rouge155_known_answers.json``:

1. Fetch a public repository carrying ``tools/ROUGE-1.5.5`` (e.g. github andersjo/pyrouge)
   and copy that folder OUTSIDE the repository, e.g. to ``/tmp/rouge155/ROUGE-1.5.5``.
2. ``apt-get install libxml-parser-perl``.
3. Rebuild the WordNet exception DB (the shipped one is in an old Berkeley DB format):
   ``cd data/WordNet-2.0-Exceptions && rm ../WordNet-2.0.exc.db &&
   perl buildExeptionDB.pl . exc ../WordNet-2.0.exc.db``.
4. ``python scripts/rouge155_known_answers.py /tmp/rouge155/ROUGE-1.5.5 [OUT.json]``.

The pairs: every third SF-RES row (system output vs its human reference, 300 pairs),
the first 100 QAGS-CNNDM rows (model summary vs the news article, long references) and
12 hand-made pairs, each text written as ONE line in SPL format (whitespace runs joined
by a space), so ROUGE-L is the sentence-level LCS. Then 43 cases compared for ROUGE-W/S/SU
only (facetlake's ROUGE-1/2/L keep rouge-score's best-F reference and sentence-level LCS):
42 with two references (``-f A`` pools them; 40 from SF-RES) and 2 multi-line ones (the
script reads lines as sentences). Options: ``-a -n 2 -w 1.2 -2 4 -U -f A -d -z SPL`` (no
``-m``: no stemming; no ``-s``: stopwords kept), the issue's reference setting. The script
prints P/R/F with 5 decimals
(``%7.5f``); F is computed from the already rounded P and R.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
# the project's ../shared/data (also from a worktree one level further down)
DATA = next((p for p in (_ROOT.parent / "shared" / "data", _ROOT.parent.parent / "shared" / "data") if p.exists()), _ROOT.parent / "shared" / "data")
OPTIONS = ["-a", "-n", "2", "-w", "1.2", "-2", "4", "-U", "-f", "A", "-d", "-z", "SPL"]
EDGE = [
    ("a b", "a b"),
    ("cat", "the cat"),
    ("the cat", "cat"),
    ("a b c d h i k", "a b c d e f g"),
    ("a h b k c i d", "a b c d e f g"),
    ("police kill the gunman", "police killed the gunman"),
    ("the gunman kill police", "police killed the gunman"),
    ("the the the cat", "the cat the cat"),
    ("a b a b a b", "b a b a"),
    ("state-of-the-art systems, e.g. GPT-4, cost $10.", "State of the art systems (e.g. gpt 4) cost 10 dollars."),
    ("x y z w x y z w", "w z y x"),
    ("one two three four five six seven", "seven six five four three two one"),
]


def pairs(data: Path = DATA) -> list[dict]:
    """(id, candidate, reference) records: one-line texts as the Perl script sees them."""
    one_line = lambda t: " ".join(t.split())  # noqa: E731
    sfres = json.loads((data / "unieval" / "sfres.json").read_text())
    qags = json.loads((data / "unieval" / "qags_cnndm.json").read_text())
    out = [{"id": f"sfres-{r['doc_id']}", "candidate": one_line(r["system_output"]), "reference": one_line(r["reference"])} for r in sfres[::3][:300]]
    out += [{"id": f"qags-{i}", "candidate": one_line(r["system_output"]), "reference": one_line(r["reference"])} for i, r in enumerate(qags[:100])]
    out += [{"id": f"edge-{i}", "candidate": c, "reference": r} for i, (c, r) in enumerate(EDGE)]
    return out


def multi_reference_pairs(data: Path = DATA) -> list[dict]:
    """43 cases compared for ROUGE-W/S/SU only: 40 SF-RES system outputs (rows 1, 4, 7, ...)
    with two references, their own and the next row's (1.5.5's ``-f A`` pools them), and 3
    hand-made ones, 2 of them multi-line (the script reads lines as sentences)."""
    one_line = lambda t: " ".join(t.split())  # noqa: E731
    sfres = json.loads((data / "unieval" / "sfres.json").read_text())
    return [
        {"id": f"sfres-multi-{i}", "candidate": one_line(sfres[i]["system_output"]), "references": [one_line(sfres[i]["reference"]), one_line(sfres[i + 1]["reference"])]}
        for i in range(1, 121, 3)
    ] + [
        {"id": "edge-multi-0", "candidate": "the cat sat on the mat", "references": ["the cat sat", "a cat sat on a mat"]},
        # multi-line texts: the script reads each line as a sentence (ROUGE-W per reference sentence)
        {"id": "edge-lines-0", "candidate": "the cat sat on the mat\nit was happy", "references": ["the cat was happy\nit sat on the mat"]},
        {"id": "edge-lines-1", "candidate": "a b c\nd e f", "references": ["a b c d\ne f", "f e d\nc b a"]},
    ]


LINE = re.compile(r"^(\S+) (ROUGE-\S+) Eval (\d+)\.\S* R:([0-9.]+) P:([0-9.]+) F:([0-9.]+)$")


def run(rouge_dir: Path, records: list[dict]) -> dict[str, dict[str, list[float]]]:
    """Run ROUGE-1.5.5 once over all records; {id: {"ROUGE-1": [P, R, F], ...}}."""
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        config = []
        for i, rec in enumerate(records):
            (t / f"p{i}.txt").write_text(rec["candidate"] + "\n")
            models = []
            for k, ref in enumerate(rec.get("references") or [rec["reference"]]):
                (t / f"m{i}_{k}.txt").write_text(ref + "\n")
                models.append(str(t / f"m{i}_{k}.txt"))
            config.append(f"{t / f'p{i}.txt'} {' '.join(models)}")
        (t / "config.txt").write_text("\n".join(config) + "\n")
        cmd = ["perl", str(rouge_dir / "ROUGE-1.5.5.pl"), "-e", str(rouge_dir / "data"), *OPTIONS, str(t / "config.txt")]
        text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    results: dict[str, dict[str, list[float]]] = {}
    for line in text.splitlines():
        m = LINE.match(line.strip())
        if m:
            _, kind, ev, r, p, f = m.groups()
            results.setdefault(records[int(ev) - 1]["id"], {})[kind] = [float(p), float(r), float(f)]
    return results


def main(argv: list[str]) -> int:
    rouge_dir = Path(argv[1])
    out = Path(argv[2]) if len(argv) > 2 else Path(__file__).resolve().parents[1] / "pipelines" / "crossval" / "rouge155_known_answers.json"
    records, multi = pairs(), multi_reference_pairs()
    for group in (records, multi):
        values = run(rouge_dir, group)
        for rec in group:
            rec["rouge155"] = values[rec["id"]]
    payload = {
        "source": "ROUGE-1.5.5.pl (Lin, 2004) as carried by github.com/andersjo/pyrouge tools/ROUGE-1.5.5, "
        "WordNet exception DB rebuilt with buildExeptionDB.pl; values as printed (%7.5f), [P, R, F]",
        "options": " ".join(OPTIONS),
        "data": "SF-RES (every 3rd row, 300) and QAGS-CNNDM (first 100) from UniEval (MIT); edge pairs hand-made",
        "pairs": records,
        "multi_reference_pairs": multi,
    }
    out.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} pairs and {len(multi)} multi-reference pairs to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
