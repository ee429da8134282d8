"""Silence library output that a facetlake user cannot act on; keep everything they can.

Silenced (each is about a library's internals or a shipped dataset, never the user's input):

- Dagster's ``BetaWarning``/``PreviewWarning`` ("... is currently in beta/preview") and
  ``SupersessionWarning`` ("... is superseded and its usage is discouraged") about APIs the
  project itself calls;
- Great Expectations' INFO line "Created temporary directory ... for ephemeral docs site"
  (its ephemeral context, made for every sample check);
- transformers' "Loading weights" progress bars (``HF_HUB_DISABLE_PROGRESS_BARS``, which
  transformers reads when imported);
- sacrebleu's "That's 100 lines that end in a tokenized period" / "It looks like you forgot
  to detokenize your test data" lines: the shipped SF-RES data is tokenized by its
  authors, and the BLEU signature already records the tokenizer.

Kept: every other warning (one line each, see ``pipelines.cli.main``), Dagster's first-run
telemetry notice, and every error.
"""

from __future__ import annotations

import logging
import os
import warnings

SACREBLEU_DETOKENIZE = (
    "lines that end in a tokenized period",
    "forgot to detokenize",
    "you can suppress this message with the `force` parameter",
)


class _DropMessages(logging.Filter):
    """Drop log records whose message contains any of ``parts``."""

    def __init__(self, parts: tuple[str, ...]) -> None:
        super().__init__()
        self.parts = parts

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - logging's name
        message = record.getMessage()
        return not any(part in message for part in self.parts)


def quiet_warnings() -> None:
    """Filter Dagster's beta, preview and supersession warnings (by message: the warning
    classes live in Dagster, which this must not import)."""
    warnings.filterwarnings("ignore", message=r".*is currently in beta.*")
    warnings.filterwarnings("ignore", message=r".*is currently in preview.*")
    warnings.filterwarnings("ignore", message=r".*is superseded and its usage is discouraged.*")


def quiet_libraries() -> None:
    """Apply every silencing above to this process (idempotent; imports no library).

    Child processes inherit ``HF_HUB_DISABLE_PROGRESS_BARS``; the warning filters and log
    filters are per process (``pipelines/definitions.py`` applies them in code-location
    processes too)."""
    quiet_warnings()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.getLogger("great_expectations.data_context.types.base").setLevel(logging.WARNING)
    sacre = logging.getLogger("sacrebleu")
    if not any(isinstance(f, _DropMessages) for f in sacre.filters):
        sacre.addFilter(_DropMessages(SACREBLEU_DETOKENIZE))
