"""Berkeley Function Calling Leaderboard (BFCL v4) single-turn categories as a dataset,
and the two precomputed "models" of the BFCL demo.

Files (``data/bfcl``, Apache-2.0, from the ``bfcl-eval`` package): ``BFCL_v4_<category>.json``
(JSON lines ``{id, question: [[{role, content}]], function: [schema]}``) and
``possible_answer/BFCL_v4_<category>.json`` (``{id, ground_truth: [{fn: {arg: [accepted]}}]}``;
irrelevance has none: no call should be made).

A sample: ``input`` = the user turn text, ``metadata``: ``category``, ``tools`` (the
offered function schemas), ``reference_calls`` (one turn holding every ground-truth call,
each ``{"name", "arguments": {arg: [accepted values]}}``; ``[]`` for irrelevance),
``arg_match = "bfcl"`` (so tool-call metrics apply BFCL's accepted-value rules) and
``messages`` (the chat turn, system messages included).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

from metric_ops.base import Sample
from resources.datasets import Dataset, DatasetError
from resources.datasets.files import _read_json_or_jsonl

BFCL_CATEGORIES: tuple[str, ...] = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple")
_ALIASES = {"simple": "simple_python"}


def bfcl_categories(spec: str | list[str] | tuple[str, ...]) -> list[str]:
    """Categories named by ``spec``: one name, a comma-separated list, a list, or ``all``.
    ``simple`` means ``simple_python``. Raises :class:`DatasetError` for an unknown name."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for raw in names:
        name = _ALIASES.get(raw.strip(), raw.strip())
        if name == "all":
            out.extend(c for c in BFCL_CATEGORIES if c not in out)
            continue
        if name not in BFCL_CATEGORIES:
            raise DatasetError(f"unknown BFCL category {raw!r}; known: {', '.join(BFCL_CATEGORIES)} (or all)")
        if name not in out:
            out.append(name)
    if not out:
        raise DatasetError("no BFCL category given; set category: simple_python (or a list, or all)")
    return out


@dataclass
class BFCLDataset(Dataset):
    """BFCL v4 single-turn categories (Patil et al., 2024) with their possible answers.

    ``category``: ``simple_python`` (alias ``simple``), ``multiple``, ``parallel``,
    ``parallel_multiple``, ``irrelevance``, ``live_simple``, a comma-separated list of
    them, or ``all``. ``path`` (optional) is the folder holding the BFCL files (default
    ``data/bfcl``). Sample ids are BFCL's ids (unique across categories). A question
    without a possible answer (outside irrelevance) raises :class:`DatasetError`.
    """

    category: str = "simple_python"

    kind: ClassVar[str] = "bfcl"
    version: ClassVar[str] = "1"
    default_path: ClassVar[str | None] = "bfcl"

    def resolved_path(self) -> Path:
        """The folder holding ``BFCL_v4_*.json`` and ``possible_answer/``."""
        path = super().resolved_path()
        return path.parent if path.is_file() else path

    def question_file(self, category: str) -> Path:
        """``BFCL_v4_<category>.json`` under the dataset folder."""
        return self.resolved_path() / f"BFCL_v4_{category}.json"

    def answer_file(self, category: str) -> Path:
        """``possible_answer/BFCL_v4_<category>.json`` under the dataset folder."""
        return self.resolved_path() / "possible_answer" / f"BFCL_v4_{category}.json"

    def rows(self) -> list[Any]:
        rows: list[dict[str, Any]] = []
        for category in bfcl_categories(self.category):
            qfile = self.question_file(category)
            if not qfile.exists():
                raise DatasetError(f"BFCL file {qfile} does not exist; set path: to the folder holding BFCL_v4_*.json")
            questions = _as_rows(_read_json_or_jsonl(qfile, self.encoding), qfile)
            answers: dict[str, Any] = {}
            if category != "irrelevance":
                afile = self.answer_file(category)
                if not afile.exists():
                    raise DatasetError(f"BFCL possible answers {afile} do not exist (needed for category {category})")
                answers = {str(r["id"]): r.get("ground_truth") for r in _as_rows(_read_json_or_jsonl(afile, self.encoding), afile)}
            for q in questions:
                qid = str(q.get("id"))
                if category != "irrelevance" and qid not in answers:
                    raise DatasetError(f"{qfile}: question {qid} has no possible answer in {self.answer_file(category)}")
                rows.append({**q, "category": category, "ground_truth": answers.get(qid, [])})
        return rows

    def normalize(self, row: Mapping[str, Any]) -> Sample:
        qid = str(row.get("id") or "")
        if not qid:
            raise DatasetError("BFCL row has no id")
        question = row.get("question")
        if not isinstance(question, list) or not question or not isinstance(question[0], list):
            raise DatasetError(f"{qid}: question must be a list of turns of messages")
        messages = [dict(m) for m in question[0]]
        user_text = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
        reference = [[{"name": fn, "arguments": args} for call in row.get("ground_truth") or [] for fn, args in call.items()]]
        if reference == [[]]:
            reference = []
        return Sample(
            sample_id=qid,
            input=user_text,
            metadata={
                "category": row.get("category"),
                "tools": list(row.get("function") or []),
                "reference_calls": reference,
                "arg_match": "bfcl",
                "messages": messages,
            },
        )

    def config(self) -> dict[str, Any]:
        return {**super().config(), "category": ",".join(bfcl_categories(self.category))}


def _as_rows(data: Any, path: Path) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected JSON lines of objects")
    return data


# ============================================================================ demo models


def render_reference_calls(reference: list[list[Mapping[str, Any]]], tools: Any = None) -> list[dict[str, Any]]:
    """The calls a perfect model would make: every reference call with the first
    accepted value of each argument. An argument whose first accepted value is ``""``
    (BFCL's "optional" marker) is left out, unless the offered schema requires it: then
    the next accepted value is used. An argument the offered schema does not declare is
    left out (a few BFCL possible answers name one). Dicts are rendered key by key the
    same way. An argument with no accepted value at all (two live_simple rows,
    unsatisfiable under BFCL's rules) is rendered as ``[]``."""
    from metric_ops.toolcalls import normalize_tools

    schemas = normalize_tools(tools)
    calls = []
    for turn in reference:
        for call in turn:
            schema = schemas.get(call["name"])
            args = {}
            for arg, accepted in call["arguments"].items():
                if schema is not None and arg not in schema["properties"]:
                    continue
                if not accepted:
                    args[arg] = []
                    continue
                required = schema is not None and arg in schema["required"]
                values = [v for v in accepted if not (isinstance(v, str) and v == "")] if required else accepted[:1]
                if values and not (isinstance(values[0], str) and values[0] == ""):
                    args[arg] = _render_value(values[0])
            calls.append({"name": call["name"], "arguments": args})
    return calls


def _render_value(value: Any) -> Any:
    # inside BFCL possible answers a dict maps each key to its own accepted values
    if isinstance(value, Mapping):
        out = {}
        for key, accepted in value.items():
            options = accepted if isinstance(accepted, list) else [accepted]
            if options and not (isinstance(options[0], str) and options[0] == ""):
                out[key] = _render_value(options[0])
        return out
    if isinstance(value, list):
        return [_render_value(v) if isinstance(v, Mapping) else v for v in value]
    return value


def _stable_int(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _perturb_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return value * 2 + 1.5
    if isinstance(value, str):
        return value + " zzz"
    if isinstance(value, list):
        return value[:-1] if value else ["zzz"]
    if isinstance(value, dict):
        return {**value, "zzz": 1}
    return "zzz"


def perturb_calls(sample: Sample, calls: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]] | str]:
    """A deterministic wrong answer for one sample: (kind, calls or a text reply).

    Chosen by a hash of the sample id so that about one sample in four stays right
    (``none``); otherwise ``wrong_value`` (one argument changed), ``drop_call`` (the last
    call dropped; a single call becomes a no-call reply), ``wrong_function`` (another
    offered function, or a misspelled name) or, for irrelevance, ``spurious_call`` (a
    call to the first offered function).
    """
    tools = [t for t in sample.metadata.get("tools") or [] if isinstance(t, Mapping)]
    h = _stable_int(sample.sample_id)
    if not calls:  # irrelevance
        if h % 4 == 0 or not tools:
            return "none", calls
        return "spurious_call", [{"name": tools[0]["name"], "arguments": {}}]
    kind = ("none", "wrong_value", "drop_call", "wrong_function")[h % 4]
    calls = json.loads(json.dumps(calls))
    if kind == "wrong_value":
        for call in calls:
            if call["arguments"]:
                key = sorted(call["arguments"])[h % len(call["arguments"])]
                call["arguments"][key] = _perturb_value(call["arguments"][key])
                return kind, calls
        kind = "drop_call"
    if kind == "drop_call":
        calls = calls[:-1]
        return kind, calls if calls else "I could not find a suitable function for this request."
    if kind == "wrong_function":
        other = [t["name"] for t in tools if t.get("name") != calls[0]["name"]]
        calls[0]["name"] = other[h % len(other)] if other else calls[0]["name"] + "_v2"
    return kind, calls


def render_output(calls: list[dict[str, Any]] | str, style: int) -> str:
    """One reply string in one of the formats a backend produces: 0 a JSON list of
    ``{"name", "arguments"}``, 1 OpenAI ``tool_calls`` (arguments as JSON strings),
    2 Hermes/Qwen ``<tool_call>`` blocks. A string (or an empty list) is a no-call reply."""
    if isinstance(calls, str):
        return calls
    if not calls:
        return "None of the offered functions can answer this request."
    if style % 3 == 1:
        return json.dumps(
            [
                {"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                for i, c in enumerate(calls)
            ]
        )
    if style % 3 == 2:
        return "\n".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in calls)
    return json.dumps(calls)


def write_bfcl_demo_outputs(
    out_dir: str | Path, category: str = "all", limit: int | None = None, path: str | None = None
) -> dict[str, Path]:
    """Write the two BFCL demo "models" as precomputed outputs and return their paths.

    ``possible_answers.jsonl``: the possible answers rendered as calls
    (:func:`render_reference_calls`) in rotating native / Hermes / JSON formats;
    ``perturbed.jsonl``: the same with :func:`perturb_calls` applied. Rows are
    ``{"sample_id", "output", "perturbation"}`` (read by ``precomputed:PATH``). Use them as
    ``precomputed:<out_dir>/possible_answers.jsonl`` and ``precomputed:<out_dir>/perturbed.jsonl``
    against dataset ``{kind: bfcl, category: <category>}``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    samples = BFCLDataset(path=path, category=category, limit=limit).load()
    paths = {"possible_answers": out / "possible_answers.jsonl", "perturbed": out / "perturbed.jsonl"}
    with paths["possible_answers"].open("w", encoding="utf-8") as gold, paths["perturbed"].open("w", encoding="utf-8") as bad:
        for sample in samples:
            calls = render_reference_calls(sample.metadata["reference_calls"], sample.metadata.get("tools"))
            style = _stable_int(sample.sample_id + "/style")
            gold.write(json.dumps({"sample_id": sample.sample_id, "output": render_output(calls, style)}) + "\n")
            kind, wrong = perturb_calls(sample, calls)
            bad.write(json.dumps({"sample_id": sample.sample_id, "output": render_output(wrong, style), "perturbation": kind}) + "\n")
    return paths

