//! Request bodies shared by the modules.

use serde_json::json;

pub(crate) fn body(mpid: &str, amount: &str) -> serde_json::Value {
    json!({"merchant_payment_id": mpid, "amount": amount, "payment_method": "sbp"})
}
