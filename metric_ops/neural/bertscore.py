"""BERTScore and semantic similarity, computed in process from contextual embeddings.

BERTScore (Zhang et al., ICLR 2020) follows the reference implementation
(``bert_score`` 0.3.13, ``utils.greedy_cos_idf``) step for step: token ids by its
``sent_encode`` rule (strip, special tokens, cut at the model's maximum length), hidden
states of one layer, cosine similarity of every candidate token with every reference
token (special tokens included in the matching, weighted 0), greedy max matching,
optional idf weights computed over the references, optional baseline rescaling, and the
best of several references taken per component (P, R and F separately, as the reference
does; a sample's references padded together as the reference pads them, see
``BERTScore``). ``bert_score`` itself is a test-only dependency used to cross-validate this code.

Semantic similarity is the cosine of sentence embeddings: the mean of the last layer's
token states over the attention mask, L2-normalised -- the sentence-transformers pipeline
of all-MiniLM-L6-v2 (Transformer, max_seq_length 256 -> mean Pooling -> Normalize).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Sequence

from metric_ops.base import Direction, Metric, Sample, Score, check_lengths
from metric_ops.neural.embeddings import DEFAULT_BATCH_SIZE, dtype_tag, get_encoder, model_identity
from metric_ops.errors import FacetlakeError


class IdfUndefinedError(FacetlakeError, ValueError):
    """idf weighting was asked for with fewer than 2 reference documents."""


def idf_weights(reference_ids: Sequence[Sequence[int]]) -> dict[int, float]:
    """Inverse document frequency of each token id over the reference documents, as
    ``bert_score.utils.get_idf_dict``: idf(t) = ln((N + 1) / (df(t) + 1)), N documents;
    unseen tokens get ln(N + 1) (see :func:`idf_default`).

    Raises :class:`IdfUndefinedError` with fewer than 2 documents: with one document every
    token it contains has idf ln(2/2) = 0, the weights sum to zero and the score is NaN
    (the reference library returns NaN there)."""
    n_docs = len(reference_ids)
    if n_docs < 2:
        raise IdfUndefinedError(
            f"idf weighting needs at least 2 reference documents, got {n_docs}: with one document "
            "every idf is ln(2/2) = 0 and BERTScore is undefined (NaN); score more samples at once "
            "or use idf=False"
        )
    df: Counter = Counter()
    for ids in reference_ids:
        df.update(set(ids))
    return {t: math.log((n_docs + 1) / (c + 1)) for t, c in df.items()}


def idf_default(n_docs: int) -> float:
    """idf of a token seen in no reference document: ln(N + 1)."""
    return math.log(n_docs + 1)


# bert_score.score's default batch_size: the references of one call are padded per chunk
BERT_SCORE_BATCH = 64


def padded_references(ref_lengths: Sequence[int], chunk: int = BERT_SCORE_BATCH) -> list[bool]:
    """Which of one sample's references bert-score pads when it scores them together.

    ``bert_score.score(cands, refs)`` with a list of references per candidate repeats the
    candidate once per reference and pads every chunk of ``chunk`` references (in order)
    to the longest one in the chunk. A padded reference position is masked to cosine 0,
    and ``greedy_cos_idf`` takes its max over it too, so a candidate token's best match
    against a reference shorter than the chunk's longest is never below 0.

    Args:
        ref_lengths: token counts (special tokens included) of one sample's references.
        chunk: bert-score's ``batch_size`` (default 64).

    Returns:
        one flag per reference: True where it is shorter than the longest of its chunk.
    """
    flags = []
    for start in range(0, len(ref_lengths), chunk):
        part = ref_lengths[start : start + chunk]
        longest = max(part)
        flags.extend(n < longest for n in part)
    return flags


def greedy_match(hyp: Any, ref: Any, hyp_w: Any, ref_w: Any, floor_precision: bool = False) -> tuple[float, float, float]:
    """Greedy-matching BERTScore of one pair (``bert_score.utils.greedy_cos_idf``).

    Args:
        hyp, ref: float32 arrays (n, d) and (m, d) of L2-normalised token states (special
            tokens included).
        hyp_w, ref_w: float32 arrays (n,) and (m,) of token weights (idf, or 1; 0 for
            [CLS]/[SEP] when idf is off).
        floor_precision: the reference was padded in bert-score's batch (see
            :func:`padded_references`): each candidate token's best cosine is at least 0.

    Returns:
        (P, R, F) as floats; F = 2PR/(P+R) with NaN -> 0. The weights are normalised to sum
        to 1; a zero sum gives NaN for P or R (the caller reports it).
    """
    import numpy as np

    sim = hyp @ ref.T
    best_for_hyp = sim.max(axis=1)
    if floor_precision:
        best_for_hyp = np.maximum(best_for_hyp, np.float32(0))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.float32((best_for_hyp * (hyp_w / hyp_w.sum())).sum())
        r = np.float32((sim.max(axis=0) * (ref_w / ref_w.sum())).sum())
        f = np.float32(2) * p * r / (p + r)
    return float(p), float(r), float(f)


def f1_condition(p: float, r: float) -> float:
    """How much F = 2PR/(P+R) magnifies small errors in P and R: kappa = 2(P^2 + R^2)/(P+R)^2,
    so |dF| <= kappa * max(|dP|, |dR|) to first order.

    kappa is 1 when P = R and at most 2 while P, R >= 0; it grows without bound when P and
    R have opposite signs (unrelated texts, negative token cosines), where F can exceed
    both P and R and a float32 rounding difference in P or R shows up magnified in F.
    Returns NaN when P + R = 0 or either is NaN (F is then set to 0 by rule)."""
    denom = (p + r) ** 2
    if not denom or math.isnan(denom):
        return math.nan
    return 2.0 * (p * p + r * r) / denom


class BERTScore(Metric):
    """BERTScore precision, recall and F1 (Zhang et al., 2020), computed in process.

    Input: one candidate and >= 1 references per sample. Emits ``bertscore_precision``,
    ``bertscore_recall`` and ``bertscore_f1``: cosine-based, in [-1, 1] in principle and
    in practice in (0, 1] without rescaling; rescaled values may fall below 0. With
    several references each of P, R, F is the maximum over references (the reference
    library's rule).

    Parameters (all enter the signature):
        model: local encoder folder (default: the packaged all-MiniLM-L6-v2).
        num_layers: which layer's hidden states to use, 1..L (default: the last layer;
            bert_score's ``num_layers``).
        idf: weight tokens by idf over the references scored together. This makes the
            metric corpus-level (``corpus_level`` is True): pass the whole set of samples
            in one ``score_batch`` call. Refused (:class:`IdfUndefinedError`) with fewer
            than 2 references in the call. The scores table then holds one row per score
            (the mean over the corpus) with every segment's value kept for resampling
            (:meth:`corpus_spec`), not a value per sample.
        baseline: ``(b_P, b_R, b_F)`` to rescale with, x -> (x - b) / (1 - b) (bert_score's
            ``rescale_with_baseline``); bert_score ships no baseline for MiniLM, so the
            values must be given (e.g. read from a bert_score baseline file's row for the
            layer used).
        pad_references: reproduce bert-score's multi-reference padding (default True):
            ``bert_score.score`` pads a sample's references to the longest one and its
            greedy max also sees the padded positions as cosine 0, so against a shorter
            reference a candidate token's best match is floored at 0 (see
            :func:`padded_references`). It changes only pairs with negative token
            cosines -- unrelated texts -- and ``detail["bert_score_padding"]`` lists the
            references where it did. False gives the textbook definition (Zhang et al.,
            eq. 1-3) for every reference alike. A sample's value never depends on which
            other samples are scored with it: it equals ``bert_score.score`` called on
            that one sample. (Called on a whole corpus at once, bert-score also pads
            across samples, so there its values for negative-cosine pairs depend on the
            batch; facetlake does not reproduce that.)
    ``batch_size`` and ``device`` change speed, not the numbers, and are not recorded
    (``device="auto"``: CUDA when present, else CPU). ``fp16`` (CUDA only) changes the
    numbers slightly and is recorded in the signature (``|dtype:fp16``).

    Edge cases, as the reference: text longer than the model's maximum length (512
    tokens for MiniLM, special tokens included) is cut to it and ``detail["truncated"]``
    says how many tokens were dropped from which side. An empty candidate (nothing left
    but special tokens after tokenisation), or references that are all empty, leave
    nothing to measure: ``unscored`` with ``detail["empty"]`` naming the side (bert-score
    gives 0 with a warning; facetlake never records a scored 0 there). Empty or
    whitespace-only references are dropped by the runner, as null ones are; a sample
    with no reference is ``unscored``. Values are in [-1, 1], or
    [(-1 - b) / (1 - b), 1] with a baseline b (:meth:`range_of`); float32 residue past
    1 is clamped by the runner. F = 2PR/(P+R) of a P and R with opposite signs can lie
    far outside that range (P + R near 0): the runner records such an F as an ``error``
    with its raw value and ``f1_condition`` kept in ``detail``. With idf, a
    precision (recall) whose candidate (reference) tokens all have idf 0 -- they occur in
    every reference -- is undefined: bert-score returns NaN there and facetlake records an
    ``error`` naming the cause; F is the best over the references where it is defined
    (bert-score fills 0 instead), an ``error`` when it is defined for none. When the best F comes from a P and R of opposite signs
    (F can then exceed both and is numerically ill-conditioned), the F score's
    ``detail["f1_condition"]`` gives the error magnification (:func:`f1_condition`).
    """

    name = "bertscore"
    aliases = ("bert_score",)
    direction = Direction.MAXIMIZE
    score_directions = {
        "bertscore_precision": Direction.MAXIMIZE,
        "bertscore_recall": Direction.MAXIMIZE,
        "bertscore_f1": Direction.MAXIMIZE,
    }
    dimension = "baseline_grounding"
    # 2: bert-score's multi-reference padding reproduced (pad_references); 3: a candidate whose
    # tokens equal a reference's scores exactly 1.0 (bert-score: 1 +- 3e-7 in float32)
    version = "3"
    value_range = (-1.0, 1.0)
    libraries = ("transformers", "torch")
    signature_extras = ("max_len", "rescaled", "dtype")

    def __init__(
        self,
        model: str | None = None,
        num_layers: int | None = None,
        idf: bool = False,
        baseline: Sequence[float] | None = None,
        pad_references: bool = True,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "auto",
        progress: bool = False,
        fp16: bool = False,
    ) -> None:
        self.encoder = get_encoder(model, device, fp16=bool(fp16))
        layer = self.encoder.num_layers if num_layers is None else int(num_layers)
        if not 1 <= layer <= self.encoder.num_layers:
            raise ValueError(f"bertscore: num_layers must be in 1..{self.encoder.num_layers} for this model, got {num_layers!r}")
        if baseline is not None:
            baseline = tuple(float(b) for b in baseline)
            if len(baseline) != 3 or any(b >= 1.0 for b in baseline):
                raise ValueError(f"bertscore: baseline must be three numbers (P, R, F) below 1, e.g. --param baseline=0.83,0.83,0.83; got {baseline!r}")
        params: dict[str, Any] = {
            "model": model_identity(self.encoder.path),
            "num_layers": layer,
            "idf": bool(idf),
            "pad_references": bool(pad_references),
        }
        if baseline is not None:
            params["baseline"] = baseline
        super().__init__(**params)
        self.layer = layer
        self.idf = bool(idf)
        self.baseline = baseline
        self.pad_references = bool(pad_references)
        self.batch_size = batch_size
        self.progress = progress

    @property
    def corpus_level(self) -> bool:  # type: ignore[override]
        """True when idf weighting makes the numbers depend on the whole scored set."""
        return self.idf

    def corpus_spec(self, score_name: str) -> dict[str, Any]:
        """With idf, each score is stored once per model and evaluation as the mean of the
        segments' values (each computed with the corpus's idf weights), with every
        segment's value kept for resampling (:func:`metric_ops.scoring.corpus.corpus_score_rows`)."""
        return {"kind": "mean", "fields": ["sum", "count"], "params": {}}

    def range_of(self, score_name: str) -> tuple[float, float]:
        """[-1, 1] (a weighted mean of cosines); with baseline rescaling x -> (x - b) / (1 - b)
        the bounds move to [(-1 - b) / (1 - b), 1]."""
        if self.baseline is None:
            return self.declared_range(score_name)
        b = self.baseline[list(self.score_directions).index(score_name)]
        return (-1.0 - b) / (1.0 - b), 1.0

    def signature(self) -> str:
        return (f"{super().signature()}|max_len:{self.encoder.max_length}|rescaled:{'yes' if self.baseline else 'no'}"
                + dtype_tag(self.encoder))

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        import numpy as np
        import torch

        check_lengths(samples, outputs)
        enc = self.encoder
        ref_texts = [list(s.references) for s in samples]
        unique = list(dict.fromkeys([*outputs, *(r for refs in ref_texts for r in refs)]))
        encoded = dict(zip(unique, enc.encode(unique)))
        n_special = len(enc.encode([""])[0][0])
        # bert_score gives [CLS] and [SEP] weight 0 (idf off); every other token, [UNK] included, weight 1
        special = {enc.tokenizer.cls_token_id, enc.tokenizer.sep_token_id} - {None}

        if self.idf:
            flat_refs = [encoded[r][0] for refs in ref_texts for r in refs]
            idf = idf_weights(flat_refs)
            default = idf_default(len(flat_refs))
            weight = lambda ids: np.array([idf.get(t, default) for t in ids], dtype=np.float32)  # noqa: E731
        else:
            weight = lambda ids: np.array([0.0 if t in special else 1.0 for t in ids], dtype=np.float32)  # noqa: E731

        embedded = enc.embed([encoded[t][0] for t in unique], self.layer, self.batch_size, self.progress, "bertscore")
        # L2-normalise each text's token states once (bert_score normalises per batch; same values)
        states = {t: torch.nn.functional.normalize(e, p=2.0, dim=-1, eps=0.0).numpy() for t, e in zip(unique, embedded)}
        weights = {t: weight(encoded[t][0]) for t in unique}
        results = []
        for output, refs in zip(outputs, ref_texts):
            detail: dict[str, Any] = {}
            hyp_ids, hyp_cut = encoded[output]
            truncated = {}
            if hyp_cut:
                truncated["candidate_tokens_dropped"] = hyp_cut
            empty = []
            if len(hyp_ids) == n_special:
                empty.append("candidate")
            if not refs:
                results.append({n: Score.unscored("no reference to compare with") for n in self.score_directions})
                continue
            if empty or all(len(encoded[ref][0]) == n_special for ref in refs):
                # nothing to measure: bert_score would give 0 with a warning; never a scored 0 here
                side = "candidate" if empty else "reference"
                reason = f"the {side} is empty after tokenisation (only special tokens): nothing to compare"
                results.append({n: Score.unscored(reason, empty=[side]) for n in self.score_directions})
                continue
            per_ref: list[tuple[float, float, float]] = []
            padded = padded_references([len(encoded[ref][0]) for ref in refs]) if self.pad_references else [False] * len(refs)
            for k, ref in enumerate(refs):
                ref_ids, ref_cut = encoded[ref]
                if ref_cut:
                    truncated.setdefault("reference_tokens_dropped", []).append(ref_cut)
                ref_empty = len(ref_ids) == n_special
                if ref_empty and "reference" not in empty:
                    empty.append("reference")
                if list(hyp_ids) == list(ref_ids) and not ref_empty:
                    # the same tokens: every token matches itself, so P = R = F = 1 exactly. bert-score's
                    # float32 sums give 1 +- 3e-7 here, which reordered ranks in correlations (issue 26)
                    per_ref.append((1.0, 1.0, 1.0))
                    detail["identical_to_reference"] = True
                    continue
                p, r, f = greedy_match(states[output], states[ref], weights[output], weights[ref], padded[k])
                if padded[k] and not ref_empty and p != greedy_match(states[output], states[ref], weights[output], weights[ref])[0]:
                    detail.setdefault("bert_score_padding", []).append(k)
                if len(hyp_ids) == n_special or ref_empty:
                    p, r = 0.0, 0.0  # bert_score: "Empty candidate/reference ... setting raw BERTScores to 0"
                if math.isnan(f) and not (math.isnan(p) or math.isnan(r)):
                    f = 0.0  # bert_score: F.masked_fill(isnan(F), 0) where P + R = 0
                per_ref.append((p, r, f))
            if truncated:
                detail["truncated"] = {**truncated, "max_length": enc.max_length}
            if empty:
                detail["empty"] = empty
            # P (R) is undefined when some reference leaves every candidate (reference) token
            # with idf weight 0: bert-score's max over references is then NaN -> an error here.
            # F is the best over the references where it is defined (bert-score fills 0).
            undefined = "every {side} token has idf weight 0 (it occurs in every reference document), so BERTScore {what} is undefined"
            p_nan = any(math.isnan(v[0]) for v in per_ref)
            r_nan = any(math.isnan(v[1]) for v in per_ref)
            defined = [v for v in per_ref if not math.isnan(v[2])]
            best = [
                math.nan if p_nan else max(v[0] for v in per_ref),
                math.nan if r_nan else max(v[1] for v in per_ref),
                max((v[2] for v in defined), default=math.nan),
            ]
            best_f_pr = max(defined, key=lambda v: v[2])[:2] if defined else (math.nan, math.nan)
            if self.baseline is not None:
                best = [(v - b) / (1 - b) for v, b in zip(best, self.baseline)]
                detail["baseline"] = list(self.baseline)
            f_detail = detail
            condition = f1_condition(*best_f_pr)
            if condition > 2.0:
                f_detail = {**detail, "f1_condition": float(f"{condition:.3g}")}
            results.append(
                {
                    "bertscore_precision": Score.error(undefined.format(side="candidate", what="precision"), **detail)
                    if p_nan else Score(best[0], detail=detail),
                    "bertscore_recall": Score.error(undefined.format(side="reference", what="recall"), **detail)
                    if r_nan else Score(best[1], detail=detail),
                    "bertscore_f1": Score.error(undefined.format(side="candidate or reference", what="F1"), **detail)
                    if math.isnan(best[2]) else Score(best[2], detail=f_detail),
                }
            )
        return results


class SemanticSimilarity(Metric):
    """Cosine similarity of sentence embeddings (Reimers & Gurevych, 2019): mean pooling
    of the encoder's last layer over the attention mask, L2-normalised, as the
    sentence-transformers pipeline of all-MiniLM-L6-v2 (max_seq_length 256).

    Input: one output and >= 1 references; value in [-1, 1], the maximum over
    references. Text past ``max_seq_length`` tokens is cut (``detail["truncated"]``); an
    empty (or whitespace-only) output leaves nothing to measure and is ``unscored``
    (sentence-transformers would embed the special tokens alone). Parameters: ``model``
    (local folder, default the packaged MiniLM), ``max_seq_length`` (256, the model's
    sentence-transformers setting), ``device`` (``auto``: CUDA when present) and ``fp16``
    (CUDA only, in the signature).
    Shares the token-embedding cache with ``bertscore`` (same model, last layer).
    """

    name = "semantic_similarity"
    aliases = ("cosine_similarity", "sem_sim")
    direction = Direction.MAXIMIZE
    dimension = "baseline_grounding"
    version = "1"
    value_range = (-1.0, 1.0)
    libraries = ("transformers", "torch")
    signature_extras = ("dtype",)

    def __init__(
        self,
        model: str | None = None,
        max_seq_length: int = 256,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "auto",
        progress: bool = False,
        fp16: bool = False,
    ) -> None:
        self.encoder = get_encoder(model, device, fp16=bool(fp16))
        super().__init__(model=model_identity(self.encoder.path), max_seq_length=int(max_seq_length), pooling="mean")
        self.max_seq_length = int(max_seq_length)
        self.batch_size = batch_size
        self.progress = progress

    def signature(self) -> str:
        return super().signature() + dtype_tag(self.encoder)

    def sentence_embeddings(self, texts: Sequence[str]) -> tuple[Any, list[int]]:
        """L2-normalised sentence embeddings (len(texts), hidden) and, per text, the number
        of tokens cut by ``max_seq_length``."""
        import torch

        enc = self.encoder
        encoded = enc.encode(texts, self.max_seq_length)
        states = enc.embed([ids for ids, _ in encoded], enc.num_layers, self.batch_size, self.progress, "sentence embeddings")
        pooled = torch.stack([s.mean(dim=0) for s in states]) if states else torch.zeros((0, 1))
        pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return pooled, [cut for _, cut in encoded]

    def score_batch(self, samples: Sequence[Sample], outputs: Sequence[str]) -> list[dict[str, Score]]:
        check_lengths(samples, outputs)
        unique = list(dict.fromkeys([*outputs, *(r for s in samples for r in s.references)]))
        emb, cuts = self.sentence_embeddings(unique)
        index = {t: i for i, t in enumerate(unique)}
        results = []
        for sample, output in zip(samples, outputs):
            if not output.strip():
                results.append({self.name: Score.unscored("the output is empty: nothing to compare", empty=["output"])})
                continue
            o = index[output]
            value = max(float(emb[o] @ emb[index[r]]) for r in sample.references)
            detail: dict[str, Any] = {}
            dropped = {t: cuts[index[t]] for t in (output, *sample.references) if cuts[index[t]]}
            if dropped:
                detail["truncated"] = {"texts_cut": len(dropped), "max_seq_length": self.max_seq_length}
            results.append({self.name: Score(value, detail=detail)})
        return results
