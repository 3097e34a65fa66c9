#!/usr/bin/env bash
# A complete signed create against a running server, with nothing but bash, openssl (3.x),
# curl and python3 (for reading the credentials JSON). Usage:
#   examples/scripts/signed-create.sh [data-dir] [merchant_payment_id] [amount]
# The credentials come from the sandbox's <data-dir>/sandbox-credentials.json; with `-` as the
# data dir, from the environment instead (any project, production too; no python3 needed):
#   MERCHANT_BASE_URL=https://api.example.com MERCHANT_TOKEN=nl_live_... \
#   MERCHANT_KEYID=ed25519-... MERCHANT_PRIVATE_KEY=private.pem \
#     examples/scripts/signed-create.sh - order-1 3400
# Prints the answer's body, then `HTTP status: N`; exits non-zero unless the status is 2xx.
set -euo pipefail
data_dir=${1:-./data}
mpid=${2:-order-$(date +%s)}
amount=${3:-3400}
key_file=$(mktemp)
base_file=$(mktemp)
answer_file=$(mktemp)
trap 'rm -f "$key_file" "$base_file" "$answer_file"' EXIT
if [ "$data_dir" = "-" ]; then
  base_url=${MERCHANT_BASE_URL:?MERCHANT_BASE_URL: the base URL of the server}
  token=${MERCHANT_TOKEN:?MERCHANT_TOKEN: the project token}
  keyid=${MERCHANT_KEYID:?MERCHANT_KEYID: the keyid of the registered key}
  cat "${MERCHANT_PRIVATE_KEY:?MERCHANT_PRIVATE_KEY: the PEM private key file}" > "$key_file"
else
  creds="$data_dir/sandbox-credentials.json"
  field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$creds" "$1"; }
  base_url=$(field base_url)
  token=$(field token)
  keyid=$(field keyid)
  field private_key_pem > "$key_file"
fi

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

status=$(curl -sS -X POST "${base_url%/}/api/v1/payments" \
  -H "Authorization: Bearer $token" \
  -H "Content-Type: application/json" \
  -H "X-Request-ID: $request_id" \
  -H "X-Request-Nonce: $nonce" \
  -H "Content-Digest: $digest" \
  -H "Signature-Input: sig1=$params" \
  -H "Signature: sig1=:$signature:" \
  -o "$answer_file" -w '%{http_code}' \
  --data-binary "$body")
cat "$answer_file"
printf '\nHTTP status: %s\n' "$status"
case "$status" in 2??) ;; *) exit 1 ;; esac
