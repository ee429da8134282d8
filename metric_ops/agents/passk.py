"""pass@k and pass^k over repeated trials of the same tasks (pure: numpy + the shared stats).

An agent is run ``n`` times on each task; ``c`` of those trials pass. Two questions:

- **pass@k** (Chen et al., 2021, *Evaluating Large Language Models Trained on Code*, eq. 1):
  the probability that at least one of ``k`` trials drawn without replacement from the
  ``n`` passes, estimated without bias as ``1 - C(n - c, k) / C(n, k)``. Grows with k.
- **pass^k** (Yao et al., 2024, *τ-bench*, §5): the probability that *all* ``k`` drawn
  trials pass, ``C(c, k) / C(n, k)``: the reliability of an agent that must succeed every
  time. Shrinks with k; pass^1 = pass@1 = c / n.

Both are computed per task and averaged over the tasks that have at least ``k`` trials;
tasks with fewer trials are **excluded and counted** (never padded, never read as
failures). Intervals are percentile bootstraps over tasks (the task is the unit that was
sampled; trials of one task are not independent draws of the benchmark), through
:func:`metric_ops.stats.bootstrap_ci`. Two agents on the same tasks are compared
task-paired: per-task differences, their bootstrap interval and the paired sign-flip
permutation test (:func:`metric_ops.stats.paired_permutation_test`).

Inputs are trial tables: ``{task_id: [passed: bool, ...]}`` (one entry per trial, in trial
order). Every number is a float in [0, 1]; an estimate over no eligible task is ``None``
with the reason, never 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from metric_ops.stats import CONFIDENCE, DEFAULT_RESAMPLES, bootstrap_ci, paired_permutation_test

PASS_TOLERANCE = 1e-6  # a reward counts as a pass when reward >= 1 - PASS_TOLERANCE (τ-bench's rule)


def is_pass(value: float | None, threshold: float = 1.0 - PASS_TOLERANCE) -> bool:
    """Whether a recorded reward or 0/1 oracle value is a pass (``value >= threshold``;
    default ``1 - 1e-6``, τ-bench's ``is_successful``). ``None`` is not a pass."""
    return value is not None and math.isfinite(value) and value >= threshold


def _check(n: int, c: int, k: int) -> None:
    if not (isinstance(n, (int, np.integer)) and isinstance(c, (int, np.integer)) and isinstance(k, (int, np.integer))):
        raise TypeError(f"n, c and k must be integers, got n={n!r}, c={c!r}, k={k!r}")
    if n < 1 or not 0 <= c <= n:
        raise ValueError(f"need n >= 1 trials and 0 <= c <= n passes, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the number of trials n={n}, got k={k}; exclude tasks with fewer than k trials")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task (Chen et al., 2021, eq. 1): ``1 - C(n-c, k) / C(n, k)``.

    Args: ``n`` trials (>= 1), ``c`` passes (0..n), ``k`` in 1..n. Returns a float in
    [0, 1] (exact integer binomials, then one division). Raises ``ValueError`` for
    ``k > n`` (the task must be excluded, not scored) or inconsistent counts.
    """
    _check(n, c, k)
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one task (Yao et al., 2024, τ-bench): ``C(c, k) / C(n, k)``, the chance that
    k trials drawn without replacement all pass. Same arguments and errors as
    :func:`pass_at_k`; returns a float in [0, 1]."""
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


@dataclass(frozen=True)
class PassK:
    """pass@k and pass^k at one ``k`` over a set of tasks.

    ``pass_at_k`` / ``pass_hat_k``: means over the ``n_tasks`` eligible tasks (those with at
    least k trials), None when none is eligible; ``*_ci``: (low, high) percentile-bootstrap
    interval over tasks at ``confidence`` (None bounds with fewer than two tasks);
    ``excluded``: ids of tasks with fewer than k trials (``n_excluded`` of them);
    ``per_task``: ``{task_id: (n, c, pass@k, pass^k)}`` of the eligible tasks.
    """

    k: int
    n_tasks: int
    n_excluded: int
    excluded: tuple[str, ...]
    n_trials: int
    n_pass: int
    pass_at_k: float | None
    pass_hat_k: float | None
    pass_at_k_ci: tuple[float | None, float | None]
    pass_hat_k_ci: tuple[float | None, float | None]
    per_task: dict[str, tuple[int, int, float, float]] = field(default_factory=dict)
    note: str | None = None


def task_order(task_id: str) -> tuple[int, int, str]:
    """Sort key of task ids: numeric ids in numeric order, then the others alphabetically."""
    return (0, int(task_id), task_id) if task_id.isdigit() else (1, 0, task_id)


def counts(trials: Mapping[str, Sequence[bool]]) -> dict[str, tuple[int, int]]:
    """``{task_id: (n trials, c passes)}`` of a trial table."""
    return {str(t): (len(v), int(sum(bool(x) for x in v))) for t, v in trials.items()}


def max_trials(trials: Mapping[str, Sequence[bool]]) -> int:
    """The largest number of trials any task has (0 for an empty table)."""
    return max((len(v) for v in trials.values()), default=0)


def pass_k(
    trials: Mapping[str, Sequence[bool]],
    k: int,
    confidence: float = CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> PassK:
    """pass@k and pass^k at ``k`` over the tasks of ``trials`` (see the module docstring).

    Tasks with fewer than ``k`` trials (including tasks listed with no trial) are excluded
    and counted. With no eligible task both estimates are None and ``note`` says why.
    Raises ``ValueError`` for ``k < 1``.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    table = counts(trials)
    eligible = {t: nc for t, nc in table.items() if nc[0] >= k}
    excluded = tuple(sorted((t for t in table if t not in eligible), key=task_order))
    per_task = {t: (n, c, pass_at_k(n, c, k), pass_hat_k(n, c, k)) for t, (n, c) in sorted(eligible.items(), key=lambda kv: task_order(kv[0]))}
    n_trials = sum(n for n, _ in eligible.values())
    n_pass = sum(c for _, c in eligible.values())
    if not per_task:
        return PassK(k, 0, len(excluded), excluded, 0, 0, None, None, (None, None), (None, None), {},
                     note=f"no task has {k} or more trials")
    at = np.array([v[2] for v in per_task.values()])
    hat = np.array([v[3] for v in per_task.values()])
    ci_at = bootstrap_ci(at, np.mean, confidence, n_resamples, seed)
    ci_hat = bootstrap_ci(hat, np.mean, confidence, n_resamples, seed)
    return PassK(
        k, len(per_task), len(excluded), excluded, n_trials, n_pass, float(at.mean()), float(hat.mean()),
        (ci_at.low, ci_at.high), (ci_hat.low, ci_hat.high), per_task, note=ci_hat.note,
    )


def pass_k_curve(
    trials: Mapping[str, Sequence[bool]],
    ks: Sequence[int] | None = None,
    confidence: float = CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> list[PassK]:
    """:func:`pass_k` for every ``k`` in ``ks`` (default 1 .. the largest number of trials)."""
    ks = list(ks) if ks is not None else list(range(1, max_trials(trials) + 1))
    return [pass_k(trials, k, confidence, n_resamples, seed) for k in ks]


@dataclass(frozen=True)
class PairedPassK:
    """Task-paired difference ``candidate - baseline`` of pass^k (and pass@k) at ``k``.

    Only tasks where both agents have at least k trials are paired (``n_tasks``; the
    others are counted in ``n_excluded``). ``delta_hat`` / ``delta_at``: mean per-task
    differences; ``delta_hat_ci``: percentile bootstrap over tasks; ``p_value``: paired
    sign-flip permutation test of the per-task pass^k values (None with fewer than two
    pairs); ``wins`` / ``losses`` / ``ties``: tasks where the candidate's pass^k is
    higher / lower / equal.
    """

    k: int
    n_tasks: int
    n_excluded: int
    candidate_hat: float | None
    baseline_hat: float | None
    delta_hat: float | None
    delta_hat_ci: tuple[float | None, float | None]
    delta_at: float | None
    p_value: float | None
    test: str
    wins: int
    losses: int
    ties: int
    note: str | None = None


def paired_pass_k(
    candidate: Mapping[str, Sequence[bool]],
    baseline: Mapping[str, Sequence[bool]],
    k: int,
    confidence: float = CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> PairedPassK:
    """Compare two agents' trial tables task by task at ``k`` (see :class:`PairedPassK`)."""
    a, b = counts(candidate), counts(baseline)
    shared = sorted(t for t in set(a) & set(b) if a[t][0] >= k and b[t][0] >= k)
    n_excluded = len(set(a) | set(b)) - len(shared)
    if not shared:
        return PairedPassK(k, 0, n_excluded, None, None, None, (None, None), None, None, "paired-permutation", 0, 0, 0,
                           note=f"no task has {k} or more trials for both agents")
    cand = np.array([pass_hat_k(*a[t], k) for t in shared])
    base = np.array([pass_hat_k(*b[t], k) for t in shared])
    cand_at = np.array([pass_at_k(*a[t], k) for t in shared])
    base_at = np.array([pass_at_k(*b[t], k) for t in shared])
    diff = cand - base
    ci = bootstrap_ci(diff, np.mean, confidence, n_resamples, seed)
    test = paired_permutation_test(base, cand, seed=seed)
    return PairedPassK(
        k, len(shared), n_excluded, float(cand.mean()), float(base.mean()), float(diff.mean()), (ci.low, ci.high),
        float((cand_at - base_at).mean()), test.p_value, test.test,
        int((diff > 0).sum()), int((diff < 0).sum()), int((diff == 0).sum()), note=test.note or ci.note,
    )


def inconsistent_tasks(trials: Mapping[str, Sequence[bool]]) -> tuple[list[str], int]:
    """Tasks whose trials disagree (some pass, some fail) and the number of tasks with at
    least two trials (the ones where disagreement is possible)."""
    table = counts(trials)
    repeated = {t: nc for t, nc in table.items() if nc[0] >= 2}
    return sorted((t for t, (n, c) in repeated.items() if 0 < c < n), key=task_order), len(repeated)


def oracle_disagreement(outcomes: Mapping[str, Mapping[str, bool]], a: str, b: str) -> dict[str, Any]:
    """How two oracles disagree over the same episodes.

    ``outcomes``: ``{episode_id: {oracle: passed}}`` (an oracle absent from an episode was
    not scored there). Returns counts over the episodes both scored: ``n``, ``both_pass``,
    ``both_fail``, ``a_only`` (a passes, b fails), ``b_only``, ``share`` (disagreeing / n,
    None when n = 0) and up to ten example episode ids of each kind of disagreement.
    """
    both = [(e, o[a], o[b]) for e, o in sorted(outcomes.items()) if a in o and b in o]
    a_only = [e for e, x, y in both if x and not y]
    b_only = [e for e, x, y in both if y and not x]
    n = len(both)
    return {
        "n": n,
        "both_pass": sum(1 for _, x, y in both if x and y),
        "both_fail": sum(1 for _, x, y in both if not x and not y),
        "a_only": len(a_only),
        "b_only": len(b_only),
        "share": (len(a_only) + len(b_only)) / n if n else None,
        "a_only_examples": a_only[:10],
        "b_only_examples": b_only[:10],
    }
