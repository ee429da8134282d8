"""Pairwise judging and evaluation topologies over N models.

A judge compares two responses to the same input. Every pair is judged in both orders
(A first, then B first) and the two verdicts are combined as in Zheng et al. (2023,
"Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena"): a model wins only when it is
preferred in both orders; any disagreement between the orders is a tie, flagged as a
position flip (``position_flip``), never silently resolved for one side.

Topologies: ``round_robin`` (every pair of models) and ``tournament`` (single
elimination, seeded in the given model order; a match is decided by sample wins; a tied
match is flagged and the higher seed advances, as the bracket record says).

Reported: per-model wins, losses, ties and win rate ``(wins + ties / 2) / games``; per
judge the position-flip rate (share of pairs whose combined verdict changes with order)
and the first-position preference (share of decisive single-order verdicts that chose
whichever response was shown first; 0.5 = no position bias).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from metric_ops.base import Sample
from metric_ops.errors import BudgetExhausted, CallDeferred
from metric_ops.judged.judging import JudgeCaller, PromptTemplate, error_score_detail
from metric_ops.judged.replies import JudgeParseError, JudgeReply, extract_json

TOPOLOGIES = ("round_robin", "tournament")
DEFAULT_CRITERION = "Which response answers the user input better: more correct, complete, relevant and clear."


@dataclass
class PairVerdict:
    """One judged pair on one sample.

    ``verdict_ab``: the model the judge preferred with ``model_a`` shown first (a model
    name, ``"tie"``, or ``None`` when that order's reply was unreadable); ``verdict_ba``
    the same with ``model_b`` shown first. ``winner``: a model name when both orders
    agree, ``"tie"`` otherwise; ``None`` (status ``error``) when an order failed.
    """

    sample_id: str
    model_a: str
    model_b: str
    verdict_ab: str | None
    verdict_ba: str | None
    winner: str | None
    position_flip: bool | None
    status: str
    detail: dict[str, Any] = field(default_factory=dict)
    first_choice: list[str] = field(default_factory=list)  # "first"/"second"/"tie" per readable order


def parse_pairwise(reply: JudgeReply) -> tuple[str, str]:
    """``("first" | "second" | "tie", reasoning)`` from a reply ``{"reasoning", "winner":
    "1" | "2" | "tie"}``; raises :class:`JudgeParseError` otherwise."""
    obj, _ = extract_json(reply.text)
    raw = obj.get("winner")
    value = str(raw).strip().lower() if raw is not None and not isinstance(raw, bool) else ""
    value = value.replace("response", "").replace("[", "").replace("]", "").strip()
    mapping = {"1": "first", "2": "second", "tie": "tie"}
    if value not in mapping:
        raise JudgeParseError(f"reply JSON 'winner' must be \"1\", \"2\" or \"tie\", got {raw!r}")
    return mapping[value], str(obj.get("reasoning") or "")


def judge_pair(caller: JudgeCaller, template: PromptTemplate, sample: Sample, model_a: str, output_a: str,
               model_b: str, output_b: str, criterion: str = DEFAULT_CRITERION) -> PairVerdict:
    """Judge ``output_a`` vs ``output_b`` on ``sample`` in both orders and combine.

    Never raises for an unreadable reply or a transport failure: the pair is then an
    ``error`` with the raw replies in ``detail``.
    """
    verdicts: dict[str, str | None] = {}
    detail: dict[str, Any] = {}
    firsts: list[str] = []
    errors = []
    for order, (first, f_out, second, s_out) in (("ab", (model_a, output_a, model_b, output_b)),
                                                 ("ba", (model_b, output_b, model_a, output_a))):
        messages = template.render(criterion=criterion, input=sample.input, first=f_out, second=s_out)
        try:
            call = caller.ask(messages, parse_pairwise, sample.sample_id, salt=f"pair:{order}")
            choice, reasoning = call.value
            firsts.append(choice)
            verdicts[order] = {"first": first, "second": second, "tie": "tie"}[choice]
            detail[f"reasoning_{order}"] = reasoning
        except (BudgetExhausted, CallDeferred):  # not sent: the pair stays unjudged (the pairwise asset ends the run with the message)
            raise
        except Exception as exc:  # noqa: BLE001 - recorded on the pair
            verdicts[order] = None
            errors.append(f"order {order}: {type(exc).__name__}: {exc}")
            for k, v in error_score_detail(exc).items():
                detail[f"{k}_{order}"] = v
    detail["first_choice"] = firsts
    ab, ba = verdicts["ab"], verdicts["ba"]
    if ab is None or ba is None:
        detail["error"] = "; ".join(errors)
        return PairVerdict(sample.sample_id, model_a, model_b, ab, ba, None, None, "error", detail, firsts)
    flip = ab != ba
    winner = ab if not flip else "tie"
    detail["reasoning"] = (f"{model_a} first: {ab}; {model_b} first: {ba}"
                           + ("; the verdict changes with the order: counted as a tie (position flip)" if flip else ""))
    return PairVerdict(sample.sample_id, model_a, model_b, ab, ba, winner, flip, "scored", detail, firsts)


def round_robin_pairs(models: Sequence[str]) -> list[tuple[str, str]]:
    """Every unordered pair of distinct models, in input order (``n (n - 1) / 2`` pairs)."""
    if len(set(models)) != len(models):
        raise ValueError(f"model names repeat: {list(models)}")
    return list(itertools.combinations(models, 2))


def match_result(verdicts: Sequence[PairVerdict], model_a: str, model_b: str) -> dict[str, Any]:
    """Sample wins of each side over the scored verdicts of one pair, and the match winner
    (``None`` with ``tie: True`` when the sample wins are equal)."""
    scored = [v for v in verdicts if v.status == "scored"]
    wins_a = sum(1 for v in scored if v.winner == model_a)
    wins_b = sum(1 for v in scored if v.winner == model_b)
    winner = model_a if wins_a > wins_b else model_b if wins_b > wins_a else None
    return {"model_a": model_a, "model_b": model_b, "wins_a": wins_a, "wins_b": wins_b,
            "ties": sum(1 for v in scored if v.winner == "tie"), "errors": len(verdicts) - len(scored),
            "winner": winner, "tie": winner is None}


def tournament(models: Sequence[str], play: Callable[[str, str], Sequence[PairVerdict]]) -> dict[str, Any]:
    """Single-elimination bracket over ``models`` seeded in the given order (seed 1 first).

    ``play(a, b)`` judges every sample for the pair and returns its verdicts. Each round
    pairs the highest remaining seed with the lowest; with an odd count the top seed has a
    bye. A tied match (equal sample wins) is flagged ``tie`` and the higher seed advances
    (``advanced_by: "seed"``). Returns ``{"champion", "rounds": [[match, ...], ...],
    "verdicts": [PairVerdict, ...]}``.
    """
    if len(models) < 2:
        raise ValueError(f"a tournament needs at least two models, got {list(models)}")
    round_robin_pairs(models)  # duplicate check
    seed = {m: i for i, m in enumerate(models)}
    alive = list(models)
    rounds: list[list[dict[str, Any]]] = []
    all_verdicts: list[PairVerdict] = []
    number = 0
    while len(alive) > 1:
        number += 1
        alive.sort(key=seed.__getitem__)
        matches: list[dict[str, Any]] = []
        nxt: list[str] = []
        if len(alive) % 2:
            nxt.append(alive[0])
            matches.append({"model_a": alive[0], "model_b": None, "winner": alive[0], "bye": True, "tie": False})
            alive = alive[1:]
        while alive:
            a, b = alive[0], alive[-1]
            alive = alive[1:-1]
            verdicts = list(play(a, b))
            for v in verdicts:
                v.detail.setdefault("round", number)
            all_verdicts.extend(verdicts)
            result = match_result(verdicts, a, b)
            if result["tie"]:
                result["winner"] = a if seed[a] < seed[b] else b
                result["advanced_by"] = "seed"
            matches.append(result)
            nxt.append(result["winner"])
        rounds.append(matches)
        alive = nxt
    return {"champion": alive[0], "rounds": rounds, "verdicts": all_verdicts}


def win_rates(verdicts: Sequence[PairVerdict]) -> list[dict[str, Any]]:
    """Per model: games (scored verdicts it took part in), wins, losses, ties, errors and
    ``win_rate = (wins + ties / 2) / games`` (``None`` with no scored game)."""
    table: dict[str, dict[str, Any]] = {}
    for v in verdicts:
        for m in (v.model_a, v.model_b):
            table.setdefault(m, {"model": m, "games": 0, "wins": 0, "losses": 0, "ties": 0, "errors": 0})
        if v.status != "scored":
            table[v.model_a]["errors"] += 1
            table[v.model_b]["errors"] += 1
            continue
        for m, other in ((v.model_a, v.model_b), (v.model_b, v.model_a)):
            row = table[m]
            row["games"] += 1
            if v.winner == m:
                row["wins"] += 1
            elif v.winner == other:
                row["losses"] += 1
            else:
                row["ties"] += 1
    for row in table.values():
        row["win_rate"] = (row["wins"] + row["ties"] / 2) / row["games"] if row["games"] else None
    return sorted(table.values(), key=lambda r: (-(r["win_rate"] if r["win_rate"] is not None else -1), r["model"]))


def position_bias(verdicts: Sequence[PairVerdict]) -> dict[str, Any]:
    """Position-bias statistics of one judge's verdicts: ``flip_rate`` (share of scored
    pairs whose verdict changes when the order is swapped), ``first_position_preference``
    (share of decisive single-order verdicts that chose the response shown first; 0.5 is
    unbiased), and the counts behind them. Rates are ``None`` when there is nothing to count."""
    scored = [v for v in verdicts if v.status == "scored"]
    flips = sum(1 for v in scored if v.position_flip)
    decisive = [c for v in verdicts for c in v.first_choice if c != "tie"]
    firsts = sum(1 for c in decisive if c == "first")
    return {
        "pairs": len(verdicts), "scored": len(scored), "flips": flips,
        "flip_rate": flips / len(scored) if scored else None,
        "decisive_verdicts": len(decisive),
        "first_position_preference": firsts / len(decisive) if decisive else None,
    }


def judge_models(caller: JudgeCaller, template: PromptTemplate, samples: Sequence[Sample],
                 outputs: Mapping[str, Mapping[str, str | None]], topology: str = "round_robin",
                 criterion: str = DEFAULT_CRITERION, concurrency: int = 4) -> dict[str, Any]:
    """Run a topology over the models in ``outputs`` (``{model: {sample_id: output}}``,
    in seed order). A sample for which either model has no output is skipped for that pair.
    Returns ``{"verdicts", "win_rates", "position_bias", "rounds"?, "champion"?}``."""
    from concurrent.futures import ThreadPoolExecutor

    if topology not in TOPOLOGIES:
        raise ValueError(f"unknown topology {topology!r}; use one of {', '.join(TOPOLOGIES)}")
    models = list(outputs)
    if len(models) < 2:
        raise ValueError(f"pairwise judging needs at least two models with outputs, got {models}")

    def play(a: str, b: str) -> list[PairVerdict]:
        todo = [s for s in samples if outputs[a].get(s.sample_id) is not None and outputs[b].get(s.sample_id) is not None]
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            return list(pool.map(lambda s: judge_pair(caller, template, s, a, outputs[a][s.sample_id] or "", b,
                                                      outputs[b][s.sample_id] or "", criterion), todo))

    result: dict[str, Any] = {}
    if topology == "round_robin":
        verdicts = [v for a, b in round_robin_pairs(models) for v in play(a, b)]
    else:
        bracket = tournament(models, play)
        verdicts = bracket["verdicts"]
        result.update(champion=bracket["champion"], rounds=bracket["rounds"])
    result.update(verdicts=verdicts, win_rates=win_rates(verdicts), position_bias=position_bias(verdicts))
    return result
