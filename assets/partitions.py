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

Kind-specific assets get partition sets of their own, holding only evaluations of their kind
(issue 26, fault 12: ``episodes`` showed 0/9 with five phantoms forever missing, and
"Materialize all" offered them for generation evaluations):

- ``agent_pair`` (``episodes``): the pair keys of agent evaluations (dataset kind ``episodes``);
- ``agent_evaluation`` (``episode_summary``): the evaluation keys of agent evaluations;
- ``lm_eval_evaluation`` (``lm_eval_summary``): the evaluation keys of lm-eval evaluations.

The keys are the same strings as in ``pair`` / ``evaluation``, so an agent pair's ``scores``
partition reads its ``episodes`` partition through an ``IdentityPartitionMapping``. A Dagster
run holds assets of one partitions definition only, so an agent pair's run is two runs
(``agent_job`` for its episodes, then ``scores_job``: the CLI runs them in order, and the
``episodes_sensor`` scores episodes stored by any other path); an agent evaluation's verdicts
are ``analysis_job`` and ``agent_analysis_job``.

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
from resources.catalog.reads import KINDS, keys_by_kind

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
# kind-specific partition sets (see the module docstring)
agent_pair_partitions = dg.DynamicPartitionsDefinition(name="agent_pair")
agent_evaluation_partitions = dg.DynamicPartitionsDefinition(name="agent_evaluation")
lm_eval_partitions = dg.DynamicPartitionsDefinition(name="lm_eval_evaluation")

#: every partition set: name -> (level, kind): level ``evaluation`` or ``pair``, kind one of
#: resources.catalog.reads.KINDS (None: every evaluation)
DIMENSIONS: dict[str, tuple[str, str | None]] = {
    EVALUATION_DIMENSION: ("evaluation", None),
    PAIR_DIMENSION: ("pair", None),
    agent_pair_partitions.name: ("pair", "agent"),
    agent_evaluation_partitions.name: ("evaluation", "agent"),
    lm_eval_partitions.name: ("evaluation", "lm_eval"),
}
assert {kind for _, kind in DIMENSIONS.values() if kind} <= set(KINDS)

# the edge between the two dimensions, for the asset graph (see the module docstring)
EVALUATION_EDGE = dg.AllPartitionMapping()
# a pair's partition in a kind-specific pair set (same key) -> the same pair
SAME_KEY = dg.IdentityPartitionMapping()

# the key formats live with the catalog, which stores every key (resources/catalog/__init__.py)
evaluation_key = catalog.evaluation_key
pair_key = catalog.pair_key


def _wanted(lake: "LakeStore") -> dict[str, tuple[list[str], list[str]]]:
    """partition set -> (its current keys, keys this lake retired), from one catalog read."""
    keys = keys_by_kind(lake)
    return {name: (keys[kind][0], keys[kind][2]) if level == "evaluation" else (keys[kind][1], keys[kind][3])
            for name, (level, kind) in DIMENSIONS.items()}


def _changes(instance: dg.DagsterInstance, name: str, wanted: Iterable[str], stale: Iterable[str]) -> tuple[list[str], list[str]]:
    have = set(instance.get_dynamic_partitions(name))
    return sorted(set(wanted) - have), sorted((set(stale) & have) - set(wanted))


def sync_partitions(lake: "LakeStore", instance: dg.DagsterInstance) -> dict[str, dict[str, list[str]]]:
    """Make the instance's dynamic partition sets (:data:`DIMENSIONS`: ``evaluation``,
    ``pair`` and the kind-specific ones) match the catalog: add its current keys, remove the
    keys it knows as superseded or archived. Keys the catalog does not know (another lake on
    the same instance) are left alone.

    Returns ``{"evaluation": {"added": [...], "removed": [...]}, "pair": {...}, ...}``."""
    done: dict[str, dict[str, list[str]]] = {}
    for name, (wanted, stale) in _wanted(lake).items():
        added, removed = _changes(instance, name, wanted, stale)
        if added:
            instance.add_dynamic_partitions(name, added)
        for key in removed:
            instance.delete_dynamic_partition(name, key)
        done[name] = {"added": added, "removed": removed}
    return done


def partition_requests(lake: "LakeStore", instance: dg.DagsterInstance) -> list:
    """The dynamic-partition requests (for a ``SensorResult``) that :func:`sync_partitions`
    would apply."""
    requests: list = []
    for name, (wanted, stale) in _wanted(lake).items():
        add, remove = _changes(instance, name, wanted, stale)
        if add:
            requests.append(dg.AddDynamicPartitionsRequest(name, add))
        if remove:
            requests.append(dg.DeleteDynamicPartitionsRequest(name, remove))
    return requests
