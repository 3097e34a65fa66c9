// Reconcile one order: find its payment by metadata in the list, print its status history, read
// the payment's callback events, and resend the newest one (a new event_id, one attempt). Prints
// one JSON summary line.
//
//   node reconcile.mjs --credentials ../../../data/sandbox-credentials.json --order order-42
//
// The token needs payments:read, events:read and events:resend (the sandbox's has them).
import { parseArgs } from 'node:util';
import { PaymentsClient, credentialsFromFile } from './payments.mjs';

const { values: args } = parseArgs({
  options: {
    credentials: { type: 'string' },
    project: { type: 'string', default: 'demo' },
    order: { type: 'string' },
  },
});
const client = new PaymentsClient(credentialsFromFile(args.credentials, args.project));

function fail(step, r) {
  console.error(`${step}: HTTP ${r.status} ${r.text} (X-Request-ID ${r.requestId})`);
  process.exit(1);
}

// The list, filtered by one metadata key; the query string is part of what is signed.
const query = new URLSearchParams({ 'metadata[order]': args.order, limit: '10' });
const listed = await client.send('GET', `/api/v1/payments?${query}`);
if (listed.status !== 200) fail('list', listed);
const ids = listed.json.data.map((p) => p.id);
if (ids.length !== 1) fail('list: expected one payment', listed);

// What happened to the payment, oldest first, whether a callback followed or not.
const history = await client.getPaymentHistory(ids[0]);
if (history.status !== 200) fail('history', history);
for (const h of history.json.history) {
  console.error(`history ${h.at} ${h.status} ${h.cause} ${h.source ?? '-'} ${h.amount}`);
}

// The payment's callback events, newest first, each with its attempts.
const events = await client.send('GET', `/api/v1/events?${new URLSearchParams({ payment_id: ids[0] })}`);
if (events.status !== 200) fail('events', events);
const data = events.json.data;
for (const e of data) {
  const tried = e.attempts.map((a) => a.result).join(', ') || 'not tried yet';
  console.error(`event ${e.id} ${e.type} ${e.status}: ${e.delivery_state} (${tried})`);
}
if (data.length === 0) fail('events: none for the payment', events);

// Resend the newest: a new event with a new event_id, delivered once.
const resent = await client.send('POST', `/api/v1/events/${data[0].id}/resend`);
if (resent.status !== 202) fail('resend', resent);

console.log(
  JSON.stringify({
    listed: ids,
    history: history.json.history.map((h) => h.cause),
    events: data.length,
    resent: resent.status,
    new_event: resent.json.id,
  }),
);
