package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

const testKey = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----`

// workedExample signs docs/signatures.md's worked example and compares the headers.
func workedExample() int {
	key, err := ParsePrivateKey(testKey)
	if err != nil {
		panic(err)
	}
	body := []byte(`{"merchant_payment_id":"order-1001","amount":"3400","payment_method":"sbp"}`)
	req, _ := http.NewRequest("POST", "http://127.0.0.1:8080/api/v1/payments", nil)
	req.Header.Set("X-Request-ID", "6f1c0a47-3a0e-4d7e-9a55-2b8e0f6d9c11")
	req.Header.Set("X-Request-Nonce", "kQ7vN2xR9pL4sT8wZ1yB3c")
	req.Header.Set("Content-Digest", ContentDigest(body))
	Sign(req, key, "ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U", 1790856000)
	want := map[string]string{
		"Content-Digest":  "sha-256=:FXC5JFyOCZOi17NTXG++ifGmgVphQtG1JbIfBEG5p3E=:",
		"Signature-Input": `sig1=("@method" "@path" "content-digest" "x-request-id" "x-request-nonce");created=1790856000;expires=1790856300;keyid="ed25519-poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519"`,
		"Signature":       "sig1=:o5B6yIu06SyHi7glptcrj5H9GTXLohUtbgJUVfQGtvAB2Nsj6zZfUBua4inQIMYNpk9clodQw6TtHybIVhwGCA==:",
	}
	ok := true
	for name, value := range want {
		if got := req.Header.Get(name); got != value {
			ok = false
			fmt.Fprintf(os.Stderr, "%s\n  expected %s\n  got      %s\n", name, value, got)
		}
	}
	if !ok {
		fmt.Println("worked example: MISMATCH")
		return 1
	}
	fmt.Println("worked example: OK")
	return 0
}

type credentials struct {
	BaseURL       string `json:"base_url"`
	Token         string `json:"token"`
	KeyID         string `json:"keyid"`
	PrivateKeyPEM string `json:"private_key_pem"`
}

func create(args []string) int {
	fs := flag.NewFlagSet("create", flag.ExitOnError)
	credsPath := fs.String("credentials", "data/sandbox-credentials.json", "sandbox-credentials.json")
	order := fs.String("order", fmt.Sprintf("order-%d", time.Now().UnixMilli()), "merchant_payment_id")
	amount := fs.String("amount", "3400.50", "amount")
	method := fs.String("method", "sbp", "payment_method")
	callbackURL := fs.String("callback-url", "", "callback_url")
	_ = fs.Parse(args)
	client := clientFrom(*credsPath)
	payment := map[string]any{
		"merchant_payment_id": *order, "amount": *amount, "payment_method": *method,
		// Your own keys, echoed in the payment, the list (filterable) and the callback body.
		"metadata": map[string]string{"order": *order, "source": "go-guide"},
	}
	if *callbackURL != "" {
		payment["callback_url"] = *callbackURL
	}
	ctx := context.Background()
	first, err := client.CreatePayment(ctx, payment, 5)
	if err != nil || (first.Status != 201 && first.Status != 200) {
		return fail("create", first, err)
	}
	if p := first.JSON; p["status"] == "processing" {
		// What the payer needs: exactly this amount, to this requisite, before expires_at.
		bank, _ := p["requisite_bank"].(string)
		if bank == "" {
			bank = "any bank"
		}
		fmt.Fprintf(os.Stderr, "pay %v %v to %v (%v, %s) before %v\n",
			p["amount"], p["currency"], p["requisite"], p["holder_name"], bank, p["expires_at"])
	}
	again, err := client.CreatePayment(ctx, payment, 5) // same order again: 200, same payment
	if err != nil || again.Status != 200 || again.JSON["id"] != first.JSON["id"] {
		return fail("repeat", again, err)
	}
	read, err := client.GetPayment(ctx, first.JSON["id"].(string))
	if err != nil || read.Status != 200 {
		return fail("get", read, err)
	}
	info, _ := read.JSON["merchant_information"].(map[string]any)
	summary, _ := json.Marshal(map[string]any{
		"id": first.JSON["id"], "order": first.JSON["merchant_payment_id"], "create": first.Status, "repeat": again.Status,
		"same_payment": again.JSON["id"] == first.JSON["id"], "get": read.Status,
		"status":      read.JSON["status"],
		"amount":      read.JSON["amount"].(json.Number).String(), // exact text, e.g. "3400.50"
		"amount_usdt": info["amount_usdt"],
	})
	fmt.Println(string(summary))
	return 0
}

// fail prints why a step failed (the transport error, or the answer with its request id)
// and returns the exit code.
func fail(step string, r *Response, err error) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
	} else {
		fmt.Fprintf(os.Stderr, "%s: HTTP %d %s (X-Request-ID %s)\n", step, r.Status, r.Body, r.RequestID)
	}
	return 1
}

// clientFrom reads the sandbox credentials file and makes a signing client from it.
func clientFrom(path string) *Client {
	raw, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	var c credentials
	if err := json.Unmarshal(raw, &c); err != nil {
		panic(err)
	}
	key, err := ParsePrivateKey(c.PrivateKeyPEM)
	if err != nil {
		panic(err)
	}
	return &Client{BaseURL: c.BaseURL, Token: c.Token, KeyID: c.KeyID, Key: key, HTTP: &http.Client{}}
}

// reconcile finds an order's payment by metadata in the list, prints its status history,
// reads its callback events and resends the newest (a new event_id, one attempt); it prints
// one JSON summary line. The token needs payments:read, events:read and events:resend.
func reconcile(args []string) int {
	fs := flag.NewFlagSet("reconcile", flag.ExitOnError)
	credsPath := fs.String("credentials", "data/sandbox-credentials.json", "sandbox-credentials.json")
	order := fs.String("order", "", "merchant_payment_id (also metadata.order)")
	_ = fs.Parse(args)
	client := clientFrom(*credsPath)
	ctx := context.Background()
	// The list, filtered by one metadata key; the query string is part of what is signed.
	query := url.Values{"metadata[order]": {*order}, "limit": {"10"}}.Encode()
	listed, err := client.Send(ctx, "GET", "/api/v1/payments?"+query, nil)
	if err != nil || listed.Status != 200 {
		return fail("list", listed, err)
	}
	payments, _ := listed.JSON["data"].([]any)
	if len(payments) != 1 {
		return fail("list: expected one payment", listed, nil)
	}
	id := payments[0].(map[string]any)["id"].(string)
	// What happened to the payment, oldest first, whether a callback followed or not.
	history, err := client.GetPaymentHistory(ctx, id)
	if err != nil || history.Status != 200 {
		return fail("history", history, err)
	}
	var causes []any
	for _, item := range history.JSON["history"].([]any) {
		h := item.(map[string]any)
		source := h["source"]
		if source == nil {
			source = "-"
		}
		fmt.Fprintf(os.Stderr, "history %v %v %v %v %v\n", h["at"], h["status"], h["cause"], source, h["amount"])
		causes = append(causes, h["cause"])
	}
	// The payment's callback events, newest first, each with its attempts.
	events, err := client.Send(ctx, "GET", "/api/v1/events?"+url.Values{"payment_id": {id}}.Encode(), nil)
	if err != nil || events.Status != 200 {
		return fail("events", events, err)
	}
	data, _ := events.JSON["data"].([]any)
	for _, item := range data {
		e := item.(map[string]any)
		var tried []string
		for _, a := range e["attempts"].([]any) {
			tried = append(tried, a.(map[string]any)["result"].(string))
		}
		fmt.Fprintf(os.Stderr, "event %v %v %v: %v (%s)\n", e["id"], e["type"], e["status"], e["delivery_state"], strings.Join(tried, ", "))
	}
	if len(data) == 0 {
		return fail("events: none for the payment", events, nil)
	}
	// Resend the newest: a new event with a new event_id, delivered once.
	newest := data[0].(map[string]any)["id"].(string)
	resent, err := client.Send(ctx, "POST", "/api/v1/events/"+newest+"/resend", nil)
	if err != nil || resent.Status != 202 {
		return fail("resend", resent, err)
	}
	summary, _ := json.Marshal(map[string]any{
		"listed": []string{id}, "history": causes, "events": len(data), "resent": resent.Status, "new_event": resent.JSON["id"],
	})
	fmt.Println(string(summary))
	return 0
}

// appeal opens an appeal for an order: the payer says they paid another amount than asked,
// with the receipt. It finds the order's payment by metadata in the list (as reconcile does),
// opens the appeal (paid_other_amount, the amount, the receipt), sends the same appeal again
// (the same idempotency key, a new nonce: 200, the same appeal) and prints one JSON summary
// line. The provider on record or support decides later; an accepted appeal arrives as a
// "completed" callback with the amount found. The token needs payments:read and
// payments:create.
func appeal(args []string) int {
	fs := flag.NewFlagSet("appeal", flag.ExitOnError)
	credsPath := fs.String("credentials", "data/sandbox-credentials.json", "sandbox-credentials.json")
	order := fs.String("order", "", "merchant_payment_id (also metadata.order)")
	amount := fs.String("amount", "", "the amount the payer sent, e.g. 3390.50")
	receiptPath := fs.String("receipt", "", "the payer's receipt: a PDF, PNG or JPEG file")
	// Yours, naming this appeal: a retry with the same key and body finds it (200).
	key := fs.String("key", "", "idempotency_key (default appeal-<order>-1)")
	_ = fs.Parse(args)
	if *order == "" || *amount == "" || *receiptPath == "" {
		fmt.Fprintln(os.Stderr, "appeal: --order, --amount and --receipt are required")
		return 2
	}
	if *key == "" {
		*key = "appeal-" + *order + "-1"
	}
	raw, err := os.ReadFile(*receiptPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "receipt: %v\n", err)
		return 1
	}
	receipt, err := Receipt(raw)
	if err != nil {
		fmt.Fprintf(os.Stderr, "receipt %s: %v\n", *receiptPath, err)
		return 1
	}
	client := clientFrom(*credsPath)
	ctx := context.Background()
	// The list, filtered by one metadata key; the query string is part of what is signed.
	query := url.Values{"metadata[order]": {*order}, "limit": {"10"}}.Encode()
	listed, err := client.Send(ctx, "GET", "/api/v1/payments?"+query, nil)
	if err != nil || listed.Status != 200 {
		return failAnswer("list", listed, err)
	}
	payments, _ := listed.JSON["data"].([]any)
	if len(payments) != 1 {
		fmt.Fprintf(os.Stderr, "list: %d payments have metadata order=%s, expected one\n", len(payments), *order)
		return 1
	}
	id := payments[0].(map[string]any)["id"].(string)
	body := map[string]any{
		"idempotency_key": *key,
		"reason":          "paid_other_amount",
		"claimed_amount":  *amount, // a string: sent exactly, never through a float
		"receipts":        []any{receipt},
	}
	first, err := client.OpenAppeal(ctx, id, body, 5)
	if err != nil || (first.Status != 201 && first.Status != 200) {
		return failAnswer("appeal", first, err)
	}
	// The same appeal again, as after a lost answer: the same key and body, a new request.
	again, err := client.OpenAppeal(ctx, id, body, 5)
	if err != nil || again.Status != 200 || again.JSON["id"] != first.JSON["id"] {
		return failAnswer("repeat", again, err)
	}
	claimed, _ := first.JSON["claimed_amount"].(json.Number)
	summary, _ := json.Marshal(map[string]any{
		"order": *order, "appeal": first.Status, "repeat": again.Status,
		"same_appeal": again.JSON["id"] == first.JSON["id"], "id": first.JSON["id"],
		"state":          first.JSON["state"], // open, or under_review once the provider took it
		"claimed_amount": claimed.String(),    // exact text, e.g. "3390.50"
	})
	fmt.Println(string(summary))
	return 0
}

// failAnswer is fail with an error answer's code and message spelled out.
func failAnswer(step string, r *Response, err error) int {
	if err == nil {
		if code, ok := r.JSON["code"].(string); ok {
			fmt.Fprintf(os.Stderr, "%s: HTTP %d %s: %v (X-Request-ID %s)\n", step, r.Status, code, r.JSON["message"], r.RequestID)
			return 1
		}
	}
	return fail(step, r, err)
}

var timestampPattern = regexp.MustCompile(`^[0-9]{1,12}$`)

// receiver verifies, checks freshness, deduplicates by event_id (use your database's UNIQUE
// constraint in production) and prints one JSON line per processed event.
func receiver() int {
	var secrets []string
	for _, s := range strings.Split(os.Getenv("CALLBACK_SECRETS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) == 0 {
		fmt.Fprintln(os.Stderr, "set CALLBACK_SECRETS to the project callback secret (whsec_...)")
		return 2
	}
	var mu sync.Mutex
	processed := map[string]bool{}
	answer := func(w http.ResponseWriter, status int, v map[string]string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	http.HandleFunc("/callbacks", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			answer(w, 405, map[string]string{"error": "POST only"})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10)) // raw bytes: verify before parsing
		if err != nil {
			answer(w, 413, map[string]string{"error": "too large"})
			return
		}
		ts := r.Header.Get("X-Callback-Timestamp")
		if !timestampPattern.MatchString(ts) {
			answer(w, 400, map[string]string{"error": "bad timestamp"})
			return
		}
		sec, _ := strconv.ParseInt(ts, 10, 64)
		if d := time.Now().Unix() - sec; d > 300 || d < -300 {
			answer(w, 401, map[string]string{"error": "stale timestamp"})
			return
		}
		if !CallbackValid(ts, r.Header.Get("X-Callback-Signature"), body, secrets) {
			answer(w, 401, map[string]string{"error": "bad signature"})
			return
		}
		event, err := DecodeJSON(body) // amounts as json.Number("3400.50")
		if err != nil {
			answer(w, 400, map[string]string{"error": "bad json"})
			return
		}
		id, _ := event["event_id"].(string)
		mu.Lock()
		seen := processed[id]
		processed[id] = true // apply the event to the order here, in the same transaction
		mu.Unlock()
		if seen {
			answer(w, 200, map[string]string{"status": "duplicate"})
			return
		}
		line, _ := json.Marshal(map[string]any{"accepted": id, "payment": event["id"],
			"order": event["merchant_payment_id"], "status": event["status"],
			"amount": event["amount"].(json.Number).String()})
		fmt.Println(string(line))
		answer(w, 200, map[string]string{"status": "ok"})
	})
	port := os.Getenv("PORT")
	if port == "" {
		port = "9090"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		panic(err)
	}
	line, _ := json.Marshal(map[string]string{"listening": "http://" + ln.Addr().String() + "/callbacks"})
	fmt.Println(string(line))
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	return map[bool]int{true: 1, false: 0}[srv.Serve(ln) != nil]
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go run . worked-example | create [flags] | receiver | reconcile [flags] | appeal [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "worked-example":
		os.Exit(workedExample())
	case "create":
		os.Exit(create(os.Args[2:]))
	case "receiver":
		os.Exit(receiver())
	case "reconcile":
		os.Exit(reconcile(os.Args[2:]))
	case "appeal":
		os.Exit(appeal(os.Args[2:]))
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}
