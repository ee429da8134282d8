"""Score many metrics over many samples fast: the batched path behind the benchmark.

- Lexical metrics are scored in chunks spread over the machine's cores (the scoring pool
  of :mod:`metric_ops.scoring.parallel`; each worker builds its metric objects once) when the work pays for the workers'
  start-up (:func:`plan_workers`: at least :data:`PARALLEL_MIN_SCORES` sample x metric
  scores); smaller work runs in process. A worker imports only the metric families asked
  for (no NLTK unless METEOR is requested).
- Corpus-level metrics (``corpus_level`` true: corpus BLEU, idf BERTScore) are scored in
  one call over the whole set, as their definition requires.
- Neural metrics (BERTScore, semantic similarity) share one model load and one
  token-embedding cache (:mod:`metric_ops.neural.embeddings`): each distinct text is encoded
  once, in length-sorted batches, and reused across samples and metrics.

A tqdm progress bar tracks the work. Results are the same :class:`~metric_ops.base.Score`
dicts ``score_batch`` returns, in input order.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping, Sequence

from metric_ops.base import Metric, Sample, Score, check_lengths
from metric_ops.registry import get_metric

NEURAL = ("bertscore", "semantic_similarity")

_WORKER_METRICS: dict[str, Metric] = {}

# a worker process costs ~0.5-1 s to start and import (more under load); below this many
# sample x metric scores (about 1-3 s of lexical scoring on one core) one process is faster
PARALLEL_MIN_SCORES = 20_000


def plan_workers(n_samples: int, n_metrics: int, workers: int | None, chunk_size: int) -> int:
    """Processes to score ``n_samples`` x ``n_metrics`` lexical scores with.

    ``workers`` given (>= 1) is obeyed (capped at the number of chunks); ``None`` means:
    one process below :data:`PARALLEL_MIN_SCORES` scores or on a one-core machine, else
    ``os.cpu_count()`` capped at the number of chunks and at one worker per
    :data:`PARALLEL_MIN_SCORES` / 2 scores (a worker must have enough to do)."""
    chunks = max(1, -(-n_samples // max(1, chunk_size)))
    if workers is not None:
        return max(1, min(int(workers), chunks))
    work = n_samples * n_metrics
    cpus = os.cpu_count() or 1
    if cpus <= 1 or work < PARALLEL_MIN_SCORES:
        return 1
    return max(1, min(cpus, chunks, work // (PARALLEL_MIN_SCORES // 2)))


def _init_worker(specs: list[tuple[str, str, dict[str, Any]]]) -> None:
    # a worker started by forkserver/spawn holds no open WordNet files; one forked from a
    # parent that had NLTK's WordNet open must not share their offsets. Only then (NLTK
    # already imported) reopen them: importing NLTK costs seconds per worker.
    if "nltk" in sys.modules:
        from metric_ops.lexical.meteor import reopen_wordnet_files

        reopen_wordnet_files()
    _WORKER_METRICS.clear()
    for key, name, params in specs:
        _WORKER_METRICS[key] = get_metric(name, **params)


def _score_chunk(args: tuple[int, list[Sample], list[str]]) -> tuple[int, dict[str, list[dict[str, Score]]]]:
    start, samples, outputs = args
    return start, {key: metric.score_batch(samples, outputs) for key, metric in _WORKER_METRICS.items()}


_WORKER_SPECS: list[list[tuple[str, str, dict[str, Any]]]] = []


def _suite_chunk(specs: list[tuple[str, str, dict[str, Any]]],
                 args: tuple[int, list[Sample], list[str]]) -> tuple[int, dict[str, list[dict[str, Score]]]]:
    """In a worker of the shared scoring pool: ``specs``' metrics (built once per set of
    specs) over one chunk."""
    if _WORKER_SPECS != [specs]:
        _init_worker(specs)
        _WORKER_SPECS[:] = [specs]
    return _score_chunk(args)


def _is_corpus_level(metric: Metric) -> bool:
    return bool(getattr(metric, "corpus_level", False))


def score_suite(
    metrics: Mapping[str, tuple[str, dict[str, Any]]],
    samples: Sequence[Sample],
    outputs: Sequence[str],
    workers: int | None = None,
    chunk_size: int = 250,
    progress: bool = True,
) -> dict[str, list[dict[str, Score]]]:
    """Score every metric over all (sample, output) pairs.

    Args:
        metrics: ``{key: (metric name, params)}``; the key names the result (so one metric
            can appear with several settings).
        samples, outputs: aligned sequences (``ValueError`` when lengths differ); every
            sample must carry what the metrics require (no unscored handling here: use
            :func:`metric_ops.scoring.rows.score_metric` for mixed data).
        workers: processes for lexical metrics (default: :func:`plan_workers` decides from
            the amount of work; 1 = in process).
        chunk_size: samples per lexical work unit.
        progress: show a tqdm progress bar (stderr).

    Returns:
        ``{key: [scores of sample 0, scores of sample 1, ...]}``, every value checked
        against its metric's declared range (:meth:`~metric_ops.base.Metric.check_scores`).
    """
    from tqdm.auto import tqdm

    check_lengths(samples, outputs)
    samples, outputs = list(samples), list(outputs)
    n = len(samples)
    from metric_ops.registry import REGISTRY

    # neural metrics are built after the lexical process pool has run, so no worker is
    # forked from a process that already holds a torch model and its thread pools
    neural_keys = [k for k, (name, _) in metrics.items() if REGISTRY.resolve(name) in NEURAL]
    built = {key: get_metric(name, **params) for key, (name, params) in metrics.items() if key not in neural_keys}
    corpus = {k: m for k, m in built.items() if _is_corpus_level(m)}
    lexical = {k: m for k, m in built.items() if k not in corpus}
    results: dict[str, list[Any]] = {k: [None] * n for k in lexical}

    workers = plan_workers(n, len(lexical), workers, chunk_size)
    chunks = [(i, samples[i : i + chunk_size], outputs[i : i + chunk_size]) for i in range(0, n, chunk_size)]
    bar = tqdm(total=n * (len(lexical) + len(neural_keys) + len(corpus)), desc="scoring", unit="score", disable=None if progress else True)  # None: off when stderr is not a terminal
    try:
        if lexical and chunks:
            if workers > 1 and len(chunks) > 1:
                # the scoring pool the scores asset uses (metric_ops/scoring/parallel.py: forkserver
                # workers, dead-worker fallback, Ctrl-C, the calling script left alone)
                from metric_ops.scoring.parallel import map_chunks

                specs = [(k, metrics[k][0], metrics[k][1]) for k in lexical]
                parts = map_chunks(
                    _suite_chunk, [(specs, chunk) for chunk in chunks], workers,
                    here=lambda i: (chunks[i][0], {k: m.score_batch(chunks[i][1], chunks[i][2]) for k, m in lexical.items()}),
                    what="lexical metrics", describe=lambda i: f"chunk {i} ({len(chunks[i][1])} samples) of the lexical metrics",
                    done=lambda i: bar.update(len(chunks[i][1]) * len(lexical)),
                )
                for start, part in parts:
                    for k, rows in part.items():
                        results[k][start : start + len(rows)] = rows
            else:
                for start, s, o in chunks:
                    for k, m in lexical.items():
                        results[k][start : start + len(s)] = m.score_batch(s, o)
                    bar.update(len(s) * len(lexical))
        for k, m in corpus.items():
            bar.set_postfix_str(k)
            results[k] = m.score_batch(samples, outputs)
            bar.update(n)
        for k in neural_keys:
            bar.set_postfix_str(k)
            name, params = metrics[k]
            built[k] = get_metric(name, **params)
            results[k] = built[k].score_batch(samples, outputs)
            bar.update(n)
    finally:
        bar.close()
    # declared ranges checked as the runner checks them (clamped within float rounding, error beyond)
    return {k: [built[k].check_scores(row) for row in rows] for k, rows in results.items()}
