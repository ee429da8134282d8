"""Partitions, defined once, beside the assets that use them.

Only registered pairs exist (DESIGN.md, "Identity"). Two dynamic dimensions, each a
single dimension so that no cross product ever appears:

- ``evaluation`` partitions (samples, summary, comparisons, correlations, pairwise): one
  key per registered evaluation fingerprint, written ``<evaluation name>@<fingerprint
  prefix>``, e.g. ``sfres@9868f4b32c97``.
- ``pair`` partitions (generations, annotations, scores, token_logprobs): one key per
  registered (evaluation fingerprint, model) pair, written
  ``<evaluation name>@<fingerprint prefix>:<model>``, e.g. ``sfres@9868f4b32c97:bot-v1``.

A Dagster ``MultiPartitionsDefinition`` over two dynamic dimensions is the full cross
product of fingerprints and model names: with 4 evaluations and 6 model names it shows
24 partitions of which 16 are phantoms ("missing" forever, counted in fill rates, offered
for backfill, materialisable into the wrong evaluation, and blocking declarative
automation). A single dynamic dimension of pair keys holds exactly the registered pairs.
The Delta tables keep ``fingerprint`` and ``model`` as their partition columns; the
catalog (``resources/catalog/__init__.py``, table ``pairs``) maps each key to them, so keys are
never parsed to find data.

The keys of the *current* fingerprint of every active (not archived) evaluation are the
dynamic partitions Dagster knows; a superseded fingerprint's partitions are removed from
Dagster (their Delta rows stay, labelled history in the catalog and queryable with SQL
and ``facetlake compare -e NAME@FP``). :func:`sync_partitions` keeps the instance equal
to the catalog.

Dagster's built-in partition mappings cannot express "pair -> its evaluation", and a
custom mapping is ignored by the UI and automation, so the edges between the two
dimensions are declared with :data:`EVALUATION_EDGE` (``AllPartitionMapping``) for the
asset graph, and freshness is driven by the ``analysis_sensor`` (pipelines/sensors.py),
which maps each new scores materialisation to its evaluation through the catalog.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Iterable

import dagster as dg

from resources import catalog

if TYPE_CHECKING:  # pragma: no cover
    from resources.lake.resource import LakeStore

EVALUATION_DIMENSION = "evaluation"
PAIR_DIMENSION = "pair"

# asset checks are partitioned like their assets (one result per evaluation, so one
# evaluation's failing check is never hidden by another's pass); Dagster marks the
# partitions_def argument of AssetCheckSpec as preview: known and intended here
warnings.filterwarnings("ignore", message=".*partitions_def on an AssetCheckSpec.*")

evaluation_partitions = dg.DynamicPartitionsDefinition(name=EVALUATION_DIMENSION)
pair_partitions = dg.DynamicPartitionsDefinition(name=PAIR_DIMENSION)

# the edge between the two dimensions, for the asset graph (see the module docstring)
EVALUATION_EDGE = dg.AllPartitionMapping()

# the key formats live with the catalog, which stores every key (resources/catalog/__init__.py)
evaluation_key = catalog.evaluation_key
pair_key = catalog.pair_key


def _sync(instance: dg.DagsterInstance, name: str, wanted: Iterable[str], stale: Iterable[str]) -> dict[str, list[str]]:
    have = set(instance.get_dynamic_partitions(name))
    added = sorted(set(wanted) - have)
    removed = sorted((set(stale) & have) - set(wanted))
    if added:
        instance.add_dynamic_partitions(name, added)
    for key in removed:
        instance.delete_dynamic_partition(name, key)
    return {"added": added, "removed": removed}


def sync_partitions(lake: "LakeStore", instance: dg.DagsterInstance) -> dict[str, dict[str, list[str]]]:
    """Make the instance's ``evaluation`` and ``pair`` dynamic partitions match the
    catalog: add its current keys, remove the keys it knows as superseded or archived.
    Keys the catalog does not know (another lake on the same instance) are left alone.

    Returns ``{"evaluation": {"added": [...], "removed": [...]}, "pair": {...}}``."""
    evaluations, pairs = catalog.current_keys(lake)
    old_evaluations, old_pairs = catalog.retired_keys(lake)
    return {
        EVALUATION_DIMENSION: _sync(instance, EVALUATION_DIMENSION, evaluations, old_evaluations),
        PAIR_DIMENSION: _sync(instance, PAIR_DIMENSION, pairs, old_pairs),
    }


def partition_requests(lake: "LakeStore", instance: dg.DagsterInstance) -> list:
    """The dynamic-partition requests (for a ``SensorResult``) that :func:`sync_partitions`
    would apply."""
    evaluations, pairs = catalog.current_keys(lake)
    old_evaluations, old_pairs = catalog.retired_keys(lake)
    requests: list = []
    for name, wanted, stale in ((EVALUATION_DIMENSION, evaluations, old_evaluations), (PAIR_DIMENSION, pairs, old_pairs)):
        have = set(instance.get_dynamic_partitions(name))
        add = sorted(set(wanted) - have)
        remove = sorted((set(stale) & have) - set(wanted))
        if add:
            requests.append(dg.AddDynamicPartitionsRequest(name, add))
        if remove:
            requests.append(dg.DeleteDynamicPartitionsRequest(name, remove))
    return requests
