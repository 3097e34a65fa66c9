<?php
// A callback receiver for PHP's built-in server (development) or php-fpm behind a web server:
//
//   CALLBACK_SECRETS=whsec_current[,whsec_previous] php -S 127.0.0.1:9090 receiver.php
//
// Verifies X-Callback-Signature in constant time (hash_equals), refuses timestamps more than
// 300 s away, answers 2xx to an event already processed without processing it again, keeps
// decimals exact. Processed event ids are kept as files created atomically (fopen 'x'); in
// production use a UNIQUE column in your database, written with the order update.

declare(strict_types=1);
require __DIR__ . '/payments.php';

function answer(int $status, array $body): void
{
    http_response_code($status);
    header('Content-Type: application/json');
    echo json_encode($body);
}

$secrets = array_values(array_filter(array_map('trim', explode(',', getenv('CALLBACK_SECRETS') ?: ''))));
if ($_SERVER['REQUEST_METHOD'] !== 'POST' || parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) !== '/callbacks') {
    answer(404, ['error' => 'not found']);
    return;
}
$body = file_get_contents('php://input', false, null, 0, 64 * 1024); // raw bytes: verify before parsing
$timestamp = $_SERVER['HTTP_X_CALLBACK_TIMESTAMP'] ?? '';
$signature = $_SERVER['HTTP_X_CALLBACK_SIGNATURE'] ?? '';
if (!preg_match('/^[0-9]{1,12}$/', $timestamp)) {
    answer(400, ['error' => 'bad timestamp']);
    return;
}
if (abs(time() - (int) $timestamp) > 300) {
    answer(401, ['error' => 'stale timestamp']);
    return;
}
if (!$secrets || !callback_valid($timestamp, $signature, $body, $secrets)) {
    answer(401, ['error' => 'bad signature']);
    return;
}
$event = json_decode(decimals_as_strings($body), true); // amount stays "3400.50"
if (!is_array($event) || !preg_match('/^[0-9a-f-]{36}$/', $event['event_id'] ?? '')) {
    answer(400, ['error' => 'bad json']);
    return;
}
$dir = sys_get_temp_dir() . '/payments-receiver-' . substr(hash('sha256', $secrets[0]), 0, 12);
@mkdir($dir, 0700);
$marker = @fopen("$dir/{$event['event_id']}", 'x'); // fails when the id was processed already
if ($marker === false) {
    answer(200, ['status' => 'duplicate']);
    return;
}
fclose($marker);
// Apply the event: fulfil order $event['merchant_payment_id'] by $event['amount'] when
// $event['status'] is "completed", release it when "canceled".
file_put_contents('php://stdout', json_encode([
    'accepted' => $event['event_id'], 'payment' => $event['id'], 'order' => $event['merchant_payment_id'],
    'status' => $event['status'], 'amount' => $event['amount'],
]) . "\n");
answer(200, ['status' => 'ok']);
