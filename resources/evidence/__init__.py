"""Signed evidence bundles: export (:mod:`~resources.evidence.export`), signing keys and
manifests (:mod:`~resources.evidence.keys`) and verification (:mod:`~resources.evidence.verify`).
"""

from resources.evidence.export import JUDGE_DETAIL_KEYS, export_evidence
from resources.evidence.keys import (
    FORMAT,
    MANIFEST,
    SIGNATURE,
    SIGNATURE_FORMAT,
    KEY_ENV,
    KEY_FILE_ENV,
    PASSPHRASE_ENV,
    PUBLIC_KEY_ENV,
    PUBLIC_KEY_FILE_ENV,
    EvidenceError,
    public_key_id,
    generate_keypair,
    load_signing_key,
    load_public_key,
    sha256_file,
)
from resources.evidence.verify import summary_mismatches, VerifyReport, verify_evidence, manifest_files

__all__ = [
    "JUDGE_DETAIL_KEYS",
    "export_evidence",
    "FORMAT",
    "MANIFEST",
    "SIGNATURE",
    "SIGNATURE_FORMAT",
    "KEY_ENV",
    "KEY_FILE_ENV",
    "PASSPHRASE_ENV",
    "PUBLIC_KEY_ENV",
    "PUBLIC_KEY_FILE_ENV",
    "EvidenceError",
    "public_key_id",
    "generate_keypair",
    "load_signing_key",
    "load_public_key",
    "sha256_file",
    "summary_mismatches",
    "VerifyReport",
    "verify_evidence",
    "manifest_files",
]
