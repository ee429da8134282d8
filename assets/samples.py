"""The ``samples`` asset and its Great Expectations checks."""


import json
import logging
from typing import Any

import math

import dagster as dg

from assets.common import evaluation_fingerprint, markdown_table, record_run
from assets.declare import delta_asset, table_metadata
from resources.lake.sample_codec import sample_frame, sample_rows
from metric_ops.base import Sample
from assets.partitions import evaluation_partitions
from resources.catalog import evaluation_row, evaluation_spec, utcnow
from resources.datasets import DATASETS
from resources.catalog.spec import load_dataset
from resources.lake.resource import LakeStore
from resources.privacy.session import samples_for_lake, store_raw_samples

SAMPLES_COLUMNS = {
    "fingerprint": "configuration fingerprint (SHA-256, 64 hex)",
    "dataset": "dataset name",
    "dataset_hash": "SHA-256 of the normalised dataset content",
    "position": "row order in the dataset file",
    "sample_id": "unique id within the dataset",
    "input": "prompt / question / source given to the model",
    "references": "gold outputs (list of strings)",
    "context": "context passages (list of strings)",
    "metadata": "other raw fields (JSON)",
    "ratings": "human ratings by name (JSON)",
}

logging.getLogger("great_expectations").setLevel(logging.WARNING)

CHECK_REQUIRED = "check_samples_required_fields"
CHECK_UNIQUE = "check_samples_unique_ids"
CHECK_RATINGS = "check_samples_ratings_in_range"


def _validation_rows(samples: list[Sample]) -> list[dict[str, Any]]:
    """One row per sample with the checked fields (missing ones as None), and the rating
    columns in first-seen order."""
    rows: list[dict[str, Any]] = []
    for s in samples:
        row: dict[str, Any] = {
            "sample_id": s.sample_id,
            "input": s.input if s.input.strip() else None,
            "references": len(s.references) or None,
            "context": len(s.context) or None,
        }
        for name, value in s.ratings.items():
            row[f"rating:{name}"] = None if value != value else value
        rows.append(row)
    return rows


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(key for row in rows for key in row))


def _validation_frame(rows: list[dict[str, Any]]) -> Any:
    """The rows as the pandas frame Great Expectations validates (pandas imported here:
    only when a check fails)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=_columns(rows))


class _Validator:
    """Great Expectations (ephemeral context, progress bars off) over one pandas frame."""

    def __init__(self, frame: Any) -> None:
        import logging

        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        logging.getLogger("great_expectations").setLevel(logging.WARNING)
        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        source = context.data_sources.add_pandas("facetlake")
        asset = source.add_dataframe_asset("samples")
        self.batch = asset.add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": frame})

    def validate(self, kind: str, **kwargs: Any) -> tuple[bool, list[int], dict[str, Any]]:
        """(success, offending row indices, counts) for one expectation (``kind``: a class of
        ``great_expectations.expectations``, with its arguments)."""
        import great_expectations as gx

        expectation = getattr(gx.expectations, kind)(**kwargs)
        result = self.batch.validate(expectation, result_format={"result_format": "COMPLETE"})
        info = result.result or {}
        return bool(result.success), [int(i) for i in info.get("unexpected_index_list") or []], {
            "unexpected_count": info.get("unexpected_count", 0),
            "element_count": info.get("element_count", 0),
        }


class _AllPass:
    """Stands in for :class:`_Validator` when :func:`_all_pass` found nothing to report."""

    def __init__(self, n: int) -> None:
        self.n = n

    def validate(self, kind: str, **kwargs: Any) -> tuple[bool, list[int], dict[str, Any]]:
        return True, [], {"unexpected_count": 0, "element_count": self.n}


def _is_null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _numeric(value: Any) -> float | None:
    """``value`` as a number the way pandas' ``to_numeric(errors="coerce")`` reads it, else None."""
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _all_pass(rows: list[dict[str, Any]], required: list[str], bounds: tuple[float, float] | None) -> bool:
    """Whether every check passes, by the expectations' own rules on whole columns (not
    null; unique ``sample_id``; each non-null rating a number within ``bounds``, inclusive).
    When True, neither Great Expectations nor pandas (seconds to import) is loaded; when
    False they run and report the offending rows."""
    if any(_is_null(row.get(column)) for column in required for row in rows):
        return False
    ids = [row["sample_id"] for row in rows]
    if len(set(ids)) != len(ids):
        return False
    if bounds is not None:
        for column in (c for c in _columns(rows) if c.startswith("rating:")):
            for row in rows:
                value = row.get(column)
                if _is_null(value):
                    continue
                number = _numeric(value)
                if number is None or math.isnan(number) or not bounds[0] <= number <= bounds[1]:
                    return False
    return True


def validate_samples(samples: list[Sample], dataset_kind: str) -> list[dg.AssetCheckResult]:
    """The three Great Expectations checks over ``samples``; failing rows are listed.

    The checks are first evaluated on whole columns (:func:`_all_pass`); only when one
    fails is Great Expectations loaded to validate and list the offending rows."""
    rows = _validation_rows(samples)
    columns = _columns(rows) or ["sample_id", "input", "references", "context"]
    cls = DATASETS.get(dataset_kind)
    required = [f for f in (cls.required_fields if cls else ("sample_id", "input")) if f in columns]
    bounds = cls.rating_range if cls else None
    validator: Any = _AllPass(len(rows)) if _all_pass(rows, required, bounds) else _Validator(_validation_frame(rows))
    results = []

    offending: dict[str, list[str]] = {}
    for column in required:
        ok, idx, _ = validator.validate("ExpectColumnValuesToNotBeNull", column=column)
        if not ok:
            offending[column] = [str(rows[i]["sample_id"]) for i in idx]
    results.append(
        dg.AssetCheckResult(
            check_name=CHECK_REQUIRED,
            passed=not offending,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={
                "required_fields": ", ".join(required),
                "offending_rows": dg.MetadataValue.json({k: v[:50] for k, v in offending.items()}),
                "n_offending": sum(len(v) for v in offending.values()),
            },
        )
    )

    ok, idx, info = validator.validate("ExpectColumnValuesToBeUnique", column="sample_id")
    dup_ids = sorted({str(rows[i]["sample_id"]) for i in idx})
    results.append(
        dg.AssetCheckResult(
            check_name=CHECK_UNIQUE,
            passed=ok,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={
                "duplicate_ids": dg.MetadataValue.json(dup_ids[:50]),
                "offending_rows": dg.MetadataValue.json([int(i) + 1 for i in idx][:100]),
                "n_offending": int(info["unexpected_count"] or 0),
            },
        )
    )

    bad_ratings: dict[str, list[dict[str, Any]]] = {}
    rating_columns = [c for c in columns if c.startswith("rating:")]
    if bounds is not None:
        for column in rating_columns:
            ok, idx, _ = validator.validate("ExpectColumnValuesToBeBetween", column=column, min_value=bounds[0],
                                            max_value=bounds[1])
            if not ok:
                bad_ratings[column] = [
                    {"sample_id": str(rows[i]["sample_id"]), "value": rows[i].get(column)} for i in idx[:50]
                ]
    results.append(
        dg.AssetCheckResult(
            check_name=CHECK_RATINGS,
            passed=not bad_ratings,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "range": str(bounds) if bounds else "no declared range",
                "ratings": ", ".join(rating_columns) or "none",
                "offending_rows": dg.MetadataValue.json(bad_ratings),
            },
        )
    )
    return results


@delta_asset(
    "samples",
    partitions_def=evaluation_partitions,
    deps=["evaluations"],  # the registration it loads the dataset config from
    kinds={"polars", "great_expectations"},
    columns=SAMPLES_COLUMNS,
    checks={
        CHECK_REQUIRED: "required fields present and non-null (Great Expectations)",
        CHECK_UNIQUE: "sample ids unique (Great Expectations)",
        CHECK_RATINGS: "human ratings within the dataset's declared range (Great Expectations)",
    },
)
def samples(context: dg.AssetExecutionContext, lake: LakeStore):
    """Dataset rows normalised to Sample (input, references, context, metadata, ratings), one partition per fingerprint."""
    started = utcnow()
    fingerprint = evaluation_fingerprint(context)
    row = evaluation_row(lake, fingerprint)
    spec = evaluation_spec(lake, fingerprint)
    dataset = spec.make_dataset()
    loaded, digest = load_dataset(dataset)  # what this process's registration loaded, when the file is unchanged
    if digest != row["dataset_hash"]:
        raise dg.Failure(
            f"dataset {dataset.display_name!r} changed since fingerprint {fingerprint[:12]} was registered "
            f"(content hash {digest[:12]} != {row['dataset_hash'][:12]}); register the evaluation again "
            "(`facetlake run CONFIG`) to get the new fingerprint"
        )
    # anonymised text when the evaluation's privacy policy is on; raw only if privacy.store_raw (issue 16)
    to_store, keep_raw = samples_for_lake(loaded, spec.privacy)
    stored = lake.read("samples", where={"fingerprint": fingerprint}, columns=["dataset_hash"])
    reused = (stored.height == len(to_store) and stored["dataset_hash"].n_unique() == 1 and stored["dataset_hash"][0] == digest
              and not spec.privacy)  # anonymised rows are rewritten: the policy may have changed
    # content-addressed: identical content is not rewritten (the table's Delta version stays)
    version = (lake.version("samples") if reused
               else lake.replace("samples", sample_frame(to_store, fingerprint, dataset.display_name, digest), {"fingerprint": fingerprint}))
    rows = to_store
    store_raw_samples(lake, sample_rows(loaded, fingerprint, dataset.display_name, digest) if keep_raw else None, fingerprint)
    previous = _previous_fingerprint(lake, row)
    record_run(
        lake, context, asset="samples", table="samples", version=version, rows=len(rows), started_at=started,
        fingerprint=fingerprint, dataset=dataset.display_name,
        provenance={"dataset_hash": digest, "dataset_config": dataset.config(), "fingerprint_inputs": json.loads(row["fingerprint_inputs"]),
                    "reused": reused},
    )
    n_refs = sum(1 for s in loaded if s.references)
    yield dg.MaterializeResult(
        metadata={
            "fingerprint": fingerprint,
            "dataset": dataset.display_name,
            "dataset_hash": digest,
            **table_metadata(lake, "samples", len(rows), version),
            "reused": reused,
            "evaluation": row["name"],
            "previous_fingerprint": previous or "none",
            "with_references": n_refs,
            "preview": dg.MetadataValue.md(
                markdown_table(
                    __import__("polars").DataFrame(
                        [{"sample_id": s.sample_id, "input": s.input[:80], "n_refs": len(s.references)} for s in to_store[:5]]
                    )
                )
            ),
        }
    )
    yield from validate_samples(loaded, dataset.kind)


def _previous_fingerprint(lake: LakeStore, row: dict) -> str | None:
    """The fingerprint this evaluation had before ``row``'s (None for its first one)."""
    import polars as pl

    frame = lake.read("evaluations", where={"name": row["name"]})
    earlier = frame.filter((pl.col("fingerprint") != row["fingerprint"]) & pl.col("superseded_at").is_not_null())
    return earlier.sort("superseded_at")["fingerprint"][-1] if earlier.height else None
