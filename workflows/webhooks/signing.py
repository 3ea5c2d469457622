"""Standard Webhooks signatures (https://www.standardwebhooks.com/, version 1).

The secret is ``whsec_`` followed by the base64 of the key bytes. A message is signed
as ``v1,<base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>"))>``: the
receiver recomputes it from the three headers and the raw body, so the id and the
moment are covered by the signature and a replayed old request can be refused by age.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import uuid

SECRET_PREFIX = "whsec_"
SIGNATURE_VERSION = "v1"
# 24 random bytes, as the reference implementations generate.
SECRET_BYTES = 24


def generate_secret() -> str:
    """A new random signing secret, ``whsec_<base64>``."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def new_message_id() -> str:
    """A Standard Webhooks ``webhook-id``: unique per message, kept across retries."""
    return f"msg_{uuid.uuid4().hex}"


def secret_key(secret: str) -> bytes:
    """The key bytes of a ``whsec_`` secret; ``ValueError`` naming the problem otherwise."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a webhook secret starts with {SECRET_PREFIX!r}")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error as exc:
        raise ValueError(f"a webhook secret is {SECRET_PREFIX} and base64: {exc}") from exc
    if not key:
        raise ValueError("a webhook secret needs at least one key byte")
    return key


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header of one request."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode()}"


def signed_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Every header of a delivery request: id, timestamp, signature and content type."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
        "content-type": "application/json",
    }
