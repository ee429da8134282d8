"""Lexical metrics, one module per metric family, each checked against its reference
library (docs/crossvalidation.md):

- :mod:`~metric_ops.lexical.squad`: exact match, token F1, quasi-exact match (SQuAD v2 script);
- :mod:`~metric_ops.lexical.bleu`: sentence, corpus and NLTK BLEU and the corpus aggregate;
- :mod:`~metric_ops.lexical.chrf`: chrF / chrF++, sentence and corpus, and the corpus aggregate;
- :mod:`~metric_ops.lexical.meteor`: METEOR (NLTK);
- :mod:`~metric_ops.lexical.rouge`: ROUGE-N/L/Lsum (rouge-score) and ROUGE-W/S/SU (ROUGE-1.5.5).

The reference libraries (sacrebleu, NLTK, rouge-score) are imported when a metric is built,
not here.
"""

from metric_ops.lexical.squad import (
    squad_normalize,
    squad_tokens,
    squad_exact,
    squad_f1,
    ExactMatch,
    TokenF1,
    squad_contains,
    QuasiExactMatch,
)
from metric_ops.lexical.bleu import (
    SacrebleuSentenceMetric,
    SentenceBLEU,
    reference_streams,
    corpus_bleu,
    CorpusBLEU,
    corpus_bleu_from_stats,
    NLTK_SMOOTHING,
    NltkBLEU,
    BLEU_SMOOTH_DEFAULTS,
    bleu_from_totals,
)
from metric_ops.lexical.chrf import ChrF, ChrFPlusPlus, chrf_from_totals, CorpusChrF, CorpusChrFPlusPlus
from metric_ops.lexical.meteor import (
    DEFAULT_NLTK_DATA,
    INSTALL_HINT,
    WordNetMissingError,
    load_wordnet,
    reopen_wordnet_files,
    METEOR_TOKENIZERS,
    meteor_tokens,
    Meteor,
)
from metric_ops.lexical.rouge import PRF, Rouge1, Rouge2, RougeL, RougeLsum, RougeW, RougeS, RougeSU

__all__ = [
    "squad_normalize",
    "squad_tokens",
    "squad_exact",
    "squad_f1",
    "ExactMatch",
    "TokenF1",
    "squad_contains",
    "QuasiExactMatch",
    "SacrebleuSentenceMetric",
    "SentenceBLEU",
    "reference_streams",
    "corpus_bleu",
    "CorpusBLEU",
    "corpus_bleu_from_stats",
    "NLTK_SMOOTHING",
    "NltkBLEU",
    "BLEU_SMOOTH_DEFAULTS",
    "bleu_from_totals",
    "ChrF",
    "ChrFPlusPlus",
    "chrf_from_totals",
    "CorpusChrF",
    "CorpusChrFPlusPlus",
    "DEFAULT_NLTK_DATA",
    "INSTALL_HINT",
    "WordNetMissingError",
    "load_wordnet",
    "reopen_wordnet_files",
    "METEOR_TOKENIZERS",
    "meteor_tokens",
    "Meteor",
    "PRF",
    "Rouge1",
    "Rouge2",
    "RougeL",
    "RougeLsum",
    "RougeW",
    "RougeS",
    "RougeSU",
]
