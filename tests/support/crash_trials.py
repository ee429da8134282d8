"""Seeded crash trials for tests/test_crash_faults.py (issue 16, "Done when").

Run as ``python tests/support/crash_trials.py CONFIG.json``. One warm process imports
facetlake once, never touches a Delta table itself (deltalake's runtime must not exist
before a fork), and for each trial forks:

1. a **faulted child** with ``FACETLAKE_FAULT=POINT@N`` that runs the evaluation
   (samples, live API generation, annotations, scores, verdicts), a forced rescore of
   one metric and an evidence export, exactly as ``facetlake run`` / ``score --force`` /
   ``export`` do in process, until the fault point ends it with ``os._exit(137)``;
2. a **recovery child** (no fault) that does what a user does next: the CLI's start-up
   (dead-run sweep), ``facetlake run``, ``facetlake score --metric token_f1``, ``facetlake
   export`` into a new folder, and then measures the lake: rows per table, duplicates
   by key, ledger rows, runs still in progress, the export's anchor.

Each trial's measurements are written to ``<workdir>/t<i>/result.json``; the test checks
them against the server's own request count.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def write_inputs(folder: Path, trial: int, base_url: str, n: int) -> Path:
    import yaml

    data = folder / "data.csv"
    data.write_text("id,input,reference\n" + "".join(f"s{i},question {i} of trial {trial},question {i} of trial {trial}\n"
                                                       for i in range(n)), encoding="utf-8")
    spec = {
        "name": f"crash-{trial}",
        "dataset": {"kind": "file", "path": str(data), "mapping": {"sample_id": "id", "input": "input", "references": "reference"}},
        "adapter": {"kind": "chat", "template": "{input}"},
        "generation": {"temperature": 0.0, "max_tokens": 16, "seed": 0},
        "runtime": {"api_key_env": "FACETLAKE_TEST_API_KEY", "concurrency": 2, "write_batch_size": 2, "max_retries": 0},
        "models": {"m": f"api:trial-{trial}@{base_url}"},
        "metrics": ["exact_match", "token_f1"],
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def _invoke(asset, key: str, lake, instance, *config) -> None:
    import dagster as dg

    from pipelines.definitions import build_resources

    resources = build_resources(lake.root)
    resources["lake"] = lake
    with dg.build_asset_context(partition_key=key, resources=resources, instance=instance) as context:
        result = asset(context, *config)
        if hasattr(result, "__iter__") and not isinstance(result, (dict, str)):
            list(result)


def workload(folder: Path, spec_path: Path, export_to: Path, force: bool) -> None:
    """What the user runs, with each asset invoked directly (the same asset code and
    resources as a run, without a Dagster run per step, to keep a trial under a second):
    `facetlake run` (register, samples, generations, annotations, scores, summary), then
    `facetlake score --metric token_f1` (``--force`` in the faulted child; without it the
    recovery redoes only scores whose run left no `runs` record), then `facetlake export`.
    An in-process CLI run leaves a STARTED run tagged with its pid and host in Dagster's
    run storage; one is recorded here the same way, and the recovery's CLI start-up
    (``get_instance``) must fail it."""
    import uuid

    import dagster as dg

    from assets.annotations import annotations
    from assets.generations import GenerationsConfig, generations
    from assets.samples import samples
    from assets.scores import ScoresConfig, scores
    from assets.summary import summary
    from pipelines.runs.run_health import process_tags
    from pipelines.runs.runner import committed_scores
    from resources.catalog import pairs_of
    from pipelines.runs.register import evaluation_partition, register
    from pipelines.runs.instance import get_instance
    from resources.catalog.spec import EvaluationSpec
    from resources.evidence.export import export_evidence
    from resources.lake.resource import LakeStore
    from resources.scoring.metric_inputs import build_metric

    lake = LakeStore(root=str(folder / "lake"))
    instance = get_instance()  # the CLI's start-up: dead runs of this host are failed
    instance.add_run(dg.DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED,
                                   tags={"facetlake/source": "cli", **process_tags()}))
    spec = EvaluationSpec.from_yaml(spec_path)
    resolved = register(spec, lake, None)
    fp = resolved.fingerprint
    ekey, pkey = evaluation_partition(lake, fp), pairs_of(lake, fp)[0]["partition_key"]
    _invoke(samples, ekey, lake, instance)
    _invoke(generations, pkey, lake, instance, GenerationsConfig())
    _invoke(annotations, pkey, lake, instance)
    _invoke(scores, pkey, lake, instance, ScoresConfig())
    signature = build_metric("token_f1", {})[0].signature()
    done = committed_scores(lake)
    have = done is not None and done.filter((done["signature"] == signature)).height > 0
    if force or not have:
        _invoke(scores, pkey, lake, instance, ScoresConfig(metrics=[{"name": "token_f1"}]))
    _invoke(summary, ekey, lake, instance)
    export_evidence(lake, fp, export_to)
    for run in instance.get_runs(filters=dg.RunsFilter(tags=process_tags(), statuses=[dg.DagsterRunStatus.STARTED])):
        instance.run_storage.delete_run(run.run_id)  # finished: it no longer holds a place in the queue


def measure(folder: Path, n: int, export_to: Path) -> dict:
    import dagster as dg
    import polars as pl

    from resources.evidence.verify import verify_evidence
    from resources.lake.resource import LakeStore
    from resources.lake.commit import KEYS

    lake = LakeStore(root=str(folder / "lake"))
    out: dict = {"duplicates": {}}
    for table in ("generations", "scores", "runs", "outbound_ledger", "evidence_exports", "samples", "summary", "annotations"):
        frame = lake.read(table)
        keys = {"generations": ("model", "fingerprint", "sample_id"), "summary": ("fingerprint", "model", "metric")}.get(table, KEYS.get(table))
        out["duplicates"][table] = int(frame.select(list(keys)).is_duplicated().sum()) if frame.height else 0
    gens = lake.read("generations")
    out["generations"] = gens.height
    out["generations_ok"] = int((gens["status"] == "ok").sum())
    scores = lake.read("scores")
    out["scores_per_metric"] = {m: int(c) for m, c in scores.group_by("metric").len().iter_rows()}
    recorded = set(lake.read("runs", where={"asset": "scores"}, columns=["run_id"])["run_id"].to_list())
    out["scores_without_runs_record"] = int((~scores["run_id"].is_in(sorted(recorded))).sum())
    summary = lake.read("summary")
    out["summary_n_total"] = {r["metric"]: r["n_total"] for r in summary.iter_rows(named=True)}
    ledger = lake.read("outbound_ledger")
    out["ledger_rows"] = ledger.height
    out["ledger_text_sha256"] = ledger["text_sha256"].to_list() if ledger.height else []
    out["ledger_status"] = {s: int(c) for s, c in ledger.group_by("status").len().iter_rows()} if ledger.height else {}
    instance = dg.DagsterInstance.get()
    in_progress = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING]))
    out["runs_in_progress"] = len(in_progress)
    manifest = json.loads((export_to / "MANIFEST.json").read_text()) if (export_to / "MANIFEST.json").exists() else None
    anchors = lake.read("evidence_exports")
    report = verify_evidence(export_to, lake=lake, allow_unsigned=True)
    out["export_anchored"] = bool(manifest) and anchors.height > 0 and bool(report.anchored)
    out["export_verified"] = bool(report.ok)
    out["export_problems"] = list(getattr(report, "problems", []))[:3]
    out["n"] = n
    return out


def _fork(fn) -> int:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            fn()
        except BaseException:  # noqa: BLE001 - reported through the result file / stderr
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def warm(config: dict) -> None:
    os.environ["DAGSTER_HOME"] = config["dagster_home"]
    os.environ.setdefault("FACETLAKE_LOG_LEVEL", "ERROR")
    os.environ["FACETLAKE_TEST_API_KEY"] = "sk-crash-trials-0000"
    # warm imports, no Delta table opened in this process
    import dagster  # noqa: F401
    import great_expectations  # noqa: F401
    import openai  # noqa: F401
    import polars  # noqa: F401

    import assets.annotations  # noqa: F401
    import assets.generations  # noqa: F401
    import assets.samples  # noqa: F401
    import assets.scores  # noqa: F401
    import assets.summary  # noqa: F401
    import metric_ops.registry  # noqa: F401
    import pipelines.runs.runner  # noqa: F401
    import resources.backends.api  # noqa: F401
    import resources.evidence.export  # noqa: F401
    import resources.scoring.metric_inputs  # noqa: F401


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    warm(config)
    workdir = Path(config["workdir"])
    if config.get("mode") == "concurrent":  # one of several processes on one lake (tests/test_crash_faults.py)
        folder = workdir / "shared"
        spec_path = folder / "spec.yaml"
        if config.get("measure"):
            (folder / "result.json").write_text(json.dumps(measure(folder, config["n"], folder / "export-0"), default=str))
        else:
            workload(folder, spec_path, folder / f"export-{config['worker']}", force=True)
        return
    for trial in config["trials"]:
        folder = workdir / f"t{trial['id']}"
        folder.mkdir(parents=True, exist_ok=True)
        spec_path = write_inputs(folder, trial["id"], config["base_url"], config["n"])

        def faulted() -> None:
            os.environ["FACETLAKE_FAULT"] = trial["fault"]
            workload(folder, spec_path, folder / "export-1", force=True)

        def recovery() -> None:
            os.environ.pop("FACETLAKE_FAULT", None)
            workload(folder, spec_path, folder / "export-2", force=False)
            result = measure(folder, config["n"], folder / "export-2")
            (folder / "result.json").write_text(json.dumps(result, default=str))

        first = _fork(faulted)
        second = _fork(recovery)
        (folder / "exit.json").write_text(json.dumps({"faulted": first, "recovery": second, "fault": trial["fault"]}))


if __name__ == "__main__":
    main(sys.argv[1])
