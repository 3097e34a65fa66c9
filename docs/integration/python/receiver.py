"""A callback receiver: verifies X-Callback-Signature (HMAC-SHA256, constant-time comparison,
every v1= value, current and previous secret), refuses timestamps more than 300 s away, answers
2xx to an event it has already processed without processing it again, and keeps decimals exact.
Prints one JSON line per processed event.

    CALLBACK_SECRETS=whsec_current[,whsec_previous] PORT=9090 python3 receiver.py

In production keep the processed event ids in your database (a UNIQUE column written in the
same transaction as the order update) instead of the in-memory set below, answer quickly and do
slow work after answering, and read the payment back with GET when in doubt.
"""

import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from payments_client import parse_json

SECRETS = [s.strip() for s in os.environ.get("CALLBACK_SECRETS", "").split(",") if s.strip()]
PORT = int(os.environ.get("PORT", "9090"))
PATH = "/callbacks"
TOLERANCE_SECONDS = 300
MAX_BODY = 64 * 1024
if not SECRETS:
    sys.exit("set CALLBACK_SECRETS to the project callback secret (whsec_...)")

processed = set()  # event ids already applied (use your database)
lock = threading.Lock()


def signature_valid(timestamp: str, header: str, body: bytes, secrets=SECRETS) -> bool:
    """True when some v1= value is the HMAC of f"{timestamp}." + body under some secret."""
    given = [p.strip()[3:] for p in header.split(",") if p.strip().startswith("v1=")]  # other schemes ignored
    for secret in secrets:
        # The key is the whole secret string, whsec_ included.
        expected = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(value.encode(), expected.encode()) for value in given):
            return True
    return False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status: int, body: dict):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        if self.path != PATH:
            return self.answer(404, {"error": "not found"})
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            return self.answer(413, {"error": "too large"})
        body = self.rfile.read(length)  # the raw bytes: verify before parsing
        timestamp = self.headers.get("X-Callback-Timestamp", "")
        signature = self.headers.get("X-Callback-Signature", "")
        if not re.fullmatch(r"[0-9]{1,12}", timestamp):
            return self.answer(400, {"error": "bad timestamp"})
        if abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
            return self.answer(401, {"error": "stale timestamp"})
        if not signature_valid(timestamp, signature, body):
            return self.answer(401, {"error": "bad signature"})
        try:
            event = parse_json(body)  # amounts as Decimal("3400.50")
        except ValueError:
            return self.answer(400, {"error": "bad json"})
        with lock:
            if event["event_id"] in processed:
                return self.answer(200, {"status": "duplicate"})
            # Apply the event: fulfil order event["merchant_payment_id"] by event["amount"] when
            # event["status"] is "completed", release it when "canceled". Then remember the id.
            processed.add(event["event_id"])
        print(json.dumps({
            "accepted": event["event_id"],
            "payment": event["id"],
            "order": event["merchant_payment_id"],
            "status": event["status"],
            "amount": str(event["amount"]),
        }), flush=True)
        return self.answer(200, {"status": "ok"})

    def log_message(self, *args):
        pass  # keep stdout for the processed events


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print(json.dumps({"listening": f"http://127.0.0.1:{server.server_address[1]}{PATH}"}), flush=True)
server.serve_forever()
