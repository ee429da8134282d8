"""The cross-validation report asset: facetlake's metrics vs their reference libraries
on real data (SF-RES, QAGS-CNNDM, SelfAware) plus edge cases.

Regenerate the Markdown file with ``facetlake crossval [--out OUTPUT.md]`` or
``python -m pipelines.crossval.run [OUTPUT.md]`` (default
``docs/crossvalidation.md``). The comparison itself is :func:`pipelines.crossval.harness.crossvalidate`;
this module only loads the cases and writes the file. The reference libraries
(bert-score in particular) are test-only dependencies: install the ``test`` extra.
"""


import json
import os
import sys
from pathlib import Path
from typing import Any


from pipelines.crossval.compare import Case
from pipelines.crossval.harness import crossvalidate, edge_cases, report_markdown

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATA_DIR = PROJECT_ROOT / "data"
DEFAULT_REPORT = PROJECT_ROOT / "docs" / "crossvalidation.md"
REGENERATE = "facetlake crossval"

# Long QAGS sources cost ~50x a short pair in the neural models; this many of them go to
# BERTScore / semantic similarity (they exercise truncation at 512 tokens), all to lexical.
NEURAL_QAGS = 8
SELFAWARE_CASES = 1000


def _data_dir(data_dir: str | os.PathLike | None) -> Path:
    return Path(data_dir or os.environ.get("FACETLAKE_DATA_DIR") or DEFAULT_DATA_DIR)


def selfaware_prediction(i: int, answer: str, question: str, next_answer: str) -> str:
    """A deterministic stand-in answer for SelfAware question i (SelfAware has gold answers
    but no model outputs): the gold with article and punctuation noise, the gold inside a
    sentence, another question's gold, or the question itself, in turn."""
    kind = i % 4
    if kind == 0:
        return f"The {answer}."
    if kind == 1:
        return f"I think the answer is {answer}, probably."
    if kind == 2:
        return next_answer
    return question


def real_cases(data_dir: str | os.PathLike | None = None, selfaware_limit: int = SELFAWARE_CASES) -> dict[str, list[Case]]:
    """Real (prediction, references) pairs by source, in file order.

    - ``sfres``: SF-RES system output vs its human reference (1,181 pairs);
    - ``qags``: QAGS-CNNDM model summary vs its source article (235 pairs, long inputs);
    - ``selfaware``: the first ``selfaware_limit`` answerable SelfAware questions, a
      stand-in answer (:func:`selfaware_prediction`) vs the gold answers.

    Raises ``FileNotFoundError`` naming the missing file."""
    root = _data_dir(data_dir)
    paths = {
        "sfres": root / "unieval" / "sfres.json",
        "qags": root / "unieval" / "qags_cnndm.json",
        "selfaware": root / "selfaware" / "SelfAware.json",
    }
    for name, path in paths.items():
        if not path.is_file():
            raise FileNotFoundError(f"{name} data not found at {path}; set FACETLAKE_DATA_DIR to the folder holding unieval/ and selfaware/")
    sfres = json.loads(paths["sfres"].read_text(encoding="utf-8"))
    qags = json.loads(paths["qags"].read_text(encoding="utf-8"))
    selfaware = [r for r in json.loads(paths["selfaware"].read_text(encoding="utf-8"))["example"] if r.get("answerable") and r.get("answer")]
    selfaware = selfaware[: selfaware_limit + 1]
    sa_cases = []
    for i, row in enumerate(selfaware[:selfaware_limit]):
        nxt = selfaware[(i + 1) % len(selfaware)]["answer"][0]
        pred = selfaware_prediction(i, row["answer"][0], row["question"], nxt)
        sa_cases.append(Case(pred, tuple(row["answer"]), "selfaware"))
    return {
        "sfres": [Case(r["system_output"], (r["reference"],), "sfres") for r in sfres],
        "qags": [Case(r["system_output"], (r["source"],), "qags") for r in qags],
        "selfaware": sa_cases,
    }


def crossval_case_sets(data_dir: str | os.PathLike | None = None) -> tuple[list[Case], list[Case]]:
    """(lexical cases, neural cases): every real case plus the edge cases for lexical
    metrics; for the neural ones (CPU time), every SF-RES pair, the first
    :data:`NEURAL_QAGS` QAGS articles (truncation at 512 tokens), the SelfAware cases
    (several gold answers of different lengths, and unrelated stand-in answers with
    negative token cosines: where bert-score's reference padding shows) and the edge
    cases."""
    real = real_cases(data_dir)
    edges = edge_cases(long_text=real["qags"][0].references[0])
    lexical = [*real["sfres"], *real["qags"], *real["selfaware"], *edges]
    neural = [*real["sfres"], *real["qags"][:NEURAL_QAGS], *real["selfaware"], *edges]
    return lexical, neural


def build_report(data_dir: str | os.PathLike | None = None, progress: bool = True) -> tuple[list[dict[str, Any]], str]:
    """Run the whole cross-validation; returns (rows, Markdown)."""
    lexical, neural = crossval_case_sets(data_dir)
    rows = crossvalidate(lexical, neural, progress=progress)
    return rows, report_markdown(rows, REGENERATE)


def write_report(path: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None, progress: bool = True) -> tuple[Path, list[dict[str, Any]]]:
    """Run the cross-validation and write the Markdown report (default
    ``docs/crossvalidation.md``); returns (path, rows)."""
    out = Path(path) if path else DEFAULT_REPORT
    rows, markdown = build_report(data_dir, progress)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown, encoding="utf-8")
    return out, rows


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.crossval.run [OUTPUT.md]``: write the report, print a summary
    (the variants out of tolerance by name), exit 1 on failure."""
    args = sys.argv[1:] if argv is None else argv
    path, rows = write_report(args[0] if args else None)
    failed = [str(r.get("variant") or r.get("metric")) for r in rows if not r["passed"]]
    print(f"{len(rows)} checks, {len(rows) - len(failed)} within tolerance"
          + (f"; out of tolerance: {', '.join(failed)}" if failed else ""))
    print(f"report written to {path}")
    return 0 if not failed else 1


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
