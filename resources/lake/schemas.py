"""The lake's table contracts: one Arrow schema per Delta table (:data:`SCHEMAS`) and the
partition columns of the partitioned ones (:data:`PARTITION_COLUMNS`).

Part of :mod:`resources.lake` (the package face exports these names).
"""

from __future__ import annotations

import pyarrow as pa

_TS = pa.timestamp("us", tz="UTC")

# the samples table and samples_raw (raw text kept apart, issue 16) share one schema
_SAMPLES = pa.schema(
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
)

SCHEMAS: dict[str, pa.Schema] = {
    # the catalog (resources/catalog/__init__.py): identity of evaluations, models and pairs
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
    "samples": _SAMPLES,
    # raw sample text, kept only where an evaluation's privacy block sets store_raw (issue 16);
    # `facetlake sql` exposes it only with --include-raw. Same columns as samples.
    "samples_raw": _SAMPLES,
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
            # JSON {"metric": registry name, "version", "params": {key: text}} (metric_ops/identity.py);
            # added after the first lakes: ADDED_COLUMNS below, resources/lake/score_params.py
            ("params", pa.string()),
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
            # issue 30: the Batch API batch that carried the call (null for a live call)
            ("batch_id", pa.string()),
        ]
    ),
    # Batch API submissions (issue 30, resources/backends/batch.py): one row per state change of a
    # batch (uploaded -> submitted -> done); the latest row per input file is its state
    "call_batches": pa.schema(
        [(c, pa.string()) for c in ("input_file_id", "state", "batch_id", "base_url", "api_model", "purpose", "fingerprint", "model",
                                    "run_id", "requests")]
        + [("n_requests", pa.int64()), ("status", pa.string()), ("output_file_id", pa.string()), ("error_file_id", pa.string()),
           ("created_at", _TS)]
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
    # human reviews (issue 29, resources/review/): one row per review given; the latest per
    # (model, sample, rubric, reviewer) counts, and human:<rubric> score rows are derived from them
    "reviews": pa.schema([
        ("fingerprint", pa.string()), ("evaluation", pa.string()), ("model", pa.string()), ("sample_id", pa.string()),
        ("rubric", pa.string()), ("rubric_version", pa.string()), ("reviewer", pa.string()), ("value", pa.float64()),
        ("label", pa.string()), ("source", pa.string()), ("review_id", pa.string()), ("created_at", _TS),
    ]),
    # inter-reviewer and judge-vs-human agreement per rubric (issue 29, assets/agreement.py)
    "agreement": pa.schema([
        ("fingerprint", pa.string()), ("rubric", pa.string()), ("kind", pa.string()), ("reviewer_a", pa.string()),
        ("reviewer_b", pa.string()), ("metric", pa.string()), ("value", pa.float64()), ("n", pa.int64()),
        ("detail", pa.string()), ("run_id", pa.string()), ("created_at", _TS),
    ]),
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
    # generation leases (issue 16, resources/lake/lease.py): one row per (fingerprint, model) being generated
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
    "reviews": ["fingerprint"],
    "agreement": ["fingerprint"],
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

# columns added to a table's contract after lakes were written without them: a nullable
# column, added to a stored table on its next write (resources/lake/commit.py
# ``ensure_table``), never a rewrite of its rows; readers fill it for older rows
# (resources/lake/score_params.py for scores.params)
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {
    "scores": ("params",),
    "outbound_ledger": ("batch_id",),
}
