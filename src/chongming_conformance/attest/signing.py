"""Optional DSSE signing of a statement with a local key, through securesystemslib.

An unsigned statement binds a result to digests, but anyone can write one; a signed
one says *who* claims it. The envelope is the in-toto standard one (DSSE, payload type
``application/vnd.in-toto+json``), so cosign- or in-toto-aware tools read it too.

Keys are PEM files (an ed25519, ECDSA or RSA private key to sign, the matching public
key to verify), e.g. made with ``openssl genpkey -algorithm ed25519 -out key.pem`` and
``openssl pkey -in key.pem -pubout -out key.pub.pem``. Keyless signing (Sigstore's
Fulcio and Rekor) needs an online service and is out of scope.

securesystemslib (and pyca/cryptography under it) is an optional extra,
``chongming-conformance[sign]``; it is imported only when a key is given, and its
absence is a usage message, not an import error.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .intoto import DSSE_PAYLOAD_TYPE

__all__ = ["SigningUnavailable", "is_envelope", "open_envelope", "sign_statement"]

_INSTALL_HINT = "pip install 'chongming-conformance[sign]' (securesystemslib with cryptography)"


class SigningUnavailable(RuntimeError):
    """securesystemslib (or cryptography) is not installed."""


def is_envelope(document: Any) -> bool:
    """A DSSE envelope rather than a bare statement."""
    return isinstance(document, Mapping) and "payloadType" in document and "payload" in document


def _load_pem(path: Path, *, private: bool) -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError as exc:
        raise SigningUnavailable(f"signing needs {_INSTALL_HINT}") from exc
    data = path.read_bytes()
    try:
        if private:
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        kind = "an unencrypted PEM private key" if private else "a PEM public key"
        raise ValueError(f"{path} is not {kind} ({type(exc).__name__})") from None


def sign_statement(statement: Mapping[str, Any], key_path: Path) -> dict[str, Any]:
    """A DSSE envelope holding ``statement``, signed with the private key at ``key_path``."""
    private_key = _load_pem(key_path, private=True)
    try:
        from securesystemslib.dsse import Envelope
        from securesystemslib.signer import CryptoSigner
    except ImportError as exc:
        raise SigningUnavailable(f"signing needs {_INSTALL_HINT}") from exc
    payload = json.dumps(statement, sort_keys=True, ensure_ascii=False).encode()
    envelope = Envelope(payload=payload, payload_type=DSSE_PAYLOAD_TYPE, signatures={})
    try:
        envelope.sign(CryptoSigner(private_key))
    except Exception as exc:  # a key type or size securesystemslib cannot sign with (DSA, ...)
        raise ValueError(f"{key_path}: cannot sign with this key ({type(exc).__name__}: "
                         f"{exc})") from None
    signed: dict[str, Any] = envelope.to_dict()
    return signed


def open_envelope(envelope: Mapping[str, Any], public_key_path: Path | None) -> dict[str, Any]:
    """The statement inside ``envelope`` once its signature checks with the public key.

    Raises ``ValueError`` naming what is wrong: no key given, a payload of another type,
    a signature that does not verify with that key.
    """
    if envelope.get("payloadType") != DSSE_PAYLOAD_TYPE:
        raise ValueError(f"the envelope's payloadType is {envelope.get('payloadType')!r}, not "
                         f"{DSSE_PAYLOAD_TYPE!r}")
    if public_key_path is None:
        raise ValueError("the statement is signed (a DSSE envelope): give --key PUBLIC.pem to "
                         "check its signature")
    public_key = _load_pem(public_key_path, private=False)
    try:
        from securesystemslib.dsse import Envelope
        from securesystemslib.exceptions import VerificationError
        from securesystemslib.signer import SSlibKey
    except ImportError as exc:
        raise SigningUnavailable(f"checking a signature needs {_INSTALL_HINT}") from exc
    try:
        parsed = Envelope.from_dict(copy.deepcopy(dict(envelope)))  # from_dict pops keys
        parsed.verify([SSlibKey.from_crypto(public_key)], 1)
    except VerificationError as exc:
        raise ValueError(f"the signature does not verify with {public_key_path}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the envelope is malformed: {exc}") from None
    try:
        statement: dict[str, Any] = json.loads(parsed.payload)
    except ValueError as exc:
        raise ValueError(f"the envelope's payload is not JSON: {exc}") from None
    return statement
