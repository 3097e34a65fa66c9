// A merchant client for the payments API v1 in Node.js (18 or later).
//
// - RFC 9421 request signatures with the `http-message-signatures` library, set up exactly as
//   the API wants them: label `sig1`; components "@method" "@path" "content-digest"
//   "x-request-id" "x-request-nonce"; parameters created, expires (created + 300), keyid and
//   alg="ed25519". The library's defaults differ (label `sig`, no expires), so pass them all.
// - Content-Digest (RFC 9530) and Ed25519 with the platform's own `node:crypto`.
// - Decimals kept exact: JSON.parse would read 3400.50 as 3400.5 and round 18-digit amounts,
//   so answers are parsed with `lossless-json` and every number becomes its exact text.
//   (Or send `X-Decimals: string` and the server writes the decimals as strings.)
import { createHash, createPrivateKey, randomBytes, randomUUID, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { httpbis } from 'http-message-signatures';
import { isLosslessNumber, parse as parseLossless } from 'lossless-json';

/** The components every signed request covers (plus "@query" when there is a query string). */
export const COVERED = ['@method', '@path', 'content-digest', 'x-request-id', 'x-request-nonce'];

/** JSON text -> value, with every number as its exact decimal text ("3400.50"). */
export function parseJson(text) {
  return parseLossless(text, (_key, value) => (isLosslessNumber(value) ? value.toString() : value));
}

/** `sha-256=:<base64>:` of the exact body bytes. */
export function contentDigest(body) {
  return `sha-256=:${createHash('sha256').update(body).digest('base64')}:`;
}

/** The receipts an appeal takes, by their first bytes. */
const RECEIPT_TYPES = [
  ['application/pdf', [0x25, 0x50, 0x44, 0x46]], // %PDF
  ['image/png', [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]],
  ['image/jpeg', [0xff, 0xd8, 0xff]],
];

/**
 * A receipt of an appeal from the file's bytes: {content_type, data} with the content type
 * told by the first bytes (`%PDF`, the PNG signature, JPEG's FF D8 FF) and the data in
 * standard base64. The service checks the file by its content too; anything else is refused
 * here before it is sent.
 */
export function receipt(bytes) {
  const found = RECEIPT_TYPES.find(([, first]) => first.every((b, i) => bytes[i] === b));
  if (!found) throw new Error('a receipt must be a PDF, PNG or JPEG file');
  return { content_type: found[0], data: Buffer.from(bytes).toString('base64') };
}

/**
 * Reads the sandbox's `sandbox-credentials.json` (written by the server's first start): the
 * demo project's credentials, or with `project = 'test'` the test project's, its callback
 * secret included (`test_project.callback_secret`: it signs the test payments' callbacks).
 */
export function credentialsFromFile(path, project = 'demo') {
  const c = JSON.parse(readFileSync(path, 'utf8'));
  const p = project === 'test' ? c.test_project : c;
  return {
    baseUrl: c.base_url,
    token: p.token,
    keyid: p.keyid,
    privateKeyPem: p.private_key_pem,
    callbackSecret: p.callback_secret,
  };
}

/** Statuses and codes after which the same create may be sent again (new nonce, new signature). */
function retryable(status, code) {
  return status === 429 || status === 500 || status === 503 || code === 'request_timeout';
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class PaymentsClient {
  /** @param {{baseUrl: string, token: string, keyid: string, privateKeyPem: string}} options */
  constructor({ baseUrl, token, keyid, privateKeyPem }) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.token = token;
    this.keyid = keyid;
    this.key = createPrivateKey(privateKeyPem);
  }

  /**
   * One signed request. `body` is the exact bytes to send ('' for a GET): they are digested,
   * signed and sent unchanged. Returns {status, requestId, text, json}.
   */
  async send(method, path, body = '', { timeoutMs = 15000, headers: extra = {} } = {}) {
    const url = new URL(this.baseUrl + path);
    const headers = {
      Authorization: `Bearer ${this.token}`,
      'X-Request-ID': randomUUID(),
      'X-Request-Nonce': randomBytes(24).toString('base64url'),
      'Content-Digest': contentDigest(body),
      ...extra,
    };
    if (body) headers['Content-Type'] = 'application/json';
    const created = Math.floor(Date.now() / 1000);
    const signed = await httpbis.signMessage(
      {
        key: { id: this.keyid, alg: 'ed25519', sign: async (data) => sign(null, data, this.key) },
        name: 'sig1',
        fields: url.search ? [...COVERED, '@query'] : COVERED,
        params: ['created', 'expires', 'keyid', 'alg'],
        paramValues: { created: new Date(created * 1000), expires: new Date((created + 300) * 1000) },
      },
      { method, url: url.toString(), headers },
    );
    const response = await fetch(url, {
      method,
      headers: signed.headers,
      body: body || undefined,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    let json = null;
    try {
      json = parseJson(text);
    } catch {
      // not JSON (a proxy's error page): keep the text
    }
    return { status: response.status, requestId: response.headers.get('x-request-id'), text, json };
  }

  /**
   * POST /api/v1/payments, repeated with the same body (and so the same merchant_payment_id)
   * after a timeout, a dropped connection, 429, 500 or 503: a new request each time (fresh
   * nonce and signature), with exponential backoff and jitter; 429 waits its Retry-After.
   * `201` is a new payment, `200` the existing one; anything else is final and returned.
   */
  async createPayment(payment, { attempts = 5 } = {}) {
    const body = JSON.stringify(payment); // amounts as strings: "3400.50" is sent exactly
    return this.postWithRetries('/api/v1/payments', body, `create ${payment.merchant_payment_id}`, attempts);
  }

  /**
   * POST /api/v1/payments/{id}/appeals: the payer says they paid (`reason`: paid_but_canceled,
   * paid_other_amount with `claimed_amount`, paid_twice), with up to two receipts
   * ({content_type, data: standard base64}; see receipt()). Signed like a create and retried
   * like one: the same body, so the same `idempotency_key`, after a timeout, a dropped
   * connection, 429, 500 or 503 (also the 503 of a node reading too many uploads). `201` is a
   * new appeal, `200` the one stored before under that key for the same request; anything else
   * is final and returned (409 appeal_idempotency_conflict: the key was used for another
   * request; 422 receipt_invalid: a receipt is not a PDF, PNG or JPEG by its content).
   */
  async openAppeal(paymentId, appeal, { attempts = 5 } = {}) {
    const body = JSON.stringify(appeal); // claimed_amount as a string: sent exactly
    const path = `/api/v1/payments/${encodeURIComponent(paymentId)}/appeals`;
    return this.postWithRetries(path, body, `appeal ${appeal.idempotency_key}`, attempts);
  }

  /** The same POST body until an answer that is final; `what` names it in the error. */
  async postWithRetries(path, body, what, attempts) {
    let lastError;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        const r = await this.send('POST', path, body);
        if (!retryable(r.status, r.json?.code) || attempt === attempts) return r;
        lastError = new Error(`${r.status} ${r.json?.code}`);
      } catch (e) {
        // timeout or connection error: it may have been stored; the same request finds it
        lastError = e;
        if (attempt === attempts) break;
      }
      await sleep(Math.min(8000, 250 * 2 ** attempt) * (0.5 + Math.random() / 2));
    }
    throw new Error(`${what} failed after ${attempts} attempts: ${lastError}`);
  }

  /** GET /api/v1/payments/{id}: the source of truth for status and amount. Signed (harmless when not required). */
  async getPayment(id) {
    return this.send('GET', `/api/v1/payments/${encodeURIComponent(id)}`);
  }

  /**
   * GET /api/v1/payments/{id}/history: every change of status or amount, oldest first (the
   * creation first), with when, why (`cause`) and who (`source`). Signed like getPayment.
   */
  async getPaymentHistory(id) {
    return this.send('GET', `/api/v1/payments/${encodeURIComponent(id)}/history`);
  }
}
