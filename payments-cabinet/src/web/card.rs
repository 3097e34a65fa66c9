//! The payment card's summary and timeline: what a shop owner reads first. The summary is
//! the order, the amount as money, the status, how the payer pays and to whom, and when; the
//! timeline is everything that happened to the payment in time order, from its status
//! history (created, requisites issued, paid, canceled, re-checks) and its callbacks (queued,
//! each attempt delivered or failed). The API's own fields stay on the card, folded away
//! (`payments`' `card_fields`), each value in words.

use payments_core::event::{DeliveryAttempt, DeliveryErrorKind, EventRecord};
use payments_core::history::StatusChange;
use payments_core::payment::Payment;
use payments_core::project::Project;
use payments_core::totals::Volume;

use super::i18n::{tr, trf};
use super::views::{money, source_text, status_text, when, Moment, SummaryLine};

/// A payment method in words.
pub(crate) fn method_text(code: &str) -> &str {
    match code {
        "sbp" => tr("SBP (Faster Payments System)"),
        "card_transfer" => tr("Card transfer"),
        _ => code,
    }
}

/// A card number in groups of four (`2200 0000 0000 4242`); a phone or anything else as it
/// is.
pub(crate) fn grouped_requisite(requisite: &str) -> String {
    let card =
        (13..=19).contains(&requisite.len()) && requisite.bytes().all(|b| b.is_ascii_digit());
    if !card {
        return requisite.to_string();
    }
    let digits: Vec<char> = requisite.chars().collect();
    digits
        .chunks(4)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The card's summary of `payment` in `project`.
pub(crate) fn summary(payment: &Payment, project: &Project) -> Vec<SummaryLine> {
    let line = |id, label: &str, value: String| SummaryLine {
        id,
        label: label.to_string(),
        value,
    };
    let mut lines = vec![
        line(
            "order",
            tr("Order"),
            payment.merchant_payment_id.as_str().to_string(),
        ),
        line(
            "amount",
            tr("Amount"),
            money(Volume::of(&payment.amount), payment.currency),
        ),
    ];
    if payment.initial_amount != payment.amount {
        lines.push(line(
            "initial-amount",
            tr("Amount asked at creation"),
            money(Volume::of(&payment.initial_amount), payment.currency),
        ));
    }
    lines.push(line(
        "method",
        tr("Payment method"),
        method_text(payment.payment_method.as_str()).to_string(),
    ));
    if let Some(r) = &payment.requisites {
        lines.push(line(
            "pay-to",
            tr("Pay to"),
            grouped_requisite(&r.requisite),
        ));
        let bank = r
            .bank
            .as_deref()
            .map_or(String::new(), |b| format!(", {b}"));
        lines.push(line(
            "recipient",
            tr("Recipient"),
            format!("{}{bank}", r.holder_name),
        ));
    }
    lines.push(line("created", tr("Created"), when(payment.created_at).1));
    lines.push(line("project", tr("Project"), project.name.clone()));
    lines
}

/// A value of the payment resource in words, for the card's technical details: `null` as a
/// dash, booleans as yes and no, the codes of the flow, the status and the method by name;
/// anything else (amounts, ids, times) as the API writes it.
pub(crate) fn field_value(name: &str, value: String) -> String {
    match (name, value.as_str()) {
        (_, "null") => "—".to_string(),
        (_, "true") => tr("yes").to_string(),
        (_, "false") => tr("no").to_string(),
        ("flow", "runtime_live") => tr("live payment").to_string(),
        ("flow", "project_test") => tr("test payment").to_string(),
        ("status", code) => status_text(code).to_string(),
        ("payment_method", code) => method_text(code).to_string(),
        _ => value,
    }
}

/// What a delivery attempt came to, in the page's language: the core's kind of failure
/// ([`DeliveryAttempt::error_kind`]) and the answer's status, as
/// [`DeliveryAttempt::result_for_merchant`] words them in English.
pub(crate) fn attempt_result(a: &DeliveryAttempt) -> String {
    use DeliveryErrorKind as K;
    let Some(kind) = a.error_kind() else {
        return a.http_status.map_or_else(
            || tr("delivery|delivered").to_string(),
            |s| format!("HTTP {s}"),
        );
    };
    match (a.http_status, kind) {
        (Some(s), K::Redirect) => trf("HTTP {status}: redirect not followed", &[("status", &s)]),
        (Some(s), K::Timeout) => trf(
            "HTTP {status}: the answer did not finish in time",
            &[("status", &s)],
        ),
        (Some(s), K::ResponseBroken) => {
            trf("HTTP {status}: the answer broke off", &[("status", &s)])
        }
        (Some(s), _) => format!("HTTP {s}"),
        (None, K::RequestFailed) if a.error.as_deref().unwrap_or("").is_empty() => {
            tr("no answer").to_string()
        }
        (None, kind) => kind_text(kind).to_string(),
    }
}

/// A kind of delivery failure in words ([`DeliveryErrorKind::text`] in English).
fn kind_text(kind: DeliveryErrorKind) -> &'static str {
    use DeliveryErrorKind as K;
    match kind {
        K::Timeout => tr("timeout: no answer in time"),
        K::ConnectionRefused => tr("connection refused"),
        K::DnsFailure => tr("DNS failure: the callback URL's host name did not resolve"),
        K::TlsError => {
            tr("TLS failure: the receiver's certificate or TLS handshake was not accepted")
        }
        K::ConnectFailed => tr("could not connect to the receiver"),
        K::RefusedAddress => {
            tr("refused by the address policy: the callback URL's host is not a public address")
        }
        K::RefusedDestination => tr("refused: the callback URL is not one the service sends to"),
        K::Redirect => tr("redirect not followed"),
        K::HttpStatus => tr("an answer outside 2xx"),
        K::ResponseBroken => tr("the answer broke off"),
        K::RequestFailed => tr("the request failed before an answer"),
        _ => kind.text(),
    }
}

/// What a change of the payment's status was, in words.
fn change_text(c: &StatusChange) -> &'static str {
    match c.cause.as_str() {
        "created" => tr("Payment created"),
        "requisites_issued" => tr("Requisites issued to the payer"),
        "requisites_refused" => tr("No requisites could be issued"),
        "confirmed" => tr("Paid and confirmed"),
        "canceled" => tr("Canceled"),
        "expired" => tr("Expired: not paid in time"),
        "recheck_started" => tr("Re-check started"),
        "recheck_resolved" => tr("Re-check resolved"),
        _ => tr("Status changed"),
    }
}

/// A status change as a moment: what it was, then the status it led to, the amount and
/// who caused it.
fn change_moment(c: &StatusChange, payment: &Payment) -> Moment {
    let by = c.source.map_or(String::new(), |s| {
        trf("by {who}", &[("who", &source_text(s.as_str()))])
    });
    let detail = [
        status_text(c.to.as_str()).to_string(),
        money(Volume::of(&c.amount), payment.currency),
        by,
    ]
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect::<Vec<_>>()
    .join(" · ");
    let tone = match c.to.as_str() {
        "completed" => "ok",
        "canceled" | "error" => "bad",
        _ => "info",
    };
    Moment {
        at: when(c.at),
        at_ms: c.at.unix_millis(),
        what: change_text(c).to_string(),
        detail,
        tone,
    }
}

/// A callback event as moments: queued, then each attempt.
fn event_moments(e: &EventRecord) -> Vec<Moment> {
    let event = &e.outbox.event;
    let mut out = vec![Moment {
        at: when(event.created_at),
        at_ms: event.created_at.unix_millis(),
        what: tr("Callback queued").to_string(),
        detail: trf(
            "status {status} to {destination}",
            &[
                ("status", &status_text(event.status.as_str())),
                ("destination", &e.outbox.destination.as_str()),
            ],
        ),
        tone: "info",
    }];
    for a in &e.attempts {
        let (what, tone) = if a.success {
            (tr("Callback delivered"), "ok")
        } else {
            (tr("Callback attempt failed"), "bad")
        };
        out.push(Moment {
            at: when(a.started_at),
            at_ms: a.started_at.unix_millis(),
            what: what.to_string(),
            detail: trf(
                "attempt {n}: {result}",
                &[("n", &a.attempt), ("result", &attempt_result(a))],
            ),
            tone,
        });
    }
    out
}

/// The payment's timeline: its status changes and its callbacks' moments, oldest first
/// (a change before the callback it caused at the same millisecond).
pub(crate) fn timeline(
    payment: &Payment,
    history: &[StatusChange],
    events: &[EventRecord],
) -> Vec<Moment> {
    let mut moments: Vec<Moment> = history
        .iter()
        .map(|c| change_moment(c, payment))
        .chain(events.iter().flat_map(event_moments))
        .collect();
    // A stable sort: what happened at one millisecond stays in the order above.
    moments.sort_by_key(|m| m.at_ms);
    moments
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_values_read_as_words() {
        assert_eq!(field_value("x", "null".into()), "—");
        assert_eq!(field_value("is_test", "false".into()), "no");
        assert_eq!(field_value("flow", "runtime_live".into()), "live payment");
        assert_eq!(
            field_value("payment_method", "sbp".into()),
            "SBP (Faster Payments System)"
        );
        assert_eq!(field_value("amount", "100.50".into()), "100.50");
    }

    /// In English, the words are the core's own (a kind added to the core reads in its
    /// English until it has words here).
    #[test]
    fn attempt_results_in_english_are_the_cores() {
        use payments_core::Timestamp;
        let attempt = |http_status, error: Option<String>| DeliveryAttempt {
            attempt: 1,
            started_at: Timestamp::from_unix_millis(0),
            duration_ms: 1,
            http_status,
            success: false,
            error,
            response_excerpt: None,
        };
        let mut cases = vec![attempt(Some(200), None), attempt(None, None)];
        for kind in DeliveryErrorKind::ALL {
            for status in [None, Some(502)] {
                cases.push(attempt(status, Some(kind.record("detail"))));
            }
        }
        cases.push(attempt(None, Some(String::new())));
        for a in &cases {
            assert_eq!(attempt_result(a), a.result_for_merchant(), "{a:?}");
        }
        let dns = attempt(None, Some(DeliveryErrorKind::DnsFailure.record("x")));
        let ru = crate::web::i18n::Scope::new(crate::web::i18n::Lang::Ru, "/".into());
        let russian =
            futures_executor::block_on(crate::web::i18n::scope(ru, async { attempt_result(&dns) }));
        assert_eq!(
            russian,
            "ошибка DNS: имя хоста из адреса колбэка не найдено"
        );
    }

    #[test]
    fn card_numbers_are_grouped_by_four_and_phones_left_alone() {
        assert_eq!(grouped_requisite("2200000000004242"), "2200 0000 0000 4242");
        assert_eq!(
            grouped_requisite("2200000000004242123"),
            "2200 0000 0000 4242 123"
        );
        assert_eq!(grouped_requisite("+79001112233"), "+79001112233");
        assert_eq!(grouped_requisite("79001112233"), "79001112233");
    }
}
