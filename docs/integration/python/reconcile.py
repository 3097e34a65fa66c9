"""Reconcile one order: find its payment by metadata in the list, print its status history, read
the payment's callback events, and resend the newest one (a new event_id, one attempt). Prints one
JSON summary line.

    python3 reconcile.py --credentials ../../../data/sandbox-credentials.json --order order-42

The token needs payments:read, events:read and events:resend (the sandbox's has them).
"""

import argparse
import json
import sys
import urllib.parse

from payments_client import PaymentsClient, credentials_from_file

parser = argparse.ArgumentParser()
parser.add_argument("--credentials", required=True)
parser.add_argument("--project", default="demo")
parser.add_argument("--order", required=True)
args = parser.parse_args()

c = credentials_from_file(args.credentials, args.project)
client = PaymentsClient(c["base_url"], c["token"], c["keyid"], c["private_key_pem"])


def fail(step, r):
    print(f"{step}: HTTP {r.status} {r.text} (X-Request-ID {r.request_id})", file=sys.stderr)
    sys.exit(1)


def stop(step, why):
    print(f"{step}: {why}", file=sys.stderr)
    sys.exit(1)


# The list, filtered by one metadata key; the query string is part of what is signed.
query = urllib.parse.urlencode({"metadata[order]": args.order, "limit": 10})
listed = client.send("GET", f"/api/v1/payments?{query}")
if listed.status != 200:
    fail("list", listed)
ids = [p["id"] for p in listed.json["data"]]
if len(ids) != 1:
    stop("list", f"{len(ids)} payments have metadata order={args.order}, expected one: {ids}")

# What happened to the payment, oldest first, whether a callback followed or not.
history = client.get_payment_history(ids[0])
if history.status != 200:
    fail("history", history)
for h in history.json["history"]:
    print(f"history {h['at']} {h['status']} {h['cause']} {h['source'] or '-'} {h['amount']}", file=sys.stderr)

# The payment's callback events, newest first, each with its attempts.
events = client.send("GET", "/api/v1/events?" + urllib.parse.urlencode({"payment_id": ids[0]}))
if events.status != 200:
    fail("events", events)
data = events.json["data"]
for e in data:
    tried = ", ".join(a["result"] for a in e["attempts"]) or "not tried yet"
    print(f"event {e['id']} {e['type']} {e['status']}: {e['delivery_state']} ({tried})", file=sys.stderr)
if not data:
    stop("events", f"payment {ids[0]} has no callback events (no callback URL, or not closed yet)")

# Resend the newest: a new event with a new event_id, delivered once.
resent = client.send("POST", f"/api/v1/events/{data[0]['id']}/resend")
if resent.status != 202:
    fail("resend", resent)

print(json.dumps({
    "listed": ids,
    "history": [h["cause"] for h in history.json["history"]],
    "events": len(data),
    "resent": resent.status,
    "new_event": resent.json["id"],
}))
