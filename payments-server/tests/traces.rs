//! OpenTelemetry traces over OTLP/HTTP, received by a collector of the test's own (it decodes
//! the protobuf the server sends to `/v1/traces`). One create sent with a W3C `traceparent`
//! is followed through the server: its request span is a child of the caller's span and
//! carries the request id; the handler's span, the store calls and the provider call are in
//! the same trace; the upstream got the same trace in its `traceparent`. The payment's
//! callback delivery has its span too. A server without an endpoint exports nothing.

#[path = "ops/support.rs"]
mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use payments_client::{MerchantClient, SandboxCredentials};
use payments_core::callback::CallbackSecret;
use payments_examples::upstream::{server_settings, ExampleUpstream};
use payments_server::testing::free_port;
use prost::Message as _;
use serde_json::json;

use crate::support::{serve_with, wait_ready, Receiver};

const SECRET: &str = "whsec_dHJhY2VzLXRlc3QtdXBzdHJlYW0tc2VjcmV0LTAxMjM0NQ";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

/// Every span the collector received, and the service name of each batch.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
    services: Arc<Mutex<Vec<String>>>,
}

async fn collect(State(c): State<Collector>, body: Bytes) -> StatusCode {
    let request = match ExportTraceServiceRequest::decode(body) {
        Ok(r) => r,
        Err(_) => return StatusCode::BAD_REQUEST,
    };
    for resource in request.resource_spans {
        if let Some(r) = &resource.resource {
            for kv in &r.attributes {
                if kv.key == "service.name" {
                    c.services
                        .lock()
                        .unwrap()
                        .push(value_text(kv.value.as_ref()));
                }
            }
        }
        for scope in resource.scope_spans {
            c.spans.lock().unwrap().extend(scope.spans);
        }
    }
    StatusCode::OK
}

fn value_text(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        _ => String::new(),
    }
}

fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| value_text(kv.value.as_ref()))
}

async fn start_collector() -> (String, Collector) {
    let collector = Collector::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/v1/traces", post(collect))
        .with_state(collector.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, collector)
}

/// SIGTERM, and the wait for a clean exit (the exporter flushes on the way out).
fn terminate(server: &mut support::ServerProcess) {
    let status = std::process::Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", server.0.id())])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_is_one_trace_from_the_caller_to_the_upstream() {
    let (otlp, collector) = start_collector().await;

    // The upstream, recording the trace context of each requisite request.
    let up = ExampleUpstream::new(CallbackSecret::parse(SECRET).unwrap());
    let seen_parents: Arc<Mutex<Vec<String>>> = Arc::default();
    let parents = seen_parents.clone();
    let app = up.router().layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let parents = parents.clone();
            async move {
                if req.uri().path() == "/requisites" {
                    let tp = req
                        .headers()
                        .get("traceparent")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    parents.lock().unwrap().push(tp);
                }
                next.run(req).await
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let upstream = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let notify = SocketAddr::from(([127, 0, 0, 1], free_port()));
    up.set_notify_url(&format!("http://{notify}/upstream/v1/notifications"));

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("payments.toml");
    std::fs::write(
        &config,
        server_settings(&upstream, SECRET, &notify.to_string()),
    )
    .unwrap();
    let config = config.display().to_string();
    let (mut server, base, _) = serve_with(
        &data,
        "127.0.0.1",
        &["--config", &config],
        &[
            ("PAYMENTS_TELEMETRY__OTLP_ENDPOINT", otlp.as_str()),
            ("PAYMENTS_TELEMETRY__SERVICE_NAME", "payments-test"),
        ],
    );
    wait_ready(&mut server, &base).await;
    let receiver = Receiver::start(200).await;

    // One create, as a caller that is itself traced.
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        "traceparent",
        format!("00-{TRACE_ID}-{PARENT_ID}-01").parse().unwrap(),
    );
    let client = MerchantClient::from_credentials(&creds)
        .unwrap()
        .with_http_client(
            reqwest::Client::builder()
                .default_headers(headers)
                .build()
                .unwrap(),
        );
    let r = client
        .create_payment(
            &json!({"merchant_payment_id": "traced-1", "amount": "1910.00",
                                "payment_method": "sbp", "callback_url": receiver.url}),
        )
        .await
        .unwrap();
    assert_eq!(r.status.as_u16(), 201, "{}", r.json);
    let payment_id = r.json["id"].as_str().unwrap().to_string();
    let request_id = r.headers["x-request-id"].to_str().unwrap().to_string();
    // The transfer arrives: the payment completes and its callback is delivered.
    up.report("n-traced-1", &payment_id, true, None)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while receiver.got.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the callback arrives");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    terminate(&mut server);

    let spans = collector.spans.lock().unwrap().clone();
    assert!(
        collector
            .services
            .lock()
            .unwrap()
            .iter()
            .all(|s| s == "payments-test"),
        "service.name"
    );
    let trace_id = hex::decode(TRACE_ID).unwrap();
    let in_trace: Vec<&Span> = spans.iter().filter(|s| s.trace_id == trace_id).collect();
    let names: Vec<&str> = in_trace.iter().map(|s| s.name.as_str()).collect();
    let request = in_trace
        .iter()
        .find(|s| s.name == "POST /api/v1/payments")
        .unwrap_or_else(|| panic!("the request's span in the caller's trace: {names:?}"));
    assert_eq!(request.parent_span_id, hex::decode(PARENT_ID).unwrap());
    assert_eq!(
        attr(request, "request_id").as_deref(),
        Some(request_id.as_str())
    );
    assert_eq!(
        attr(request, "http.response.status_code").as_deref(),
        Some("201")
    );
    let child_of = |s: &Span, parent: &Span| s.parent_span_id == parent.span_id;
    let handler = in_trace
        .iter()
        .find(|s| s.name == "create_payment")
        .unwrap_or_else(|| panic!("the handler's span: {names:?}"));
    assert!(
        child_of(handler, request),
        "the handler's span is the request's child"
    );
    assert!(
        names.iter().any(|n| n.starts_with("store ")),
        "store calls in the trace: {names:?}"
    );
    let provider = in_trace
        .iter()
        .find(|s| s.name == "provider issue")
        .unwrap_or_else(|| panic!("the provider's span: {names:?}"));
    assert_eq!(
        attr(provider, "payment_id").as_deref(),
        Some(payment_id.as_str())
    );
    assert_eq!(
        attr(provider, "payments.provider.outcome").as_deref(),
        Some("issued")
    );
    let parents = seen_parents.lock().unwrap().clone();
    assert!(
        !parents.is_empty() && parents.iter().all(|p| p.contains(TRACE_ID)),
        "the upstream got the caller's trace: {parents:?}"
    );
    let callback = spans
        .iter()
        .find(|s| s.name == "callback deliver")
        .expect("the callback delivery's span");
    assert_eq!(
        attr(callback, "payment_id").as_deref(),
        Some(payment_id.as_str())
    );
    assert_eq!(
        attr(callback, "payments.callback.result").as_deref(),
        Some("delivered")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_nothing_is_exported_and_the_log_shows_no_trace_spans() {
    let (_otlp, collector) = start_collector().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (mut server, base, _) = serve_with(&data, "127.0.0.1", &["--log-format", "json"], &[]);
    wait_ready(&mut server, &base).await;
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let client = MerchantClient::from_credentials(&creds).unwrap();
    let r = client
        .create_payment(
            &json!({"merchant_payment_id": "untraced-1", "amount": "1910.00",
                                "payment_method": "sbp"}),
        )
        .await
        .unwrap();
    assert_eq!(r.status.as_u16(), 201, "{}", r.json);
    let (log, _) = support::stop_and_read_log(server).await;
    assert!(collector.spans.lock().unwrap().is_empty());
    assert!(log.contains("payment create answered"), "{log}");
    assert!(!log.contains("payments_trace"), "{log}");
    assert!(!log.contains("\"name\":\"request\""), "{log}");
}

/// A collector that refuses every batch: the lost batches are counted on `/metrics`
/// (`payments_trace_export_failures_total`) and logged, and the server serves as before.
/// Seen failing before the exporter counted its failures: the metric was absent and the log
/// silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_the_collector_refuses_are_counted_and_logged() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let otlp = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let refuse = Router::new().route(
        "/v1/traces",
        post(|| async { StatusCode::SERVICE_UNAVAILABLE }),
    );
    tokio::spawn(async move { axum::serve(listener, refuse).await });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let env = [
        ("PAYMENTS_TELEMETRY__OTLP_ENDPOINT", otlp.as_str()),
        // The batch processor's delay (the SDK reads it): a batch every 100 ms, not 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let (mut server, base, operator) =
        serve_with(&data, "127.0.0.1", &["--log-format", "json"], &env);
    wait_ready(&mut server, &base).await;
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let client = MerchantClient::from_credentials(&creds).unwrap();
    let r = client
        .create_payment(
            &json!({"merchant_payment_id": "lost-trace-1", "amount": "1910.00",
                    "payment_method": "sbp"}),
        )
        .await
        .unwrap();
    assert_eq!(r.status.as_u16(), 201, "{}", r.json);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = reqwest::get(format!("{operator}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let failures = support::sample(&text, "payments_trace_export_failures_total");
        if failures.is_some_and(|n| n >= 1.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no export failure counted in 30 s: {failures:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (log, _) = support::stop_and_read_log(server).await;
    assert!(
        log.contains("traces could not be exported to telemetry.otlp_endpoint"),
        "{log}"
    );
}
