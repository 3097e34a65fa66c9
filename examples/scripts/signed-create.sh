#!/usr/bin/env bash
# A complete signed create against a running sandbox, with nothing but bash, openssl (3.x),
# curl and python3 (for reading the credentials JSON). Usage:
#   examples/scripts/signed-create.sh [data-dir] [merchant_payment_id] [amount]
set -euo pipefail
data_dir=${1:-./data}
mpid=${2:-order-$(date +%s)}
amount=${3:-3400}
creds="$data_dir/sandbox-credentials.json"
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$creds" "$1"; }
base_url=$(field base_url)
token=$(field token)
keyid=$(field keyid)
key_file=$(mktemp)
base_file=$(mktemp)
trap 'rm -f "$key_file" "$base_file"' EXIT
field private_key_pem > "$key_file"

body=$(printf '{"merchant_payment_id":"%s","amount":"%s","payment_method":"sbp"}' "$mpid" "$amount")
request_id=$(cat /proc/sys/kernel/random/uuid 2>/dev/null || date +%s%N)
nonce=$(openssl rand -base64 24 | tr '+/' '-_' | tr -d '=\n')
created=$(date +%s)
expires=$((created + 300))
# RFC 9530 Content-Digest of the exact body bytes.
digest="sha-256=:$(printf '%s' "$body" | openssl dgst -sha256 -binary | openssl base64 -A):"
params="(\"@method\" \"@path\" \"content-digest\" \"x-request-id\" \"x-request-nonce\");created=$created;expires=$expires;keyid=\"$keyid\";alg=\"ed25519\""
# RFC 9421 signature base: one line per covered component, then @signature-params; no final LF.
base=$(printf '"@method": POST\n"@path": /api/v1/payments\n"content-digest": %s\n"x-request-id": %s\n"x-request-nonce": %s\n"@signature-params": %s' \
  "$digest" "$request_id" "$nonce" "$params")
printf '%s' "$base" > "$base_file"
# Ed25519 signs the message itself (no pre-hash); OpenSSL 3 needs it in a file for -rawin.
signature=$(openssl pkeyutl -sign -inkey "$key_file" -rawin -in "$base_file" | openssl base64 -A)

curl -sS -X POST "$base_url/api/v1/payments" \
  -H "Authorization: Bearer $token" \
  -H "Content-Type: application/json" \
  -H "X-Request-ID: $request_id" \
  -H "X-Request-Nonce: $nonce" \
  -H "Content-Digest: $digest" \
  -H "Signature-Input: sig1=$params" \
  -H "Signature: sig1=:$signature:" \
  -w '\nHTTP status: %{http_code}\n' \
  --data-binary "$body"
