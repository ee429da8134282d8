"""Dataset loaders for facetlake's own lm-eval tasks (the ``custom_dataset`` of the task YAML).

Both read data shipped in the project's ``data/`` folder, so the tasks run offline:

- :func:`selfaware_qa`: SelfAware (Yin et al., 2023; ``data/selfaware/SelfAware.json``,
  Apache-2.0), answerable questions only. The first :data:`QA_FEWSHOT_POOL` answerable
  questions (file order) form the ``train`` split, the few-shot pool; the rest form the
  ``test`` split that is evaluated.
- :func:`bfcl_function_choice`: Berkeley Function Calling Leaderboard v4 "multiple"
  category (``data/bfcl/BFCL_v4_multiple.json`` with its ``possible_answer`` file,
  Apache-2.0). Each row is a user request and 2 to 4 candidate functions; the choices are
  the candidate function names and the gold choice is the function the ground-truth call
  uses. Rows whose ground truth is not exactly one call of one candidate are skipped.
  The first :data:`CHOICE_FEWSHOT_POOL` rows form ``train``, the rest ``test``.

lm-eval calls these with the task metadata (and the model arguments it merges into it) as
keyword arguments; they are ignored. lm-eval dumps this file's function source into the
task config, so the config hash changes when a loader changes.
"""

from __future__ import annotations

import json
from pathlib import Path

QA_FEWSHOT_POOL = 10
CHOICE_FEWSHOT_POOL = 10


def _data_dir() -> Path:
    """The project's ``data/`` folder (``$FACETLAKE_DATA`` overrides it)."""
    import os

    override = os.environ.get("FACETLAKE_DATA")
    return Path(override) if override else Path(__file__).resolve().parents[3] / "data"


def _split(rows: list[dict], pool: int):
    import datasets

    return datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows[:pool]), "test": datasets.Dataset.from_list(rows[pool:])}
    )


def selfaware_qa(**_metadata):
    """SelfAware's answerable questions as a ``datasets.DatasetDict`` (train: few-shot pool, test).

    Rows: ``question_id`` (str), ``question`` (str), ``answer`` (list of gold answers, str),
    ``source`` (the upstream QA set).
    """
    data = json.loads((_data_dir() / "selfaware" / "SelfAware.json").read_text(encoding="utf-8"))
    rows = [
        {"question_id": str(r["question_id"]), "question": r["question"], "answer": [str(a) for a in r["answer"]],
         "source": r.get("source") or ""}
        for r in data["example"]
        if r.get("answerable") and r.get("answer")
    ]
    return _split(rows, QA_FEWSHOT_POOL)


def bfcl_function_choice(**_metadata):
    """BFCL v4 "multiple" as a function-selection multiple-choice ``datasets.DatasetDict``.

    Rows: ``id`` (str), ``question`` (the user's request), ``functions`` (candidate names,
    the choices), ``descriptions`` (their descriptions, same order), ``gold`` (index of the
    function the ground-truth call uses).
    """
    folder = _data_dir() / "bfcl"
    answers = {}
    for line in (folder / "possible_answer" / "BFCL_v4_multiple.json").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            answers[row["id"]] = row["ground_truth"]
    rows = []
    for line in (folder / "BFCL_v4_multiple.json").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        truth = answers.get(row["id"]) or []
        names = [f["name"] for f in row["function"]]
        if len(truth) != 1 or len(truth[0]) != 1 or next(iter(truth[0])) not in names or len(set(names)) != len(names):
            continue
        turns = [m["content"] for turn in row["question"] for m in turn if m.get("role") == "user"]
        rows.append({
            "id": row["id"],
            "question": "\n".join(turns),
            "functions": names,
            "descriptions": [str(f.get("description", "")) for f in row["function"]],
            "gold": names.index(next(iter(truth[0]))),
        })
    return _split(rows, CHOICE_FEWSHOT_POOL)
