"""Judged metrics: G-Eval, a jury of judges, and the RAG Triad (faithfulness with a
hallucination score, answer relevance, context relevance).

Every metric here takes a ``judge`` parameter (a model spec string such as
``api:gpt-4o-mini@https://api.openai.com/v1`` or ``hf:/models/judge``, or a
:class:`~metric_ops.judged.judging.Judge` object); its locality is its judge's (a remote API
makes the metric ``external``). Prompts are the versioned files in
``metric_ops/judged/prompts``; their hashes, the judge, the decoding settings and the metric
version form the signature. Judge calls go through :class:`~metric_ops.judged.judging.JudgeCaller`
(cache, bounded re-asks on unparseable replies).

``detail`` keys (the report renders exactly these): ``reasoning`` (str), ``claims``
(list of ``{claim, verdict, evidence, sentence, sentence_text}``), ``context_sentences``
(list of ``{sentence, relevant, passage}``), ``jurors`` (list of ``{judge, score,
reasoning, ...}``), ``agreement`` (float), ``raw_reply`` on errors.
"""

from __future__ import annotations

import statistics
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

from metric_ops.base import Direction, Sample, Score, check_lengths
from metric_ops.errors import BudgetExhausted, CallDeferred
from metric_ops.judged.judging import JudgeCaller, active_cache, error_score_detail, resolve_judge
from metric_ops.judged.replies import (
    JudgeParseError, JudgeReply, extract_json, parse_scale_score, probability_weighted_score, require_list,
)

from metric_ops.judged.base import JudgedMetric, _numbered


# --------------------------------------------------------------------------- G-Eval

DEFAULT_CRITERION = {
    "name": "overall quality",
    "description": "The response answers the user input correctly, completely and clearly, without errors or irrelevant content.",
    "weight": 1.0,
}


def _normalise_criteria(criteria: Any) -> list[dict[str, Any]]:
    if criteria is None:
        criteria = [DEFAULT_CRITERION]
    if isinstance(criteria, Mapping):
        criteria = [{"name": k, **(v if isinstance(v, Mapping) else {"description": str(v)})} for k, v in criteria.items()]
    out = []
    for c in criteria:
        if isinstance(c, str):
            c = {"name": c, "description": ""}
        if not isinstance(c, Mapping) or not c.get("name"):
            raise ValueError(f"a G-Eval criterion needs a name (and a description, optional weight), got {c!r}")
        weight = float(c.get("weight", 1.0))
        if not weight > 0:
            raise ValueError(f"criterion {c['name']!r}: weight must be > 0, got {weight}")
        out.append({"name": str(c["name"]), "description": str(c.get("description", "")), "weight": weight,
                    "steps": list(c.get("steps") or [])})
    if not out:
        raise ValueError("G-Eval needs at least one criterion")
    return out


def _scale(scale: Any) -> tuple[int, int]:
    lo, hi = (int(v) for v in scale)
    if hi <= lo:
        raise ValueError(f"scale must be [min, max] with max > min, got {scale!r}")
    return lo, hi


def rate(caller: JudgeCaller, template: Any, criterion: Mapping[str, Any], steps: Sequence[str], scale: tuple[int, int],
         sample: Sample, output: str, salt: str = "", weighting: bool = True) -> dict[str, Any]:
    """One G-Eval rating of ``output`` on ``criterion``: returns ``{score (normalised
    [0, 1]), raw_score, parsed_score, reasoning, weighting, probabilities}``. With
    log-probabilities the raw score is G-Eval's probability-weighted score; otherwise the
    parsed form-filled score. Raises :class:`JudgeParseError` for an unreadable reply."""
    lo, hi = scale
    extra = ""
    if sample.references:
        extra += "Reference answer:\n" + "\n".join(sample.references) + "\n\n"
    if sample.context:
        extra += "Context:\n" + "\n\n".join(sample.context) + "\n\n"
    messages = template.render(
        criterion_name=criterion["name"], criterion_description=criterion["description"], scale_min=lo, scale_max=hi,
        steps=_numbered(steps), extra=extra, input=sample.input, output=output,
    )
    call = caller.ask(messages, lambda r: parse_scale_score(r.text, lo, hi), sample.sample_id, salt)
    parsed = call.value
    raw, how, probs = parsed.raw, "none: form-filled score", {}
    if weighting:
        weighted, probs, how = probability_weighted_score(call.reply.logprobs, parsed.offset, call.reply.text, lo, hi)
        if weighted is not None:
            raw = weighted
    return {
        "score": (raw - lo) / (hi - lo),
        "raw_score": raw,
        "parsed_score": parsed.raw,
        "reasoning": parsed.reasoning,
        "weighting": how,
        "probabilities": probs,
    }


class GEval(JudgedMetric):
    """G-Eval (Liu et al., 2023, "G-Eval: NLG Evaluation using GPT-4 with Better Human
    Alignment"): a rubric of criteria (name, description, weight) on an integer scale,
    chain-of-thought evaluation steps (given per criterion, or written once by the judge
    from the criterion: auto-CoT), and a form-filled score per criterion.

    Where the judge returns log-probabilities, each criterion's score is the
    probability-weighted ``sum_s s * p(s)`` read at the score token (duplicate tokens such
    as "4" and " 4" summed; see :func:`~metric_ops.judged.replies.probability_weighted_score`).
    Each criterion is normalised ``(s - min) / (max - min)`` to [0, 1]; the value is the
    weight-averaged normalised score. Requires input and output; one unreadable criterion
    makes the sample an ``error`` (raw reply kept). Parameters: ``criteria`` (list of
    ``{name, description, weight, steps?}``, default one "overall quality" criterion),
    ``scale`` ([1, 5]), ``top_logprobs`` (10), plus :class:`JudgedMetric`'s.
    """

    name = "g_eval"
    aliases = ("geval",)
    direction = Direction.MAXIMIZE
    dimension = "process"
    version = "1"
    requires = ("input", "output")
    prompts = ("g_eval", "g_eval_steps")
    logprobs = True

    def __init__(self, judge: Any = None, criteria: Any = None, scale: Sequence[int] = (1, 5), **kwargs: Any) -> None:
        self.criteria = _normalise_criteria(criteria)
        self.scale = _scale(scale)
        super().__init__(judge=judge, criteria=self.criteria, scale=list(self.scale), **kwargs)
        self.steps: dict[str, list[str]] = {}

    def prepare(self, caller: JudgeCaller) -> None:
        for c in self.criteria:
            if c["name"] in self.steps:
                continue
            if c["steps"]:
                self.steps[c["name"]] = list(c["steps"])
                continue
            messages = self.templates["g_eval_steps"].render(
                criterion_name=c["name"], criterion_description=c["description"], scale_min=self.scale[0], scale_max=self.scale[1]
            )

            def parse(reply: JudgeReply) -> list[str]:
                obj, _ = extract_json(reply.text)
                steps = [str(s).strip() for s in require_list(obj, "steps") if str(s).strip()]
                if not steps:
                    raise JudgeParseError("reply JSON 'steps' is empty")
                return steps

            try:
                self.steps[c["name"]] = caller.ask(messages, parse, None, "steps").value
            except JudgeParseError as exc:
                self.steps[c["name"]] = []
                self.steps_error = exc

    def score_one(self, caller: JudgeCaller, sample: Sample, output: str) -> dict[str, Score]:
        missing = [c["name"] for c in self.criteria if not self.steps.get(c["name"])]
        if missing:
            exc = getattr(self, "steps_error", None)
            raise JudgeParseError(f"the judge wrote no readable evaluation steps for {', '.join(missing)}: {exc}",
                                  getattr(exc, "raw_replies", []))
        rated = []
        for c in self.criteria:
            r = rate(caller, self.templates["g_eval"], c, self.steps[c["name"]], self.scale, sample, output)
            rated.append({"criterion": c["name"], "weight": c["weight"], **r})
        total = sum(r["weight"] for r in rated)
        value = sum(r["weight"] * r["score"] for r in rated) / total
        reasoning = "\n\n".join(f"[{r['criterion']}] {r['reasoning']}" for r in rated) if len(rated) > 1 else rated[0]["reasoning"]
        detail = {"reasoning": reasoning, "criteria": rated, "scale": list(self.scale),
                  "evaluation_steps": {c["name"]: self.steps[c["name"]] for c in self.criteria}}
        return {self.name: Score(value, detail=detail)}


# --------------------------------------------------------------------------- Jury

CONSENSUS = ("mean", "median", "trimmed_mean", "weighted")


def consensus_value(scores: Sequence[float], method: str, weights: Sequence[float] | None = None, trim: float = 0.2) -> float:
    """Consensus of juror scores: ``mean``, ``median``, ``trimmed_mean`` (scipy's
    ``trim_mean`` cutting ``trim`` of each tail) or ``weighted`` (weights per juror,
    normalised). Raises ``ValueError`` for an unknown method or mismatched weights."""
    if method == "mean":
        return statistics.fmean(scores)
    if method == "median":
        return statistics.median(scores)
    if method == "trimmed_mean":
        from scipy.stats import trim_mean

        return float(trim_mean(list(scores), trim))
    if method == "weighted":
        if not weights or len(weights) != len(scores):
            raise ValueError(f"weighted consensus needs one weight per juror ({len(scores)}), got {weights!r}")
        return sum(w * s for w, s in zip(weights, scores)) / sum(weights)
    raise ValueError(f"unknown consensus {method!r}; use one of {', '.join(CONSENSUS)}")


def rwg_agreement(raw_scores: Sequence[float], scale: tuple[int, int]) -> float | None:
    """Within-group agreement r_wg (James, Demaree & Wolf, 1984): ``1 - s^2 / sigma_EU^2``
    with ``s^2`` the jurors' sample variance on the raw scale and ``sigma_EU^2 = (A^2 - 1) / 12``
    the variance of a uniform (no agreement) null over the scale's A points; truncated at 0.
    1 = every juror gave the same score. ``None`` with fewer than two jurors."""
    if len(raw_scores) < 2:
        return None
    a = scale[1] - scale[0] + 1
    null = (a * a - 1) / 12.0
    return max(0.0, 1.0 - statistics.variance(raw_scores) / null)


def outlier_jurors(scores: Sequence[float], threshold: float = 3.5) -> list[int]:
    """Indices of outlier jurors by the modified z-score rule (Iglewicz & Hoaglin, 1993):
    ``M_i = 0.6745 (x_i - median) / MAD``, outlier when ``|M_i| > threshold`` (3.5). When
    MAD = 0 (a majority agrees exactly), every juror off the median is an outlier. Needs at
    least three jurors (with two there is no majority to be an outlier from)."""
    if len(scores) < 3:
        return []
    med = statistics.median(scores)
    mad = statistics.median(abs(s - med) for s in scores)
    if mad == 0:
        return [i for i, s in enumerate(scores) if abs(s - med) > 1e-12]
    return [i for i, s in enumerate(scores) if abs(0.6745 * (s - med) / mad) > threshold]


def split_tie(scores: Sequence[float], consensus: float) -> bool:
    """True when the jury is split evenly around its consensus with no juror on it (e.g.
    votes 1, 1, 5, 5 or 2, 4): the consensus is a compromise no juror voted for, so it is
    flagged instead of being silently presented as agreement."""
    above = sum(1 for s in scores if s > consensus + 1e-12)
    below = sum(1 for s in scores if s < consensus - 1e-12)
    return above == below > 0 and above + below == len(scores)


class Jury(JudgedMetric):
    """A jury of judges (Verga et al., 2024, "Replacing Judges with Juries: Evaluating LLM
    Generations with a Panel of Diverse Models"): n judges, possibly on different backends,
    rate the same item independently with the G-Eval prompt (one criterion, integer
    scale, fixed evaluation steps), and the verdicts are pooled.

    Value: the consensus (``mean`` | ``median`` | ``trimmed_mean`` | ``weighted``) of the
    jurors' normalised scores in [0, 1]. ``detail``: ``jurors`` (each juror's judge,
    score, raw score and reasoning, or its error and raw reply), ``consensus``,
    ``sigma`` (sample standard deviation of normalised scores), ``agreement`` (r_wg, see
    :func:`rwg_agreement`), ``outliers`` (juror indices, :func:`outlier_jurors`), ``tie``
    (:func:`split_tie`). Two jurors with the same model are two votes (each juror has its
    own cache slot). When fewer than ``min_jurors`` (default: all) jurors give a readable
    score the sample is an ``error``, with the readable votes kept.

    Parameters: ``judges`` (list of specs or Judge objects, >= 1), ``consensus``
    ("mean"), ``weights`` (for ``weighted``), ``trim`` (0.2), ``criterion`` (name and
    description), ``steps``, ``scale`` ([1, 5]), ``min_jurors``, plus decoding settings.
    """

    name = "jury"
    direction = Direction.MAXIMIZE
    dimension = "process"
    version = "1"
    requires = ("input", "output")
    prompts = ("g_eval",)
    logprobs = True

    DEFAULT_STEPS = (
        "Read the user input and identify what a good response must contain.",
        "Read the response and check it against the criterion, noting errors, omissions and irrelevant content.",
        "Decide the score on the scale, using the extremes only for clear cases.",
    )

    def __init__(self, judges: Sequence[Any] = (), consensus: str = "mean", weights: Sequence[float] | None = None,
                 trim: float = 0.2, criterion: Any = None, steps: Sequence[str] | None = None,
                 scale: Sequence[int] = (1, 5), min_jurors: int | None = None, **kwargs: Any) -> None:
        if kwargs.get("judge") is not None and not judges:
            judges = [kwargs.pop("judge")]
        kwargs.pop("judge", None)
        if not judges:
            raise ValueError("a jury needs judges: metric_params: {jury: {judges: ['api:m1@URL', 'hf:/models/j2']}}")
        if consensus not in CONSENSUS:
            raise ValueError(f"unknown consensus {consensus!r}; use one of {', '.join(CONSENSUS)}")
        if consensus == "weighted" and (not weights or len(weights) != len(judges)):
            raise ValueError(f"consensus 'weighted' needs weights: one per judge ({len(judges)})")
        self.jurors = [resolve_judge(j) for j in judges]
        self.criterion = _normalise_criteria([criterion] if criterion else None)[0]
        self.jury_steps = list(steps or self.DEFAULT_STEPS)
        self.scale = _scale(scale)
        self.method = consensus
        self.weights = [float(w) for w in weights] if weights else None
        self.trim = float(trim)
        self.min_jurors = len(self.jurors) if min_jurors is None else int(min_jurors)
        super().__init__(
            judge=self.jurors[0], consensus=consensus, weights=self.weights, trim=self.trim, criterion=self.criterion,
            steps=self.jury_steps, scale=list(self.scale), min_jurors=self.min_jurors, **kwargs,
        )
        self.locality = "external" if any(j.locality == "external" for j in self.jurors) else "local"  # type: ignore[misc]

    def judge_field(self) -> str:
        """``judges:<identity>,<identity>,...``: every juror, in order."""
        return "judges:" + ",".join(j.identity for j in self.jurors)

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        cache = active_cache()
        self.callers = [JudgeCaller(j, self.decoding, self.name, self.max_attempts, cache) for j in self.jurors]
        self.last_caller = self.callers[0]
        with ThreadPoolExecutor(max_workers=self.workers()) as pool:
            return list(pool.map(lambda pair: self._safe_one(None, *pair), zip(samples, outputs)))  # type: ignore[arg-type]

    def score_one(self, caller: Any, sample: Sample, output: str) -> dict[str, Score]:
        jurors: list[dict[str, Any]] = []
        for i, (judge, jcaller) in enumerate(zip(self.jurors, self.callers)):
            entry: dict[str, Any] = {"juror": i, "judge": judge.identity}
            try:
                r = rate(jcaller, self.templates["g_eval"], self.criterion, self.jury_steps, self.scale, sample, output,
                         salt=f"juror{i}")
                entry.update(score=r["score"], raw_score=r["raw_score"], reasoning=r["reasoning"], weighting=r["weighting"])
            except (BudgetExhausted, CallDeferred):  # not sent: the sample gets no score (JudgedMetric._safe_one)
                raise
            except Exception as exc:  # noqa: BLE001 - a juror's failure is recorded, not fatal
                entry.update(score=None, error=f"{type(exc).__name__}: {exc}", **error_score_detail(exc))
            jurors.append(entry)
        ok = [j for j in jurors if j["score"] is not None]
        detail: dict[str, Any] = {"jurors": jurors, "consensus": self.method, "n_jurors": len(jurors), "n_valid": len(ok)}
        if len(ok) < max(1, self.min_jurors):
            bad = [j for j in jurors if j["score"] is None]
            if bad and "raw_reply" in bad[0]:
                detail["raw_reply"] = bad[0]["raw_reply"]
            return {self.name: Score.error(f"only {len(ok)} of {len(jurors)} jurors gave a readable score "
                                           f"(min_jurors {self.min_jurors}): {bad[0].get('error') if bad else ''}", **detail)}
        scores = [j["score"] for j in ok]
        weights = [self.weights[j["juror"]] for j in ok] if self.weights else None
        value = consensus_value(scores, self.method, weights, self.trim)
        outliers = [ok[i]["juror"] for i in outlier_jurors(scores)]
        tie = split_tie(scores, value)
        detail.update(
            sigma=statistics.stdev(scores) if len(scores) > 1 else None,
            agreement=rwg_agreement([j["raw_score"] for j in ok], self.scale),
            outliers=outliers,
            outlier_rule="modified z-score |0.6745 (x - median) / MAD| > 3.5 (MAD = 0: any juror off the median); n >= 3",
            tie=tie,
            mean=statistics.fmean(scores),
            median=statistics.median(scores),
            reasoning=" | ".join(f"juror {j['juror']} ({j['judge']}): {j['score']:.3f}" for j in ok)
            + (" -- split jury: tie around the consensus" if tie else ""),
        )
        return {self.name: Score(value, detail=detail)}
