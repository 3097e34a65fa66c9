//! Request bodies shared by the modules.

use serde_json::json;

pub(crate) fn body(mpid: &str, amount: &str) -> serde_json::Value {
    json!({"merchant_payment_id": mpid, "amount": amount, "payment_method": "sbp"})
}

/// The time now, from the system clock.
pub(crate) fn now() -> payments_core::Timestamp {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    payments_core::Timestamp::from_unix_millis(i64::try_from(millis).expect("millis"))
}

/// [`now`] in RFC 3339.
pub(crate) fn now_rfc3339() -> String {
    now().to_rfc3339()
}

/// Confirms a live payment through the operator API (its callback is queued).
pub(crate) async fn confirm(s: &payments_http::testing::TestServer, id: &str) {
    let r = reqwest::Client::new()
        .post(format!(
            "{}/operator/v1/payments/{id}/confirm",
            s.operator_url
        ))
        .bearer_auth(s.operator_token.expose())
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("the confirm is answered");
    assert_eq!(r.status(), reqwest::StatusCode::OK);
}
