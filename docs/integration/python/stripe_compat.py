"""Our callbacks verify with Stripe's own library (``stripe.WebhookSignature``): its scheme is
the same HMAC-SHA256 of ``timestamp + "." + raw body`` keyed with the whole ``whsec_`` string,
in lower-case hex under ``v1=``. Only the header differs: Stripe sends one
``Stripe-Signature: t=<timestamp>,v1=<hex>`` header where we send ``X-Callback-Timestamp`` and
``X-Callback-Signature``. Assemble Stripe's header from ours and the library does the rest
(timestamp tolerance, constant-time comparison, several v1= values during a rotation).

As a program: reads {"body", "timestamp", "signature", "secret"} as JSON on stdin and exits 0
when the callback verifies, 1 when it does not.
"""

import json
import sys

import stripe


def verify_with_stripe(body: bytes, timestamp: str, signature: str, secret: str) -> None:
    """Raises ``stripe.SignatureVerificationError`` unless the callback is authentic and fresh."""
    header = f"t={timestamp},{signature}"  # signature is "v1=<hex>[,v1=<hex>]"
    stripe.WebhookSignature.verify_header(body.decode("utf-8"), header, secret, tolerance=300)


if __name__ == "__main__":
    given = json.load(sys.stdin)
    try:
        verify_with_stripe(given["body"].encode("utf-8"), given["timestamp"], given["signature"], given["secret"])
    except stripe.SignatureVerificationError as e:
        print(f"refused: {e}")
        sys.exit(1)
    print("verified")
