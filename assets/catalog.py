"""The Delta tables that no asset function produces, placed in the asset graph anyway.

- The catalog (``evaluations``, ``evaluation_models``, ``pairs``, ``evaluation_metrics``) is
  written when an evaluation is registered (``facetlake run``/``register``, the
  scheduler and inbox sensors): external assets whose materialisations are reported
  with the rows and Delta version written (:func:`report_catalog`). ``samples`` and
  ``generations`` depend on them: lineage shows which registration a run read.

The rest is internal state, listed with the reason in :data:`INTERNAL_TABLES` (the
Definitions test checks that every Delta table is one or the other).
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from assets.declare import delta_spec, table_metadata
from resources.lake.schemas import SCHEMAS

CATALOG_TABLES = {
    "evaluations": "Registered evaluations: one row per (name, fingerprint), current or history, with the spec and schedule.",
    "evaluation_models": "Model sources per evaluation: one row per (evaluation, model, version), spec and identity hash.",
    "pairs": "Registered (evaluation fingerprint, model) pairs and their partition keys: the only partitions that exist.",
    "evaluation_metrics": "Metrics added to an evaluation with `facetlake score` (and their parameters); re-runs keep them.",
}

SPECS = [delta_spec(table, description=text, group_name="catalog") for table, text in CATALOG_TABLES.items()]

# Delta tables that are not assets, and why (docs/recurring.md repeats this)
INTERNAL_TABLES = {
    "runs": "provenance: one row per asset materialisation, appended by every asset as it writes; it is the lineage "
            "record of the graph (facetlake lineage), not a product of it",
    "judge_cache": "a cache of paid judge replies keyed by judge, decoding and messages; read and appended by the scores and "
                   "pairwise assets while they run; deleting it changes no result, only cost",
    "call_batches": "the state of each Batch API submission (uploaded, submitted, done) so that a killed or scheduled "
                    "run resumes the same batch instead of sending its requests again; a record of side effects",
    "outbound_ledger": "the audit log of every call that left the machine (privacy), appended by the outbound gateway "
                       "wherever a call is made; a record of side effects, not data the evaluation produces",
    "evidence_exports": "the anchor of each `facetlake export` (manifest hash, key fingerprint), appended by the command; "
                        "an audit record of an action outside the dataflow",
    "samples_raw": "raw sample text kept only when an anonymising evaluation asks for it (privacy.store_raw), written by "
                   "samples beside its anonymised rows; deliberately kept out of the graph's previews and of `facetlake sql`",
    "reviews": "human reviews given in `facetlake view` or imported with `facetlake review import` (resources/review/): "
               "human input appended outside any run, keyed so a retried request adds nothing; the graph tracks what is "
               "derived from it, the human:<rubric> rows of scores",
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
                metadata=table_metadata(lake, table, lake.read(table, columns=[SCHEMAS[table].names[0]]).height),
            )
        )
