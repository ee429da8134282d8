"""Metric cross-validation against the reference libraries (sacrebleu, rouge-score, nltk,
bert-score, sentence-transformers, the SQuAD script's rules) and the ROUGE-1.5.5 Perl
script's known answers: the ``facetlake crossval`` report (docs/crossvalidation.md).

Part of the product (issue 27), not test tooling under ``benchmarks/``: ``facetlake
crossval`` is a command users run to check the metrics on their own installation, and a
product command imports only product code. It reads the real data from ``data/`` (or
``$FACETLAKE_DATA_DIR``) like the built-in datasets do; bert-score, a reference library of
the ``test`` extra, is imported only when the neural variants are checked.

- :mod:`pipelines.crossval.harness`: the variants, the reference functions and the report;
- :mod:`pipelines.crossval.compare`: comparing values case by case, with tolerances;
- :mod:`pipelines.crossval.rouge`: ROUGE-1.5.5 known answers and hand-worked examples;
- :mod:`pipelines.crossval.run`: loading the real cases and writing the report.
"""

from pipelines.crossval.harness import (
    edge_cases,
    bert_score_reference,
    EXAMPLE_BASELINE,
    variants,
    crossvalidate,
    report_markdown,
)
from pipelines.crossval.compare import (
    LEXICAL_TOLERANCE,
    NEURAL_TOLERANCE,
    Case,
    Variant,
    FacetlakeValues,
    facetlake_values,
    compare,
)
from pipelines.crossval.rouge import (
    KNOWN_ANSWERS,
    PRINTED_TOLERANCE,
    WORKED_TOLERANCE,
    PERL_METRICS,
    PARTS,
    POOLED,
    load_known_answers,
    as_printed,
    known_answer_comparison,
    known_answer_rows,
    known_answer_section,
    worked_examples,
    ROUGE_WORKED_EXAMPLES,
    worked_example_rows,
)
from pipelines.crossval.run import (
    PROJECT_ROOT,
    DEFAULT_DATA_DIR,
    DEFAULT_REPORT,
    REGENERATE,
    NEURAL_QAGS,
    SELFAWARE_CASES,
    selfaware_prediction,
    real_cases,
    crossval_case_sets,
    build_report,
    write_report,
    main,
)

__all__ = [
    "edge_cases",
    "bert_score_reference",
    "EXAMPLE_BASELINE",
    "variants",
    "crossvalidate",
    "report_markdown",
    "LEXICAL_TOLERANCE",
    "NEURAL_TOLERANCE",
    "Case",
    "Variant",
    "FacetlakeValues",
    "facetlake_values",
    "compare",
    "KNOWN_ANSWERS",
    "PRINTED_TOLERANCE",
    "WORKED_TOLERANCE",
    "PERL_METRICS",
    "PARTS",
    "POOLED",
    "load_known_answers",
    "as_printed",
    "known_answer_comparison",
    "known_answer_rows",
    "known_answer_section",
    "worked_examples",
    "ROUGE_WORKED_EXAMPLES",
    "worked_example_rows",
    "PROJECT_ROOT",
    "DEFAULT_DATA_DIR",
    "DEFAULT_REPORT",
    "REGENERATE",
    "NEURAL_QAGS",
    "SELFAWARE_CASES",
    "selfaware_prediction",
    "real_cases",
    "crossval_case_sets",
    "build_report",
    "write_report",
    "main",
]
