// A merchant client for the payments API v1 in Java 17+, with the JDK's own crypto (Ed25519
// since Java 15, SHA-256, HmacSHA256, MessageDigest.isEqual for constant-time comparison), its
// HttpClient and HttpServer, and Jackson with USE_BIG_DECIMAL_FOR_FLOATS so 3400.50 stays a
// BigDecimal "3400.50" (never a double), and a node factory that keeps the scale as written.
//
// There is no widely used RFC 9421 library for Java, so the signature base is built here; it
// is short (RFC 9421 section 2.5), and `worked-example` checks it against the published one.
//
//   CP=jackson-databind.jar:jackson-core.jar:jackson-annotations.jar   (Maven:
//     com.fasterxml.jackson.core:jackson-databind:2.17.x)
//   java -cp $CP Payments.java worked-example
//   java -cp $CP Payments.java create --credentials data/sandbox-credentials.json --amount 3400.50
//   CALLBACK_SECRETS=whsec_... PORT=9090 java -cp $CP Payments.java receiver
//   java -cp $CP Payments.java reconcile --credentials data/sandbox-credentials.json --order order-42
//   java -cp $CP Payments.java appeal --credentials data/sandbox-credentials.json --order order-42 \
//       --amount 3390.50 --receipt receipt.pdf

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.MessageDigest;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class Payments {
    static final List<String> COVERED = List.of("@method", "@path", "content-digest", "x-request-id", "x-request-nonce");
    static final ObjectMapper JSON = JsonMapper.builder()
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS) // 3400.50 -> BigDecimal, not double
            // Without this, readTree's DecimalNode strips trailing zeros (3400.50 -> 3400.5).
            .nodeFactory(JsonNodeFactory.withExactBigDecimals(true))
            .build();
    static final SecureRandom RANDOM = new SecureRandom();

    static PrivateKey parsePrivateKey(String pem) throws Exception {
        String b64 = pem.replaceAll("-----[A-Z ]+-----|\\s", "");
        return KeyFactory.getInstance("Ed25519").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(b64)));
    }

    static String contentDigest(byte[] body) throws Exception {
        return "sha-256=:" + Base64.getEncoder().encodeToString(MessageDigest.getInstance("SHA-256").digest(body)) + ":";
    }

    /** Signature-Input and Signature (label sig1); headers has lower-case names. */
    static Map<String, String> sign(String method, String path, String query, Map<String, String> headers,
                                    PrivateKey key, String keyid, long created) throws Exception {
        List<String> components = new ArrayList<>(COVERED);
        if (query != null) components.add("@query");
        StringBuilder inner = new StringBuilder("(");
        for (int i = 0; i < components.size(); i++) inner.append(i == 0 ? "" : " ").append('"').append(components.get(i)).append('"');
        String params = inner + ")" + ";created=" + created + ";expires=" + (created + 300) + ";keyid=\"" + keyid + "\";alg=\"ed25519\"";
        StringBuilder base = new StringBuilder();
        for (String c : components) {
            String value = switch (c) {
                case "@method" -> method;
                case "@path" -> path;
                case "@query" -> "?" + query;
                default -> headers.get(c).trim();
            };
            base.append('"').append(c).append("\": ").append(value).append('\n');
        }
        base.append("\"@signature-params\": ").append(params);
        Signature s = Signature.getInstance("Ed25519");
        s.initSign(key);
        s.update(base.toString().getBytes(StandardCharsets.US_ASCII));
        return Map.of("signature-input", "sig1=" + params,
                "signature", "sig1=:" + Base64.getEncoder().encodeToString(s.sign()) + ":");
    }

    record ApiResponse(int status, String requestId, String body, JsonNode json) {}

    static final class Client {
        final String baseUrl, token, keyid;
        final PrivateKey key;
        final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

        Client(String baseUrl, String token, String keyid, String privateKeyPem) throws Exception {
            this.baseUrl = baseUrl.replaceAll("/+$", "");
            this.token = token;
            this.keyid = keyid;
            this.key = parsePrivateKey(privateKeyPem);
        }

        /** One signed request; body is the exact bytes digested, signed and sent. */
        ApiResponse send(String method, String pathAndQuery, byte[] body) throws Exception {
            String[] pq = pathAndQuery.split("\\?", 2);
            byte[] nonce = new byte[24];
            RANDOM.nextBytes(nonce);
            Map<String, String> headers = new LinkedHashMap<>();
            headers.put("authorization", "Bearer " + token);
            headers.put("x-request-id", UUID.randomUUID().toString());
            headers.put("x-request-nonce", Base64.getUrlEncoder().withoutPadding().encodeToString(nonce));
            headers.put("content-digest", contentDigest(body));
            if (body.length > 0) headers.put("content-type", "application/json");
            headers.putAll(sign(method, pq[0], pq.length > 1 ? pq[1] : null, headers, key, keyid, System.currentTimeMillis() / 1000));
            HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(baseUrl + pathAndQuery))
                    .timeout(Duration.ofSeconds(15))
                    .method(method, body.length > 0 ? HttpRequest.BodyPublishers.ofByteArray(body) : HttpRequest.BodyPublishers.noBody());
            headers.forEach(b::header);
            HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
            JsonNode json = null;
            try { json = JSON.readTree(r.body()); } catch (IOException notJson) { /* a proxy's error page */ }
            return new ApiResponse(r.statusCode(), r.headers().firstValue("x-request-id").orElse(null), r.body(), json);
        }

        /**
         * POST /api/v1/payments, repeated with the same body (same merchant_payment_id) after a
         * timeout, a connection error, 429, 500 or 503: a new request each time (fresh nonce and
         * signature), exponential backoff with jitter. 201 new, 200 existing, else final.
         */
        ApiResponse createPayment(ObjectNode payment, int attempts) throws Exception {
            byte[] body = JSON.writeValueAsBytes(payment); // amounts as strings: "3400.50" exactly
            return postWithRetries("/api/v1/payments", body, "create", attempts);
        }

        /**
         * POST /api/v1/payments/{id}/appeals: the payer says they paid (reason paid_but_canceled,
         * paid_other_amount with claimed_amount, paid_twice), with up to two receipts (see
         * receipt()). Signed like a create and retried like one: the same body, so the same
         * idempotency_key, after a timeout, a connection error, 429, 500 or 503 (also the 503 of
         * a node reading too many uploads). 201 new, 200 the one stored before under that key
         * for the same request, else final (409 appeal_idempotency_conflict: the key was used
         * for another request; 422 receipt_invalid: a receipt is not a PDF, PNG or JPEG).
         */
        ApiResponse openAppeal(String paymentId, ObjectNode appeal, int attempts) throws Exception {
            byte[] body = JSON.writeValueAsBytes(appeal); // claimed_amount as a string: sent exactly
            return postWithRetries("/api/v1/payments/" + paymentId + "/appeals", body, "appeal", attempts);
        }

        /** The same POST body until an answer that is final; what names it in the error. */
        ApiResponse postWithRetries(String path, byte[] body, String what, int attempts) throws Exception {
            Exception last = null;
            for (int attempt = 1; attempt <= attempts; attempt++) {
                try {
                    ApiResponse r = send("POST", path, body);
                    String code = r.json() == null ? null : r.json().path("code").asText(null);
                    boolean retry = r.status() == 429 || r.status() == 500 || r.status() == 503 || "request_timeout".equals(code);
                    if (!retry || attempt == attempts) return r;
                    last = new IOException(r.status() + " " + code);
                } catch (IOException e) { // timeout or connection error: it may have been stored
                    last = e;
                }
                Thread.sleep((long) (Math.min(8000, 250 * Math.pow(2, attempt)) * (0.5 + RANDOM.nextDouble() / 2)));
            }
            throw new IOException(what + " failed after " + attempts + " attempts", last);
        }

        ApiResponse getPayment(String id) throws Exception {
            return send("GET", "/api/v1/payments/" + id, new byte[0]);
        }

        /** GET /api/v1/payments/{id}/history: every change of status or amount, oldest first (the creation first). */
        ApiResponse getPaymentHistory(String id) throws Exception {
            return send("GET", "/api/v1/payments/" + id + "/history", new byte[0]);
        }
    }

    /**
     * A receipt of an appeal from the file's bytes: {"content_type", "data"}, the content type
     * told by the first bytes (%PDF, the PNG signature, JPEG's FF D8 FF), the data in standard
     * base64. The service checks the file by its content too; anything else is refused here.
     */
    static ObjectNode receipt(byte[] file) {
        String type;
        if (startsWith(file, 0x25, 0x50, 0x44, 0x46)) type = "application/pdf"; // %PDF
        else if (startsWith(file, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) type = "image/png";
        else if (startsWith(file, 0xff, 0xd8, 0xff)) type = "image/jpeg";
        else throw new IllegalArgumentException("a receipt must be a PDF, PNG or JPEG file");
        return JSON.createObjectNode().put("content_type", type).put("data", Base64.getEncoder().encodeToString(file));
    }

    static boolean startsWith(byte[] file, int... prefix) {
        if (file.length < prefix.length) return false;
        for (int i = 0; i < prefix.length; i++) if ((file[i] & 0xff) != prefix[i]) return false;
        return true;
    }

    /** True when some v1= value is the HMAC (key: the whole whsec_ string) of timestamp + "." + body. */
    static boolean callbackValid(String timestamp, String header, byte[] body, List<String> secrets) throws Exception {
        for (String secret : secrets) {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
            mac.update((timestamp + ".").getBytes(StandardCharsets.US_ASCII));
            byte[] expected = HexFormat.of().formatHex(mac.doFinal(body)).getBytes(StandardCharsets.US_ASCII);
            for (String part : header.split(",")) {
                part = part.trim();
                if (part.startsWith("v1=") && MessageDigest.isEqual(part.substring(3).getBytes(StandardCharsets.US_ASCII), expected)) return true;
            }
        }
        return false;
    }

    static int workedExample() throws Exception {
        PrivateKey key = parsePrivateKey("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----");
        byte[] body = "{\"merchant_payment_id\":\"order-1001\",\"amount\":\"3400\",\"payment_method\":\"sbp\"}".getBytes(StandardCharsets.UTF_8);
        Map<String, String> h = new LinkedHashMap<>();
        h.put("x-request-id", "6f1c0a47-3a0e-4d7e-9a55-2b8e0f6d9c11");
        h.put("x-request-nonce", "kQ7vN2xR9pL4sT8wZ1yB3c");
        h.put("content-digest", contentDigest(body));
        Map<String, String> s = sign("POST", "/api/v1/payments", null, h, key, "ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U", 1790856000L);
        boolean ok = h.get("content-digest").equals("sha-256=:FXC5JFyOCZOi17NTXG++ifGmgVphQtG1JbIfBEG5p3E=:")
                && s.get("signature").equals("sig1=:o5B6yIu06SyHi7glptcrj5H9GTXLohUtbgJUVfQGtvAB2Nsj6zZfUBua4inQIMYNpk9clodQw6TtHybIVhwGCA==:");
        System.out.println(ok ? "worked example: OK" : "worked example: MISMATCH " + s);
        return ok ? 0 : 1;
    }

    static int create(Map<String, String> opts) throws Exception {
        JsonNode c = JSON.readTree(Files.readString(Path.of(opts.getOrDefault("credentials", "data/sandbox-credentials.json"))));
        Client client = new Client(c.get("base_url").asText(), c.get("token").asText(), c.get("keyid").asText(), c.get("private_key_pem").asText());
        String order = opts.getOrDefault("order", "order-" + System.currentTimeMillis());
        ObjectNode payment = JSON.createObjectNode()
                .put("merchant_payment_id", order)
                .put("amount", opts.getOrDefault("amount", "3400.50"))
                .put("payment_method", opts.getOrDefault("method", "sbp"));
        // Your own keys, echoed in the payment, the list (filterable) and the callback body.
        payment.putObject("metadata").put("order", order).put("source", "java-guide");
        if (opts.containsKey("callback-url")) payment.put("callback_url", opts.get("callback-url"));
        ApiResponse first = client.createPayment(payment, 5);
        JsonNode p = first.json();
        if ("processing".equals(p.path("status").asText())) {
            // What the payer needs: exactly this amount, to this requisite, before expires_at.
            String bank = p.path("requisite_bank").isTextual() ? p.path("requisite_bank").asText() : "any bank";
            System.err.printf("pay %s %s to %s (%s, %s) before %s%n", p.get("amount").decimalValue().toPlainString(),
                    p.path("currency").asText(), p.path("requisite").asText(), p.path("holder_name").asText(), bank,
                    p.path("expires_at").asText());
        }
        ApiResponse again = client.createPayment(payment, 5); // the same order again: 200, same payment
        if ((first.status() != 201 && first.status() != 200) || again.status() != 200) {
            System.err.println("unexpected: " + first.body() + " " + again.body());
            return 1;
        }
        ApiResponse read = client.getPayment(first.json().get("id").asText());
        ObjectNode summary = JSON.createObjectNode()
                .put("id", first.json().get("id").asText())
                .put("order", first.json().get("merchant_payment_id").asText()).put("create", first.status()).put("repeat", again.status())
                .put("same_payment", again.json().get("id").equals(first.json().get("id"))).put("get", read.status())
                .put("status", read.json().get("status").asText())
                .put("amount", read.json().get("amount").decimalValue().toPlainString()) // "3400.50"
                .put("amount_usdt", read.json().path("merchant_information").path("amount_usdt").asText(null));
        System.out.println(JSON.writeValueAsString(summary));
        return 0;
    }

    /**
     * Finds an order's payment by metadata in the list, prints its status history, reads its
     * callback events and resends the newest (a new event_id, one attempt). Needs payments:read,
     * events:read, events:resend.
     */
    static int reconcile(Map<String, String> opts) throws Exception {
        JsonNode c = JSON.readTree(Files.readString(Path.of(opts.getOrDefault("credentials", "data/sandbox-credentials.json"))));
        Client client = new Client(c.get("base_url").asText(), c.get("token").asText(), c.get("keyid").asText(), c.get("private_key_pem").asText());
        // The list, filtered by one metadata key; the query string is part of what is signed.
        String order = URLEncoder.encode(opts.get("order"), StandardCharsets.UTF_8);
        ApiResponse listed = client.send("GET", "/api/v1/payments?metadata%5Border%5D=" + order + "&limit=10", new byte[0]);
        if (listed.status() != 200 || listed.json().get("data").size() != 1) {
            System.err.println("list: HTTP " + listed.status() + " " + listed.body());
            return 1;
        }
        String id = listed.json().get("data").get(0).get("id").asText();
        // What happened to the payment, oldest first, whether a callback followed or not.
        ApiResponse history = client.getPaymentHistory(id);
        if (history.status() != 200) {
            System.err.println("history: HTTP " + history.status() + " " + history.body());
            return 1;
        }
        List<String> causes = new ArrayList<>();
        for (JsonNode h : history.json().get("history")) {
            System.err.printf("history %s %s %s %s %s%n", h.get("at").asText(), h.get("status").asText(), h.get("cause").asText(),
                    h.path("source").asText("-"), h.get("amount").decimalValue().toPlainString());
            causes.add(h.get("cause").asText());
        }
        // The payment's callback events, newest first, each with its attempts.
        ApiResponse events = client.send("GET", "/api/v1/events?payment_id=" + id, new byte[0]);
        JsonNode data = events.json() == null ? null : events.json().get("data");
        if (events.status() != 200 || data == null || data.size() == 0) {
            System.err.println("events: HTTP " + events.status() + " " + events.body());
            return 1;
        }
        for (JsonNode e : data) {
            List<String> tried = new ArrayList<>();
            for (JsonNode a : e.get("attempts")) tried.add(a.get("result").asText());
            System.err.printf("event %s %s %s: %s (%s)%n", e.get("id").asText(), e.get("type").asText(),
                    e.get("status").asText(), e.get("delivery_state").asText(), String.join(", ", tried));
        }
        // Resend the newest: a new event with a new event_id, delivered once.
        ApiResponse resent = client.send("POST", "/api/v1/events/" + data.get(0).get("id").asText() + "/resend", new byte[0]);
        if (resent.status() != 202) {
            System.err.println("resend: HTTP " + resent.status() + " " + resent.body());
            return 1;
        }
        ObjectNode summary = JSON.createObjectNode().put("events", data.size()).put("resent", resent.status())
                .put("new_event", resent.json().get("id").asText());
        summary.putArray("listed").add(id);
        causes.forEach(summary.putArray("history")::add);
        System.out.println(JSON.writeValueAsString(summary));
        return 0;
    }

    /**
     * Opens an appeal for an order: the payer says they paid another amount than asked, with the
     * receipt. Finds the order's payment by metadata in the list (as reconcile does), opens the
     * appeal (paid_other_amount), sends it again (the same idempotency key, a new nonce: 200,
     * the same appeal) and prints one JSON summary line. The provider on record or support
     * decides later; an accepted appeal arrives as a "completed" callback with the amount
     * found. Needs payments:read and payments:create.
     */
    static int appeal(Map<String, String> opts) throws Exception {
        for (String required : List.of("order", "amount", "receipt")) {
            if (!opts.containsKey(required)) { System.err.println("appeal: --" + required + " is required"); return 2; }
        }
        ObjectNode file;
        try {
            file = receipt(Files.readAllBytes(Path.of(opts.get("receipt"))));
        } catch (IOException | IllegalArgumentException e) {
            System.err.println("receipt " + opts.get("receipt") + ": " + e.getMessage());
            return 1;
        }
        JsonNode c = JSON.readTree(Files.readString(Path.of(opts.getOrDefault("credentials", "data/sandbox-credentials.json"))));
        Client client = new Client(c.get("base_url").asText(), c.get("token").asText(), c.get("keyid").asText(), c.get("private_key_pem").asText());
        // The list, filtered by one metadata key; the query string is part of what is signed.
        String order = URLEncoder.encode(opts.get("order"), StandardCharsets.UTF_8);
        ApiResponse listed = client.send("GET", "/api/v1/payments?metadata%5Border%5D=" + order + "&limit=10", new byte[0]);
        if (listed.status() != 200 || listed.json().get("data").size() != 1) return failed("list", listed);
        String id = listed.json().get("data").get(0).get("id").asText();
        ObjectNode appeal = JSON.createObjectNode()
                // Yours, naming this appeal: a retry with the same key and body finds it (200).
                .put("idempotency_key", opts.getOrDefault("key", "appeal-" + opts.get("order") + "-1"))
                .put("reason", "paid_other_amount")
                .put("claimed_amount", opts.get("amount")); // a string: sent exactly, never through a double
        appeal.putArray("receipts").add(file);
        ApiResponse first = client.openAppeal(id, appeal, 5);
        if (first.status() != 201 && first.status() != 200) return failed("appeal", first);
        // The same appeal again, as after a lost answer: the same key and body, a new request.
        ApiResponse again = client.openAppeal(id, appeal, 5);
        if (again.status() != 200 || !again.json().get("id").equals(first.json().get("id"))) return failed("repeat", again);
        ObjectNode summary = JSON.createObjectNode()
                .put("order", opts.get("order")).put("appeal", first.status()).put("repeat", again.status())
                .put("same_appeal", again.json().get("id").equals(first.json().get("id")))
                .put("id", first.json().get("id").asText())
                .put("state", first.json().get("state").asText()) // open, or under_review once the provider took it
                .put("claimed_amount", first.json().get("claimed_amount").decimalValue().toPlainString()); // "3390.50"
        System.out.println(JSON.writeValueAsString(summary));
        return 0;
    }

    /** Prints why a step failed (an error answer's code and message) and returns the exit status. */
    static int failed(String step, ApiResponse r) {
        JsonNode code = r.json() == null ? null : r.json().get("code");
        String why = code == null ? r.body() : code.asText() + ": " + r.json().path("message").asText();
        System.err.println(step + ": HTTP " + r.status() + " " + why + " (X-Request-ID " + r.requestId() + ")");
        return 1;
    }

    static void answer(HttpExchange ex, int status, String json) throws IOException {
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        ex.getResponseBody().write(b);
        ex.close();
    }

    /** Verifies, checks freshness, deduplicates by event_id (use a UNIQUE column in production). */
    static int receiver() throws Exception {
        List<String> secrets = new ArrayList<>();
        for (String s : System.getenv().getOrDefault("CALLBACK_SECRETS", "").split(",")) if (!s.isBlank()) secrets.add(s.trim());
        if (secrets.isEmpty()) { System.err.println("set CALLBACK_SECRETS (whsec_...)"); return 2; }
        Set<String> processed = ConcurrentHashMap.newKeySet();
        int port = Integer.parseInt(System.getenv().getOrDefault("PORT", "9090"));
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        server.setExecutor(Executors.newFixedThreadPool(8));
        server.createContext("/callbacks", ex -> {
            try {
                if (!ex.getRequestMethod().equals("POST")) { answer(ex, 405, "{\"error\":\"POST only\"}"); return; }
                byte[] body = ex.getRequestBody().readNBytes(64 * 1024); // raw bytes: verify before parsing
                String ts = ex.getRequestHeaders().getFirst("X-Callback-Timestamp");
                String sig = ex.getRequestHeaders().getFirst("X-Callback-Signature");
                if (ts == null || !ts.matches("[0-9]{1,12}")) { answer(ex, 400, "{\"error\":\"bad timestamp\"}"); return; }
                if (Math.abs(System.currentTimeMillis() / 1000 - Long.parseLong(ts)) > 300) { answer(ex, 401, "{\"error\":\"stale timestamp\"}"); return; }
                if (sig == null || !callbackValid(ts, sig, body, secrets)) { answer(ex, 401, "{\"error\":\"bad signature\"}"); return; }
                JsonNode event = JSON.readTree(body); // amount as BigDecimal("3400.50")
                if (!processed.add(event.path("event_id").asText())) { answer(ex, 200, "{\"status\":\"duplicate\"}"); return; }
                // Apply the event: fulfil order merchant_payment_id by amount when "completed".
                ObjectNode line = JSON.createObjectNode().put("accepted", event.path("event_id").asText())
                        .put("payment", event.path("id").asText()).put("order", event.path("merchant_payment_id").asText())
                        .put("status", event.path("status").asText()).put("amount", event.path("amount").decimalValue().toPlainString());
                System.out.println(JSON.writeValueAsString(line));
                answer(ex, 200, "{\"status\":\"ok\"}");
            } catch (Exception e) {
                answer(ex, 400, "{\"error\":\"bad request\"}");
            }
        });
        server.start();
        System.out.println("{\"listening\":\"http://127.0.0.1:" + server.getAddress().getPort() + "/callbacks\"}");
        return 0;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        String command = args.length > 0 ? args[0] : "";
        int code = switch (command) {
            case "worked-example" -> workedExample();
            case "create" -> create(opts);
            case "receiver" -> receiver();
            case "reconcile" -> reconcile(opts);
            case "appeal" -> appeal(opts);
            default -> { System.err.println("usage: worked-example | create --credentials FILE [...] | receiver | reconcile --credentials FILE --order ID | appeal --credentials FILE --order ID --amount A --receipt FILE [--key K]"); yield 2; }
        };
        if (!command.equals("receiver") || code != 0) System.exit(code);
    }
}
