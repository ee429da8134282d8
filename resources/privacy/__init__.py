"""Privacy: what may leave the process, and how.

- :mod:`~resources.privacy.policy`: the run's anonymisation policy (with the administrator's forcing);
- :mod:`~resources.privacy.outbound`: the one path by which text leaves the process (offline
  guard, anonymisation, ledger);
- :mod:`~resources.privacy.session`: a run's session on that path, and the samples as the lake stores them;
- :mod:`~resources.privacy.ledger`: the durable outbound ledger;
- :mod:`~resources.privacy.keys`: API keys and their redaction;
- :mod:`~resources.privacy.anonymise`: the anonymisers (imports no transport).
"""

from resources.privacy.policy import (
    FORCE_ENV,
    FORCE_MODEL_ENV,
    FORCE_MODEL_KEY_ENV,
    PRIVACY_KEYS,
    PrivacyConfigError,
    PrivacyPolicy,
    forced_policy,
    validate_privacy,
    resolve_policy,
)
from resources.privacy.outbound import (
    OfflineModeError,
    offline_mode,
    refuse_if_offline,
    CallContext,
    Anonymiser,
    install,
    session,
    forced_anonymiser,
    text_sha256,
    chat_completion,
    completion,
    model_anonymiser_call,
)
from resources.privacy.session import (
    LedgerWriter,
    outbound_session,
    offline_refusal_rows,
    anonymised_references,
    RAW_SAMPLES_TABLE,
    samples_for_lake,
    store_raw_samples,
)
from resources.privacy.ledger import COMPLETED, DurableLedger, FAILED, INTENT, LEDGER_TABLE, mark_completed
from resources.privacy.keys import (
    REDACTED,
    MissingKeyError,
    register_secret,
    provide_key,
    forget_keys,
    resolve_key,
    redact,
    redact_exception,
    RedactingFilter,
    install_log_redaction,
)

__all__ = [
    "FORCE_ENV",
    "FORCE_MODEL_ENV",
    "FORCE_MODEL_KEY_ENV",
    "PRIVACY_KEYS",
    "PrivacyConfigError",
    "PrivacyPolicy",
    "forced_policy",
    "validate_privacy",
    "resolve_policy",
    "OfflineModeError",
    "offline_mode",
    "refuse_if_offline",
    "CallContext",
    "Anonymiser",
    "install",
    "session",
    "forced_anonymiser",
    "text_sha256",
    "chat_completion",
    "completion",
    "model_anonymiser_call",
    "LedgerWriter",
    "outbound_session",
    "offline_refusal_rows",
    "anonymised_references",
    "RAW_SAMPLES_TABLE",
    "samples_for_lake",
    "store_raw_samples",
    "COMPLETED",
    "DurableLedger",
    "FAILED",
    "INTENT",
    "LEDGER_TABLE",
    "mark_completed",
    "REDACTED",
    "MissingKeyError",
    "register_secret",
    "provide_key",
    "forget_keys",
    "resolve_key",
    "redact",
    "redact_exception",
    "RedactingFilter",
    "install_log_redaction",
]
