"""Create a payment (with retries), repeat it (200, same payment), read it back. Prints one JSON
summary line.

    python3 create.py --credentials ../../../data/sandbox-credentials.json \\
        --order order-42 --amount 3400.50 --method sbp \\
        --callback-url http://127.0.0.1:9090/callbacks

Without --credentials, PAYMENTS_BASE_URL, PAYMENTS_TOKEN, PAYMENTS_KEYID and
PAYMENTS_PRIVATE_KEY_FILE (a PEM file) are used.
"""

import argparse
import json
import os
import sys
import time
from decimal import Decimal

from payments_client import PaymentsClient, credentials_from_file

parser = argparse.ArgumentParser()
parser.add_argument("--credentials")
parser.add_argument("--project", default="demo")
parser.add_argument("--order", default=f"order-{int(time.time() * 1000)}")
parser.add_argument("--amount", default="3400.50")
parser.add_argument("--method", default="sbp")
parser.add_argument("--callback-url")
args = parser.parse_args()

if args.credentials:
    c = credentials_from_file(args.credentials, args.project)
else:
    with open(os.environ["PAYMENTS_PRIVATE_KEY_FILE"], encoding="utf-8") as f:
        pem = f.read()
    c = {"base_url": os.environ["PAYMENTS_BASE_URL"], "token": os.environ["PAYMENTS_TOKEN"],
         "keyid": os.environ["PAYMENTS_KEYID"], "private_key_pem": pem}
client = PaymentsClient(c["base_url"], c["token"], c["keyid"], c["private_key_pem"])

payment = {
    "merchant_payment_id": args.order,
    "amount": Decimal(args.amount),  # sent as the string "3400.50": never through a float
    "payment_method": args.method,
    # Your own keys, echoed in the payment, the list (filterable) and the callback body.
    "metadata": {"order": args.order, "source": "python-guide"},
}
if args.callback_url:
    payment["callback_url"] = args.callback_url


def fail(step, r):
    print(f"{step}: HTTP {r.status} {r.text} (X-Request-ID {r.request_id})", file=sys.stderr)
    sys.exit(1)


first = client.create_payment(payment)
if first.status not in (200, 201):
    fail("create", first)
p = first.json
if p["status"] == "processing":
    # What the payer needs: exactly this amount, to this requisite, before expires_at.
    print(f"pay {p['amount']} {p['currency']} to {p['requisite']} ({p['holder_name']}, "
          f"{p['requisite_bank'] or 'any bank'}) before {p['expires_at']}", file=sys.stderr)
again = client.create_payment(payment)  # the same order again: 200, same payment
if again.status != 200 or again.json["id"] != p["id"]:
    fail("repeat", again)
read = client.get_payment(p["id"])
if read.status != 200:
    fail("get", read)

info = read.json["merchant_information"] or {}
print(json.dumps({
    "id": p["id"],
    "order": p["merchant_payment_id"],  # what reconcile.py --order finds
    "create": first.status,
    "repeat": again.status,
    "same_payment": again.json["id"] == p["id"],
    "get": read.status,
    "status": read.json["status"],
    "amount": str(read.json["amount"]),  # exact text, e.g. "3400.50"
    "amount_usdt": info.get("amount_usdt"),
}))
