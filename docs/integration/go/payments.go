// Package main is a merchant client for the payments API v1 in Go, on the standard library
// only: crypto/ed25519 for the RFC 9421 signature, crypto/sha256 for Content-Digest,
// crypto/hmac for callbacks, and encoding/json with UseNumber so decimals keep their exact
// text (json.Number("3400.50")) instead of becoming float64.
//
//	go run . worked-example
//	go run . create --credentials ../../../data/sandbox-credentials.json --amount 3400.50
//	CALLBACK_SECRETS=whsec_... PORT=9090 go run . receiver
//	go run . appeal --credentials ../../../data/sandbox-credentials.json --order order-42 --amount 3390.50 --receipt receipt.pdf
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand"
	"net/http"
	"strings"
	"time"
)

// Covered is what every signed request covers ("@query" is added when there is a query).
var Covered = []string{"@method", "@path", "content-digest", "x-request-id", "x-request-nonce"}

// Client signs and sends requests for one project.
type Client struct {
	BaseURL string
	Token   string
	KeyID   string
	Key     ed25519.PrivateKey
	HTTP    *http.Client
}

// ParsePrivateKey reads a PKCS#8 PEM Ed25519 private key ("BEGIN PRIVATE KEY").
func ParsePrivateKey(pemText string) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("not an Ed25519 key")
	}
	return key, nil
}

// ContentDigest is `sha-256=:<base64>:` of the exact body bytes.
func ContentDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
}

// SignatureParams is the inner list with its parameters, exactly as sent in Signature-Input.
func SignatureParams(components []string, created, expires int64, keyid string) string {
	quoted := make([]string, len(components))
	for i, c := range components {
		quoted[i] = `"` + c + `"`
	}
	return fmt.Sprintf(`(%s);created=%d;expires=%d;keyid="%s";alg="ed25519"`,
		strings.Join(quoted, " "), created, expires, keyid)
}

// Sign adds Signature-Input and Signature (label sig1) to req, whose headers X-Request-ID,
// X-Request-Nonce and Content-Digest are set. The base follows RFC 9421 section 2.5.
func Sign(req *http.Request, key ed25519.PrivateKey, keyid string, created int64) {
	components := Covered
	if req.URL.RawQuery != "" {
		components = append(append([]string{}, Covered...), "@query")
	}
	params := SignatureParams(components, created, created+300, keyid)
	var base strings.Builder
	for _, c := range components {
		var value string
		switch c {
		case "@method":
			value = req.Method
		case "@path":
			value = req.URL.EscapedPath()
		case "@query":
			value = "?" + req.URL.RawQuery
		default:
			value = strings.TrimSpace(strings.Join(req.Header.Values(c), ", "))
		}
		fmt.Fprintf(&base, "\"%s\": %s\n", c, value)
	}
	fmt.Fprintf(&base, "\"@signature-params\": %s", params)
	sig := ed25519.Sign(key, []byte(base.String()))
	req.Header.Set("Signature-Input", "sig1="+params)
	req.Header.Set("Signature", "sig1=:"+base64.StdEncoding.EncodeToString(sig)+":")
}

// Response is a status with the body decoded (numbers as json.Number).
type Response struct {
	Status    int
	RequestID string
	Body      []byte
	JSON      map[string]any
}

// DecodeJSON decodes with UseNumber: 3400.50 stays json.Number("3400.50").
func DecodeJSON(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v map[string]any
	err := d.Decode(&v)
	return v, err
}

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func uuid4() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Send sends one signed request; body is the exact bytes digested, signed and sent.
func (c *Client) Send(ctx context.Context, method, path string, body []byte) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("X-Request-ID", uuid4())
	req.Header.Set("X-Request-Nonce", randomToken(24))
	req.Header.Set("Content-Digest", ContentDigest(body))
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	Sign(req, c.Key, c.KeyID, time.Now().Unix())
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	r := &Response{Status: res.StatusCode, RequestID: res.Header.Get("X-Request-ID"), Body: b}
	r.JSON, _ = DecodeJSON(b) // nil when not JSON (a proxy's error page)
	return r, nil
}

// CreatePayment sends POST /api/v1/payments and repeats the same body (same
// merchant_payment_id) after a timeout, a connection error, 429, 500 or 503: a new request
// each time (fresh nonce and signature), exponential backoff with jitter. 201 is a new
// payment, 200 the existing one; anything else is final and returned.
func (c *Client) CreatePayment(ctx context.Context, payment map[string]any, attempts int) (*Response, error) {
	body, err := json.Marshal(payment) // amounts as strings: "3400.50" is sent exactly
	if err != nil {
		return nil, err
	}
	return c.postWithRetries(ctx, "/api/v1/payments", body, "create", attempts)
}

// OpenAppeal sends POST /api/v1/payments/{id}/appeals: the payer says they paid ("reason":
// paid_but_canceled, paid_other_amount with "claimed_amount", paid_twice), with up to two
// receipts (see Receipt). Signed like a create and retried like one: the same body, so the
// same "idempotency_key", after a timeout, a connection error, 429, 500 or 503 (also the 503
// of a node reading too many uploads). 201 is a new appeal, 200 the one stored before under
// that key for the same request; anything else is final and returned (409
// appeal_idempotency_conflict: the key was used for another request; 422 receipt_invalid: a
// receipt is not a PDF, PNG or JPEG by its content).
func (c *Client) OpenAppeal(ctx context.Context, paymentID string, appeal map[string]any, attempts int) (*Response, error) {
	body, err := json.Marshal(appeal) // claimed_amount as a string: sent exactly
	if err != nil {
		return nil, err
	}
	return c.postWithRetries(ctx, "/api/v1/payments/"+paymentID+"/appeals", body, "appeal", attempts)
}

// postWithRetries sends the same POST body until an answer that is final; what names it in
// the error.
func (c *Client) postWithRetries(ctx context.Context, path string, body []byte, what string, attempts int) (*Response, error) {
	var last error
	for attempt := 1; attempt <= attempts; attempt++ {
		r, err := c.Send(ctx, http.MethodPost, path, body)
		if err == nil {
			code, _ := r.JSON["code"].(string)
			retry := r.Status == 429 || r.Status == 500 || r.Status == 503 || code == "request_timeout"
			if !retry || attempt == attempts {
				return r, nil
			}
			last = fmt.Errorf("%d %s", r.Status, code)
		} else {
			last = err // it may have been stored; the same request finds it
		}
		wait := math.Min(8000, 250*math.Pow(2, float64(attempt))) * (0.5 + mrand.Float64()/2)
		time.Sleep(time.Duration(wait) * time.Millisecond)
	}
	return nil, fmt.Errorf("%s failed after %d attempts: %w", what, attempts, last)
}

// Receipt is a receipt of an appeal from the file's bytes: {"content_type", "data"}, the
// content type told by the first bytes (%PDF, the PNG signature, JPEG's FF D8 FF), the data
// in standard base64. The service checks the file by its content too; anything else is
// refused here before it is sent.
func Receipt(data []byte) (map[string]string, error) {
	var contentType string
	switch {
	case bytes.HasPrefix(data, []byte("%PDF")):
		contentType = "application/pdf"
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		contentType = "image/png"
	case bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}):
		contentType = "image/jpeg"
	default:
		return nil, errors.New("a receipt must be a PDF, PNG or JPEG file")
	}
	return map[string]string{"content_type": contentType, "data": base64.StdEncoding.EncodeToString(data)}, nil
}

// GetPayment is GET /api/v1/payments/{id}, the source of truth for status and amount.
func (c *Client) GetPayment(ctx context.Context, id string) (*Response, error) {
	return c.Send(ctx, http.MethodGet, "/api/v1/payments/"+id, nil)
}

// GetPaymentHistory is GET /api/v1/payments/{id}/history: every change of status or amount,
// oldest first (the creation first), with when, why ("cause") and who ("source").
func (c *Client) GetPaymentHistory(ctx context.Context, id string) (*Response, error) {
	return c.Send(ctx, http.MethodGet, "/api/v1/payments/"+id+"/history", nil)
}

// CallbackValid reports whether some v1= value of the X-Callback-Signature header is the
// HMAC-SHA256 (key: the whole whsec_ secret string) of timestamp + "." + body, in constant time.
func CallbackValid(timestamp, header string, body []byte, secrets []string) bool {
	for _, secret := range secrets {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(timestamp + "."))
		mac.Write(body)
		expected := []byte(hex.EncodeToString(mac.Sum(nil)))
		for _, part := range strings.Split(header, ",") {
			part = strings.TrimSpace(part)
			if strings.HasPrefix(part, "v1=") && subtle.ConstantTimeCompare([]byte(part[3:]), expected) == 1 {
				return true
			}
		}
	}
	return false
}
