"""Evidence signing keys: Ed25519 (RFC 8032, through the ``cryptography`` package) key
pairs, loading the signing key from the environment or a file (never from the lake) and the
trusted public key, key ids, file hashes, and the evidence format constants.

Part of :mod:`resources.evidence` (the package face exports these names).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from metric_ops.errors import FacetlakeError

FORMAT = "facetlake-evidence/1"
MANIFEST = "MANIFEST.json"
SIGNATURE = "MANIFEST.json.sig"
SIGNATURE_FORMAT = "facetlake-evidence-signature/1"
KEY_ENV = "FACETLAKE_EVIDENCE_KEY"  # the private key itself (PEM text)
KEY_FILE_ENV = "FACETLAKE_EVIDENCE_KEY_FILE"  # a file holding it (PEM)
PASSPHRASE_ENV = "FACETLAKE_EVIDENCE_KEY_PASSPHRASE"  # for an encrypted PEM
PUBLIC_KEY_ENV = "FACETLAKE_EVIDENCE_PUBLIC_KEY"  # the public key (PEM text)
PUBLIC_KEY_FILE_ENV = "FACETLAKE_EVIDENCE_PUBLIC_KEY_FILE"


class EvidenceError(FacetlakeError, RuntimeError):
    """The export cannot be written (unknown fingerprint, existing non-empty folder, a
    signing key that cannot be read or lies inside the lake, ...)."""


# --------------------------------------------------------------------------- keys
def public_key_id(public_key: Any) -> str:
    """SHA-256 (hex) of an Ed25519 public key's 32 raw bytes: the key's id."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def generate_keypair(folder: str | Path, name: str = "facetlake-evidence", passphrase: str | None = None) -> tuple[Path, Path, str]:
    """Write a new Ed25519 key pair: ``NAME.key`` (PKCS#8 PEM, mode 0600, encrypted when
    ``passphrase``) and ``NAME.pub`` (SubjectPublicKeyInfo PEM) in ``folder``.

    Returns (private path, public path, key id). Raises :class:`EvidenceError` when either
    file exists (a key is never overwritten)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    private_path, public_path = folder / f"{name}.key", folder / f"{name}.pub"
    for path in (private_path, public_path):
        if path.exists():
            raise EvidenceError(f"{path} exists; a key is never overwritten (move it away or choose another --name)")
    key = Ed25519PrivateKey.generate()
    encryption = (serialization.BestAvailableEncryption(passphrase.encode()) if passphrase else serialization.NoEncryption())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public_path.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private_path, public_path, public_key_id(key.public_key())


def _inside(path: Path, root: str | None) -> bool:
    if not root or "://" in root:
        return False
    try:
        return path.resolve().is_relative_to(Path(root).expanduser().resolve())
    except OSError:
        return False


def load_signing_key(key_file: str | Path | None = None, lake_root: str | None = None) -> Any | None:
    """The Ed25519 private key for signing: ``key_file``, else ``$FACETLAKE_EVIDENCE_KEY``
    (PEM text), else the file named by ``$FACETLAKE_EVIDENCE_KEY_FILE``; None when none is
    set. An encrypted PEM takes its passphrase from ``$FACETLAKE_EVIDENCE_KEY_PASSPHRASE``.

    Raises :class:`EvidenceError` for a key file inside the lake (``lake_root``), an
    unreadable key, or a key that is not Ed25519."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    source, data = None, None
    path = Path(key_file) if key_file else (Path(os.environ[KEY_FILE_ENV]) if not os.environ.get(KEY_ENV) and os.environ.get(KEY_FILE_ENV) else None)
    if path is not None:
        path = path.expanduser()
        if _inside(path, lake_root):
            raise EvidenceError(f"the signing key {path} lies inside the lake {lake_root}; keep it outside the lake (anyone who can read the lake could sign)")
        try:
            data, source = path.read_bytes(), str(path)
        except OSError as exc:
            raise EvidenceError(f"cannot read the signing key {path} ({exc.strerror}); create one with `facetlake keygen`") from None
    elif os.environ.get(KEY_ENV):
        data, source = os.environ[KEY_ENV].encode(), f"${KEY_ENV}"
    if data is None:
        return None
    passphrase = os.environ.get(PASSPHRASE_ENV)
    try:
        key = serialization.load_pem_private_key(data, password=passphrase.encode() if passphrase else None)
    except (ValueError, TypeError) as exc:
        hint = f" (set {PASSPHRASE_ENV} for an encrypted key)" if "encrypt" in str(exc).lower() or "password" in str(exc).lower() else ""
        raise EvidenceError(f"the signing key from {source} is not a readable PEM private key{hint}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise EvidenceError(f"the signing key from {source} is {type(key).__name__.replace('_', '')}, not Ed25519; create one with `facetlake keygen`")
    return key


def load_public_key(public_key: str | Path | None = None) -> Any | None:
    """The Ed25519 public key that verification trusts: the PEM file ``public_key``, else
    ``$FACETLAKE_EVIDENCE_PUBLIC_KEY`` (PEM text), else the file named by
    ``$FACETLAKE_EVIDENCE_PUBLIC_KEY_FILE``; None when none is set. Raises
    :class:`EvidenceError` for an unreadable or non-Ed25519 key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    source = None
    if public_key:
        source = Path(public_key).expanduser()
    elif os.environ.get(PUBLIC_KEY_ENV):
        data, label = os.environ[PUBLIC_KEY_ENV].encode(), f"${PUBLIC_KEY_ENV}"
    elif os.environ.get(PUBLIC_KEY_FILE_ENV):
        source = Path(os.environ[PUBLIC_KEY_FILE_ENV]).expanduser()
    else:
        return None
    if source is not None:
        try:
            data, label = source.read_bytes(), str(source)
        except OSError as exc:
            raise EvidenceError(f"cannot read the public key {source} ({exc.strerror})") from None
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError:
        raise EvidenceError(f"the public key from {label} is not a PEM public key (the .pub file `facetlake keygen` wrote)") from None
    if not isinstance(key, Ed25519PublicKey):
        raise EvidenceError(f"the public key from {label} is not Ed25519")
    return key


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
