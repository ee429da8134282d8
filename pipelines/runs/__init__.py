"""Running evaluations through Dagster, from Python or the CLI.

- :mod:`~pipelines.runs.register`: an evaluation spec into the catalog and Dagster's
  partitions (the sensors and the runner both register);
- :mod:`~pipelines.runs.runner`: materialising samples, pairs and verdicts in process,
  rescoring, the tables the CLI prints;
- :mod:`~pipelines.runs.launch`: runs launched or queued through the code location;
- :mod:`~pipelines.runs.lm_eval_run`: lm-eval runs and imports as evaluations;
- :mod:`~pipelines.runs.instance`, :mod:`~pipelines.runs.instance_storage`,
  :mod:`~pipelines.runs.pg_storage`, :mod:`~pipelines.runs.run_health`: the Dagster
  instance, its storage and the health check of run workers.

Nothing is imported here: ``dagster.yaml`` names ``pipelines.runs.pg_storage`` and
``pipelines.runs.run_health`` as instance classes, and loading them must not load the code
location (the runner imports every asset definition).
"""
