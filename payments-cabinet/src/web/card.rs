//! The payment card's summary and timeline: what a shop owner reads first. The summary is
//! the order, the amount as money, the status, how the payer pays and to whom, and when; the
//! timeline is everything that happened to the payment in time order, from its status
//! history (created, requisites issued, paid, canceled, re-checks) and its callbacks (queued,
//! each attempt delivered or failed). The API's own fields stay on the card, folded away
//! (`payments`' `card_fields`), each value in words.

use payments_core::event::EventRecord;
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
                &[("n", &a.attempt), ("result", &a.result_for_merchant())],
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
