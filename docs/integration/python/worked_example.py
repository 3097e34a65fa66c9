"""Signs the worked example of docs/signatures.md with the library set up as payments_client.py
does and checks it: the same digest and signature base as published. (The library orders the
signature parameters created;keyid;alg;expires, so Signature-Input and the signature bytes
differ from the example's; the base's component lines are the same and the server accepts the
order.) The key is RFC 9421's test key ``test-key-ed25519`` (public; never use it for real)."""

import datetime
import sys

import requests
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from http_message_signatures import HTTPMessageSigner, HTTPSignatureKeyResolver, algorithms

from payments_client import COVERED

TEST_KEY = b"""-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----"""
KEYID = "ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"


class Keys(HTTPSignatureKeyResolver):
    def resolve_private_key(self, key_id):
        return load_pem_private_key(TEST_KEY, password=None)


body = b'{"merchant_payment_id":"order-1001","amount":"3400","payment_method":"sbp"}'
request = requests.Request(
    "POST",
    "http://127.0.0.1:8080/api/v1/payments",
    data=body,
    headers={
        "Content-Type": "application/json",
        "X-Request-ID": "6f1c0a47-3a0e-4d7e-9a55-2b8e0f6d9c11",
        "X-Request-Nonce": "kQ7vN2xR9pL4sT8wZ1yB3c",
    },
).prepare()
at = lambda s: datetime.datetime.fromtimestamp(s, tz=datetime.timezone.utc)  # noqa: E731
signer = HTTPMessageSigner(signature_algorithm=algorithms.ED25519, key_resolver=Keys())
prepared = signer.prepare(
    request, key_id=KEYID, created=at(1790856000), expires=at(1790856300), label="sig1",
    include_alg=True, covered_component_ids=COVERED, body=body,
)
signer.apply(request, prepared, Keys().resolve_private_key(KEYID).sign(prepared.signature_base))
base = prepared.signature_base.decode()
expected_lines = [
    '"@method": POST',
    '"@path": /api/v1/payments',
    '"content-digest": sha-256=:FXC5JFyOCZOi17NTXG++ifGmgVphQtG1JbIfBEG5p3E=:',
    '"x-request-id": 6f1c0a47-3a0e-4d7e-9a55-2b8e0f6d9c11',
    '"x-request-nonce": kQ7vN2xR9pL4sT8wZ1yB3c',
]
expected_params = (
    '"@signature-params": ("@method" "@path" "content-digest" "x-request-id" "x-request-nonce")'
    f';created=1790856000;keyid="{KEYID}";alg="ed25519";expires=1790856300'
)
ok = (
    request.headers["Content-Digest"] == "sha-256=:FXC5JFyOCZOi17NTXG++ifGmgVphQtG1JbIfBEG5p3E=:"
    and base.split("\n") == expected_lines + [expected_params]
    and request.headers["Signature-Input"] == "sig1=" + expected_params.split(": ", 1)[1]
    and request.headers["Signature"].startswith("sig1=:")
)
if not ok:
    print(base, request.headers, sep="\n", file=sys.stderr)
print("worked example: OK" if ok else "worked example: MISMATCH")
sys.exit(0 if ok else 1)
