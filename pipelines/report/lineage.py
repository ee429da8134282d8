"""Provenance lineage of one fingerprint from the ``runs`` table.

Every asset materialisation appends a ``runs`` row (asset, model, fingerprint, the Delta
table and version it wrote, provenance JSON with what it read). :func:`build_lineage`
walks it backwards: each analysis run (``comparisons``, ``correlations``, ``summary``)
records, per model and metric signature, the scores runs whose rows it read (a
rescore of one metric adds a run; the others' rows keep the run that computed them), so
every verdict traces to every scores run behind it; each scores run read ``generations``
at a version, which names
the generations run and its model identity; generations read ``samples``, whose run
records the dataset content hash. :func:`render` prints the graph as an indented text
tree, a Mermaid flowchart or Graphviz DOT.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from metric_ops.errors import FacetlakeError
from resources.lake.resource import LakeStore

FORMATS = ("text", "mermaid", "dot")
ANALYSIS_ASSETS = ("comparisons", "correlations", "summary", "episode_summary")


class LineageError(FacetlakeError, LookupError):
    """No provenance recorded for the fingerprint; the message says what to run."""


@dataclass
class Node:
    """One provenance node: a dataset, a model identity or an asset run."""

    id: str
    kind: str
    label: str
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class Lineage:
    """Nodes and edges (``upstream id -> downstream id``) of one fingerprint's provenance."""

    fingerprint: str
    name: str = ""
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)

    def add(self, node: Node) -> str:
        self.nodes.setdefault(node.id, node)
        return node.id

    def link(self, upstream: str, downstream: str) -> None:
        if (upstream, downstream) not in self.edges:
            self.edges.append((upstream, downstream))

    def roots(self) -> list[str]:
        """Nodes nothing reads from (the outputs: analysis runs)."""
        ups = {u for u, _ in self.edges}
        return [n for n in self.nodes if n not in ups]

    def upstream(self, node_id: str) -> list[str]:
        return [u for u, d in self.edges if d == node_id]


def _prov(row: dict[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(row.get("provenance") or "{}")
    except ValueError:
        return {}


def _latest(runs: pl.DataFrame, asset: str, model: str | None = None, max_version: int | None = None) -> dict[str, Any] | None:
    frame = runs.filter(pl.col("asset") == asset)
    if model is not None:
        frame = frame.filter(pl.col("model") == model)
    if max_version is not None:
        frame = frame.filter(pl.col("table_version") <= max_version)
    if frame.height == 0:
        return None
    return frame.sort(["table_version", "finished_at"]).row(-1, named=True)


def _run_node(row: dict[str, Any]) -> Node:
    model = f"[{row['model']}]" if row.get("model") else ""
    when = row["finished_at"].strftime("%Y-%m-%d %H:%M:%S") if row.get("finished_at") else ""
    return Node(
        id=f"{row['asset']}_{row.get('model') or 'all'}_v{row['table_version']}_{str(row['run_id'])[:8]}",
        kind="run",
        label=f"{row['asset']}{model} v{row['table_version']}",
        facts={"table": row["table_name"], "version": row["table_version"], "rows": row["rows"], "run_id": row["run_id"],
               "finished_at": when, "mode": row.get("mode")},
    )


def build_lineage(lake: LakeStore, fingerprint: str) -> Lineage:
    """The provenance graph of ``fingerprint`` (a unique prefix is enough)."""
    from resources.catalog import evaluation_row

    evaluation = evaluation_row(lake, fingerprint)
    fp = evaluation["fingerprint"]
    if not lake.exists("runs"):
        raise LineageError(f"no runs table under {lake.root}; materialise the evaluation first (`facetlake run CONFIG`)")
    runs = lake.read("runs", where={"fingerprint": fp})
    if runs.height == 0:
        raise LineageError(f"no runs recorded for fingerprint {fp[:12]} ({evaluation['name']}); run `facetlake run CONFIG` first")
    g = Lineage(fp, evaluation["name"])
    dataset = g.add(Node(f"dataset_{evaluation['dataset_hash'][:12]}", "dataset", f"dataset {evaluation['dataset']}",
                         {"content_sha256": evaluation["dataset_hash"], "n_samples": evaluation["n_samples"]}))
    memo: dict[str, str] = {}

    def samples_node(max_version: int | None, before: Any = None) -> str | None:
        # the run that wrote the rows the child read: finished before the child, at or below
        # the version it read, and not a later run that found the rows unchanged (reused)
        candidates = runs.filter(pl.col("asset") == "samples")
        if before is not None:
            candidates = candidates.filter(pl.col("finished_at") <= before)
        wrote = candidates.filter(~pl.col("provenance").fill_null("{}").str.contains('"reused": true'))
        row = _latest(wrote if wrote.height else candidates, "samples", None, max_version)
        if row is None:
            return None
        node = _run_node(row)
        if node.id not in memo:
            prov = _prov(row)
            node.facts["dataset_hash"] = prov.get("dataset_hash")
            memo[node.id] = g.add(node)
            g.link(dataset, node.id)
        return memo[node.id]

    def generations_node(model: str, max_version: int | None, asset: str = "generations") -> str | None:
        row = _latest(runs, asset, model, max_version)
        if row is None:
            return None
        node = _run_node(row)
        if node.id not in memo:
            prov = _prov(row)
            identity = prov.get("model_identity") or {}
            node.facts["model_spec"] = prov.get("model_spec")
            memo[node.id] = g.add(node)
            ident = g.add(Node(f"model_{model}", "model", f"model {model}", {"identity": identity, "spec": prov.get("model_spec")}))
            g.link(ident, node.id)
            s = samples_node(prov.get("samples_version"), row.get("finished_at"))
            if s:
                g.link(s, node.id)
        return memo[node.id]

    def scores_run_node(run_id: str, model: str) -> str | None:
        hits = runs.filter((pl.col("asset") == "scores") & (pl.col("run_id") == run_id) & (pl.col("model") == model))
        if hits.height == 0:
            return None
        row = hits.sort("finished_at").row(-1, named=True)
        node = _run_node(row)
        if node.id not in memo:
            prov = _prov(row)
            computed = prov.get("computed")
            node.facts["signatures"] = computed if computed is not None else prov.get("signatures", [])
            node.facts["metrics"] = prov.get("metrics")
            memo[node.id] = g.add(node)
            read = prov.get("read") or {}
            gen = generations_node(model, read.get("generations"))
            if gen is None and read.get("episodes") is not None:  # an agent partition: scored from its episodes (issue 17)
                gen = generations_node(model, read.get("episodes"), "episodes")
            if gen:
                g.link(gen, node.id)
        return memo[node.id]

    def scores_node(model: str, max_version: int | None) -> str | None:
        row = _latest(runs, "scores", model, max_version)
        return scores_run_node(row["run_id"], model) if row is not None else None

    models = sorted(set(runs.filter(pl.col("asset").is_in(["generations", "episodes", "scores"]))["model"].drop_nulls().to_list()))
    found_analysis = False
    for asset in ANALYSIS_ASSETS:
        row = _latest(runs, asset)
        if row is None:
            continue
        found_analysis = True
        node = _run_node(row)
        prov = _prov(row)
        read = prov.get("read") or {}
        node.facts["read_versions"] = read
        g.add(node)
        reads = prov.get("reads") or {}
        by_signature = reads.get("scores_runs_by_signature")
        if by_signature:  # every scores run that wrote the rows this verdict read, per metric signature
            for model, signatures in sorted(by_signature.items()):
                for run_ids in signatures.values():
                    for run_id in run_ids:
                        s = scores_run_node(run_id, model)
                        if s:
                            g.link(s, node.id)
            continue
        for model, run_ids in sorted((reads.get("scores_run_ids") or {}).items()) or [(m, []) for m in models]:
            linked = [scores_run_node(r, model) for r in run_ids]
            if not any(linked):
                linked = [scores_node(model, read.get("scores"))]
            for s in linked:
                if s:
                    g.link(s, node.id)
    if not found_analysis:  # scores only: show the scores runs as the outputs
        for model in models:
            scores_node(model, None)
    return g


def _short(value: Any, limit: int = 90) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pairs(value: Any) -> str:
    """A mapping as ``key=value`` words (no braces or quotes); a path value by its file name."""
    if not isinstance(value, dict):
        return _short(value)
    return " ".join(f"{k}={_file_name(v) if isinstance(v, str) else _short(v, 40)}" for k, v in sorted(value.items()))


def _file_name(text: str) -> str:
    """``precomputed:/abs/dir/out.jsonl`` -> ``precomputed:out.jsonl``; other text unchanged."""
    head, sep, tail = text.rpartition(":") if ":" in text and "/" in text else ("", "", text)
    return f"{head}{sep}{tail.rsplit('/', 1)[-1]}" if "/" in tail else text


def _signature(signature: str) -> str:
    """A metric signature by its name and version (``rouge_l|v:2``); the full one is in the runs table."""
    return "|".join(signature.split("|")[:2])


def _facts_line(node: Node) -> str:
    keys = {"dataset": ("content_sha256", "n_samples"), "model": ("identity", "spec")}.get(
        node.kind, ("run_id", "rows", "finished_at", "read_versions", "dataset_hash", "signatures")
    )
    parts = []
    for k in keys:
        v = node.facts.get(k)
        if v in (None, [], {}):
            continue
        if k == "run_id":
            v = str(v)[:8]
        elif k == "signatures":
            v = ", ".join(_signature(x) for x in v)
        elif k in ("identity", "read_versions"):
            v = _pairs(v)
        elif k == "spec":
            v = _file_name(str(v))
        elif k == "dataset_hash":
            v = str(v)[:12]
        parts.append(f"{k}={_short(v, 400 if k in ('signatures', 'identity') else 90)}")
    return ", ".join(parts)


def render_text(g: Lineage) -> str:
    """An indented tree from each output down to the dataset and model identities; a
    subtree drawn once is named "(as above)" afterwards, signatures show name and version,
    identities ``key=value`` and model files their name (the full values are in the runs table)."""
    lines = [f"lineage of {g.name + ' @ ' if g.name else ''}fingerprint {g.fingerprint}"]

    shown: set[str] = set()

    def walk(node_id: str, prefix: str, last: bool, depth: int) -> None:
        node = g.nodes[node_id]
        branch = "" if depth == 0 else ("└─ " if last else "├─ ")
        ups = g.upstream(node_id)
        if node_id in shown and ups:  # a subtree already drawn is named, not drawn again
            lines.append(f"{prefix}{branch}{node.label}  (as above)")
            return
        shown.add(node_id)
        lines.append(f"{prefix}{branch}{node.label}  ({_facts_line(node)})")
        child_prefix = prefix + ("" if depth == 0 else ("   " if last else "│  "))
        for i, up in enumerate(ups):
            walk(up, child_prefix, i == len(ups) - 1, depth + 1)

    for root in g.roots():
        walk(root, "", True, 0)
    return "\n".join(lines)


def _mid(node_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", node_id)


def render_mermaid(g: Lineage) -> str:
    """A Mermaid ``flowchart LR`` (paste into any Mermaid renderer)."""
    shapes = {"dataset": ("[(", ")]"), "model": ("([", "])"), "run": ("[", "]")}
    lines = ["flowchart LR"]
    for node in g.nodes.values():
        a, b = shapes[node.kind]
        extra = ""
        if node.kind == "dataset":
            extra = f"<br/>sha256 {node.facts['content_sha256'][:16]}…"
        elif node.kind == "model":
            extra = "<br/>" + _short(_pairs(node.facts.get("identity")), 60)
        elif node.facts.get("run_id"):
            extra = f"<br/>run {str(node.facts['run_id'])[:8]}"
        text = (node.label + extra).replace('"', "'")
        lines.append(f'    {_mid(node.id)}{a}"{text}"{b}')
    for up, down in g.edges:
        lines.append(f"    {_mid(up)} --> {_mid(down)}")
    return "\n".join(lines)


def render_dot(g: Lineage) -> str:
    """Graphviz DOT (``dot -Tsvg``)."""
    shapes = {"dataset": "cylinder", "model": "ellipse", "run": "box"}
    lines = [f'digraph lineage {{\n  rankdir=LR;\n  label="fingerprint {g.fingerprint[:12]}";']
    for node in g.nodes.values():
        label = (node.label + "\\n" + _facts_line(node)[:160]).replace('"', "'")
        lines.append(f'  {_mid(node.id)} [shape={shapes[node.kind]}, label="{label}"];')
    for up, down in g.edges:
        lines.append(f"  {_mid(up)} -> {_mid(down)};")
    lines.append("}")
    return "\n".join(lines)


def render(g: Lineage, fmt: str = "text") -> str:
    """``g`` as ``text``, ``mermaid`` or ``dot``; raises ``ValueError`` for another format."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown lineage format {fmt!r}; use one of {', '.join(FORMATS)}")
    return {"text": render_text, "mermaid": render_mermaid, "dot": render_dot}[fmt](g)
