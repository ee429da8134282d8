"""Agreement statistics (metric_ops/review/agreement.py) against their reference
implementations, on real ratings: SF-RES's three human ratings per sample (informativeness,
naturalness, overall: averages of 1-6 ratings) read as three raters, and token F1 of the real system
outputs as a judge. Tolerance 1e-12 throughout."""

from __future__ import annotations

import numpy as np
import pytest

from metric_ops.review import auroc, cohen_kappa, fleiss_kappa, krippendorff_alpha
from tests.conftest import small_spec

N = 300


@pytest.fixture(scope="module")
def ratings():
    """(raters x samples matrix of SF-RES ratings, token F1 of the system output per sample)."""
    from metric_ops.registry import get_metric
    from metric_ops.scoring.rows import score_metric
    from resources.catalog.spec import resolve

    samples = resolve(small_spec(limit=N)).samples
    matrix = np.array([[s.ratings.get(name, np.nan) for s in samples] for name in ("informativeness", "naturalness", "overall")],
                      dtype=float)
    f1 = score_metric(get_metric("token_f1"), samples, [s.metadata["system_output"] for s in samples])
    return matrix, np.array([r["token_f1"].value for r in f1], dtype=float)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_equals_sklearn(ratings, weights):
    from sklearn.metrics import cohen_kappa_score

    matrix, _ = ratings
    keep = ~(np.isnan(matrix[0]) | np.isnan(matrix[1]))
    a, b = np.rint(matrix[0]).astype(int), np.rint(matrix[1]).astype(int)  # the ratings are averages: whole points
    assert cohen_kappa(a[keep], b[keep], weights) == pytest.approx(cohen_kappa_score(a[keep], b[keep], weights=weights), abs=1e-12)
    labels = ["good" if v >= 4 else "bad" for v in a[keep]], ["good" if v >= 4 else "bad" for v in b[keep]]
    assert cohen_kappa(*labels) == pytest.approx(cohen_kappa_score(*labels), abs=1e-12)


def test_fleiss_kappa_equals_statsmodels(ratings):
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa as sm_fleiss

    matrix, _ = ratings
    complete = matrix[:, ~np.isnan(matrix).any(axis=0)].T.astype(int)  # subjects x raters
    table, _ = aggregate_raters(complete)
    assert fleiss_kappa(table) == pytest.approx(sm_fleiss(table, method="fleiss"), abs=1e-12)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_equals_the_krippendorff_package(ratings, level):
    krippendorff = pytest.importorskip("krippendorff", reason="the reference package: pip install -e '.[test]'")
    matrix, _ = ratings
    holes = matrix.copy()
    holes[0, ::7] = np.nan  # missing ratings, as reviews leave them
    holes[2, 3::11] = np.nan
    for data in (matrix, holes):
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert krippendorff_alpha(data, level) == pytest.approx(expected, abs=1e-12)


def test_auroc_equals_sklearn_with_ties(ratings):
    from sklearn.metrics import roc_auc_score

    matrix, f1 = ratings
    keep = ~(np.isnan(matrix[2]) | np.isnan(f1))
    labels = (matrix[2][keep] >= 5).astype(float)
    assert 0 < labels.sum() < len(labels)
    assert auroc(labels, f1[keep]) == pytest.approx(roc_auc_score(labels, f1[keep]), abs=1e-12)
    assert auroc(labels, np.round(f1[keep], 1)) == pytest.approx(roc_auc_score(labels, np.round(f1[keep], 1)), abs=1e-12)


def test_nothing_to_measure_is_an_error_never_a_zero():
    with pytest.raises(ValueError, match="one and the same label"):
        cohen_kappa([1, 1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match="both classes"):
        auroc([1, 1], [0.2, 0.4])
    with pytest.raises(ValueError, match="no variation"):
        krippendorff_alpha(np.array([[1.0, 1.0], [1.0, 1.0]]))
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa(np.array([[2, 0], [1, 2]]))
