"""LLM-as-a-judge: the judge contract and its plumbing, and the judged metrics.

- :mod:`~metric_ops.judged.judging`: the :class:`Judge` protocol, versioned prompts
  (``prompts/*.toml``), cached calls and bounded re-asks (:class:`JudgeCaller`);
- :mod:`~metric_ops.judged.replies`: what a judge answered and how it is read (no reply
  that cannot be parsed ever becomes a score);
- :mod:`~metric_ops.judged.base`: the base of judged metrics (:class:`JudgedMetric`);
- :mod:`~metric_ops.judged.geval_jury`: G-Eval and the jury;
- :mod:`~metric_ops.judged.rag_triad`: faithfulness, answer relevance, context relevance;
- :mod:`~metric_ops.judged.pairwise`: pairwise judging and tournaments.

The live judge clients are resources (resources/scoring/judges.py).
"""

from metric_ops.judged.judging import (
    Judge,
    JudgeSpecError,
    install_judge_resolver,
    resolve_judge,
    PromptTemplate,
    parse_prompt,
    load_prompt,
    JudgeCache,
    MemoryJudgeCache,
    active_cache,
    use_cache,
    cache_key,
    JudgeCall,
    RETRY_MESSAGE,
    JudgeCaller,
    error_score_detail,
)
from metric_ops.judged.replies import (
    TokenLogprob,
    JudgeReply,
    JudgeParseError,
    extract_json,
    normalise_reply,
    ParsedScore,
    parse_scale_score,
    probability_weighted_score,
    require_list,
)
from metric_ops.judged.base import VERDICTS, split_sentences, JudgedMetric
from metric_ops.judged.geval_jury import (
    DEFAULT_CRITERION,
    rate,
    GEval,
    CONSENSUS,
    consensus_value,
    rwg_agreement,
    outlier_jurors,
    split_tie,
    Jury,
)
from metric_ops.judged.rag_triad import Faithfulness, AnswerRelevance, ContextRelevance, auroc
from metric_ops.judged.pairwise import (
    TOPOLOGIES,
    PairVerdict,
    parse_pairwise,
    judge_pair,
    round_robin_pairs,
    match_result,
    tournament,
    win_rates,
    position_bias,
    judge_models,
)

__all__ = [
    "Judge",
    "JudgeSpecError",
    "install_judge_resolver",
    "resolve_judge",
    "PromptTemplate",
    "parse_prompt",
    "load_prompt",
    "JudgeCache",
    "MemoryJudgeCache",
    "active_cache",
    "use_cache",
    "cache_key",
    "JudgeCall",
    "RETRY_MESSAGE",
    "JudgeCaller",
    "error_score_detail",
    "TokenLogprob",
    "JudgeReply",
    "JudgeParseError",
    "extract_json",
    "normalise_reply",
    "ParsedScore",
    "parse_scale_score",
    "probability_weighted_score",
    "require_list",
    "VERDICTS",
    "split_sentences",
    "JudgedMetric",
    "DEFAULT_CRITERION",
    "rate",
    "GEval",
    "CONSENSUS",
    "consensus_value",
    "rwg_agreement",
    "outlier_jurors",
    "split_tie",
    "Jury",
    "Faithfulness",
    "AnswerRelevance",
    "ContextRelevance",
    "auroc",
    "TOPOLOGIES",
    "PairVerdict",
    "parse_pairwise",
    "judge_pair",
    "round_robin_pairs",
    "match_result",
    "tournament",
    "win_rates",
    "position_bias",
    "judge_models",
]
