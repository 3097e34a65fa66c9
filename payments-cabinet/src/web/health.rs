//! The integration health of a project, read from its logged merchant requests (the core's
//! request log, [`payments_core::request_log`]): the share of `4xx` answers by error code,
//! creates that reuse a `merchant_payment_id`, payments read more often than the spec's polling
//! interval allows, and the clock skew seen in the signatures' `created`. The Requests tab
//! shows it above the log.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use payments_core::request_log::{RequestLogEntry, RequestLogQuery};
use payments_core::service::PaymentService;
use payments_core::store::StoreError;
use payments_core::{PaymentId, ProjectId, Timestamp};

/// The route of a create, as logged.
const CREATE_PATH: &str = "/api/v1/payments";

/// The shortest interval between two reads of one payment that the spec allows (it asks for
/// polling every 5 to 10 s): reads closer than this count as polling too fast.
pub const MIN_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// Whether the request is a create (`POST /api/v1/payments`, a prefix before it allowed).
fn is_create(e: &RequestLogEntry) -> bool {
    e.method == "POST" && e.path.ends_with(CREATE_PATH)
}

/// The integration health of `project` over its whole logged window (at most
/// [`RequestLogPolicy::keep`](payments_core::request_log::RequestLogPolicy::keep) requests,
/// none older than the retention), as [`IntegrationHealth::of`] reads it.
pub async fn integration_health(
    service: &PaymentService,
    project: ProjectId,
) -> Result<IntegrationHealth, StoreError> {
    let policy = service.config().request_log;
    let q = RequestLogQuery {
        since: Some(policy.since(service.ports().clock.now())),
        ..RequestLogQuery::new(project, policy.keep.max(1))
    };
    let entries = service.store().find_requests(&q).await?;
    Ok(IntegrationHealth::of(&entries))
}

/// One error code's share of the answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeShare {
    /// The error code.
    pub code: String,
    /// How many answers had it.
    pub count: u64,
    /// Its share of all requests in the window, per mille.
    pub permille: u64,
}

/// The integration health of a project over its logged requests ([`IntegrationHealth::of`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntegrationHealth {
    /// The requests read.
    pub requests: u64,
    /// Of them, answered `4xx`.
    pub client_errors: u64,
    /// The `4xx` answers by error code, most frequent first (ties by code).
    pub client_errors_by_code: Vec<CodeShare>,
    /// Creates that repeated an earlier create's `merchant_payment_id` (a retry: the second
    /// and later of each id).
    pub create_retries: u64,
    /// The `merchant_payment_id`s created more than once.
    pub retried_ids: u64,
    /// Payments read twice within less than [`MIN_POLL_INTERVAL`].
    pub fast_polled_payments: u64,
    /// The shortest interval seen between two reads of one payment, when one was read twice.
    pub shortest_poll_interval: Option<Duration>,
    /// The signed requests whose `created` was read.
    pub skew_samples: u64,
    /// The largest clock skew seen (by size, with its sign), milliseconds.
    pub max_skew_ms: Option<i64>,
    /// The median clock skew, milliseconds.
    pub median_skew_ms: Option<i64>,
}

impl IntegrationHealth {
    /// The summary of `entries` (one project's requests, any order).
    pub fn of(entries: &[RequestLogEntry]) -> IntegrationHealth {
        let requests = entries.len() as u64;
        let mut by_code: BTreeMap<&str, u64> = BTreeMap::new();
        let mut client_errors = 0;
        let mut creates: HashMap<&str, u64> = HashMap::new();
        let mut reads: HashMap<PaymentId, Vec<Timestamp>> = HashMap::new();
        let mut skews = Vec::new();
        for e in entries {
            if e.status / 100 == 4 {
                client_errors += 1;
                *by_code
                    .entry(e.error_code.as_deref().unwrap_or("-"))
                    .or_default() += 1;
            }
            if is_create(e) {
                if let Some(m) = e.merchant_payment_id.as_deref() {
                    *creates.entry(m).or_default() += 1;
                }
            }
            if e.method == "GET" {
                if let Some(p) = e.payment_id {
                    reads.entry(p).or_default().push(e.at);
                }
            }
            skews.extend(e.clock_skew_ms);
        }
        let mut client_errors_by_code: Vec<CodeShare> = by_code
            .into_iter()
            .map(|(code, count)| CodeShare {
                code: code.to_string(),
                count,
                permille: (count * 1000 + requests / 2) / requests.max(1),
            })
            .collect();
        client_errors_by_code.sort_by(|a, b| b.count.cmp(&a.count).then(a.code.cmp(&b.code)));
        let create_retries = creates.values().map(|n| n - 1).sum();
        let retried_ids = creates.values().filter(|n| **n > 1).count() as u64;
        let mut fast_polled_payments = 0;
        let mut shortest_poll_interval: Option<Duration> = None;
        for times in reads.values_mut() {
            times.sort();
            let shortest = times.windows(2).map(|w| w[1].duration_since(w[0])).min();
            if let Some(d) = shortest {
                if d < MIN_POLL_INTERVAL {
                    fast_polled_payments += 1;
                }
                shortest_poll_interval = Some(shortest_poll_interval.map_or(d, |s| s.min(d)));
            }
        }
        skews.sort();
        let median_skew_ms = (!skews.is_empty()).then(|| skews[(skews.len() - 1) / 2]);
        let max_skew_ms = skews.iter().copied().max_by_key(|s| s.unsigned_abs());
        IntegrationHealth {
            requests,
            client_errors,
            client_errors_by_code,
            create_retries,
            retried_ids,
            fast_polled_payments,
            shortest_poll_interval,
            skew_samples: skews.len() as u64,
            max_skew_ms,
            median_skew_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> ProjectId {
        "00000000-0000-4000-8000-000000000001".parse().unwrap()
    }

    fn payment(n: u8) -> PaymentId {
        format!("00000000-0000-4000-8000-0000000000{n:02}")
            .parse()
            .unwrap()
    }

    fn entry(
        at_ms: i64,
        method: &str,
        path: &str,
        status: u16,
        code: Option<&str>,
    ) -> RequestLogEntry {
        RequestLogEntry {
            id: 0,
            project_id: project(),
            at: Timestamp::from_unix_millis(at_ms),
            method: method.into(),
            path: path.into(),
            status,
            error_code: code.map(str::to_string),
            message: None,
            request_id: "r".into(),
            latency_us: 1,
            source: "-".into(),
            merchant_payment_id: None,
            payment_id: None,
            clock_skew_ms: None,
            diagnosis: None,
        }
    }

    fn create(at_ms: i64, mpid: &str) -> RequestLogEntry {
        RequestLogEntry {
            merchant_payment_id: Some(mpid.into()),
            ..entry(at_ms, "POST", "/api/v1/payments", 201, None)
        }
    }

    fn read(at_ms: i64, p: u8) -> RequestLogEntry {
        RequestLogEntry {
            payment_id: Some(payment(p)),
            ..entry(
                at_ms,
                "GET",
                &format!("/api/v1/payments/{}", payment(p)),
                200,
                None,
            )
        }
    }

    #[test]
    fn an_empty_log_is_healthy() {
        assert_eq!(IntegrationHealth::of(&[]), IntegrationHealth::default());
    }

    #[test]
    fn client_errors_are_shared_by_code_over_every_request() {
        let mut log = vec![entry(1, "GET", "/api/v1/project", 200, None); 5];
        log.extend(vec![
            entry(
                2,
                "POST",
                "/api/v1/payments",
                401,
                Some("signature_invalid")
            );
            3
        ]);
        log.push(entry(
            3,
            "POST",
            "/api/v1/payments",
            409,
            Some("request_replayed"),
        ));
        log.push(entry(
            4,
            "GET",
            "/api/v1/payments",
            503,
            Some("service_unavailable"),
        ));
        let h = IntegrationHealth::of(&log);
        assert_eq!((h.requests, h.client_errors), (10, 4));
        let shares: Vec<_> = h
            .client_errors_by_code
            .iter()
            .map(|c| (c.code.as_str(), c.count, c.permille))
            .collect();
        // 5xx is not a client error; most frequent first.
        assert_eq!(
            shares,
            [("signature_invalid", 3, 300), ("request_replayed", 1, 100)]
        );
    }

    #[test]
    fn a_create_that_reuses_a_merchant_payment_id_is_a_retry() {
        let log = [
            create(1, "a"),
            create(2, "a"),
            create(3, "a"),
            create(4, "b"),
            create(5, "c"),
            create(6, "c"),
            // A read or a list with the id is no create.
            RequestLogEntry {
                merchant_payment_id: Some("b".into()),
                ..entry(7, "GET", "/api/v1/payments", 200, None)
            },
        ];
        let h = IntegrationHealth::of(&log);
        assert_eq!((h.create_retries, h.retried_ids), (3, 2));
    }

    #[test]
    fn reads_closer_than_five_seconds_are_polling_too_fast() {
        let table: &[(&[i64], u64, Option<u64>)] = &[
            // (read times of one payment in ms, fast-polled payments, shortest interval ms)
            (&[0], 0, None),
            (&[0, 5_000, 10_000], 0, Some(5_000)),
            (&[0, 4_999], 1, Some(4_999)),
            (&[10_000, 0, 6_000, 7_000], 1, Some(1_000)),
        ];
        for (times, fast, shortest) in table {
            let log: Vec<_> = times.iter().map(|t| read(*t, 1)).collect();
            let h = IntegrationHealth::of(&log);
            assert_eq!(h.fast_polled_payments, *fast, "{times:?}");
            assert_eq!(
                h.shortest_poll_interval,
                shortest.map(Duration::from_millis),
                "{times:?}"
            );
        }
        // Each payment on its own: two payments read 1 s apart are not one polled fast.
        let h = IntegrationHealth::of(&[read(0, 1), read(1_000, 2), read(9_000, 1)]);
        assert_eq!(h.fast_polled_payments, 0);
    }

    #[test]
    fn the_skew_is_the_median_and_the_largest_by_size() {
        let skewed = |ms: i64| RequestLogEntry {
            clock_skew_ms: Some(ms),
            ..entry(1, "GET", "/api/v1/project", 200, None)
        };
        let h = IntegrationHealth::of(&[skewed(100), skewed(-90_000), skewed(2_000), skewed(50)]);
        assert_eq!(h.skew_samples, 4);
        assert_eq!(h.max_skew_ms, Some(-90_000));
        assert_eq!(h.median_skew_ms, Some(50));
    }
}
