"""The RAG Triad (TruLens' name; Es et al., 2024 for faithfulness): faithfulness with a
hallucination score, answer relevance and context relevance, judged per claim or per
sentence (see metric_ops/judged/geval_jury.py for the conventions every judged metric follows), and
:func:`auroc` for hallucination detection against labels."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from metric_ops.base import Direction, Sample, Score
from metric_ops.judged.judging import JudgeCaller
from metric_ops.judged.replies import JudgeParseError, JudgeReply, extract_json, require_list

from metric_ops.judged.base import VERDICTS, JudgedMetric, _numbered, split_sentences


# --------------------------------------------------------------------------- RAG Triad


class Faithfulness(JudgedMetric):
    """Faithfulness (Es et al., 2024, "RAGAS: Automated Evaluation of Retrieval Augmented
    Generation"): the answer is split into sentences (pysbd) and decomposed by the judge
    into atomic claims, each tied to its sentence; the judge then gives each claim a
    verdict against the context: supported, unsupported or contradicted.
    ``faithfulness = supported / claims`` in [0, 1] (maximise) and ``hallucination =
    1 - faithfulness`` (minimise).

    An answer with zero extractable claims is ``unscored`` for both (never 0, 1 or NaN).
    ``detail.claims`` lists ``{claim, verdict, evidence, sentence, sentence_text}`` so a
    report can show which sentence introduced a hallucination. A verdict list that does
    not give exactly one known verdict per claim is unreadable (``error``, raw reply kept).

    Parameters: ``knowledge``: ``"context"`` (default; requires context) or ``"judge"``
    (no context: claims are checked against the judge's own knowledge, for reference-free
    sets such as HaluEval general), plus :class:`JudgedMetric`'s.
    """

    name = "faithfulness"
    direction = Direction.MAXIMIZE
    score_directions = {"faithfulness": Direction.MAXIMIZE, "hallucination": Direction.MINIMIZE}
    dimension = "factual"
    version = "1"
    requires = ("input", "output", "context")
    prompts = ("faithfulness_claims", "faithfulness_verdicts")

    def __init__(self, judge: Any = None, knowledge: str = "context", **kwargs: Any) -> None:
        if knowledge not in ("context", "judge"):
            raise ValueError(f"knowledge must be 'context' or 'judge', got {knowledge!r}")
        if knowledge == "judge":
            self.prompts = ("faithfulness_claims", "faithfulness_verdicts_open")
            self.requires = ("input", "output")
            kwargs["knowledge"] = knowledge
        self.knowledge = knowledge
        super().__init__(judge=judge, **kwargs)

    def score_one(self, caller: JudgeCaller, sample: Sample, output: str) -> dict[str, Score]:
        sentences = split_sentences(output)
        if not sentences:
            return {n: Score.unscored("answer is empty: no claims to check", claims=[]) for n in self.emitted()}
        messages = self.templates["faithfulness_claims"].render(question=sample.input, sentences=_numbered(sentences))

        def parse_claims(reply: JudgeReply) -> list[dict[str, Any]]:
            obj, _ = extract_json(reply.text)
            claims = []
            for i, item in enumerate(require_list(obj, "claims"), start=1):
                if isinstance(item, str):
                    raise JudgeParseError(f"claim {i} has no sentence number (expected {{sentence, claim}})")
                if not isinstance(item, Mapping) or not str(item.get("claim", "")).strip():
                    raise JudgeParseError(f"claim {i} is not {{sentence, claim}}: {item!r}")
                sent = item.get("sentence")
                if isinstance(sent, bool) or not isinstance(sent, (int, float, str)) or not str(sent).strip().isdigit() \
                        or not 1 <= int(sent) <= len(sentences):
                    raise JudgeParseError(f"claim {i} names sentence {sent!r}; the answer has sentences 1-{len(sentences)}")
                claims.append({"claim": str(item["claim"]).strip(), "sentence": int(sent)})
            return claims

        step1 = caller.ask(messages, parse_claims, sample.sample_id, "claims")
        claims = step1.value
        if not claims:
            reason = "the answer has no extractable claims"
            return {n: Score.unscored(reason, claims=[], reasoning=reason) for n in self.emitted()}
        template = self.templates[self.prompts[1]]
        messages = template.render(question=sample.input, context="\n\n".join(sample.context),
                                   claims=_numbered([c["claim"] for c in claims]))

        def parse_verdicts(reply: JudgeReply) -> dict[int, dict[str, str]]:
            obj, _ = extract_json(reply.text)
            found: dict[int, dict[str, str]] = {}
            for item in require_list(obj, "verdicts"):
                if not isinstance(item, Mapping):
                    raise JudgeParseError(f"verdict entry is not an object: {item!r}")
                idx, verdict = item.get("claim"), str(item.get("verdict", "")).strip().lower()
                if isinstance(idx, bool) or not str(idx).strip().isdigit() or not 1 <= int(idx) <= len(claims):
                    raise JudgeParseError(f"verdict for unknown claim {idx!r}; claims are 1-{len(claims)}")
                if verdict not in VERDICTS:
                    raise JudgeParseError(f"verdict {item.get('verdict')!r} for claim {idx} is not one of {', '.join(VERDICTS)}")
                if int(idx) in found:
                    raise JudgeParseError(f"claim {idx} has two verdicts")
                found[int(idx)] = {"verdict": verdict, "evidence": str(item.get("evidence") or "")}
            missing = [i for i in range(1, len(claims) + 1) if i not in found]
            if missing:
                raise JudgeParseError(f"no verdict for claims {missing}")
            return found

        step2 = caller.ask(messages, parse_verdicts, sample.sample_id, "verdicts")
        rows = []
        for i, c in enumerate(claims, start=1):
            rows.append({"claim": c["claim"], "verdict": step2.value[i]["verdict"], "evidence": step2.value[i]["evidence"],
                         "sentence": c["sentence"], "sentence_text": sentences[c["sentence"] - 1]})
        supported = sum(1 for r in rows if r["verdict"] == "supported")
        value = supported / len(rows)
        bad = [r for r in rows if r["verdict"] != "supported"]
        reasoning = f"{supported} of {len(rows)} claims supported by the {'context' if self.knowledge == 'context' else 'judge'}"
        if bad:
            reasoning += "; " + "; ".join(f"sentence {r['sentence']}: {r['verdict']}: {r['claim']}" for r in bad)
        detail = {"reasoning": reasoning, "claims": rows, "n_claims": len(rows), "n_supported": supported,
                  "n_contradicted": sum(1 for r in rows if r["verdict"] == "contradicted"), "knowledge": self.knowledge}
        return {"faithfulness": Score(value, detail=detail), "hallucination": Score(1.0 - value, detail=detail)}


class AnswerRelevance(JudgedMetric):
    """Answer relevance (Es et al., 2024, RAGAS): the judge writes ``n`` questions the
    answer would answer; the value is the mean cosine similarity between each generated
    question and the real question, with the local embedding model (the packaged
    all-MiniLM-L6-v2 by default, :class:`~metric_ops.neural.bertscore.SemanticSimilarity`'s mean
    pooling). Range [-1, 1] (in practice [0, 1]). As in RAGAS, an answer the judge calls
    noncommittal ("I don't know") scores 0 (a measured irrelevance, flagged in detail).
    A reply with no questions is unreadable (``error``). Parameters: ``n`` (3),
    ``embedding_model`` (local folder), plus :class:`JudgedMetric`'s.
    """

    name = "answer_relevance"
    aliases = ("answer_relevancy",)
    direction = Direction.MAXIMIZE
    dimension = "factual"
    version = "1"
    requires = ("input", "output")
    value_range = (-1.0, 1.0)
    prompts = ("answer_relevance",)
    libraries = ("transformers", "torch")

    def __init__(self, judge: Any = None, n: int = 3, embedding_model: str | None = None, **kwargs: Any) -> None:
        from metric_ops.neural.bertscore import SemanticSimilarity

        if int(n) < 1:
            raise ValueError(f"n (questions to generate) must be >= 1, got {n}")
        self.n = int(n)
        self.embedder = SemanticSimilarity(model=embedding_model)
        super().__init__(judge=judge, n=self.n, embedding_model=self.embedder.params["model"], **kwargs)

    def score_one(self, caller: JudgeCaller, sample: Sample, output: str) -> dict[str, Score]:
        messages = self.templates["answer_relevance"].render(output=output, n=self.n)

        def parse(reply: JudgeReply) -> tuple[list[str], bool]:
            obj, _ = extract_json(reply.text)
            questions = [str(q).strip() for q in require_list(obj, "questions") if str(q).strip()]
            if not questions:
                raise JudgeParseError("reply JSON 'questions' is empty")
            noncommittal = obj.get("noncommittal", False)
            if not isinstance(noncommittal, bool):
                raise JudgeParseError(f"'noncommittal' must be true or false, got {noncommittal!r}")
            return questions[: self.n], noncommittal

        call = caller.ask(messages, parse, sample.sample_id)
        questions, noncommittal = call.value
        emb, _ = self.embedder.sentence_embeddings([sample.input, *questions])
        cosines = [float(emb[0] @ emb[i]) for i in range(1, len(questions) + 1)]
        mean = sum(cosines) / len(cosines)
        value = 0.0 if noncommittal else mean
        reasoning = f"mean cosine of {len(questions)} generated questions with the question: {mean:.3f}"
        if noncommittal:
            reasoning += "; the judge found the answer noncommittal, so the score is 0 (RAGAS)"
        detail = {"reasoning": reasoning, "generated_questions": [{"question": q, "cosine": c} for q, c in zip(questions, cosines)],
                  "noncommittal": noncommittal, "mean_cosine": mean}
        return {self.name: Score(value, detail=detail)}


class ContextRelevance(JudgedMetric):
    """Context relevance (Es et al., 2024, RAGAS; the RAG Triad of TruLens): the context
    passages are split into sentences (pysbd) and the judge classifies each as relevant
    to the question or not; the value is the relevant share in [0, 1].
    ``detail.context_sentences`` lists ``{sentence, relevant, passage}``. A reply that does
    not classify every sentence exactly once is unreadable (``error``, raw reply kept).
    """

    name = "context_relevance"
    aliases = ("context_relevancy",)
    direction = Direction.MAXIMIZE
    dimension = "factual"
    version = "1"
    requires = ("input", "context")
    prompts = ("context_relevance",)

    def __init__(self, judge: Any = None, **kwargs: Any) -> None:
        super().__init__(judge=judge, **kwargs)

    def score_one(self, caller: JudgeCaller, sample: Sample, output: str) -> dict[str, Score]:
        sentences = [(p, s) for p, passage in enumerate(sample.context, start=1) for s in split_sentences(passage)]
        if not sentences:
            return {self.name: Score.unscored("context has no sentences", context_sentences=[])}
        messages = self.templates["context_relevance"].render(question=sample.input, sentences=_numbered([s for _, s in sentences]))

        def parse(reply: JudgeReply) -> dict[int, bool]:
            obj, _ = extract_json(reply.text)
            found: dict[int, bool] = {}
            for item in require_list(obj, "sentences"):
                if not isinstance(item, Mapping):
                    raise JudgeParseError(f"sentence entry is not an object: {item!r}")
                idx, rel = item.get("index"), item.get("relevant")
                if isinstance(idx, bool) or not str(idx).strip().isdigit() or not 1 <= int(idx) <= len(sentences):
                    raise JudgeParseError(f"entry for unknown sentence {idx!r}; sentences are 1-{len(sentences)}")
                if not isinstance(rel, bool):
                    raise JudgeParseError(f"sentence {idx}: 'relevant' must be true or false, got {rel!r}")
                if int(idx) in found:
                    raise JudgeParseError(f"sentence {idx} is classified twice")
                found[int(idx)] = rel
            missing = [i for i in range(1, len(sentences) + 1) if i not in found]
            if missing:
                raise JudgeParseError(f"no classification for sentences {missing}")
            return found

        call = caller.ask(messages, parse, sample.sample_id)
        rows = [{"sentence": s, "relevant": call.value[i], "passage": p} for i, (p, s) in enumerate(sentences, start=1)]
        relevant = sum(1 for r in rows if r["relevant"])
        detail = {"reasoning": f"{relevant} of {len(rows)} context sentences relevant to the question",
                  "context_sentences": rows, "n_sentences": len(rows), "n_relevant": relevant}
        return {self.name: Score(relevant / len(rows), detail=detail)}


def auroc(labels: Sequence[int], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (1 = positive, e.g.
    hallucinated): the Mann-Whitney U of the positives over ``n_pos * n_neg`` (ties count
    one half), computed with ``scipy.stats.mannwhitneyu``. 0.5 = chance, 1 = perfect
    ranking. ``None`` when either class is empty (undefined, not 0.5)."""
    from scipy.stats import mannwhitneyu

    pos = [s for l, s in zip(labels, scores) if l == 1]
    neg = [s for l, s in zip(labels, scores) if l == 0]
    if len(labels) != len(scores):
        raise ValueError(f"got {len(labels)} labels but {len(scores)} scores")
    if not pos or not neg:
        return None
    u = mannwhitneyu(pos, neg, alternative="two-sided").statistic
    return float(u) / (len(pos) * len(neg))
