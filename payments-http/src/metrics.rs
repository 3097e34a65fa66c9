//! Prometheus metrics: request counts and latency histograms by route and status, callback
//! delivery counts, and gauges read from the store at scrape time (payments by status, outbox
//! depth). Rendered in the Prometheus text format on the operator listener's `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Latency bucket upper bounds, seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum += secs;
    }
}

/// The process's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, &'static str, u16), Histogram>>,
    deliveries: Mutex<BTreeMap<&'static str, u64>>,
}

impl Metrics {
    /// Records one request: route template, method, status and latency.
    pub fn observe_request(
        &self,
        route: &'static str,
        method: &'static str,
        status: u16,
        latency: Duration,
    ) {
        let mut m = self
            .requests
            .lock()
            .expect("metrics lock is never held across a panic");
        m.entry((route, method, status))
            .or_default()
            .observe(latency.as_secs_f64());
    }

    /// Records one callback delivery attempt by outcome (`success`, `failure`).
    pub fn observe_delivery(&self, outcome: &'static str) {
        let mut m = self
            .deliveries
            .lock()
            .expect("metrics lock is never held across a panic");
        *m.entry(outcome).or_default() += 1;
    }

    /// The text exposition, with the store gauges given by the caller.
    pub fn render(&self, payments_by_status: &[(String, u64)], outbox_pending: u64) -> String {
        let mut out = String::new();
        out.push_str("# HELP payments_http_requests_total Requests by route, method and status.\n");
        out.push_str("# TYPE payments_http_requests_total counter\n");
        let requests = self
            .requests
            .lock()
            .expect("metrics lock is never held across a panic")
            .clone();
        for ((route, method, status), h) in &requests {
            let _ = writeln!(
                out,
                "payments_http_requests_total{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {}",
                h.count
            );
        }
        out.push_str("# HELP payments_http_request_duration_seconds Request latency.\n");
        out.push_str("# TYPE payments_http_request_duration_seconds histogram\n");
        for ((route, method, status), h) in &requests {
            let labels = format!("route=\"{route}\",method=\"{method}\",status=\"{status}\"");
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "payments_http_request_duration_seconds_bucket{{{labels},le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ = writeln!(
                out,
                "payments_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "payments_http_request_duration_seconds_sum{{{labels}}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "payments_http_request_duration_seconds_count{{{labels}}} {}",
                h.count
            );
        }
        out.push_str(
            "# HELP payments_callback_attempts_total Callback delivery attempts by outcome.\n",
        );
        out.push_str("# TYPE payments_callback_attempts_total counter\n");
        for (outcome, n) in self
            .deliveries
            .lock()
            .expect("metrics lock is never held across a panic")
            .iter()
        {
            let _ = writeln!(
                out,
                "payments_callback_attempts_total{{outcome=\"{outcome}\"}} {n}"
            );
        }
        out.push_str("# HELP payments_payments Payments stored, by status.\n");
        out.push_str("# TYPE payments_payments gauge\n");
        for (status, n) in payments_by_status {
            let _ = writeln!(out, "payments_payments{{status=\"{status}\"}} {n}");
        }
        out.push_str("# HELP payments_outbox_pending Callback events waiting for delivery.\n");
        out.push_str("# TYPE payments_outbox_pending gauge\n");
        let _ = writeln!(out, "payments_outbox_pending {outbox_pending}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_histograms() {
        let m = Metrics::default();
        m.observe_request("/api/v1/payments", "POST", 201, Duration::from_millis(3));
        m.observe_request("/api/v1/payments", "POST", 201, Duration::from_millis(30));
        m.observe_delivery("success");
        let text = m.render(&[("processing".into(), 2)], 5);
        assert!(text.contains("payments_http_requests_total{route=\"/api/v1/payments\",method=\"POST\",status=\"201\"} 2"));
        assert!(text.contains("le=\"0.005\"} 1"));
        assert!(text.contains("le=\"0.05\"} 2"));
        assert!(text.contains("payments_callback_attempts_total{outcome=\"success\"} 1"));
        assert!(text.contains("payments_payments{status=\"processing\"} 2"));
        assert!(text.contains("payments_outbox_pending 5"));
    }
}
