"""An IO manager over the lake against the assets' own writes (issue 27: "consider Dagster's
``ConfigurableIOManager`` ... and measure it against the current path").

Two ways to store one partition of ``scores`` rows (a real Delta table on a temporary lake,
materialised by Dagster in process):

- ``direct`` (the current path, assets/declare.py): the asset writes its own rows with
  ``LakeStore.replace`` keyed by the partition, and returns metadata only;
- ``io_manager``: the asset returns the polars frame and a ``ConfigurableIOManager`` writes
  it with the same ``replace`` call (as project_fully_featured does for partitioned Parquet).

Prints one row per path and size: median wall seconds of one materialisation over the
repeats and the peak resident memory of the process. A live ``generations`` run appends
batches of ``write_batch_size`` rows as they finish (a kill loses at most one batch); an IO
manager receives the asset's return value once, at the end, so that path would hold every
output of the partition in memory and lose them all on a kill: the measurement below is of
the write itself, which is what the two paths share.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_io_manager.py [--rows 20000 200000] [--repeats 5]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_io_manager.py --path io_manager --rows 200000   # one run (farm-bench)
"""


import argparse
import datetime as dt
import resource
import statistics
import tempfile
import time
import warnings

import dagster as dg
import polars as pl

from resources.lake.resource import LakeStore

PARTITIONS = dg.StaticPartitionsDefinition(["m1", "m2"])


def score_frame(model: str, n: int) -> pl.DataFrame:
    """``n`` rows in the ``scores`` contract for model ``model``."""
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return pl.DataFrame({
        "model": [model] * n, "fingerprint": ["f" * 64] * n, "dataset": ["bench"] * n,
        "sample_id": [f"s{i}" for i in range(n)], "metric": ["token_f1"] * n, "value": [i % 100 / 100 for i in range(n)],
        "direction": ["maximize"] * n, "dimension": ["baseline_grounding"] * n, "locality": ["local"] * n,
        "status": ["scored"] * n, "detail": ["{}"] * n, "signature": ["token_f1|v1"] * n, "params": [None] * n,
        "run_id": ["r"] * n, "created_at": [now] * n,
    }, schema_overrides={"params": pl.String, "created_at": pl.Datetime("us", "UTC")})


class LakeIOManager(dg.ConfigurableIOManager):
    """Writes an asset's returned frame to the Delta table named like the asset, replacing
    the rows of its partition (model column = partition key)."""

    root: str

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        table = context.asset_key.to_user_string()
        version = LakeStore(root=self.root).replace(table, obj, {"model": context.partition_key})
        context.add_output_metadata({"dagster/row_count": obj.height, "delta_version": version})

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        return LakeStore(root=self.root).read(context.asset_key.to_user_string(), where={"model": context.partition_key})


def definitions(path: str, rows: int):
    """The asset of ``path`` (``direct`` or ``io_manager``) and its resources."""
    if path == "direct":
        @dg.asset(name="scores", partitions_def=PARTITIONS)
        def direct(context: dg.AssetExecutionContext, lake: LakeStore) -> dg.MaterializeResult:
            version = lake.replace("scores", score_frame(context.partition_key, rows), {"model": context.partition_key})
            return dg.MaterializeResult(metadata={"dagster/row_count": rows, "delta_version": version})

        return direct, {}
    if path == "io_manager":
        @dg.asset(name="scores", partitions_def=PARTITIONS, io_manager_key="lake_io")
        def returned(context: dg.AssetExecutionContext) -> pl.DataFrame:
            return score_frame(context.partition_key, rows)

        return returned, {"lake_io": None}
    raise SystemExit(f"--path must be direct or io_manager, not {path!r}")


def materialise(path: str, rows: int, root: str, partition: str) -> float:
    """Seconds for one in-process materialisation of ``partition``."""
    asset, extra = definitions(path, rows)
    resources = {"lake": LakeStore(root=root)}
    if extra:
        resources["lake_io"] = LakeIOManager(root=root)
    instance = dg.DagsterInstance.ephemeral()
    start = time.perf_counter()
    result = dg.materialize([asset], resources=resources, partition_key=partition, instance=instance, raise_on_error=True,
                            run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}})
    seconds = time.perf_counter() - start
    assert result.success
    stored = LakeStore(root=root).read("scores", where={"model": partition}, columns=["sample_id"]).height
    assert stored == rows, (path, stored, rows)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[20_000, 200_000], help="rows per partition")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--path", choices=["direct", "io_manager"], help="one materialisation of this path only (for farm-bench)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if args.path:
        with tempfile.TemporaryDirectory() as tmp:
            materialise(args.path, args.rows[0], f"{tmp}/lake", "m1")
        return
    print(f"{'path':<12} {'rows':>8} {'median s':>9} {'min s':>7} {'max s':>7}")
    for rows in args.rows:
        times: dict[str, list[float]] = {"direct": [], "io_manager": []}
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeats):  # interleaved: A B A B, so drift hits both paths alike
                for path in times:
                    times[path].append(materialise(path, rows, f"{tmp}/{path}", ("m1", "m2")[i % 2]))
        for path, values in times.items():
            print(f"{path:<12} {rows:>8} {statistics.median(values):>9.3f} {min(values):>7.3f} {max(values):>7.3f}")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
