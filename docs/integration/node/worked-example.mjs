// Signs the worked example of docs/signatures.md with the library set up as payments.mjs does
// and checks the result against the published headers: run it once to know your settings are
// right. The key is RFC 9421's test key `test-key-ed25519` (public; never use it for real).
import { sign, createPrivateKey } from 'node:crypto';
import { httpbis } from 'http-message-signatures';
import { COVERED, contentDigest } from './payments.mjs';

const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----`;
const key = createPrivateKey(TEST_KEY);
const body = '{"merchant_payment_id":"order-1001","amount":"3400","payment_method":"sbp"}';
const request = {
  method: 'POST',
  url: 'http://127.0.0.1:8080/api/v1/payments',
  headers: {
    'Content-Type': 'application/json',
    'X-Request-ID': '6f1c0a47-3a0e-4d7e-9a55-2b8e0f6d9c11',
    'Content-Digest': contentDigest(body),
    'X-Request-Nonce': 'kQ7vN2xR9pL4sT8wZ1yB3c',
  },
};
const signed = await httpbis.signMessage(
  {
    key: { id: 'ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U', alg: 'ed25519', sign: async (d) => sign(null, d, key) },
    name: 'sig1',
    fields: COVERED,
    params: ['created', 'expires', 'keyid', 'alg'],
    paramValues: { created: new Date(1790856000 * 1000), expires: new Date(1790856300 * 1000) },
  },
  request,
);
const expected = {
  'Content-Digest': 'sha-256=:FXC5JFyOCZOi17NTXG++ifGmgVphQtG1JbIfBEG5p3E=:',
  'Signature-Input':
    'sig1=("@method" "@path" "content-digest" "x-request-id" "x-request-nonce");created=1790856000;expires=1790856300;keyid="ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519"',
  Signature: 'sig1=:o5B6yIu06SyHi7glptcrj5H9GTXLohUtbgJUVfQGtvAB2Nsj6zZfUBua4inQIMYNpk9clodQw6TtHybIVhwGCA==:',
};
let ok = true;
for (const [name, value] of Object.entries(expected)) {
  const got = signed.headers[name];
  if (got !== value) {
    ok = false;
    console.error(`${name}\n  expected ${value}\n  got      ${got}`);
  }
}
console.log(ok ? 'worked example: OK' : 'worked example: MISMATCH');
process.exit(ok ? 0 : 1);
