// Create a payment (with retries), repeat it (200, same payment), read it back: the whole
// merchant side of a pay-in in a few lines. Prints one JSON summary line.
//
//   node create.mjs --credentials ../../../data/sandbox-credentials.json \
//       --order order-42 --amount 3400.50 --method sbp \
//       --callback-url http://127.0.0.1:9090/callbacks
//
// Without --credentials, PAYMENTS_BASE_URL, PAYMENTS_TOKEN, PAYMENTS_KEYID and
// PAYMENTS_PRIVATE_KEY_FILE (a PEM file) are used.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { PaymentsClient, credentialsFromFile } from './payments.mjs';

const { values: args } = parseArgs({
  options: {
    credentials: { type: 'string' },
    project: { type: 'string', default: 'demo' },
    order: { type: 'string', default: `order-${Date.now()}` },
    amount: { type: 'string', default: '3400.50' },
    method: { type: 'string', default: 'sbp' },
    'callback-url': { type: 'string' },
  },
});
const config = args.credentials
  ? credentialsFromFile(args.credentials, args.project)
  : {
      baseUrl: process.env.PAYMENTS_BASE_URL,
      token: process.env.PAYMENTS_TOKEN,
      keyid: process.env.PAYMENTS_KEYID,
      privateKeyPem: readFileSync(process.env.PAYMENTS_PRIVATE_KEY_FILE, 'utf8'),
    };
const client = new PaymentsClient(config);

const payment = {
  merchant_payment_id: args.order,
  amount: args.amount, // a string: sent exactly, never through a float
  payment_method: args.method,
  // Your own keys, echoed in the payment, the list (filterable) and the callback body.
  metadata: { order: args.order, source: 'node-guide' },
};
if (args['callback-url']) payment.callback_url = args['callback-url'];

function fail(step, r) {
  console.error(`${step}: HTTP ${r.status} ${r.text} (X-Request-ID ${r.requestId})`);
  process.exit(1);
}

const first = await client.createPayment(payment);
if (first.status !== 201 && first.status !== 200) fail('create', first);
const p = first.json;
if (p.status === 'processing') {
  // What the payer needs: exactly this amount, to this requisite, before expires_at.
  console.error(`pay ${p.amount} ${p.currency} to ${p.requisite} (${p.holder_name}, ${p.requisite_bank ?? 'any bank'}) before ${p.expires_at}`);
}
const again = await client.createPayment(payment); // the same order again: 200, same payment
if (again.status !== 200 || again.json.id !== p.id) fail('repeat', again);
const read = await client.getPayment(p.id);
if (read.status !== 200) fail('get', read);

console.log(
  JSON.stringify({
    id: p.id,
    order: p.merchant_payment_id, // what reconcile.mjs --order finds
    create: first.status,
    repeat: again.status,
    same_payment: again.json.id === p.id,
    get: read.status,
    status: read.json.status,
    amount: read.json.amount, // exact text, e.g. "3400.50"
    amount_usdt: read.json.merchant_information?.amount_usdt ?? null,
  }),
);
