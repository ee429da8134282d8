"""lm-evaluation-harness through the lake (docs/lm-eval.md).

- :mod:`~resources.lm_eval.bridge`: the ``lm_eval`` dataset kind and backend, stored score rows;
- :mod:`~resources.lm_eval.common`: shared names and hashing;
- :mod:`~resources.lm_eval.results`: reading lm-eval's output folders;
- :mod:`~resources.lm_eval.summary`: lm-eval's aggregates beside facetlake's;
- :mod:`~resources.lm_eval.models`: running lm-eval (its models through the outbound path);
- ``tasks/``: facetlake's own lm-eval tasks.

lm-eval itself is imported only when a task runs.
"""

from resources.lm_eval.bridge import (
    ADAPTER_KEYS,
    adapter_block,
    run_record,
    LmEvalDataset,
    register_adapter,
    LmEvalOutputBackend,
    write_responses,
    stored_score_rows,
    score_rows_from_responses,
    SECTION_KEYS,
    validate_section,
)
from resources.lm_eval.common import (
    PREFIX,
    TASKS_DIR,
    DEFAULT_FILTER,
    AGREEMENT_TOLERANCE,
    LmEvalError,
    require_lm_eval,
    canonical,
    sha256,
    CONFIG_UNHASHED,
    config_hash,
    metric_name,
    score_signature,
    score_identity,
)
from resources.lm_eval.results import TaskRun, load_results, find_task_runs, task_run
from resources.lm_eval.summary import summary_rows
from resources.lm_eval.models import (
    LmEvalPrivacyError,
    LmEvalModel,
    parse_model_args,
    lm_eval_model,
    check_outbound,
    outbound_ledger,
    register_api_classes,
    RunSettings,
    task_manager,
    run_tasks,
)

__all__ = [
    "ADAPTER_KEYS",
    "adapter_block",
    "run_record",
    "LmEvalDataset",
    "register_adapter",
    "LmEvalOutputBackend",
    "write_responses",
    "stored_score_rows",
    "score_rows_from_responses",
    "SECTION_KEYS",
    "validate_section",
    "PREFIX",
    "TASKS_DIR",
    "DEFAULT_FILTER",
    "AGREEMENT_TOLERANCE",
    "LmEvalError",
    "require_lm_eval",
    "canonical",
    "sha256",
    "CONFIG_UNHASHED",
    "config_hash",
    "metric_name",
    "score_signature",
    "score_identity",
    "TaskRun",
    "load_results",
    "find_task_runs",
    "task_run",
    "summary_rows",
    "LmEvalPrivacyError",
    "LmEvalModel",
    "parse_model_args",
    "lm_eval_model",
    "check_outbound",
    "outbound_ledger",
    "register_api_classes",
    "RunSettings",
    "task_manager",
    "run_tasks",
]
