"""Statistics for comparing models and meta-evaluating metrics (pure: numpy + scipy).

Every resampling method here runs as numpy array operations over batches of resamples
(never one Python call per resample), so a test over 100k paired samples with 10,000
resamples costs well under a second (``benchmarks/bench_analysis.py`` measures it).

What each function computes and where it comes from:

- :func:`bootstrap_ci`: percentile bootstrap interval of a statistic (Efron & Tibshirani,
  1993, ch. 13). Same resampling stream and quantile rule as
  ``scipy.stats.bootstrap(method="percentile")`` at the same seed (indices drawn with
  ``Generator.integers(0, n, (B, n))``, linear-interpolated quantiles), in batches; for
  the mean when values x resamples exceed :data:`WILD_BOOTSTRAP_ABOVE`, the wild
  bootstrap with Rademacher weights (same mean and variance of the resampled means,
  one random bit per value).
- :func:`wilson_interval`: Wilson score interval of a binomial proportion (Wilson,
  1927), in closed form (equal to ``scipy.stats.binomtest(...).proportion_ci(
  method="wilson")``); :func:`wilson_bounds` does arrays of counts at once.
- :func:`mean_interval`: the 95% interval the comparisons table reports: Wilson for a
  score *declared* 0/1 (``Metric.binary``), percentile bootstrap of the mean otherwise.
  The choice comes from the declaration, never from the values a run produced.
- :func:`paired_permutation_test`: the paired (sign-flip) permutation test of the mean
  difference (Fisher, 1935; Good, 2005), p-values defined as
  ``scipy.stats.permutation_test(permutation_type="samples")`` defines them. Exact
  (every sign pattern enumerated, by meet in the middle) when at most
  :data:`EXACT_MAX_PAIRS` differences are non-zero or ``2**m <= n_resamples``; otherwise
  Monte Carlo over random sign patterns drawn as raw random bits and summed through a
  256-entry table per group of 8 differences.
- :func:`mcnemar_exact`: exact McNemar test for paired 0/1 outcomes (McNemar, 1947): a
  two-sided binomial test on the discordant pairs, via ``scipy.stats.binomtest``.
- :func:`holm`: Holm's step-down adjustment of p-values (Holm, 1979).
- :func:`effect_dz` / :func:`cohens_dz` / :func:`cohens_g`: paired effect sizes (Cohen,
  1988): mean difference over the standard deviation of the differences; discordant
  proportion minus one half (signed).
- :func:`correlation`: Pearson r, Spearman rho and Kendall tau-b with their p-values,
  via ``scipy.stats.pearsonr`` / ``spearmanr`` / ``kendalltau``.
- Corpus-level metrics (corpus BLEU, chrF, idf BERTScore): :func:`corpus_bootstrap`,
  :func:`paired_bootstrap_corpus` and :func:`approximate_randomization` resample the
  per-segment sufficient statistics and recompute the corpus score of every resample,
  as sacrebleu's ``significance._bootstrap_resample`` / ``_paired_bs_test`` /
  ``_paired_ar_test`` do (Koehn, 2004; Riezler & Maxwell, 2005), with the same random
  streams at the same seed.

Conventions: inputs are 1-D sequences of finite floats (NaN/None are the caller's to
drop: every function raises :class:`StatsError` on a non-finite value rather than
silently skipping it). A statistic that is undefined for the data (fewer than two
values, a constant vector for a correlation, zero variance of differences) is ``None``
with the reason in ``note``, never a zero. "Zero" and "constant" are judged with a
tolerance relative to the data's scale (:data:`RTOL`): a spread below ``RTOL`` times the
largest magnitude involved is float residue (e.g. ``0.3 - (0.1 + 0.2)``), not signal.

The code lives in :mod:`metric_ops.stats.core` (types, tolerance, bootstrap, Wilson),
:mod:`metric_ops.stats.significance` (paired tests, effect sizes, correlations) and
:mod:`metric_ops.stats.corpus` (corpus-level resampling) and :mod:`metric_ops.stats.clustered`
(cluster-robust errors, ICC, design effect, clustered tests, detectable effects, tie
groups); this module re-exports them.
"""

from __future__ import annotations

from metric_ops.stats.core import (
    BOOTSTRAP_RESAMPLING,
    CONFIDENCE,
    Correlation,
    DEFAULT_PERMUTATIONS,
    DEFAULT_RESAMPLES,
    EXACT_MAX_PAIRS,
    Effect,
    Interval,
    RTOL,
    StatsError,
    TestResult,
    WILD_BOOTSTRAP_ABOVE,
    bootstrap_ci,
    bootstrap_distribution,
    bootstrap_resampling,
    clean_differences,
    data_scale,
    is_binary,
    is_constant,
    mean_interval,
    negligible,
    sign_flip_null,
    wilson_bounds,
    wilson_interval,
)
from metric_ops.stats.significance import (  # noqa: F401  (re-exported: the public API of metric_ops.stats)
    CORRELATION_METHODS,
    cohens_dz,
    cohens_g,
    correlation,
    effect_dz,
    holm,
    mcnemar_exact,
    paired_effect_size,
    paired_permutation_test,
    paired_test,
)
from metric_ops.stats.corr import kendall_tau_b, pearson, rank_average, spearman
from metric_ops.stats.corpus import (
    Aggregate,
    approximate_randomization,
    corpus_bootstrap,
    corpus_interval,
    paired_bootstrap_corpus,
)
from metric_ops.stats.clustered import (
    POWER,
    ClusterSummary,
    clopper_pearson_interval,
    cluster_bootstrap_ci,
    cluster_robust_se,
    cluster_summary,
    clustered_paired_test,
    design_effect,
    icc_anova,
    mde_two_proportions,
    min_detectable_effect,
    tie_groups,
)

__all__ = [
    "POWER",
    "ClusterSummary",
    "clopper_pearson_interval",
    "cluster_bootstrap_ci",
    "cluster_robust_se",
    "cluster_summary",
    "clustered_paired_test",
    "design_effect",
    "icc_anova",
    "mde_two_proportions",
    "min_detectable_effect",
    "tie_groups",
    "CONFIDENCE",
    "CORRELATION_METHODS",
    "Correlation",
    "Effect",
    "Interval",
    "StatsError",
    "TestResult",
    "approximate_randomization",
    "bootstrap_ci",
    "bootstrap_distribution",
    "bootstrap_resampling",
    "clean_differences",
    "cohens_dz",
    "cohens_g",
    "corpus_bootstrap",
    "corpus_interval",
    "correlation",
    "data_scale",
    "effect_dz",
    "holm",
    "is_binary",
    "is_constant",
    "kendall_tau_b",
    "mcnemar_exact",
    "mean_interval",
    "negligible",
    "paired_bootstrap_corpus",
    "paired_effect_size",
    "paired_permutation_test",
    "paired_test",
    "pearson",
    "rank_average",
    "sign_flip_null",
    "spearman",
    "wilson_bounds",
    "wilson_interval",
]
