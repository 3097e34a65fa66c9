"""Open an appeal for one order: the payer says they paid, another amount than asked, and sent
the receipt. Finds the order's payment by metadata in the list (as reconcile.py does), opens
the appeal (``paid_other_amount``, the amount, the receipt), sends the same appeal again (the
same idempotency key, a new nonce: 200, the same appeal) and prints one JSON summary line. The
provider on record or support decides later; an accepted appeal arrives as a ``completed``
callback with the amount found.

    python3 appeal.py --credentials ../../../data/sandbox-credentials.json --order order-42 \\
        --amount 3390.50 --receipt receipt.pdf

The token needs payments:read (the list) and payments:create (the appeal).
"""

import argparse
import json
import sys
import urllib.parse
from decimal import Decimal

from payments_client import PaymentsClient, credentials_from_file, receipt

parser = argparse.ArgumentParser()
parser.add_argument("--credentials", required=True)
parser.add_argument("--project", default="demo")
parser.add_argument("--order", required=True)
parser.add_argument("--amount", required=True, help="the amount the payer sent, e.g. 3390.50")
parser.add_argument("--receipt", required=True, help="the payer's receipt: a PDF, PNG or JPEG file")
# Yours, naming this appeal: a retry with the same key and body finds it (200).
parser.add_argument("--key")
args = parser.parse_args()

c = credentials_from_file(args.credentials, args.project)
client = PaymentsClient(c["base_url"], c["token"], c["keyid"], c["private_key_pem"])


def fail(step, r):
    why = f"{r.json['code']}: {r.json['message']}" if isinstance(r.json, dict) and "code" in r.json else r.text
    print(f"{step}: HTTP {r.status} {why} (X-Request-ID {r.request_id})", file=sys.stderr)
    sys.exit(1)


def stop(step, why):
    print(f"{step}: {why}", file=sys.stderr)
    sys.exit(1)


try:
    with open(args.receipt, "rb") as f:
        file = receipt(f.read())
except (OSError, ValueError) as e:
    stop(f"receipt {args.receipt}", e)

# The list, filtered by one metadata key; the query string is part of what is signed.
query = urllib.parse.urlencode({"metadata[order]": args.order, "limit": 10})
listed = client.send("GET", f"/api/v1/payments?{query}")
if listed.status != 200:
    fail("list", listed)
ids = [p["id"] for p in listed.json["data"]]
if len(ids) != 1:
    stop("list", f"{len(ids)} payments have metadata order={args.order}, expected one: {ids}")

appeal = {
    "idempotency_key": args.key or f"appeal-{args.order}-1",
    "reason": "paid_other_amount",
    "claimed_amount": Decimal(args.amount),  # sent as the string "3390.50": never through a float
    "receipts": [file],
}
first = client.open_appeal(ids[0], appeal)
if first.status not in (200, 201):
    fail("appeal", first)
# The same appeal again, as after a lost answer: the same key and body, a new request.
again = client.open_appeal(ids[0], appeal)
if again.status != 200 or again.json["id"] != first.json["id"]:
    fail("repeat", again)

print(json.dumps({
    "order": args.order,
    "appeal": first.status,
    "repeat": again.status,
    "same_appeal": again.json["id"] == first.json["id"],
    "id": first.json["id"],
    "state": first.json["state"],  # open, or under_review once the provider took it
    "claimed_amount": str(first.json["claimed_amount"]),  # exact text, e.g. "3390.50"
}))
