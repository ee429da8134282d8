"""Inter-annotator and judge-vs-human agreement (issue 29), computed here and checked in
tests against their reference implementations on the same data:

- :func:`cohen_kappa`: two raters (Cohen 1960; weighted per Cohen 1968), equal to
  ``sklearn.metrics.cohen_kappa_score`` (same ``weights``);
- :func:`fleiss_kappa`: any number of raters, each subject rated by the same number
  (Fleiss 1971), equal to ``statsmodels.stats.inter_rater.fleiss_kappa(method="fleiss")``;
- :func:`krippendorff_alpha`: any raters, missing ratings allowed, nominal / ordinal /
  interval / ratio distances (Krippendorff 2011, "Computing Krippendorff's alpha-
  reliability"), equal to the ``krippendorff`` package's ``alpha``;
- :func:`auroc`: a judge's scores against binary human labels (Mann-Whitney U / (n1 n0),
  ties counted one half), equal to ``sklearn.metrics.roc_auc_score``.

Inputs are plain sequences or numpy arrays; every function raises ``ValueError`` when
there is nothing to measure (fewer than two paired ratings, one class only), never
returning a made-up 0.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def cohen_kappa(a: Sequence[float], b: Sequence[float], weights: str | None = None) -> float:
    """Cohen's kappa of two raters' labels on the same items (``a[i]``, ``b[i]``), in
    [-1, 1]; ``weights``: None (nominal), ``"linear"`` or ``"quadratic"`` (ordinal, on the
    sorted label values' positions). Raises ``ValueError`` for fewer than two items, unequal
    lengths, or when chance agreement is 1 (a single label everywhere)."""
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError("Cohen's kappa needs two equally long sequences of at least two labels")
    labels = np.unique(np.concatenate([x, y]))
    index = {v: i for i, v in enumerate(labels.tolist())}
    k = len(labels)
    confusion = np.zeros((k, k))
    for u, v in zip(x.tolist(), y.tolist()):
        confusion[index[u], index[v]] += 1
    expected = np.outer(confusion.sum(axis=1), confusion.sum(axis=0)) / confusion.sum()
    if weights is None:
        w = 1.0 - np.eye(k)
    elif weights in ("linear", "quadratic"):
        grid = np.abs(np.subtract.outer(np.arange(k), np.arange(k)))
        w = grid if weights == "linear" else grid ** 2
    else:
        raise ValueError(f"weights must be None, linear or quadratic, not {weights!r}")
    denominator = float((w * expected).sum())
    if denominator == 0:
        raise ValueError("Cohen's kappa is undefined: both raters used one and the same label throughout")
    return 1.0 - float((w * confusion).sum()) / denominator


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa of a subjects x categories table of rating counts (each row sums to
    the same number of raters n >= 2). Raises ``ValueError`` for unequal rows, n < 2 or a
    table where every rating falls in one category."""
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2 or table.shape[0] < 1:
        raise ValueError("Fleiss' kappa needs a subjects x categories table of counts")
    raters = table.sum(axis=1)
    if not np.all(raters == raters[0]) or raters[0] < 2:
        raise ValueError("Fleiss' kappa needs the same number (>= 2) of ratings for every subject")
    n = raters[0]
    p_category = table.sum(axis=0) / table.sum()
    p_subject = ((table * table).sum(axis=1) - n) / (n * (n - 1))
    chance = float((p_category * p_category).sum())
    if chance == 1:
        raise ValueError("Fleiss' kappa is undefined: every rating falls in one category")
    return (float(p_subject.mean()) - chance) / (1 - chance)


def krippendorff_alpha(data: np.ndarray, level: str = "nominal") -> float:
    """Krippendorff's alpha of a raters x units matrix (``nan`` = not rated), ``level`` one
    of nominal, ordinal, interval, ratio. Units with fewer than two ratings are left out.
    Raises ``ValueError`` when fewer than two pairable values remain or they show no
    variation (expected disagreement 0)."""
    matrix = np.asarray(data, dtype=float)
    if matrix.ndim != 2:
        raise ValueError("Krippendorff's alpha needs a raters x units matrix")
    values = np.unique(matrix[~np.isnan(matrix)])
    index = {v: i for i, v in enumerate(values.tolist())}
    k = len(values)
    coincidence = np.zeros((k, k))
    for unit in matrix.T:
        present = unit[~np.isnan(unit)]
        m = len(present)
        if m < 2:
            continue
        counts = np.zeros(k)
        for v in present.tolist():
            counts[index[v]] += 1
        coincidence += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    n_c = coincidence.sum(axis=0)
    n = n_c.sum()
    if n < 2:
        raise ValueError("Krippendorff's alpha needs at least two units rated twice")
    if level == "nominal":
        delta = 1.0 - np.eye(k)
    elif level == "interval":
        delta = np.subtract.outer(values, values) ** 2
    elif level == "ratio":
        total = np.add.outer(values, values)
        with np.errstate(divide="ignore", invalid="ignore"):
            delta = np.where(total == 0, 0.0, (np.subtract.outer(values, values) / total) ** 2)
    elif level == "ordinal":
        cumulative = np.cumsum(n_c)
        delta = np.zeros((k, k))
        for c in range(k):
            for g in range(k):
                lo, hi = min(c, g), max(c, g)
                between = cumulative[hi] - (cumulative[lo - 1] if lo > 0 else 0.0)
                delta[c, g] = (between - (n_c[c] + n_c[g]) / 2) ** 2
    else:
        raise ValueError(f"level must be nominal, ordinal, interval or ratio, not {level!r}")
    expected = float((np.outer(n_c, n_c) * delta).sum())
    if expected == 0:
        raise ValueError("Krippendorff's alpha is undefined: the ratings show no variation")
    return 1.0 - (n - 1) * float((coincidence * delta).sum()) / expected


def auroc(labels: Sequence[float], scores: Sequence[float]) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (1 = positive), in
    [0, 1], ties counted one half. Raises ``ValueError`` unless both classes occur."""
    y, s = np.asarray(labels, dtype=float), np.asarray(scores, dtype=float)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError("AUROC needs equally long label and score sequences")
    positive, negative = s[y == 1], s[y == 0]
    if len(positive) == 0 or len(negative) == 0 or len(positive) + len(negative) != len(y):
        raise ValueError("AUROC needs binary labels (0/1) with both classes present")
    from metric_ops.stats.corr import rank_average

    ranks = rank_average(np.concatenate([positive, negative]))
    u = ranks[: len(positive)].sum() - len(positive) * (len(positive) + 1) / 2
    return float(u / (len(positive) * len(negative)))
