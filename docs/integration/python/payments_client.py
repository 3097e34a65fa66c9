"""A merchant client for the payments API v1 in Python (3.9 or later).

- RFC 9421 request signatures with the ``http-message-signatures`` library, set up as the API
  wants them: label ``sig1`` (the library's default is ``pyhms``); components ``@method``
  ``@path`` ``content-digest`` ``x-request-id`` ``x-request-nonce``; ``created``, ``expires``
  (created + 300), ``keyid`` and ``alg="ed25519"``. Given the body, the library also writes
  ``Content-Digest``. It orders the parameters ``created;keyid;alg;expires``: the server accepts
  any order, so the signature differs from the worked example's bytes but verifies.
- Ed25519 keys with ``cryptography``; HMAC and constant-time comparison with the standard
  library (see receiver.py).
- Decimals kept exact: ``json.loads(text, parse_float=Decimal)`` reads 3400.50 as
  ``Decimal("3400.50")``; the default would make it the float 3400.5.
"""

from __future__ import annotations

import base64
import datetime
import json
import random
import secrets
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

import requests
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from http_message_signatures import HTTPMessageSigner, HTTPSignatureKeyResolver, algorithms

COVERED = ("@method", "@path", "content-digest", "x-request-id", "x-request-nonce")
RETRYABLE_STATUSES = {429, 500, 503}


def parse_json(text: str | bytes) -> Any:
    """JSON -> value with every decimal number as a ``Decimal`` holding its exact text."""
    return json.loads(text, parse_float=Decimal)


def credentials_from_file(path: str, project: str = "demo") -> dict:
    """Reads the sandbox's ``sandbox-credentials.json`` (written by the server's first start).

    The demo project's credentials, or with ``project="test"`` the test project's, its
    callback secret included (``test_project.callback_secret``: it signs the test payments'
    callbacks).
    """
    with open(path, encoding="utf-8") as f:
        c = json.load(f)
    p = c["test_project"] if project == "test" else c
    return {
        "base_url": c["base_url"],
        "token": p["token"],
        "keyid": p["keyid"],
        "private_key_pem": p["private_key_pem"],
        "callback_secret": p.get("callback_secret"),
    }


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def receipt(data: bytes) -> dict:
    """A receipt of an appeal from the file's bytes: ``{"content_type", "data"}``, the content
    type told by the first bytes (``%PDF``, the PNG signature, JPEG's FF D8 FF), the data in
    standard base64. The service checks the file by its content too; anything else is refused
    here before it is sent."""
    if data.startswith(b"%PDF"):
        content_type = "application/pdf"
    elif data.startswith(PNG_SIGNATURE):
        content_type = "image/png"
    elif data.startswith(b"\xff\xd8\xff"):
        content_type = "image/jpeg"
    else:
        raise ValueError("a receipt must be a PDF, PNG or JPEG file")
    return {"content_type": content_type, "data": base64.b64encode(data).decode("ascii")}


@dataclass
class ApiResponse:
    status: int
    request_id: Optional[str]
    text: str
    json: Any


class _OneKey(HTTPSignatureKeyResolver):
    def __init__(self, key):
        self.key = key

    def resolve_private_key(self, key_id: str):
        return self.key


class PaymentsClient:
    def __init__(self, base_url: str, token: str, keyid: str, private_key_pem: str):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.keyid = keyid
        key = load_pem_private_key(private_key_pem.encode(), password=None)
        self.signer = HTTPMessageSigner(signature_algorithm=algorithms.ED25519, key_resolver=_OneKey(key))
        self.http = requests.Session()

    def send(self, method: str, path: str, body: bytes = b"", timeout: float = 15.0, headers: dict | None = None) -> ApiResponse:
        """One signed request; ``body`` is the exact bytes digested, signed and sent."""
        url = self.base_url + path
        all_headers = {
            "Authorization": f"Bearer {self.token}",
            "X-Request-ID": str(uuid.uuid4()),
            "X-Request-Nonce": base64.urlsafe_b64encode(secrets.token_bytes(24)).decode().rstrip("="),
            **(headers or {}),
        }
        if body:
            all_headers["Content-Type"] = "application/json"
        request = requests.Request(method, url, data=body, headers=all_headers).prepare()
        created = int(time.time())
        at = lambda s: datetime.datetime.fromtimestamp(s, tz=datetime.timezone.utc)  # noqa: E731
        covered = COVERED + (("@query",) if "?" in path else ())
        self.signer.sign(
            request,
            key_id=self.keyid,
            created=at(created),
            expires=at(created + 300),
            label="sig1",
            include_alg=True,
            covered_component_ids=covered,
            body=body,  # writes Content-Digest: sha-256=:...: (also for an empty body)
        )
        response = self.http.send(request, timeout=timeout)
        try:
            parsed = parse_json(response.content)
        except ValueError:
            parsed = None  # not JSON (a proxy's error page): keep the text
        return ApiResponse(response.status_code, response.headers.get("X-Request-ID"), response.text, parsed)

    def create_payment(self, payment: dict, attempts: int = 5) -> ApiResponse:
        """POST /api/v1/payments, repeated with the same body (same merchant_payment_id) after a
        timeout, a connection error, 429, 500 or 503: a new request each time (fresh nonce and
        signature), exponential backoff with jitter, 429 waits its Retry-After. 201 is a new
        payment, 200 the existing one; anything else is final and returned."""
        body = json.dumps(payment, separators=(",", ":"), default=str).encode()  # Decimal -> "3400.50"
        return self._post_with_retries("/api/v1/payments", body, f"create {payment['merchant_payment_id']}", attempts)

    def open_appeal(self, payment_id: str, appeal: dict, attempts: int = 5) -> ApiResponse:
        """POST /api/v1/payments/{id}/appeals: the payer says they paid (``reason``:
        ``paid_but_canceled``, ``paid_other_amount`` with ``claimed_amount``, ``paid_twice``),
        with up to two receipts (``{"content_type", "data"}``, see ``receipt()``). Signed like a
        create and retried like one: the same body, so the same ``idempotency_key``, after a
        timeout, a connection error, 429, 500 or 503 (also the 503 of a node reading too many
        uploads). 201 is a new appeal, 200 the one stored before under that key for the same
        request; anything else is final and returned (409 ``appeal_idempotency_conflict``: the
        key was used for another request; 422 ``receipt_invalid``: a receipt is not a PDF, PNG
        or JPEG by its content)."""
        body = json.dumps(appeal, separators=(",", ":"), default=str).encode()  # Decimal -> "3390.50"
        path = f"/api/v1/payments/{payment_id}/appeals"
        return self._post_with_retries(path, body, f"appeal {appeal['idempotency_key']}", attempts)

    def _post_with_retries(self, path: str, body: bytes, what: str, attempts: int) -> ApiResponse:
        """The same POST body until an answer that is final; ``what`` names it in the error."""
        last_error: object = None
        for attempt in range(1, attempts + 1):
            try:
                r = self.send("POST", path, body)
                code = r.json.get("code") if isinstance(r.json, dict) else None
                if (r.status not in RETRYABLE_STATUSES and code != "request_timeout") or attempt == attempts:
                    return r
                last_error = f"{r.status} {code}"
            except requests.RequestException as e:  # it may have been stored; the same request finds it
                last_error = e
                if attempt == attempts:
                    break
            time.sleep(min(8.0, 0.25 * 2**attempt) * (0.5 + random.random() / 2))
        raise RuntimeError(f"{what} failed after {attempts} attempts: {last_error}")

    def get_payment(self, payment_id: str) -> ApiResponse:
        """GET /api/v1/payments/{id}: the source of truth for status and amount."""
        return self.send("GET", f"/api/v1/payments/{payment_id}")

    def get_payment_history(self, payment_id: str) -> ApiResponse:
        """GET /api/v1/payments/{id}/history: every change of status or amount, oldest first
        (the creation first), with when, why (``cause``) and who (``source``); test payments and
        payments without a callback have one too."""
        return self.send("GET", f"/api/v1/payments/{payment_id}/history")
