//! One complete payment against a running sandbox: a signed create, the payer's requisite, the
//! operator's confirmation (what the cabinet's "paid" button does), a signed `GET` showing
//! `completed`, and the settlement. Every unexpected answer stops it with an error naming the
//! step and the server's `request_id`.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use payments_client::{ApiResponse, MerchantClient, SandboxCredentials};
use serde_json::{json, Value};

use crate::advice::{describe, next_step, NextStep};
use crate::display::{exact, payer_instructions, settlement};

/// The amount the quickstart pays: the spec's worked settlement example.
pub const AMOUNT: &str = "3400";

/// What the quickstart did.
#[derive(Debug, Clone)]
pub struct QuickstartReport {
    /// The payment's id.
    pub payment_id: String,
    /// The order id it was created with.
    pub merchant_payment_id: String,
    /// What the payer was shown.
    pub payer_instructions: String,
    /// The status read back after the confirmation (`completed`).
    pub final_status: String,
    /// The amount read back.
    pub amount: String,
    /// Its currency.
    pub currency: String,
    /// The settlement line.
    pub settlement: String,
    /// The payment as read back, for callers that want more.
    pub payment: Value,
    /// Where the payment's callback was sent, when one was asked for.
    pub callback_url: Option<String>,
}

impl fmt::Display for QuickstartReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "1. Created payment {} for order {}.",
            self.payment_id, self.merchant_payment_id
        )?;
        writeln!(f, "2. The payer sees:")?;
        for line in self.payer_instructions.lines() {
            writeln!(f, "     {line}")?;
        }
        writeln!(f, "3. The operator confirmed the transfer.")?;
        writeln!(
            f,
            "4. GET /api/v1/payments/{} says: {} ({} {}).",
            self.payment_id, self.final_status, self.amount, self.currency
        )?;
        write!(f, "5. Settlement: {}.", self.settlement)?;
        if let Some(url) = &self.callback_url {
            write!(
                f,
                "\n6. The `completed` callback was queued for {url}: a receiver there logs it \
                 (`order updated`) once it verified the signature."
            )?;
        }
        Ok(())
    }
}

/// Runs the quickstart against the sandbox described by `creds`.
pub async fn quickstart(creds: &SandboxCredentials) -> Result<QuickstartReport, String> {
    quickstart_with_callback(creds, None).await
}

/// [`quickstart`] with the payment's `callback_url` set to `callback_url` (a local receiver
/// needs the server's development setting `allow_local_callbacks`).
pub async fn quickstart_with_callback(
    creds: &SandboxCredentials,
    callback_url: Option<&str>,
) -> Result<QuickstartReport, String> {
    let client =
        MerchantClient::from_credentials(creds).map_err(|e| format!("credentials: {e}"))?;
    let merchant_payment_id = format!("quickstart-{}", unix_millis());

    // 1. Create (signed), as card_transfer so the card grouping shows.
    let mut body = json!({
        "merchant_payment_id": merchant_payment_id,
        "amount": AMOUNT,
        "payment_method": "card_transfer",
    });
    if let Some(url) = callback_url {
        body["callback_url"] = url.into();
    }
    let created = client
        .create_payment(&body)
        .await
        .map_err(|e| format!("create: cannot reach {}: {e}", client.base_url()))?;
    expect_created(&created)?;
    let payment = &created.json;
    let payment_id = payment
        .get("id")
        .and_then(Value::as_str)
        .ok_or("create: the answer has no payment id")?
        .to_owned();

    // 2. The requisite, as the payer sees it.
    let payer_instructions = payer_instructions(payment).ok_or_else(|| {
        format!(
            "create: expected a processing payment with a requisite, got status {}",
            exact(&payment["status"])
        )
    })?;

    // 3. The operator confirms the money arrived.
    let confirmed = confirm(creds, &payment_id).await?;
    if confirmed["payment"]["status"] != "completed" {
        return Err(format!(
            "confirm: expected status completed, got {}",
            exact(&confirmed["payment"]["status"])
        ));
    }

    // 4. The merchant reads the payment back: the source of truth.
    let read = client
        .get_payment(&payment_id)
        .await
        .map_err(|e| format!("get: {e}"))?;
    if read.status != reqwest::StatusCode::OK {
        return Err(format!("get: {}", describe(&read)));
    }
    let final_status = exact(&read.json["status"]);
    if final_status != "completed" {
        return Err(format!(
            "get: expected status completed, got {final_status}"
        ));
    }

    // 5. The settlement credited to the project.
    let settlement = settlement(&read.json).ok_or("get: no merchant_information")?;
    Ok(QuickstartReport {
        payment_id,
        merchant_payment_id,
        payer_instructions,
        final_status,
        amount: exact(&read.json["amount"]),
        currency: exact(&read.json["currency"]),
        settlement,
        payment: read.json,
        callback_url: callback_url.map(str::to_owned),
    })
}

fn expect_created(resp: &ApiResponse) -> Result<(), String> {
    match next_step(resp) {
        NextStep::Accepted { created: true } => Ok(()),
        NextStep::FixSignature {
            reason,
            signature_base: Some(base),
        } => Err(format!(
            "create: {reason}\nthe server verified this signature base:\n{base}"
        )),
        other => Err(format!("create: {other:?}")),
    }
}

/// `POST /operator/v1/payments/{id}/confirm` with the operator token.
async fn confirm(creds: &SandboxCredentials, payment_id: &str) -> Result<Value, String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .map_err(|e| format!("confirm: {e}"))?;
    let url = format!(
        "{}/operator/v1/payments/{payment_id}/confirm",
        creds.operator_url.trim_end_matches('/')
    );
    let resp = http
        .post(&url)
        .bearer_auth(creds.operator_token.expose())
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .map_err(|e| format!("confirm: cannot reach the operator API at {url}: {e}"))?;
    let status = resp.status();
    let body: Value = resp
        .json()
        .await
        .map_err(|e| format!("confirm: the answer is not JSON: {e}"))?;
    if status != reqwest::StatusCode::OK {
        return Err(format!(
            "confirm: {} {}: {}",
            status.as_u16(),
            exact(&body["code"]),
            exact(&body["message"])
        ));
    }
    Ok(body)
}

fn unix_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}
