"""Repeated trials of any evaluation (issue 28): per-sample trial statistics, pass@k and
pass^k for any binary metric, and a hierarchical bootstrap (clusters, then items, then trials).

A sample evaluated ``n`` times (generation or judging repeated) has ``n`` scores of one
metric. Score rows of a repeated trial carry ``<sample id>#<trial>`` as their sample id,
the convention agent episodes already use (resources/agents/episodes.py); :func:`split_trial`
reads it back.

- Per sample: the mean of its trials, their variance (ddof = 1; None with one trial) and the
  **flip rate**, the share of unordered trial pairs whose values differ: for a binary metric
  with ``c`` passes of ``n`` it is ``2 c (n - c) / (n (n - 1))``, the unbiased estimate of the
  chance that two independent trials disagree.
- Per evaluation, for a binary metric (every scored value 0 or 1): pass@k (Chen et al., 2021,
  eq. 1) and pass^k (Yao et al., 2024, τ-bench) through :mod:`metric_ops.agents.passk`, the
  same estimators and exclusion rules as agent episodes.
- Intervals: :func:`hierarchical_bootstrap_ci` resamples clusters, then items within each
  drawn cluster, then trials within each drawn item (Davison & Hinkley, 1997, §3.8; Ren et
  al., 2010, "Nonparametric bootstrapping for hierarchical data"), so trial-to-trial variance
  enters the interval beside item and cluster variance. Resampling at every level is
  conservative: the trial variance enters once through the item means and once more through
  the trial draw, ``Var = (s_item² + s_trial²/m + s_trial² (m-1)/m²) / n`` for n items of m
  trials (Davison & Hinkley, §3.8); the cluster-level bootstrap and CR1 standard error of
  :mod:`metric_ops.stats.clustered` are the exact alternative.

Pure numpy; every value is a float in the metric's units; bad input raises ``ValueError``
naming the problem.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from metric_ops.stats.core import WILD_BOOTSTRAP_ABOVE

TRIAL_SEPARATOR = "#"


def trial_id(sample_id: str, trial: int) -> str:
    """The sample id of trial ``trial`` (0-based) of ``sample_id``: ``"<sample_id>#<trial>"``."""
    if trial < 0:
        raise ValueError(f"trial index must be >= 0, got {trial}")
    return f"{sample_id}{TRIAL_SEPARATOR}{int(trial)}"


def expand_trials(samples: Sequence, k: int) -> list:
    """Each of ``samples`` (:class:`metric_ops.base.Sample`) repeated ``k`` times as trials
    ``<sample_id>#<t>`` (t = 0..k-1), sample by sample, with ``task_id`` (the sample id) and
    ``trial`` added to the metadata; the samples themselves when ``k == 1``. Raises
    ``ValueError`` for ``k < 1``."""
    import dataclasses

    if k < 1:
        raise ValueError(f"trials must be >= 1, got {k}")
    if k == 1:
        return list(samples)
    return [dataclasses.replace(s, sample_id=trial_id(s.sample_id, t), metadata={**dict(s.metadata or {}), "task_id": s.sample_id, "trial": t})
            for s in samples for t in range(k)]


def split_trial(sample_id: str) -> tuple[str, int | None]:
    """``(sample id, trial index)`` of a trial row's id; ``(sample_id, None)`` for an id with
    no ``#<digits>`` suffix (a single-trial evaluation)."""
    base, sep, tail = str(sample_id).rpartition(TRIAL_SEPARATOR)
    if sep and base and tail.isdigit():
        return base, int(tail)
    return str(sample_id), None


@dataclass(frozen=True)
class SampleTrials:
    """Trial statistics of one sample: ``n`` trials, their ``mean``, ``variance`` (ddof 1,
    None when n < 2) and ``flip_rate`` (share of trial pairs that differ, None when n < 2)."""

    sample_id: str
    n: int
    mean: float
    variance: float | None
    flip_rate: float | None


def flip_rate(values: Sequence[float], atol: float = 1e-12) -> float | None:
    """Share of the unordered pairs of ``values`` (one sample's trials) that differ by more
    than ``atol``; None with fewer than two trials. Binary values with c ones of n give
    ``2 c (n - c) / (n (n - 1))``."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < 2:
        return None
    if np.all((x == 0) | (x == 1)):
        c = float(x.sum())
        return 2.0 * c * (n - c) / (n * (n - 1))
    order = np.sort(x)
    # pairs that are equal (within atol) come from runs of equal sorted values
    same = 0
    start = 0
    for i in range(1, n + 1):
        if i == n or order[i] - order[start] > atol:
            m = i - start
            same += m * (m - 1) // 2
            start = i
    return 1.0 - same / (n * (n - 1) / 2)


def sample_trials(values_by_sample: Mapping[str, Sequence[float]]) -> list[SampleTrials]:
    """:class:`SampleTrials` of every sample of ``{sample_id: [value per trial]}`` (trial
    order), in the mapping's order. Raises ``ValueError`` for a sample with no trial or a
    non-finite value."""
    out = []
    for sid, vals in values_by_sample.items():
        x = np.asarray(list(vals), dtype=float)
        if x.size == 0:
            raise ValueError(f"sample {sid!r} has no trial; drop it or score it")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"sample {sid!r} has a non-finite trial value {x.tolist()}")
        out.append(SampleTrials(str(sid), int(x.size), float(x.mean()), float(x.var(ddof=1)) if x.size > 1 else None,
                                flip_rate(x)))
    return out


def trials_by_sample(sample_ids: Sequence[str], values: Sequence[float]) -> dict[str, list[float]]:
    """Group score rows of a repeated evaluation by sample: ids ``<sample>#<trial>`` (see
    :func:`split_trial`) -> ``{sample: [value in trial order]}``, samples in first-seen order.
    Raises ``ValueError`` when ``sample_ids`` and ``values`` differ in length or a trial
    index repeats within a sample."""
    if len(sample_ids) != len(values):
        raise ValueError(f"{len(sample_ids)} sample ids and {len(values)} values: one value per score row")
    seen: dict[str, dict[int, float]] = {}
    for sid, value in zip(sample_ids, values):
        base, trial = split_trial(sid)
        slot = seen.setdefault(base, {})
        trial = 0 if trial is None else trial
        if trial in slot:
            raise ValueError(f"sample {base!r} has trial {trial} twice; one score row per (sample, trial)")
        slot[trial] = float(value)
    return {base: [v for _, v in sorted(trials.items())] for base, trials in seen.items()}


def binary_pass_k(values_by_sample: Mapping[str, Sequence[float]], ks: Sequence[int] | None = None, **bootstrap):
    """pass@k and pass^k (``metric_ops.agents.passk.pass_k_curve``) of a binary metric's
    trials ``{sample_id: [0/1 per trial]}``; ``ks`` default 1 .. the most trials. Raises
    ``ValueError`` naming the first value that is not 0 or 1 (pass@k is defined for pass /
    fail outcomes only: threshold a graded metric first)."""
    from metric_ops.agents.passk import pass_k_curve

    table = {}
    for sid, vals in values_by_sample.items():
        bad = [v for v in vals if v not in (0, 1, 0.0, 1.0, True, False)]
        if bad:
            raise ValueError(f"pass@k / pass^k need a binary metric (0 or 1 per trial); sample {sid!r} has {bad[0]!r}")
        table[str(sid)] = [bool(v) for v in vals]
    return pass_k_curve(table, ks=ks, **bootstrap)


@dataclass(frozen=True)
class HierarchicalInterval:
    """Mean of all trials and its percentile interval from :func:`hierarchical_bootstrap_ci`."""

    mean: float
    low: float
    high: float
    n_clusters: int
    n_items: int
    n_trials: int
    n_resamples: int
    method: str = "hierarchical-bootstrap-percentile"


def hierarchical_bootstrap_ci(
    values: Sequence[float], items: Sequence[str], clusters: Sequence[str] | None = None,
    confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0, wild: bool | None = None,
) -> HierarchicalInterval:
    """Percentile interval of the mean of ``values`` (one per trial row) by a three-level
    bootstrap: draw clusters with replacement, then within each drawn cluster draw its items
    with replacement, then within each drawn item draw its trials with replacement; the
    statistic is the mean over every drawn trial.

    ``items``: the sample id of each row (trials of one sample share it); ``clusters``: the
    cluster label of each row (None: every item its own cluster, a two-level bootstrap).
    Rows of one item must share one cluster. Raises ``ValueError`` for mismatched lengths,
    an item in two clusters, no rows or a confidence outside (0, 1). Cost: O(n_resamples x
    rows) in batches of index arrays (benchmarks/bench_stats.py).

    ``wild`` (default: when rows x resamples > :data:`metric_ops.stats.core.WILD_BOOTSTRAP_ABOVE`):
    the wild bootstrap at every level instead (Cameron, Gelbach & Miller, 2008, as
    :func:`metric_ops.stats.clustered.cluster_bootstrap_ci` does past the same size): each
    resample's mean is ``mean + (sum_g w_g R_g + sum_i u_i r_i + sum_ij v_ij d_ij) / N`` with
    independent Rademacher signs on the cluster residual sums R_g, the items' sums around their
    cluster's mean r_i and the trials' deviations from their item's mean d_ij: the same three
    variance components at one random bit each (method ``hierarchical-wild-bootstrap-percentile``)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("no values to bootstrap")
    if len(items) != x.size or (clusters is not None and len(clusters) != x.size):
        raise ValueError(f"values ({x.size}), items ({len(items)}) and clusters must have one entry per row")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    clusters = list(items) if clusters is None else [str(c) for c in clusters]
    item_cluster: dict[str, str] = {}
    for item, cluster in zip(items, clusters):
        if item_cluster.setdefault(str(item), cluster) != cluster:
            raise ValueError(f"item {item!r} is in clusters {item_cluster[str(item)]!r} and {cluster!r}; an item belongs to one cluster")
    # rows sorted by (cluster, item): each item a contiguous run of trials, each cluster a run of items
    order = sorted(range(x.size), key=lambda i: (clusters[i], str(items[i])))
    xs = x[order]
    item_keys = [(clusters[i], str(items[i])) for i in order]
    item_start = np.array([i for i in range(len(order)) if i == 0 or item_keys[i] != item_keys[i - 1]])
    item_size = np.diff(np.append(item_start, len(order)))
    item_cl = [item_keys[s][0] for s in item_start]
    cl_start = np.array([j for j in range(len(item_cl)) if j == 0 or item_cl[j] != item_cl[j - 1]])
    cl_size = np.diff(np.append(cl_start, len(item_cl)))
    n_cl = cl_start.size
    alpha = (1 - confidence) / 2
    if wild if wild is not None else xs.size * n_resamples > WILD_BOOTSTRAP_ABOVE:
        from metric_ops.stats.core import sign_flip_null

        mean, total = float(xs.mean()), xs.size
        item_sum = np.add.reduceat(xs, item_start)
        cl_item_start = cl_start  # clusters are runs of items
        cl_sum = np.add.reduceat(item_sum, cl_item_start)
        cl_n = np.add.reduceat(item_size, cl_item_start)
        cl_mean_of_item = np.repeat(cl_sum / cl_n, cl_size)
        levels = [cl_sum - cl_n * mean, item_sum - item_size * cl_mean_of_item, xs - np.repeat(item_sum / item_size, item_size)]
        flipped = sum(sign_flip_null(res, n_resamples, seed + i) for i, res in enumerate(levels) if np.any(res))
        means = mean - 2.0 * np.asarray(flipped, dtype=float) / total if not np.isscalar(flipped) else np.full(n_resamples, mean)
        low, high = np.quantile(means, [alpha, 1 - alpha])
        return HierarchicalInterval(mean, float(low), float(high), int(n_cl), int(item_start.size), int(x.size), n_resamples,
                                    "hierarchical-wild-bootstrap-percentile")
    rng = np.random.default_rng(seed)
    stats = np.empty(n_resamples)
    for r in range(n_resamples):
        cl = rng.integers(0, n_cl, n_cl)
        sizes = cl_size[cl]
        # items: for each drawn cluster, its size many draws among its items
        base = np.repeat(cl_start[cl], sizes)
        it = base + (rng.random(base.size) * np.repeat(sizes, sizes)).astype(np.int64)
        tsz = item_size[it]
        tbase = np.repeat(item_start[it], tsz)
        tr = tbase + (rng.random(tbase.size) * np.repeat(tsz, tsz)).astype(np.int64)
        stats[r] = xs[tr].mean()
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return HierarchicalInterval(float(x.mean()), float(low), float(high), int(n_cl), int(item_start.size), int(x.size), n_resamples)


def all_subsets_pass(trials: Sequence[bool], k: int) -> tuple[float, float]:
    """(pass@k, pass^k) of one sample by enumerating every k-subset of its trials: the share
    of subsets with at least one pass, and with every trial a pass. A reference for tests
    (exponential in k; use :func:`binary_pass_k`)."""
    subsets = list(itertools.combinations(trials, k))
    return (sum(any(s) for s in subsets) / len(subsets), sum(all(s) for s in subsets) / len(subsets))


LOWEST_SHOWN = 5
PASS_K_CI = "percentile bootstrap over samples (pass@k: Chen et al., 2021; pass^k: Yao et al., 2024)"


def trial_rows(scores, binary=None, metrics=None, n_resamples: int = 2000, seed: int = 0) -> list[dict]:
    """Comparison rows of a repeated evaluation (trial row ids ``<sample>#<trial>``), per
    (model, score name) with scored values, ``human:`` ratings left out:

    - kind ``trials``: ``mean`` = mean flip rate over the samples with at least two trials
      (None when none has), ``n_scored`` / ``n_total`` = those samples / every sample,
      ``ci_low``/``ci_high`` = the hierarchical bootstrap interval of the score's mean
      (:func:`hierarchical_bootstrap_ci`, samples as items, ``ci_method`` says so); ``detail``:
      ``k`` (most trials of a sample), ``score_mean``, ``mean_variance`` (mean per-sample trial
      variance), ``unstable`` (samples whose trials differ), ``lowest`` (up to 5 ``[sample,
      mean]`` of the lowest per-sample means; highest for a ``minimize`` score) and, for a
      binary score, ``pass_histogram`` (``{passes: samples}``) and ``fewest_passes`` (up to 5
      ``[sample, passes, trials]``, fewest first);
    - kind ``pass_k`` (binary scores only, one row per k = 1 .. k): ``mean`` = pass^k with
      its bootstrap interval, ``n_scored`` = samples with at least k trials, ``detail``:
      ``k``, ``pass_at_k`` and its interval (:func:`binary_pass_k`).

    ``scores``: a polars frame with the ``scores`` table's columns (model, metric, sample_id,
    value, status, direction, dimension); ``binary``: the 0/1 score names (default: the
    metric registry's declarations); ``metrics``: only these score names. A score declared
    binary whose values are not all 0 or 1 gets no ``pass_k`` row."""
    import polars as pl

    from metric_ops.compare.frames import declared_binary

    if scores.height == 0:
        return []
    ok = scores.filter(pl.col("value").is_not_null() & pl.col("value").is_finite() & ~pl.col("metric").str.starts_with("human:"))
    if "status" in ok.columns:
        ok = ok.filter(pl.col("status") == "scored")
    if metrics is not None:
        ok = ok.filter(pl.col("metric").is_in(list(metrics)))
    binary = declared_binary(set(ok["metric"].to_list())) if binary is None else set(binary)
    out: list[dict] = []
    for (model, metric), group in sorted(ok.group_by(["model", "metric"]), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        ids, values = group["sample_id"].to_list(), group["value"].to_list()
        by_sample = trials_by_sample(ids, values)
        per = sample_trials(by_sample)
        direction = group["direction"][0] if "direction" in group.columns else None
        dimension = group["dimension"][0] if "dimension" in group.columns else None
        k = max(s.n for s in per)
        repeated = [s for s in per if s.n >= 2]
        flips = [s.flip_rate for s in repeated]
        interval = hierarchical_bootstrap_ci(values, [split_trial(i)[0] for i in ids], n_resamples=n_resamples, seed=seed)
        lowest = sorted(per, key=lambda s: (s.mean if direction != "minimize" else -s.mean, s.sample_id))[:LOWEST_SHOWN]
        detail = {
            "k": k, "score_mean": interval.mean, "mean_variance": float(np.mean([s.variance for s in repeated])) if repeated else None,
            "unstable": sum(1 for f in flips if f), "lowest": [[s.sample_id, s.mean] for s in lowest],
            "interval": "hierarchical bootstrap: samples, then their trials (conservative; Davison & Hinkley 1997, 3.8)",
        }
        is_binary = metric in binary and all(v in (0.0, 1.0) for v in values)
        if is_binary:
            passes = {sid: (int(sum(v)), len(v)) for sid, v in by_sample.items()}
            hist: dict[str, int] = {}
            for c, _ in passes.values():
                hist[str(c)] = hist.get(str(c), 0) + 1
            detail["pass_histogram"] = dict(sorted(hist.items(), key=lambda kv: int(kv[0])))
            fewest = sorted(passes.items(), key=lambda kv: (kv[1][0], kv[1][0] / kv[1][1], kv[0]))[:LOWEST_SHOWN]
            detail["fewest_passes"] = [[sid, c, n] for sid, (c, n) in fewest]
        common = {"model": model, "metric": metric, "direction": direction, "dimension": dimension}
        out.append({**common, "kind": "trials", "n_scored": len(repeated), "n_total": len(per),
                    "mean": float(np.mean(flips)) if flips else None, "ci_low": interval.low, "ci_high": interval.high,
                    "ci_method": interval.method, "detail": detail})
        if is_binary:
            for pk in binary_pass_k(by_sample, n_resamples=n_resamples, seed=seed):
                out.append({**common, "kind": "pass_k", "n_scored": pk.n_tasks, "n_total": pk.n_tasks + pk.n_excluded,
                            "mean": pk.pass_hat_k, "ci_low": pk.pass_hat_k_ci[0], "ci_high": pk.pass_hat_k_ci[1],
                            "ci_method": PASS_K_CI,
                            "detail": {"k": pk.k, "pass_hat_k": pk.pass_hat_k, "pass_at_k": pk.pass_at_k,
                                       "pass_at_k_ci": list(pk.pass_at_k_ci), "n_excluded": pk.n_excluded}})
    return out


__all__ = ["HierarchicalInterval", "SampleTrials", "TRIAL_SEPARATOR", "all_subsets_pass", "binary_pass_k", "expand_trials", "flip_rate",
           "hierarchical_bootstrap_ci", "sample_trials", "split_trial", "trial_id", "trial_rows", "trials_by_sample"]
