"""Token-confidence metrics (epistemic transparency): what the model was sure of.

Input: ``sample.metadata["token_logprobs"]``, a list with one dict per generated token
``{"token": str, "logprob": float (natural log), "char_start": int, "char_end": int}``
in generation order. The ``scores`` asset fills it from the ``token_logprobs`` Delta
table for metrics that declare ``uses_token_logprobs = True`` (when a metric is told to
score an annotation, only the tokens overlapping the annotation's span are passed). A
sample without that key (the backend returned no log-probabilities, or
``generation.logprobs`` was off) is ``unscored``; so is a sample with no generated
tokens. Tokens whose logprob is null are ignored.

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


def token_logprobs_of(sample: Sample) -> list[float] | None:
    """The finite token log-probabilities of ``sample`` (None when none were recorded)."""
    records = sample.metadata.get("token_logprobs")
    if records is None:
        return None
    values = []
    for r in records:
        lp = r.get("logprob") if isinstance(r, Mapping) else r
        if lp is not None and math.isfinite(float(lp)):
            values.append(min(0.0, float(lp)))
    return values


class _TokenConfidence(Metric):
    abstract = True
    dimension = "epistemic"
    requires = ("output", "metadata")
    uses_token_logprobs = True
    version = "1"

    def value(self, logprobs: list[float]) -> tuple[float, dict[str, Any]]:  # pragma: no cover - abstract
        raise NotImplementedError

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        results = []
        for sample in samples:
            values = token_logprobs_of(sample)
            if values is None:
                score = Score.unscored("no token log-probabilities recorded (backend returned none, or generation.logprobs is off)")
            elif not values:
                score = Score.unscored("no generated tokens with a log-probability")
            else:
                value, detail = self.value(values)
                score = Score(value, detail={"n_tokens": len(values), **detail})
            results.append({self.name: score})
        return results


class MeanTokenLogprob(_TokenConfidence):
    """Mean natural-log probability of the generated tokens; range (-inf, 0], higher = surer."""

    name = "mean_token_logprob"
    direction = Direction.MAXIMIZE
    value_range = (float("-inf"), 0.0)

    def value(self, logprobs: list[float]) -> tuple[float, dict[str, Any]]:
        return sum(logprobs) / len(logprobs), {}


class Perplexity(_TokenConfidence):
    """exp(-mean token logprob) of the generated text under the generating model; range [1, inf), lower = surer."""

    name = "perplexity"
    direction = Direction.MINIMIZE
    value_range = (1.0, float("inf"))

    def value(self, logprobs: list[float]) -> tuple[float, dict[str, Any]]:
        mean = sum(logprobs) / len(logprobs)
        return math.exp(min(-mean, 700.0)), {"mean_logprob": mean}


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
