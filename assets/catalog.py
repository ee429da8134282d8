"""The Delta tables that no asset function produces, placed in the asset graph anyway.

- The catalog (``evaluations``, ``evaluation_models``, ``pairs``, ``evaluation_metrics``) is
  written when an evaluation is registered (``facetlake run``/``register``, the
  scheduler and inbox sensors): external assets whose materialisations are reported
  with the rows and Delta version written (:func:`report_catalog`). ``samples`` and
  ``generations`` depend on them: lineage shows which registration a run read.
- ``token_logprobs`` (live backends with log-probabilities) and ``lm_eval_responses``
  (lm-eval models) are written by ``generations``, which reports their materialisations
  for the same pair partition.

The rest is internal state, listed with the reason in :data:`INTERNAL_TABLES` (the
Definitions test checks that every Delta table is one or the other).
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from assets.partitions import pair_partitions

CATALOG_TABLES = {
    "evaluations": "Registered evaluations: one row per (name, fingerprint), current or history, with the spec and schedule.",
    "evaluation_models": "Model sources per evaluation: one row per (evaluation, model, version), spec and identity hash.",
    "pairs": "Registered (evaluation fingerprint, model) pairs and their partition keys: the only partitions that exist.",
    "evaluation_metrics": "Metrics added to an evaluation with `facetlake score` (and their parameters); re-runs keep them.",
}

CATALOG_SPECS = [
    dg.AssetSpec(table, description=text, group_name="catalog", kinds={"delta"}, metadata={"delta_table": table})
    for table, text in CATALOG_TABLES.items()
]

# tables the generations step writes beside its own, reported for the same pair partition
PAIR_SIDE_DESCRIPTIONS = {
    "token_logprobs": "Per generated token: text, log-probability, character span, top alternatives (written by generations).",
    "lm_eval_responses": "lm-eval's raw and filtered responses, filter, log-likelihoods per doc (written by generations for lm-eval models).",
}
PAIR_SIDE_TABLES = tuple(PAIR_SIDE_DESCRIPTIONS)
PAIR_SIDE_SPECS = [
    dg.AssetSpec(table, description=text, deps=["generations"], partitions_def=pair_partitions, group_name="evaluation",
                 kinds={"delta"}, metadata={"delta_table": table})
    for table, text in PAIR_SIDE_DESCRIPTIONS.items()
]

SPECS = [
    dg.AssetSpec(table, description=text, group_name="catalog", kinds={"delta"}, metadata={"delta_table": table})
    for table, text in CATALOG_TABLES.items()
]

TOKEN_LOGPROBS_SPEC = dg.AssetSpec(
    "token_logprobs",
    description="Per generated token: text, log-probability, character span, top alternatives (written by generations).",
    deps=["generations"],
    partitions_def=pair_partitions,
    group_name="evaluation",
    kinds={"delta"},
    metadata={"delta_table": "token_logprobs"},
)

LM_EVAL_RESPONSES_SPEC = dg.AssetSpec(
    "lm_eval_responses",
    description="lm-eval's raw and filtered responses, filter, log-likelihoods per doc (written by generations for lm-eval models).",
    deps=["generations"],
    partitions_def=pair_partitions,
    group_name="evaluation",
    kinds={"delta"},
    metadata={"delta_table": "lm_eval_responses"},
)

# tables the generations step writes beside its own, reported for the same pair partition
PAIR_SIDE_TABLES = ("token_logprobs", "lm_eval_responses")

SPECS = [*CATALOG_SPECS, *PAIR_SIDE_SPECS]

# Delta tables that are not assets, and why (docs/recurring.md repeats this)
INTERNAL_TABLES = {
    "runs": "provenance: one row per asset materialisation, appended by every asset as it writes; it is the lineage "
            "record of the graph (facetlake lineage), not a product of it",
    "judge_cache": "a cache of paid judge replies keyed by judge, decoding and messages; read and appended by the scores and "
                   "pairwise assets while they run; deleting it changes no result, only cost",
    "outbound_ledger": "the audit log of every call that left the machine (privacy), appended by the outbound gateway "
                       "wherever a call is made; a record of side effects, not data the evaluation produces",
    "evidence_exports": "the anchor of each `facetlake export` (manifest hash, key fingerprint), appended by the command; "
                        "an audit record of an action outside the dataflow",
    "samples_raw": "raw sample text kept only when an anonymising evaluation asks for it (privacy.store_raw), written by "
                   "samples beside its anonymised rows; deliberately kept out of the graph's previews and of `facetlake sql`",
    "leases": "one row per (fingerprint, model) generation in progress (resources/lake/lease.py), taken and released by the "
              "generations asset so a second live writer waits instead of paying twice; coordination state, not a result",
}


def report_catalog(instance: dg.DagsterInstance, lake: Any, tables: tuple[str, ...] = tuple(CATALOG_TABLES)) -> None:
    """Report a materialisation of each catalog table (rows and Delta version now stored),
    outside any run: registration happens in the CLI and in sensors."""
    for table in tables:
        if not lake.exists(table):
            continue
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                asset_key=table,
                metadata={"dagster/row_count": lake.read(table).height, "delta_version": lake.version(table),
                          "delta_table": dg.MetadataValue.path(lake.uri(table))},
            )
        )
