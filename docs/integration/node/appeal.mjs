// Open an appeal for one order: the payer says they paid, another amount than asked, and sent
// the receipt. Finds the order's payment by metadata in the list (as reconcile.mjs does),
// opens the appeal (`paid_other_amount`, the amount, the receipt), sends the same appeal again
// (the same idempotency key, a new nonce: 200, the same appeal) and prints one JSON summary
// line. The provider on record or support decides later; an accepted appeal arrives as a
// `completed` callback with the amount found.
//
//   node appeal.mjs --credentials ../../../data/sandbox-credentials.json --order order-42 \
//       --amount 3390.50 --receipt receipt.pdf
//
// The token needs payments:read (the list) and payments:create (the appeal).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { PaymentsClient, credentialsFromFile, receipt } from './payments.mjs';

const { values: args } = parseArgs({
  options: {
    credentials: { type: 'string' },
    project: { type: 'string', default: 'demo' },
    order: { type: 'string' },
    amount: { type: 'string' },
    receipt: { type: 'string' },
    // Yours, naming this appeal: a retry with the same key and body finds it (200).
    key: { type: 'string' },
  },
});
for (const name of ['credentials', 'order', 'amount', 'receipt']) {
  if (!args[name]) {
    console.error(`--${name} is required`);
    process.exit(2);
  }
}
const client = new PaymentsClient(credentialsFromFile(args.credentials, args.project));

function fail(step, r) {
  const why = r.json?.code ? `${r.json.code}: ${r.json.message}` : r.text;
  console.error(`${step}: HTTP ${r.status} ${why} (X-Request-ID ${r.requestId})`);
  process.exit(1);
}

let file;
try {
  file = receipt(readFileSync(args.receipt));
} catch (e) {
  console.error(`receipt ${args.receipt}: ${e.message}`);
  process.exit(1);
}

// The list, filtered by one metadata key; the query string is part of what is signed.
const query = new URLSearchParams({ 'metadata[order]': args.order, limit: '10' });
const listed = await client.send('GET', `/api/v1/payments?${query}`);
if (listed.status !== 200) fail('list', listed);
const ids = listed.json.data.map((p) => p.id);
if (ids.length !== 1) {
  console.error(`list: ${ids.length} payments have metadata order=${args.order}, expected one`);
  process.exit(1);
}

const appeal = {
  idempotency_key: args.key ?? `appeal-${args.order}-1`,
  reason: 'paid_other_amount',
  claimed_amount: args.amount, // a string: sent exactly, never through a float
  receipts: [file],
};
const first = await client.openAppeal(ids[0], appeal);
if (first.status !== 201 && first.status !== 200) fail('appeal', first);
// The same appeal again, as after a lost answer: the same key and body, a new request.
const again = await client.openAppeal(ids[0], appeal);
if (again.status !== 200 || again.json.id !== first.json.id) fail('repeat', again);

console.log(
  JSON.stringify({
    order: args.order,
    appeal: first.status,
    repeat: again.status,
    same_appeal: again.json.id === first.json.id,
    id: first.json.id,
    state: first.json.state, // open, or under_review once the provider took it
    claimed_amount: first.json.claimed_amount, // exact text, e.g. "3390.50"
  }),
);
