"""The lake store: Delta tables under one root, written partition by partition.

Why not dagster-deltalake's IO manager: with a model x fingerprint multi-partition whose
dimensions are dynamic it fails inside its table-slice code ("The instance is not
available to load partitions", ../shared/PITFALLS.md), and when building a predicate
fails it overwrites the whole table. This store writes with deltalake's predicate
overwrite (``mode="overwrite", predicate="model = '…' AND fingerprint = '…'"``), which
replaces exactly one partition, and validates every partition value first so a predicate
can never be malformed.

Every table has an Arrow schema contract (:data:`SCHEMAS`); a write whose columns differ
is refused (change a schema by explicit migration, never by silent merge).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import polars as pl
import pyarrow as pa

_TS = pa.timestamp("us", tz="UTC")

SCHEMAS: dict[str, pa.Schema] = {
    # the catalog (resources/catalog.py): identity of evaluations, models and pairs
    "evaluations": pa.schema(
        [
            ("name", pa.string()),
            ("fingerprint", pa.string()),
            ("partition_key", pa.string()),
            ("status", pa.string()),
            ("archived", pa.bool_()),
            ("dataset", pa.string()),
            ("dataset_source", pa.string()),
            ("dataset_hash", pa.string()),
            ("n_samples", pa.int64()),
            ("spec", pa.string()),
            ("fingerprint_inputs", pa.string()),
            ("schedule", pa.string()),
            ("registered_at", _TS),
            ("superseded_at", _TS),
        ]
    ),
    "evaluation_models": pa.schema(
        [
            ("evaluation", pa.string()),
            ("model", pa.string()),
            ("version", pa.int64()),
            ("spec", pa.string()),
            ("identity", pa.string()),
            ("identity_sha256", pa.string()),
            ("source", pa.string()),
            ("active", pa.bool_()),
            ("registered_at", _TS),
        ]
    ),
    "pairs": pa.schema(
        [
            ("evaluation", pa.string()),
            ("fingerprint", pa.string()),
            ("model", pa.string()),
            ("partition_key", pa.string()),
            ("status", pa.string()),
            ("registered_at", _TS),
        ]
    ),
    "evaluation_metrics": pa.schema(
        [
            ("evaluation", pa.string()),
            ("metric", pa.string()),
            ("params", pa.string()),
            ("source", pa.string()),
            ("added_at", _TS),
        ]
    ),
    "samples": pa.schema(
        [
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("dataset_hash", pa.string()),
            ("position", pa.int64()),
            ("sample_id", pa.string()),
            ("input", pa.string()),
            ("references", pa.list_(pa.string())),
            ("context", pa.list_(pa.string())),
            ("metadata", pa.string()),
            ("ratings", pa.string()),
        ]
    ),
    # raw sample text, kept only where an evaluation's privacy block sets store_raw (issue 16);
    # `facetlake sql` exposes it only with --include-raw. Same columns as samples.
    "samples_raw": pa.schema(
        [
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("dataset_hash", pa.string()),
            ("position", pa.int64()),
            ("sample_id", pa.string()),
            ("input", pa.string()),
            ("references", pa.list_(pa.string())),
            ("context", pa.list_(pa.string())),
            ("metadata", pa.string()),
            ("ratings", pa.string()),
        ]
    ),
    "generations": pa.schema(
        [
            ("model", pa.string()),
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("sample_id", pa.string()),
            ("output", pa.string()),
            ("status", pa.string()),
            ("error", pa.string()),
            ("backend", pa.string()),
            ("prompt", pa.string()),
            ("latency_s", pa.float64()),
            ("tokens_in", pa.int64()),
            ("tokens_out", pa.int64()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    "scores": pa.schema(
        [
            ("model", pa.string()),
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("sample_id", pa.string()),
            ("metric", pa.string()),
            ("value", pa.float64()),
            ("direction", pa.string()),
            ("dimension", pa.string()),
            ("locality", pa.string()),
            ("status", pa.string()),
            ("detail", pa.string()),
            ("signature", pa.string()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    "summary": pa.schema(
        [
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("model", pa.string()),
            ("metric", pa.string()),
            ("direction", pa.string()),
            ("mean", pa.float64()),
            ("n_scored", pa.int64()),
            ("n_unscored", pa.int64()),
            ("n_error", pa.int64()),
            ("n_total", pa.int64()),
            ("run_id", pa.string()),
        ]
    ),
    # live generation (issue 7): one row per sample x annotator; one row per generated token
    "annotations": pa.schema(
        [
            ("model", pa.string()),
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("sample_id", pa.string()),
            ("annotator", pa.string()),
            ("kind", pa.string()),
            ("value", pa.string()),
            ("matched", pa.bool_()),
            ("span", pa.string()),
            ("span_start", pa.int64()),
            ("span_end", pa.int64()),
            ("error", pa.string()),
            ("signature", pa.string()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    "token_logprobs": pa.schema(
        [
            ("model", pa.string()),
            ("fingerprint", pa.string()),
            ("sample_id", pa.string()),
            ("position", pa.int64()),
            ("token", pa.string()),
            ("logprob", pa.float64()),
            ("char_start", pa.int64()),
            ("char_end", pa.int64()),
            ("top_logprobs", pa.string()),
            ("run_id", pa.string()),
        ]
    ),
    # comparisons / correlations (issue 8): one partition per fingerprint; `reads` names the
    # partitions and Delta table versions each row was computed from (JSON).
    "comparisons": pa.schema(
        [
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("kind", pa.string()),
            ("model", pa.string()),
            ("baseline", pa.string()),
            ("metric", pa.string()),
            ("direction", pa.string()),
            ("dimension", pa.string()),
            ("sample_id", pa.string()),
            ("n_scored", pa.int64()),
            ("n_total", pa.int64()),
            ("n_pairs", pa.int64()),
            ("mean", pa.float64()),
            ("median", pa.float64()),
            ("baseline_mean", pa.float64()),
            ("ci_low", pa.float64()),
            ("ci_high", pa.float64()),
            ("ci_method", pa.string()),
            ("is_winner", pa.bool_()),
            ("delta", pa.float64()),
            ("relative_change", pa.float64()),
            ("retention", pa.float64()),
            ("test", pa.string()),
            ("statistic", pa.float64()),
            ("p_value", pa.float64()),
            ("p_holm", pa.float64()),
            ("significant", pa.bool_()),
            ("effect_size", pa.float64()),
            ("effect_size_name", pa.string()),
            ("verdict", pa.string()),
            ("detail", pa.string()),
            ("reads", pa.string()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    "correlations": pa.schema(
        [
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("model", pa.string()),
            ("metric_a", pa.string()),
            ("metric_b", pa.string()),
            ("kind", pa.string()),
            ("dimension_a", pa.string()),
            ("dimension_b", pa.string()),
            ("same_dimension", pa.bool_()),
            ("n", pa.int64()),
            ("pearson", pa.float64()),
            ("pearson_p", pa.float64()),
            ("spearman", pa.float64()),
            ("spearman_p", pa.float64()),
            ("kendall", pa.float64()),
            ("kendall_p", pa.float64()),
            ("divergent", pa.bool_()),
            ("detail", pa.string()),
            ("reads", pa.string()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    # judge-call cache (issue 4): one row per paid judge call, keyed by judge + decoding + messages + salt
    "judge_cache": pa.schema(
        [
            ("key", pa.string()),
            ("judge", pa.string()),
            ("purpose", pa.string()),
            ("sample_id", pa.string()),
            ("reply", pa.string()),
            ("created_at", _TS),
        ]
    ),
    # pairwise judging (issue 4): one row per sample x model pair x judge configuration, both orders
    "pairwise": pa.schema(
        [
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("config_key", pa.string()),
            ("judge", pa.string()),
            ("topology", pa.string()),
            ("round", pa.int64()),
            ("sample_id", pa.string()),
            ("model_a", pa.string()),
            ("model_b", pa.string()),
            ("verdict_ab", pa.string()),
            ("verdict_ba", pa.string()),
            ("winner", pa.string()),
            ("position_flip", pa.bool_()),
            ("status", pa.string()),
            ("detail", pa.string()),
            ("signature", pa.string()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    # outbound ledger (privacy issue): one row per call that left the process; never the text or a key
    "outbound_ledger": pa.schema(
        [
            ("called_at", _TS),
            ("run_id", pa.string()),
            ("fingerprint", pa.string()),
            ("model", pa.string()),
            ("host", pa.string()),
            ("api_model", pa.string()),
            ("purpose", pa.string()),
            ("sample_id", pa.string()),
            ("text_sha256", pa.string()),
            ("n_chars", pa.int64()),
            ("anonymised", pa.bool_()),
            ("strategy", pa.string()),
            ("entity_counts", pa.string()),
            ("n_entities", pa.int64()),
            # issue 16: committed as "intent" before the call is sent, then "completed" / "failed"
            ("call_id", pa.string()), ("status", pa.string()), ("completed_at", _TS),
        ]
    ),
    # agent episodes (issue 17): one row per (task, trial) per model x fingerprint partition
    "episodes": pa.schema(
        [
            ("model", pa.string()),
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("task_id", pa.string()),
            ("trial", pa.int64()),
            ("episode_id", pa.string()),
            ("messages", pa.string()),
            ("tool_calls", pa.string()),
            ("final_answer", pa.string()),
            ("n_messages", pa.int64()),
            ("n_turns", pa.int64()),
            ("n_tool_calls", pa.int64()),
            ("reward", pa.float64()),
            ("reward_info", pa.string()),
            ("status", pa.string()),
            ("error", pa.string()),
            ("tokens_in", pa.int64()),
            ("tokens_out", pa.int64()),
            ("cost", pa.float64()),
            ("user_cost", pa.float64()),
            ("latency_s", pa.float64()),
            ("source", pa.string()),
            ("backend", pa.string()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    # corpus-level episode results (issue 17): pass@k / pass^k per model x oracle x k, per task,
    # task-paired model comparisons, consistency; one partition per fingerprint, never per row
    "episode_summary": pa.schema(
        [
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("kind", pa.string()),
            ("model", pa.string()),
            ("baseline", pa.string()),
            ("oracle", pa.string()),
            ("oracle_b", pa.string()),
            ("k", pa.int64()),
            ("task_id", pa.string()),
            ("label", pa.string()),
            ("n_tasks", pa.int64()),
            ("n_excluded", pa.int64()),
            ("n_trials", pa.int64()),
            ("n_pass", pa.int64()),
            ("pass_at_k", pa.float64()),
            ("pass_at_k_low", pa.float64()),
            ("pass_at_k_high", pa.float64()),
            ("pass_hat_k", pa.float64()),
            ("pass_hat_k_low", pa.float64()),
            ("pass_hat_k_high", pa.float64()),
            ("value", pa.float64()),
            ("ci_low", pa.float64()),
            ("ci_high", pa.float64()),
            ("p_value", pa.float64()),
            ("detail", pa.string()),
            ("signature", pa.string()),
            ("reads", pa.string()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    # lm-eval (issue 18): lm-eval's raw and filtered responses, one row per doc x filter
    # (model x fingerprint partitions); lm-eval's aggregates beside facetlake's (per fingerprint)
    "lm_eval_responses": pa.schema(
        [
            ("model", pa.string()),
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("sample_id", pa.string()),
            ("task", pa.string()),
            ("filter", pa.string()),
            ("output_type", pa.string()),
            ("arguments", pa.string()),
            ("resps", pa.string()),
            ("filtered_resps", pa.string()),
            ("loglikelihoods", pa.list_(pa.float64())),
            ("is_greedy", pa.list_(pa.bool_())),
            ("target", pa.string()),
            ("metrics", pa.string()),
            ("doc_hash", pa.string()),
            ("prompt_hash", pa.string()),
            ("target_hash", pa.string()),
            ("task_version", pa.string()),
            ("lm_eval_version", pa.string()),
            ("config_sha256", pa.string()),
            ("n_shot", pa.int64()),
            ("directions", pa.string()),
            ("aggregations", pa.string()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    "lm_eval_summary": pa.schema(
        [
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("model", pa.string()),
            ("task", pa.string()),
            ("metric", pa.string()),
            ("lm_eval_metric", pa.string()),
            ("filter", pa.string()),
            ("aggregation", pa.string()),
            ("direction", pa.string()),
            ("lm_eval_value", pa.float64()),
            ("lm_eval_stderr", pa.float64()),
            ("facetlake_value", pa.float64()),
            ("facetlake_stderr", pa.float64()),
            ("ci_low", pa.float64()),
            ("ci_high", pa.float64()),
            ("ci_method", pa.string()),
            ("n_scored", pa.int64()),
            ("n_total", pa.int64()),
            ("abs_diff", pa.float64()),
            ("stderr_abs_diff", pa.float64()),
            ("agrees", pa.bool_()),
            ("detail", pa.string()),
            ("run_id", pa.string()),
            ("created_at", _TS),
        ]
    ),
    # evidence exports (issue 16): one row per `facetlake export`, the anchor of its manifest
    "evidence_exports": pa.schema(
        [
            ("exported_at", _TS),
            ("fingerprint", pa.string()),
            ("evaluation", pa.string()),
            ("manifest_sha256", pa.string()),
            ("public_key_sha256", pa.string()),
            ("signed", pa.bool_()),
            ("table_format", pa.string()),
            ("n_files", pa.int64()),
            ("folder", pa.string()),
        ]
    ),
    # generation leases (issue 16, resources/lease.py): one row per (fingerprint, model) being generated
    "leases": pa.schema([("fingerprint", pa.string()), ("model", pa.string()), ("holder", pa.string()), ("host", pa.string()),
                         ("pid", pa.int64()), ("run_id", pa.string()), ("acquired_at", _TS), ("expires_at", _TS)]),
    "runs": pa.schema(
        [
            ("run_id", pa.string()),
            ("asset", pa.string()),
            ("model", pa.string()),
            ("fingerprint", pa.string()),
            ("dataset", pa.string()),
            ("table_name", pa.string()),
            ("table_version", pa.int64()),
            ("rows", pa.int64()),
            ("started_at", _TS),
            ("finished_at", _TS),
            ("mode", pa.string()),
            ("provenance", pa.string()),
        ]
    ),
}

PARTITION_COLUMNS: dict[str, list[str] | None] = {
    "pairwise": ["fingerprint"],
    "generations": ["fingerprint", "model"],
    "scores": ["fingerprint", "model"],
    "annotations": ["fingerprint", "model"],
    "token_logprobs": ["fingerprint", "model"],
    "lm_eval_responses": ["fingerprint", "model"],
    "comparisons": ["fingerprint"],
    "correlations": ["fingerprint"],
    "episodes": ["fingerprint", "model"],
    "episode_summary": ["fingerprint"],
}

_SAFE_VALUE = re.compile(r"^[A-Za-z0-9._:\-@/+, ]{1,200}$")  # "," for lm-eval metric names (exact_match,strict-match)


from resources.lake_commit import LakeConflictError, LakeError  # noqa: E402,F401 - re-exported


def predicate_for(where: Mapping[str, str | Sequence[str]]) -> str:
    """A delta-rs predicate ``col = 'v' AND col2 IN ('a', 'b')`` for ``where``.

    Values must be slugs, hex or metric names (``[A-Za-z0-9._:-@/+ ]``); anything else
    raises :class:`LakeError`, so a predicate can never be silently malformed (a
    malformed one would make an overwrite replace the whole table).
    """
    if not where:
        raise LakeError("refusing a predicate overwrite with no partition values (it would replace the whole table)")
    clauses = []
    for column, value in where.items():
        if not re.fullmatch(r"[a-z_]+", column):
            raise LakeError(f"bad column name in predicate: {column!r}")
        values = [value] if isinstance(value, str) else list(value)
        if not values:
            raise LakeError(f"empty value list for {column!r} in predicate")
        for v in values:
            if not isinstance(v, str) or not _SAFE_VALUE.match(v) or "'" in v:
                raise LakeError(
                    f"partition value {v!r} for {column!r} is not a slug/hex/metric name; "
                    "use letters, digits and . _ - : only"
                )
        if len(values) == 1:
            clauses.append(f"{column} = '{values[0]}'")
        else:
            clauses.append(f"{column} IN ({', '.join(repr(v) for v in values)})")
    return " AND ".join(clauses)


def to_arrow(table_name: str, rows: pl.DataFrame | pa.Table | Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows cast to the table's schema contract; raises :class:`LakeError` on a column
    mismatch or a value whose type does not fit its column (resources/lake_types.py)."""
    from resources.lake_types import check_rows, check_table
    schema = SCHEMAS[table_name]
    if isinstance(rows, pl.DataFrame):
        data = rows.to_arrow()
    elif isinstance(rows, pa.Table):
        data = rows
    else:
        rows = list(rows)
        missing = [f.name for f in schema if rows and f.name not in rows[0]]
        extra = [k for k in (rows[0] if rows else {}) if k not in schema.names]
        if missing or extra:
            raise LakeError(f"rows for {table_name!r} do not match its schema: missing {missing}, unexpected {extra}")
        check_rows(table_name, schema, rows)
        return pa.Table.from_pylist(rows, schema=schema)
    if set(data.column_names) != set(schema.names):
        raise LakeError(
            f"columns for {table_name!r} do not match its schema: got {sorted(data.column_names)}, "
            f"expected {sorted(schema.names)}"
        )
    check_table(table_name, schema, data)
    return data.select(schema.names).cast(schema)


def __getattr__(name: str) -> Any:
    """``LakeStore`` (the Dagster resource) is defined in :mod:`resources.lake_resource` and
    loaded on first use, so that reading the lake (``facetlake sql``) never imports Dagster."""
    if name == "LakeStore":
        from resources.lake_resource import LakeStore

        return LakeStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class LakeTables:
    """Delta tables under ``root`` (a local folder by default; ``s3://``/``gs://``/``az://``
    with ``storage_options`` past one machine).

    ``root`` defaults to ``$FACETLAKE_LAKE`` or ``./lake``. Plain Python (no Dagster): the
    Dagster resource :class:`resources.lake_resource.LakeStore` (``resources.lake.LakeStore``)
    adds the resource config on top of these methods.
    """

    root: str
    storage_options: dict[str, str]

    def __init__(self, root: str | None = None, storage_options: Mapping[str, str] | None = None) -> None:
        self.root = root or os.environ.get("FACETLAKE_LAKE", "lake")
        self.storage_options = dict(storage_options or {})

    # ----------------------------------------------------------------- paths
    def uri(self, table: str) -> str:
        """Location of ``table`` under the root."""
        if "://" in self.root:
            return f"{self.root.rstrip('/')}/{table}"
        return str(Path(self.root).expanduser().resolve() / table)

    def _options(self) -> dict[str, str] | None:
        return dict(self.storage_options) or None

    def exists(self, table: str) -> bool:
        """Whether ``table`` is a Delta table."""
        from deltalake import DeltaTable

        return DeltaTable.is_deltatable(self.uri(table), storage_options=self._options())

    def tables(self) -> list[str]:
        """Names of the Delta tables present under the root (local roots are listed;
        remote roots are probed for the known table names)."""
        if "://" not in self.root:
            root = Path(self.root).expanduser()
            if not root.exists():
                return []
            return sorted(p.name for p in root.iterdir() if (p / "_delta_log").is_dir())
        return [t for t in SCHEMAS if self.exists(t)]

    def delta(self, table: str, version: int | None = None):
        """The ``deltalake.DeltaTable`` for ``table``; raises :class:`LakeError` if absent."""
        from deltalake import DeltaTable

        if not self.exists(table):
            raise LakeError(f"table {table!r} does not exist under {self.root}; run `facetlake demo` or `facetlake run CONFIG` first")
        return DeltaTable(self.uri(table), version=version, storage_options=self._options())

    def version(self, table: str) -> int | None:
        """Current Delta version of ``table`` (None when it does not exist)."""
        return self.delta(table).version() if self.exists(table) else None

    # ----------------------------------------------------------------- writes
    def replace(
        self,
        table: str,
        rows: pl.DataFrame | pa.Table | Sequence[Mapping[str, Any]],
        where: Mapping[str, str | Sequence[str]],
    ) -> int:
        """Replace the rows matching ``where`` with ``rows`` in one Delta commit.

        Other partitions are untouched (A/B/A-safe); re-running with the same rows is
        idempotent. Every written row must satisfy ``where``. Returns the new version.
        """
        import pyarrow.compute as pc

        from resources.lake_commit import ensure_table, overwrite

        data = to_arrow(table, rows)
        predicate = predicate_for(where)
        for column, value in where.items():
            allowed = {value} if isinstance(value, str) else set(value)
            bad = set(pc.unique(data.column(column)).to_pylist()) - allowed  # distinct values, not one per row
            if bad:
                raise LakeError(f"rows for {table!r} fall outside the partition being written: {column} in {sorted(bad)[:5]}")
        ensure_table(self.uri(table), SCHEMAS[table], PARTITION_COLUMNS.get(table), self._options())  # never a racing first append
        overwrite(self.uri(table), table, data, predicate, self._options())  # conflicts retried (resources/lake_commit.py)
        return self.delta(table).version()

    def append(self, table: str, rows: pl.DataFrame | pa.Table | Sequence[Mapping[str, Any]], fresh_keys: bool = False) -> int:
        """Append the ``rows`` whose key (resources/lake_commit.py ``KEYS``; ``fresh_keys``: just
        generated) is not stored yet, retrying conflicts in a bound; returns the new version."""
        from resources.lake_commit import ensure_table, keyed_append, partition_filter

        data = to_arrow(table, rows)
        ensure_table(self.uri(table), SCHEMAS[table], PARTITION_COLUMNS.get(table), self._options())
        keyed_append(self.uri(table), table, data, self._options(), fresh_keys=fresh_keys,
                     partition_filter=partition_filter(data, PARTITION_COLUMNS.get(table)))
        return self.delta(table).version()

    # ----------------------------------------------------------------- reads
    def arrow_dataset(self, table: str, version: int | None = None) -> Any:
        """A ``pyarrow.dataset.Dataset`` over ``table`` (current or given ``version``).

        A local table is read through pyarrow's native filesystem, not deltalake's
        Python-implemented one: Arrow IO threads still pre-buffering row groups that a
        filter skipped would otherwise call into Python while the interpreter exits, and
        the process aborts (SIGABRT) or hangs after printing its result (issue 16)."""
        import pyarrow.fs as pa_fs

        delta = self.delta(table, version)
        uri = self.uri(table)
        if "://" not in uri or uri.startswith("file://"):
            filesystem, path = (pa_fs.LocalFileSystem(), uri) if "://" not in uri else pa_fs.FileSystem.from_uri(uri)
            # deltalake names each data file relative to the table root, percent-decoded
            return delta.to_pyarrow_dataset(filesystem=pa_fs.SubTreeFileSystem(path, filesystem))
        return delta.to_pyarrow_dataset()

    def read(
        self,
        table: str,
        where: Mapping[str, str | Sequence[str]] | None = None,
        columns: Iterable[str] | None = None,
        version: int | None = None,
    ) -> pl.DataFrame:
        """Rows of ``table`` matching ``where`` (equality / membership), as polars.

        A missing table reads as an empty frame with the table's schema.
        """
        import pyarrow.dataset as ds

        if not self.exists(table):
            empty = SCHEMAS[table].empty_table() if table in SCHEMAS else pa.table({})
            frame = pl.from_arrow(empty)
            return frame.select(list(columns)) if columns else frame
        dataset = self.arrow_dataset(table, version)
        expr = None
        for column, value in (where or {}).items():
            values = [value] if isinstance(value, str) else list(value)
            term = ds.field(column).isin(values)
            expr = term if expr is None else expr & term
        result = dataset.to_table(filter=expr, columns=list(columns) if columns else None)
        return pl.from_arrow(result)
