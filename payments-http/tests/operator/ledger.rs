//! The project balance over real sockets: a completion credits the balance the merchant reads
//! (`balance:read`), the operator records payouts and adjustments (refused beyond the balance,
//! idempotent by transaction hash), the statement and the entries agree, and the
//! reconciliation finds nothing and says so on `/metrics`.

use serde_json::{json, Value};

use crate::common::TestApp;
use crate::support::provision;

/// A transaction hash made of one hex digit.
fn tx(c: char) -> String {
    c.to_string().repeat(64)
}

const TRON: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

#[tokio::test]
async fn a_completion_credits_the_balance_and_payouts_debit_it_once() {
    let app = TestApp::sandbox().await;
    let shop = provision(&app).await;
    let project = shop.project_id.clone();

    // The provisioned token lacks the balance's scope.
    let refused = app
        .merchant("GET", "/api/v1/balance", &shop.token, None, b"")
        .await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    assert_eq!(refused.code(), "insufficient_scope");
    let t = app
        .op(
            "POST",
            &format!("/operator/v1/projects/{project}/tokens"),
            Some(json!({"scopes": ["balance:read"]})),
        )
        .await;
    assert_eq!(t.status, 201, "{}", t.text);
    let reader = t.body["token"].as_str().unwrap().to_string();
    let balance = |token: String| {
        let app = &app;
        async move {
            app.merchant("GET", "/api/v1/balance", &token, None, b"")
                .await
        }
    };
    let empty = balance(reader.clone()).await;
    assert_eq!(empty.status, 200, "{}", empty.text);
    assert_eq!(empty.body["balance"], "0.0000");
    assert_eq!(empty.body["entries"], 0);

    // 3400 RUB at the sandbox course 100 and the default fee: the spec's worked example
    // gives amount_usdt_rate 30.2600 at 11 %; the credit is whatever the payment shows.
    let created = app.create_payment(&shop.token, &shop.signer, "3400").await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["is_test"], false);
    let id = created.body["id"].as_str().unwrap().to_string();
    // A create writes no ledger entry: only a completion does.
    let created_only = balance(reader.clone()).await;
    assert_eq!(created_only.body["entries"], 0, "{}", created_only.text);
    let confirmed = app
        .op("POST", &format!("/operator/v1/payments/{id}/confirm"), None)
        .await;
    assert_eq!(confirmed.status, 200, "{}", confirmed.text);
    let credit = confirmed.body["payment"]["merchant_information"]["amount_usdt_rate"]
        .as_str()
        .expect("the settlement's amount as a string")
        .to_string();
    let after = balance(reader.clone()).await;
    assert_eq!(after.body["balance"], credit.as_str(), "{}", after.text);
    assert_eq!(after.body["credits"], credit.as_str());
    assert_eq!(after.body["entries"], 1);

    let entries = app
        .merchant("GET", "/api/v1/balance/entries", &reader, None, b"")
        .await;
    assert_eq!(entries.status, 200, "{}", entries.text);
    let data = entries.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["kind"], "credit");
    assert_eq!(data[0]["payment_id"], id.as_str());
    assert_eq!(data[0]["amount"], credit.as_str());
    assert_eq!(data[0]["balance_after"], credit.as_str());
    assert_eq!(entries.body["has_more"], false);

    // Payouts: beyond the balance refused, within it recorded once.
    let payout = |amount: &str, reference: &str| json!({"amount": amount, "destination": TRON, "reference": reference});
    let path = format!("/operator/v1/projects/{project}/payouts");
    let too_much = app.op("POST", &path, Some(payout("100", &tx('a')))).await;
    assert_eq!(too_much.status, 409, "{}", too_much.text);
    assert_eq!(too_much.code(), "insufficient_balance");
    let paid = app.op("POST", &path, Some(payout("30", &tx('a')))).await;
    assert_eq!(paid.status, 201, "{}", paid.text);
    assert_eq!(paid.body["kind"], "payout");
    assert_eq!(paid.body["amount"], "-30.0000");
    assert_eq!(paid.body["destination"], TRON);
    let again = app
        .op(
            "POST",
            &path,
            Some(payout("30.0", &format!("0x{}", tx('A')))),
        )
        .await;
    assert_eq!(
        again.status, 200,
        "a retry answers the first record: {}",
        again.text
    );
    assert_eq!(again.body["id"], paid.body["id"]);
    let other = app.op("POST", &path, Some(payout("1", &tx('a')))).await;
    assert_eq!(other.status, 409, "{}", other.text);
    assert_eq!(other.code(), "payout_reference_conflict");
    for (body, field) in [
        (payout("1", "abc"), "reference"),
        (payout("0", &tx('b')), "amount"),
        (payout("1.00001", &tx('b')), "amount"),
        (
            json!({"amount": "1", "destination": "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u", "reference": tx('b')}),
            "destination",
        ),
        (json!({"amount": "1", "reference": tx('b')}), "destination"),
        (
            json!({"amount": "1", "destination": TRON, "reference": tx('b'), "note": "x"}),
            "note",
        ),
    ] {
        let bad = app.op("POST", &path, Some(body)).await;
        assert_eq!(bad.status, 400, "{}", bad.text);
        assert!(bad.message().starts_with(field), "{field}: {}", bad.text);
    }
    let unknown = app
        .op(
            "POST",
            "/operator/v1/projects/00000000-0000-4000-8000-000000000000/payouts",
            Some(payout("1", &tx('b'))),
        )
        .await;
    assert_eq!(unknown.status, 404, "{}", unknown.text);
    let forced = app
        .op(
            "POST",
            &path,
            Some(
                json!({"amount": "5", "destination": TRON, "reference": tx('c'),
                        "force_reason": "paid in advance by agreement"}),
            ),
        )
        .await;
    assert_eq!(forced.status, 201, "{}", forced.text);

    // An adjustment brings the balance back to zero.
    let left = balance(reader.clone()).await.body["balance"]
        .as_str()
        .unwrap()
        .to_string();
    let correction = left.trim_start_matches('-');
    let adjusted = app
        .op(
            "POST",
            &format!("/operator/v1/projects/{project}/adjustments"),
            Some(json!({"amount": correction, "reason": "covering the advance"})),
        )
        .await;
    assert_eq!(adjusted.status, 201, "{}", adjusted.text);
    assert_eq!(
        adjusted.body["balance_after"], "0.0000",
        "{}",
        adjusted.text
    );
    let no_reason = app
        .op(
            "POST",
            &format!("/operator/v1/projects/{project}/adjustments"),
            Some(json!({"amount": "1"})),
        )
        .await;
    assert_eq!(no_reason.status, 400, "{}", no_reason.text);

    // The statement of today: opening 0, the lines, closing 0; the operator sees the same.
    let now = payments_core::Timestamp::from_unix_millis(
        i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap(),
    );
    let from = (now - std::time::Duration::from_secs(3_600)).to_rfc3339();
    let to = (now + std::time::Duration::from_secs(3_600)).to_rfc3339();
    let statement = app
        .merchant(
            "GET",
            &format!("/api/v1/balance/statement?from={from}&to={to}"),
            &reader,
            None,
            b"",
        )
        .await;
    assert_eq!(statement.status, 200, "{}", statement.text);
    let s = &statement.body;
    assert_eq!(s["opening"], "0.0000");
    assert_eq!(s["closing"], "0.0000");
    assert_eq!(s["lines"]["credit"]["sum"], credit.as_str());
    assert_eq!(s["lines"]["payout"]["count"], 2);
    assert_eq!(s["lines"]["payout"]["sum"], "-35.0000");
    assert_eq!(s["lines"]["operator_adjustment"]["count"], 1);
    let later = app
        .merchant(
            "GET",
            &format!(
                "/api/v1/balance/statement?from={to}&to={}",
                (now + std::time::Duration::from_secs(7_200)).to_rfc3339()
            ),
            &reader,
            None,
            b"",
        )
        .await;
    assert_eq!(later.body["opening"], "0.0000");
    assert_eq!(later.body["lines"]["credit"]["count"], 0);
    let op_balance = app
        .op(
            "GET",
            &format!("/operator/v1/projects/{project}/balance"),
            None,
        )
        .await;
    assert_eq!(op_balance.body["entries"], 4, "{}", op_balance.text);
    let page = app
        .op(
            "GET",
            &format!("/operator/v1/projects/{project}/balance/entries?kind=payout&limit=1"),
            None,
        )
        .await;
    assert_eq!(page.status, 200, "{}", page.text);
    assert_eq!(page.body["data"][0]["reference"], tx('c').as_str());
    assert_eq!(page.body["has_more"], true);
    let cursor = page.body["next_cursor"].as_str().unwrap();
    let next = app
        .op(
            "GET",
            &format!(
                "/operator/v1/projects/{project}/balance/entries?kind=payout&limit=1&cursor={cursor}"
            ),
            None,
        )
        .await;
    assert_eq!(
        next.body["data"][0]["reference"],
        tx('a').as_str(),
        "{}",
        next.text
    );
    assert_eq!(next.body["has_more"], false);

    // Bad queries are named.
    for (path, says) in [
        ("/api/v1/balance?x=1", "no query"),
        ("/api/v1/balance/entries?kind=refund", "kind"),
        (
            "/api/v1/balance/statement?from=2026-10-01T00:00:00Z",
            "required",
        ),
    ] {
        let bad = app.merchant("GET", path, &reader, None, b"").await;
        assert_eq!(bad.status, 400, "{path}: {}", bad.text);
        assert!(bad.message().contains(says), "{path}: {}", bad.text);
    }

    // The reconciliation finds nothing, and /metrics says so.
    let report = app
        .op("POST", "/operator/v1/ledger/reconcile", Some(json!({})))
        .await;
    assert_eq!(report.status, 200, "{}", report.text);
    assert_eq!(
        report.body["differences"],
        Value::Array(vec![]),
        "{}",
        report.text
    );
    assert!(report.body["payments"].as_u64().unwrap() >= 1);
    let metrics = app.op("GET", "/metrics", None).await;
    assert!(
        metrics.text.contains("payments_ledger_differences 0"),
        "{}",
        metrics.text
    );
    assert!(metrics
        .text
        .contains("payments_ledger_reconciliations_total 1"));
    // Every payout and adjustment is in the audit trail.
    let audit = app.op("GET", "/operator/v1/audit?limit=50", None).await;
    let actions: Vec<&str> = audit.body["records"]
        .as_array()
        .or_else(|| audit.body.as_array())
        .expect("audit records")
        .iter()
        .filter_map(|r| r["action"].as_str())
        .filter(|a| a.starts_with("ledger."))
        .collect();
    assert_eq!(
        actions,
        vec!["ledger.adjust", "ledger.payout", "ledger.payout"],
        "{}",
        audit.text
    );
}
