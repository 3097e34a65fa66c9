<?php
// A merchant client for the payments API v1 in PHP 8.1+, with the platform only: sodium for
// Ed25519 (bundled since PHP 7.2), hash/hash_hmac for the digest and callbacks, and HTTP
// streams (no curl extension needed; Guzzle works the same way: set the headers below).
//
// There is no widely used RFC 9421 library for PHP, so the signature base is built here; it
// is short (RFC 9421 section 2.5), and `php payments.php worked-example` checks it against the
// published worked example.
//
// Decimals: json_decode turns 3400.50 into the float 3400.5. Send `X-Decimals: string` (done
// below) and the API writes amounts as strings; callbacks keep numbers, so receiver.php
// quotes them before decoding (decimals_as_strings()).

declare(strict_types=1);

const COVERED = ['@method', '@path', 'content-digest', 'x-request-id', 'x-request-nonce'];

/** The 64-byte sodium secret key from a PKCS#8 PEM Ed25519 private key. */
function ed25519_secret_key(string $pem): string
{
    $der = base64_decode(preg_replace('/-----[A-Z ]+-----|\s+/', '', $pem), true);
    // PKCS#8 for Ed25519 is a fixed 48-byte structure; the 32-byte seed is at the end.
    if ($der === false || strlen($der) !== 48 || substr($der, 0, 16) !== hex2bin('302e020100300506032b657004220420')) {
        throw new InvalidArgumentException('not a PKCS#8 Ed25519 private key');
    }
    return sodium_crypto_sign_secretkey(sodium_crypto_sign_seed_keypair(substr($der, 16, 32)));
}

function content_digest(string $body): string
{
    return 'sha-256=:' . base64_encode(hash('sha256', $body, true)) . ':';
}

function uuid4(): string
{
    $b = random_bytes(16);
    $b[6] = chr(ord($b[6]) & 0x0f | 0x40);
    $b[8] = chr(ord($b[8]) & 0x3f | 0x80);
    return vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex($b), 4));
}

/**
 * Signature-Input and Signature (label sig1) for a request whose headers (lower-case names)
 * include x-request-id, x-request-nonce and content-digest.
 */
function sign_request(string $method, string $pathAndQuery, array $headers, string $secretKey, string $keyid, int $created): array
{
    [$path, $query] = array_pad(explode('?', $pathAndQuery, 2), 2, null);
    $components = $query === null ? COVERED : [...COVERED, '@query'];
    $params = '(' . implode(' ', array_map(fn ($c) => "\"$c\"", $components)) . ')'
        . sprintf(';created=%d;expires=%d;keyid="%s";alg="ed25519"', $created, $created + 300, $keyid);
    $lines = [];
    foreach ($components as $c) {
        $value = match ($c) {
            '@method' => $method,
            '@path' => $path,
            '@query' => '?' . $query,
            default => trim($headers[$c]),
        };
        $lines[] = "\"$c\": $value";
    }
    $lines[] = "\"@signature-params\": $params";
    $signature = sodium_crypto_sign_detached(implode("\n", $lines), $secretKey);
    return ['signature-input' => "sig1=$params", 'signature' => 'sig1=:' . base64_encode($signature) . ':'];
}

final class PaymentsClient
{
    private string $secretKey;

    public function __construct(private string $baseUrl, private string $token, private string $keyid, string $privateKeyPem)
    {
        $this->baseUrl = rtrim($baseUrl, '/');
        $this->secretKey = ed25519_secret_key($privateKeyPem);
    }

    /** One signed request: ['status' => int, 'request_id' => ?string, 'body' => string, 'json' => ?array]. */
    public function send(string $method, string $pathAndQuery, string $body = ''): array
    {
        $headers = [
            'authorization' => "Bearer {$this->token}",
            'x-request-id' => uuid4(),
            'x-request-nonce' => rtrim(strtr(base64_encode(random_bytes(24)), '+/', '-_'), '='),
            'content-digest' => content_digest($body),
            'x-decimals' => 'string', // amounts as "3400.50": json_decode cannot keep decimals
        ];
        if ($body !== '') {
            $headers['content-type'] = 'application/json';
        }
        $headers += sign_request($method, $pathAndQuery, $headers, $this->secretKey, $this->keyid, time());
        $context = stream_context_create(['http' => [
            'method' => $method,
            'header' => implode("\r\n", array_map(fn ($k, $v) => "$k: $v", array_keys($headers), $headers)),
            'content' => $body,
            'timeout' => 15,
            'ignore_errors' => true, // read 4xx/5xx bodies too
        ]]);
        $text = @file_get_contents($this->baseUrl . $pathAndQuery, false, $context);
        if ($text === false) {
            throw new RuntimeException("no answer from {$this->baseUrl}");
        }
        $status = (int) explode(' ', $http_response_header[0])[1];
        $requestId = null;
        foreach ($http_response_header as $line) {
            if (stripos($line, 'x-request-id:') === 0) {
                $requestId = trim(substr($line, 13));
            }
        }
        return ['status' => $status, 'request_id' => $requestId, 'body' => $text, 'json' => json_decode($text, true)];
    }

    /**
     * POST /api/v1/payments, repeated with the same body (same merchant_payment_id) after a
     * timeout, a connection error, 429, 500 or 503: a new request each time (fresh nonce and
     * signature), exponential backoff with jitter. 201 new, 200 existing, else final.
     */
    public function createPayment(array $payment, int $attempts = 5): array
    {
        $body = json_encode($payment, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
        return $this->postWithRetries('/api/v1/payments', $body, 'create', $attempts);
    }

    /**
     * POST /api/v1/payments/{id}/appeals: the payer says they paid (reason paid_but_canceled,
     * paid_other_amount with claimed_amount, paid_twice), with up to two receipts (receipt()).
     * Signed like a create and retried like one: the same body, so the same idempotency_key,
     * after a timeout, a connection error, 429, 500 or 503 (also the 503 of a node reading too
     * many uploads). 201 new, 200 the one stored before under that key for the same request,
     * else final (409 appeal_idempotency_conflict: the key was used for another request; 422
     * receipt_invalid: a receipt is not a PDF, PNG or JPEG by its content). The appeal's
     * amounts are numbers whatever X-Decimals says, so they are quoted before decoding.
     */
    public function openAppeal(string $paymentId, array $appeal, int $attempts = 5): array
    {
        $body = json_encode($appeal, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE);
        $r = $this->postWithRetries('/api/v1/payments/' . rawurlencode($paymentId) . '/appeals', $body, 'appeal', $attempts);
        $r['json'] = json_decode(preg_replace('/"(claimed_amount|resolved_amount)":(-?[0-9]+(?:\.[0-9]+)?)/', '"$1":"$2"', $r['body']), true);
        return $r;
    }

    /** The same POST body until an answer that is final; $what names it in the error. */
    private function postWithRetries(string $path, string $body, string $what, int $attempts): array
    {
        $last = null;
        for ($attempt = 1; $attempt <= $attempts; $attempt++) {
            try {
                $r = $this->send('POST', $path, $body);
                $code = $r['json']['code'] ?? null;
                if (!in_array($r['status'], [429, 500, 503], true) && $code !== 'request_timeout' || $attempt === $attempts) {
                    return $r;
                }
                $last = "{$r['status']} $code";
            } catch (RuntimeException $e) { // it may have been stored; the same request finds it
                $last = $e->getMessage();
            }
            usleep((int) (min(8000, 250 * 2 ** $attempt) * (0.5 + mt_rand() / mt_getrandmax() / 2) * 1000));
        }
        throw new RuntimeException("$what failed after $attempts attempts: $last");
    }

    public function getPayment(string $id): array
    {
        return $this->send('GET', '/api/v1/payments/' . rawurlencode($id));
    }

    /** GET /api/v1/payments/{id}/history: every change of status or amount, oldest first (the creation first). */
    public function getPaymentHistory(string $id): array
    {
        return $this->send('GET', '/api/v1/payments/' . rawurlencode($id) . '/history');
    }
}

/**
 * A receipt of an appeal from the file's bytes: ['content_type' => ..., 'data' => standard
 * base64], the content type told by the first bytes (%PDF, the PNG signature, JPEG's FF D8
 * FF). The service checks the file by its content too; anything else is refused here.
 */
function receipt(string $bytes): array
{
    $type = match (true) {
        str_starts_with($bytes, '%PDF') => 'application/pdf',
        str_starts_with($bytes, "\x89PNG\r\n\x1a\n") => 'image/png',
        str_starts_with($bytes, "\xff\xd8\xff") => 'image/jpeg',
        default => throw new InvalidArgumentException('a receipt must be a PDF, PNG or JPEG file'),
    };
    return ['content_type' => $type, 'data' => base64_encode($bytes)];
}

/** True when some v1= value is the HMAC (key: the whole whsec_ string) of "$timestamp.$body". */
function callback_valid(string $timestamp, string $header, string $body, array $secrets): bool
{
    foreach ($secrets as $secret) {
        $expected = hash_hmac('sha256', "$timestamp.$body", $secret);
        foreach (explode(',', $header) as $part) {
            $part = trim($part);
            if (str_starts_with($part, 'v1=') && hash_equals($expected, substr($part, 3))) {
                return true;
            }
        }
    }
    return false;
}

/** A verified callback body with its decimal fields quoted, so json_decode keeps their text. */
function decimals_as_strings(string $body): string
{
    return preg_replace('/"(amount|initial_amount|rate|course)":(-?[0-9]+(?:\.[0-9]+)?)/', '"$1":"$2"', $body);
}

if (PHP_SAPI === 'cli' && realpath($argv[0]) === __FILE__) {
    $command = $argv[1] ?? '';
    if ($command === 'worked-example') {
        $pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----";
        $body = '{"merchant_payment_id":"order-1001","amount":"3400","payment_method":"sbp"}';
        $headers = ['x-request-id' => '6f1c0a47-3a0e-4d7e-9a55-2b8e0f6d9c11', 'x-request-nonce' => 'kQ7vN2xR9pL4sT8wZ1yB3c', 'content-digest' => content_digest($body)];
        $signed = sign_request('POST', '/api/v1/payments', $headers, ed25519_secret_key($pem), 'ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U', 1790856000);
        $ok = $headers['content-digest'] === 'sha-256=:FXC5JFyOCZOi17NTXG++ifGmgVphQtG1JbIfBEG5p3E=:'
            && $signed['signature'] === 'sig1=:o5B6yIu06SyHi7glptcrj5H9GTXLohUtbgJUVfQGtvAB2Nsj6zZfUBua4inQIMYNpk9clodQw6TtHybIVhwGCA==:';
        echo $ok ? "worked example: OK\n" : "worked example: MISMATCH\n";
        exit($ok ? 0 : 1);
    }
    if ($command === 'create') {
        $opts = [];
        for ($i = 2; $i + 1 < $argc; $i += 2) {
            $opts[ltrim($argv[$i], '-')] = $argv[$i + 1];
        }
        $c = json_decode(file_get_contents($opts['credentials'] ?? 'data/sandbox-credentials.json'), true);
        $client = new PaymentsClient($c['base_url'], $c['token'], $c['keyid'], $c['private_key_pem']);
        $order = $opts['order'] ?? 'order-' . time();
        $payment = ['merchant_payment_id' => $order, 'amount' => $opts['amount'] ?? '3400.50', 'payment_method' => $opts['method'] ?? 'sbp',
            // Your own keys, echoed in the payment, the list (filterable) and the callback body.
            'metadata' => ['order' => $order, 'source' => 'php-guide']];
        if (isset($opts['callback-url'])) {
            $payment['callback_url'] = $opts['callback-url'];
        }
        $first = $client->createPayment($payment);
        $p = $first['json'] ?? [];
        if (($p['status'] ?? '') === 'processing') {
            // What the payer needs: exactly this amount, to this requisite, before expires_at.
            fwrite(STDERR, sprintf("pay %s %s to %s (%s, %s) before %s\n", $p['amount'], $p['currency'],
                $p['requisite'], $p['holder_name'], $p['requisite_bank'] ?? 'any bank', $p['expires_at']));
        }
        $again = $client->createPayment($payment); // the same order again: 200, same payment
        $read = $client->getPayment($first['json']['id'] ?? '');
        if (!in_array($first['status'], [200, 201], true) || $again['status'] !== 200 || $read['status'] !== 200) {
            fwrite(STDERR, "unexpected: {$first['body']} {$again['body']} {$read['body']}\n");
            exit(1);
        }
        echo json_encode([
            'id' => $first['json']['id'], 'order' => $first['json']['merchant_payment_id'], 'create' => $first['status'], 'repeat' => $again['status'],
            'same_payment' => $again['json']['id'] === $first['json']['id'], 'get' => $read['status'],
            'status' => $read['json']['status'], 'amount' => $read['json']['amount'], // "3400.50"
            'amount_usdt' => $read['json']['merchant_information']['amount_usdt'] ?? null,
        ]), "\n";
        exit(0);
    }
    if ($command === 'reconcile') {
        // Find an order's payment by metadata in the list, print its status history, read its
        // callback events, resend the newest (a new event_id, one attempt). Needs
        // payments:read, events:read and events:resend.
        $opts = [];
        for ($i = 2; $i + 1 < $argc; $i += 2) {
            $opts[ltrim($argv[$i], '-')] = $argv[$i + 1];
        }
        $c = json_decode(file_get_contents($opts['credentials'] ?? 'data/sandbox-credentials.json'), true);
        $client = new PaymentsClient($c['base_url'], $c['token'], $c['keyid'], $c['private_key_pem']);
        $fail = function (string $step, array $r) {
            fwrite(STDERR, "$step: HTTP {$r['status']} {$r['body']} (X-Request-ID {$r['request_id']})\n");
            exit(1);
        };
        // The list, filtered by one metadata key; the query string is part of what is signed.
        $listed = $client->send('GET', '/api/v1/payments?' . http_build_query(['metadata[order]' => $opts['order'], 'limit' => 10]));
        if ($listed['status'] !== 200 || count($listed['json']['data']) !== 1) {
            $fail('list', $listed);
        }
        $id = $listed['json']['data'][0]['id'];
        // What happened to the payment, oldest first, whether a callback followed or not.
        $history = $client->getPaymentHistory($id);
        if ($history['status'] !== 200) {
            $fail('history', $history);
        }
        foreach ($history['json']['history'] as $h) {
            fwrite(STDERR, "history {$h['at']} {$h['status']} {$h['cause']} " . ($h['source'] ?? '-') . " {$h['amount']}\n");
        }
        // The payment's callback events, newest first, each with its attempts.
        $events = $client->send('GET', '/api/v1/events?' . http_build_query(['payment_id' => $id]));
        if ($events['status'] !== 200 || count($events['json']['data']) === 0) {
            $fail('events', $events);
        }
        foreach ($events['json']['data'] as $e) {
            $tried = implode(', ', array_map(fn ($a) => $a['result'], $e['attempts']));
            fwrite(STDERR, "event {$e['id']} {$e['type']} {$e['status']}: {$e['delivery_state']} ($tried)\n");
        }
        // Resend the newest: a new event with a new event_id, delivered once.
        $resent = $client->send('POST', "/api/v1/events/{$events['json']['data'][0]['id']}/resend");
        if ($resent['status'] !== 202) {
            $fail('resend', $resent);
        }
        echo json_encode(['listed' => [$id], 'history' => array_column($history['json']['history'], 'cause'),
            'events' => count($events['json']['data']),
            'resent' => $resent['status'], 'new_event' => $resent['json']['id']]), "\n";
        exit(0);
    }
    if ($command === 'appeal') {
        // Open an appeal for an order: the payer says they paid another amount than asked, with
        // the receipt. Finds the order's payment by metadata in the list (as reconcile does),
        // opens the appeal (paid_other_amount), sends it again (the same idempotency key, a new
        // nonce: 200, the same appeal). The provider on record or support decides later; an
        // accepted appeal arrives as a "completed" callback. Needs payments:read and
        // payments:create.
        $opts = [];
        for ($i = 2; $i + 1 < $argc; $i += 2) {
            $opts[ltrim($argv[$i], '-')] = $argv[$i + 1];
        }
        foreach (['order', 'amount', 'receipt'] as $required) {
            if (!isset($opts[$required])) {
                fwrite(STDERR, "appeal: --$required is required\n");
                exit(2);
            }
        }
        $fail = function (string $step, array $r) {
            $why = isset($r['json']['code']) ? "{$r['json']['code']}: {$r['json']['message']}" : $r['body'];
            fwrite(STDERR, "$step: HTTP {$r['status']} $why (X-Request-ID {$r['request_id']})\n");
            exit(1);
        };
        $bytes = @file_get_contents($opts['receipt']);
        try {
            $file = receipt($bytes === false ? '' : $bytes);
        } catch (InvalidArgumentException $e) {
            fwrite(STDERR, "receipt {$opts['receipt']}: " . ($bytes === false ? 'cannot be read' : $e->getMessage()) . "\n");
            exit(1);
        }
        $c = json_decode(file_get_contents($opts['credentials'] ?? 'data/sandbox-credentials.json'), true);
        $client = new PaymentsClient($c['base_url'], $c['token'], $c['keyid'], $c['private_key_pem']);
        // The list, filtered by one metadata key; the query string is part of what is signed.
        $listed = $client->send('GET', '/api/v1/payments?' . http_build_query(['metadata[order]' => $opts['order'], 'limit' => 10]));
        if ($listed['status'] !== 200 || count($listed['json']['data']) !== 1) {
            $fail('list', $listed);
        }
        $id = $listed['json']['data'][0]['id'];
        $appeal = [
            // Yours, naming this appeal: a retry with the same key and body finds it (200).
            'idempotency_key' => $opts['key'] ?? "appeal-{$opts['order']}-1",
            'reason' => 'paid_other_amount',
            'claimed_amount' => $opts['amount'], // a string: sent exactly, never through a float
            'receipts' => [$file],
        ];
        $first = $client->openAppeal($id, $appeal);
        if (!in_array($first['status'], [200, 201], true)) {
            $fail('appeal', $first);
        }
        // The same appeal again, as after a lost answer: the same key and body, a new request.
        $again = $client->openAppeal($id, $appeal);
        if ($again['status'] !== 200 || $again['json']['id'] !== $first['json']['id']) {
            $fail('repeat', $again);
        }
        echo json_encode([
            'order' => $opts['order'], 'appeal' => $first['status'], 'repeat' => $again['status'],
            'same_appeal' => $again['json']['id'] === $first['json']['id'], 'id' => $first['json']['id'],
            'state' => $first['json']['state'], // open, or under_review once the provider took it
            'claimed_amount' => $first['json']['claimed_amount'], // "3390.50"
        ]), "\n";
        exit(0);
    }
    fwrite(STDERR, "usage: php payments.php worked-example | create --credentials FILE [--order ID --amount A --method M --callback-url URL] | reconcile --credentials FILE --order ID | appeal --credentials FILE --order ID --amount A --receipt FILE [--key K]\n");
    exit(2);
}
