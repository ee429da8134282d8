"""Token-confidence metrics (epistemic transparency): what the model was sure of.

Input: ``sample.metadata["token_logprobs"]``, a list with one dict per generated token
``{"token": str, "logprob": float (natural log), "char_start": int, "char_end": int}``
in generation order. The ``scores`` asset fills it from the ``token_logprobs`` Delta
table for metrics that declare ``uses_token_logprobs = True`` (when a metric is told to
score an annotation, only the tokens overlapping the annotation's span are passed). A
sample without that key (the backend returned no log-probabilities, or
``generation.logprobs`` was off) is ``unscored``; so is a sample with no generated
tokens. No token's value is ever dropped:

- a logprob of ``-inf`` (probability 0) is a value: min_token_probability 0, the token is
  low-confidence, mean_token_logprob ``-inf`` and perplexity ``+inf``, flagged in
  ``detail["zero_probability_positions"]`` (``detail["infinite"]`` true);
- a token whose logprob is null (not recorded) makes the sample ``unscored``, the
  positions named in ``detail["missing_positions"]`` (a metric over the text needs every
  token);
- NaN, ``+inf`` or a positive logprob (beyond 1e-6 of float rounding, which is clamped
  to 0) is not a log-probability: the sample is an ``error`` naming the position.

Five-tier confidence label per token, by the token's probability p = exp(logprob)
(equal-width tiers over [0, 1]; any p < 0.4 falls in the two lowest tiers)::

    very_low   p < 0.2
    low        0.2 <= p < 0.4
    medium     0.4 <= p < 0.6
    high       0.6 <= p < 0.8
    very_high  p >= 0.8

References: perplexity as exp of the mean negative log-likelihood (Jelinek et al.,
1977); token-probability confidence and low-probability tokens as hallucination signals
(Manakul et al., 2023, SelfCheckGPT's Avg(-log p) and Max(-log p); Varshney et al.,
2023); LLM-FACETS' token log-probability confidence.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths
from metric_ops.errors import FacetlakeError

TIERS: tuple[tuple[str, float], ...] = (
    ("very_low", 0.2),
    ("low", 0.4),
    ("medium", 0.6),
    ("high", 0.8),
    ("very_high", float("inf")),
)
TIER_NAMES: tuple[str, ...] = tuple(name for name, _ in TIERS)
LOW_CONFIDENCE_P = 0.4


def confidence_tier(probability: float) -> str:
    """The five-tier label of a token probability in [0, 1] (see module docstring).

    Raises ``ValueError`` for a probability outside [0, 1] or NaN.
    """
    if not (0.0 <= probability <= 1.0):
        raise ValueError(f"probability must be in [0, 1], got {probability!r}")
    for name, upper in TIERS:
        if probability < upper:
            return name
    return TIER_NAMES[-1]  # pragma: no cover - p <= 1 < inf


LOGPROB_ATOL = 1e-6  # a positive logprob up to this is float rounding of 0


class LogprobError(FacetlakeError, ValueError):
    """A token's recorded logprob is not a log-probability (NaN, +inf, positive)."""


def token_logprobs_of(sample: Sample) -> list[float | None] | None:
    """Every generated token's log-probability of ``sample``, in generation order (None
    when no log-probabilities were recorded at all). A token with no recorded logprob is
    ``None`` in the list; ``-inf`` (probability 0) is kept. Never drops a token."""
    records = sample.metadata.get("token_logprobs")
    if records is None:
        return None
    values: list[float | None] = []
    for r in records:
        lp = r.get("logprob") if isinstance(r, Mapping) else r
        values.append(None if lp is None else float(lp))
    return values


def checked_logprobs(values: Sequence[float | None]) -> tuple[list[float], list[int]]:
    """(logprobs, positions of missing ones) with each present value checked: ``-inf``
    and values <= 0 kept, positives up to :data:`LOGPROB_ATOL` clamped to 0. Raises
    :class:`LogprobError` for NaN, ``+inf`` or a larger positive value, naming the
    position."""
    out: list[float] = []
    missing: list[int] = []
    for i, lp in enumerate(values):
        if lp is None:
            missing.append(i)
            continue
        if math.isnan(lp) or lp == math.inf or lp > LOGPROB_ATOL:
            raise LogprobError(f"token at position {i} has logprob {lp!r}, which is not a log-probability (must be <= 0 or -inf)")
        out.append(min(0.0, lp))
    return out, missing


class _TokenConfidence(Metric):
    abstract = True
    dimension = "epistemic"
    value_range = (0.0, 1.0)
    requires = ("output", "metadata")
    uses_token_logprobs = True
    version = "1"

    def value(self, logprobs: list[float]) -> tuple[float, dict[str, Any]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        results = []
        for sample in samples:
            results.append({self.name: self._score(token_logprobs_of(sample))})
        return results

    def _score(self, raw: list[float | None] | None) -> Score:
        if raw is None:
            return Score.unscored("no token log-probabilities recorded (backend returned none, or generation.logprobs is off)")
        if not raw:
            return Score.unscored("no generated tokens", n_tokens=0)
        try:
            values, missing = checked_logprobs(raw)
        except LogprobError as exc:
            return Score.error(str(exc), n_tokens=len(raw))
        if missing:
            shown = missing[:20]
            return Score.unscored(
                f"{len(missing)} of {len(raw)} generated tokens have no recorded log-probability "
                f"(positions {shown}{' ...' if len(missing) > 20 else ''}); the metric needs every token",
                n_tokens=len(raw), missing_positions=shown, n_missing=len(missing),
            )
        value, detail = self.value(values)
        zero = [i for i, lp in enumerate(values) if lp == -math.inf]
        if zero:
            detail = {**detail, "zero_probability_positions": zero[:20], "n_zero_probability": len(zero)}
        if math.isinf(value):
            detail = {**detail, "infinite": True}
        return Score(value, detail={"n_tokens": len(values), **detail})


class MeanTokenLogprob(_TokenConfidence):
    """Mean natural-log probability of the generated tokens; range (-inf, 0], higher = surer."""

    name = "mean_token_logprob"
    direction = Direction.MAXIMIZE
    value_range = (float("-inf"), 0.0)

    def value(self, logprobs: list[float]) -> tuple[float, dict[str, Any]]:
        return math.fsum(logprobs) / len(logprobs), {}


class Perplexity(_TokenConfidence):
    """exp(-mean token logprob) of the generated text under the generating model; range [1, inf), lower = surer."""

    name = "perplexity"
    direction = Direction.MINIMIZE
    value_range = (1.0, float("inf"))

    def value(self, logprobs: list[float]) -> tuple[float, dict[str, Any]]:
        mean = math.fsum(logprobs) / len(logprobs)
        detail: dict[str, Any] = {"mean_logprob": mean if math.isfinite(mean) else "-inf"}
        try:
            return math.exp(-mean), detail
        except OverflowError:  # exp(-mean) beyond the largest float: +inf, flagged, never a capped number
            return math.inf, {**detail, "overflow": True}


class MinTokenProbability(_TokenConfidence):
    """Probability of the least likely generated token; range [0, 1], higher = surer."""

    name = "min_token_probability"
    direction = Direction.MAXIMIZE

    def value(self, logprobs: list[float]) -> tuple[float, dict[str, Any]]:
        i = min(range(len(logprobs)), key=logprobs.__getitem__)
        return math.exp(logprobs[i]), {"position": i}


class LowConfidenceShare(_TokenConfidence):
    """Share of generated tokens with probability below ``threshold`` (default 0.4, the two
    lowest tiers); range [0, 1], lower = surer."""

    name = "low_confidence_share"
    direction = Direction.MINIMIZE

    def __init__(self, threshold: float = LOW_CONFIDENCE_P) -> None:
        if not 0.0 < float(threshold) <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
        super().__init__(threshold=float(threshold))

    def value(self, logprobs: list[float]) -> tuple[float, dict[str, Any]]:
        low = sum(1 for lp in logprobs if math.exp(lp) < self.params["threshold"])
        return low / len(logprobs), {"n_low": low}


class ConfidenceTiers(_TokenConfidence):
    """Five-tier confidence label per token (module docstring). Value: share of tokens in
    the two highest tiers (p >= 0.6), range [0, 1], higher = surer; ``detail`` holds the
    per-tier counts and the label of every token (``tiers``, in generation order)."""

    name = "confidence_tiers"
    direction = Direction.MAXIMIZE

    def value(self, logprobs: list[float]) -> tuple[float, dict[str, Any]]:
        labels = [confidence_tier(math.exp(lp)) for lp in logprobs]
        counts = {name: labels.count(name) for name in TIER_NAMES}
        return (counts["high"] + counts["very_high"]) / len(labels), {
            "counts": counts, "tiers": labels, "thresholds": {name: upper for name, upper in TIERS[:-1]},
        }
