// A callback receiver: verifies X-Callback-Signature (HMAC-SHA256, constant-time comparison,
// every v1= value, current and previous secret), refuses timestamps more than 300 s away,
// answers 2xx to an event it has already processed without processing it again, and keeps
// decimals exact. Prints one JSON line per processed event.
//
//   CALLBACK_SECRETS=whsec_current[,whsec_previous] PORT=9090 node receiver.mjs
//
// In production keep the processed event ids in your database (a UNIQUE column written in the
// same transaction as the order update) instead of the in-memory Set below, answer quickly and
// do slow work after answering, and read the payment back with GET when in doubt.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import { parseJson } from './payments.mjs';

const SECRETS = (process.env.CALLBACK_SECRETS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
const PORT = Number(process.env.PORT ?? 9090);
const PATH = '/callbacks';
const TOLERANCE_SECONDS = 300;
const MAX_BODY = 64 * 1024;
if (SECRETS.length === 0) {
  console.error('set CALLBACK_SECRETS to the project callback secret (whsec_...)');
  process.exit(2);
}

const processed = new Set(); // event ids already applied (use your database)

/** true when some v1= value is the HMAC of `${timestamp}.${body}` under some secret. */
export function signatureValid(timestamp, header, body, secrets = SECRETS) {
  const given = header
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part.startsWith('v1=')) // other schemes are ignored, not errors
    .map((part) => Buffer.from(part.slice(3), 'utf8'));
  for (const secret of secrets) {
    const expected = Buffer.from(
      createHmac('sha256', secret) // the key is the whole secret string, whsec_ included
        .update(`${timestamp}.`)
        .update(body)
        .digest('hex'),
      'utf8',
    );
    for (const value of given) {
      if (value.length === expected.length && timingSafeEqual(value, expected)) return true;
    }
  }
  return false;
}

function answer(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

const server = createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== PATH) return answer(res, 404, { error: 'not found' });
  const chunks = [];
  let size = 0;
  req.on('data', (chunk) => {
    size += chunk.length;
    if (size > MAX_BODY) {
      answer(res, 413, { error: 'too large' });
      req.destroy();
    } else chunks.push(chunk);
  });
  req.on('end', () => {
    if (res.headersSent) return;
    const body = Buffer.concat(chunks); // the raw bytes: verify before parsing
    const timestamp = req.headers['x-callback-timestamp'] ?? '';
    const signature = req.headers['x-callback-signature'] ?? '';
    if (!/^[0-9]{1,12}$/.test(timestamp)) return answer(res, 400, { error: 'bad timestamp' });
    if (Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE_SECONDS) {
      return answer(res, 401, { error: 'stale timestamp' });
    }
    if (!signatureValid(timestamp, signature, body)) return answer(res, 401, { error: 'bad signature' });
    let event;
    try {
      event = parseJson(body.toString('utf8')); // amounts stay exact text: "3400.50"
    } catch {
      return answer(res, 400, { error: 'bad json' });
    }
    if (processed.has(event.event_id)) return answer(res, 200, { status: 'duplicate' });
    // Apply the event: fulfil order `event.merchant_payment_id` by `event.amount` when
    // `event.status` is "completed", release it when "canceled". Then remember the id.
    processed.add(event.event_id);
    console.log(
      JSON.stringify({
        accepted: event.event_id,
        payment: event.id,
        order: event.merchant_payment_id,
        status: event.status,
        amount: event.amount,
      }),
    );
    return answer(res, 200, { status: 'ok' });
  });
});

server.listen(PORT, '127.0.0.1', () => {
  const { port } = server.address();
  console.log(JSON.stringify({ listening: `http://127.0.0.1:${port}${PATH}` }));
});
