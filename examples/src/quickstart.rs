//! One complete payment against a running sandbox: a signed create, the payer's requisite, the
//! operator's confirmation (what the cabinet's "paid" button does), a signed `GET` showing
//! `completed`, and the settlement. Every unexpected answer stops it with an error naming the
//! step and the server's `request_id`.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use payments_client::{ApiResponse, ClientError, MerchantClient, SandboxCredentials};
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

/// The step where the quickstart stopped, and why (the text starts with the step's name).
#[derive(Debug, thiserror::Error)]
pub enum QuickstartError {
    /// The credentials make no client.
    #[error("credentials: {0}")]
    Credentials(#[source] ClientError),
    /// The create got no answer.
    #[error("create: cannot reach {base_url}: {source}")]
    Unreachable {
        /// The merchant API.
        base_url: String,
        /// Why.
        source: ClientError,
    },
    /// The create's signature was refused; the sandbox said what it verified.
    #[error("create: {reason}\nthe server verified this signature base:\n{signature_base}")]
    Signature {
        /// The server's reason.
        reason: String,
        /// The signature base the server verified.
        signature_base: String,
    },
    /// The create was not accepted as new.
    #[error("create: {0:?}")]
    NotCreated(NextStep),
    /// The create's answer has no payment id.
    #[error("create: the answer has no payment id")]
    NoPaymentId,
    /// The created payment shows no requisite.
    #[error("create: expected a processing payment with a requisite, got status {0}")]
    NoRequisite(String),
    /// The confirmation's HTTP client could not be built.
    #[error("confirm: {0}")]
    ConfirmClient(#[source] reqwest::Error),
    /// The operator API got no answer.
    #[error("confirm: cannot reach the operator API at {url}: {source}")]
    OperatorUnreachable {
        /// The confirm URL.
        url: String,
        /// Why.
        source: reqwest::Error,
    },
    /// The operator API's answer is not JSON.
    #[error("confirm: the answer is not JSON: {0}")]
    ConfirmNotJson(#[source] reqwest::Error),
    /// The operator API refused the confirmation.
    #[error("confirm: {status} {code}: {message}")]
    ConfirmRefused {
        /// The HTTP status.
        status: u16,
        /// The error code.
        code: String,
        /// The error message.
        message: String,
    },
    /// The confirmed payment is not completed.
    #[error("confirm: expected status completed, got {0}")]
    NotConfirmed(String),
    /// The read-back got no answer.
    #[error("get: {0}")]
    Get(#[source] ClientError),
    /// The read-back was refused.
    #[error("get: {0}")]
    GetRefused(String),
    /// The payment read back is not completed.
    #[error("get: expected status completed, got {0}")]
    NotCompleted(String),
    /// The payment read back has no settlement.
    #[error("get: no merchant_information")]
    NoSettlement,
}

/// Runs the quickstart against the sandbox described by `creds`.
pub async fn quickstart(creds: &SandboxCredentials) -> Result<QuickstartReport, QuickstartError> {
    quickstart_with_callback(creds, None).await
}

/// [`quickstart`] with the payment's `callback_url` set to `callback_url` (a local receiver
/// needs the server's development setting `allow_local_callbacks`).
pub async fn quickstart_with_callback(
    creds: &SandboxCredentials,
    callback_url: Option<&str>,
) -> Result<QuickstartReport, QuickstartError> {
    let client = MerchantClient::from_credentials(creds).map_err(QuickstartError::Credentials)?;
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
    let created =
        client
            .create_payment(&body)
            .await
            .map_err(|source| QuickstartError::Unreachable {
                base_url: client.base_url().to_string(),
                source,
            })?;
    expect_created(&created)?;
    let payment = &created.json;
    let payment_id = payment
        .get("id")
        .and_then(Value::as_str)
        .ok_or(QuickstartError::NoPaymentId)?
        .to_owned();

    // 2. The requisite, as the payer sees it.
    let payer_instructions = payer_instructions(payment)
        .ok_or_else(|| QuickstartError::NoRequisite(exact(&payment["status"])))?;

    // 3. The operator confirms the money arrived.
    let confirmed = confirm(creds, &payment_id).await?;
    if confirmed["payment"]["status"] != "completed" {
        return Err(QuickstartError::NotConfirmed(exact(
            &confirmed["payment"]["status"],
        )));
    }

    // 4. The merchant reads the payment back: the source of truth.
    let read = client
        .get_payment(&payment_id)
        .await
        .map_err(QuickstartError::Get)?;
    if read.status != reqwest::StatusCode::OK {
        return Err(QuickstartError::GetRefused(describe(&read)));
    }
    let final_status = exact(&read.json["status"]);
    if final_status != "completed" {
        return Err(QuickstartError::NotCompleted(final_status));
    }

    // 5. The settlement credited to the project.
    let settlement = settlement(&read.json).ok_or(QuickstartError::NoSettlement)?;
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

fn expect_created(resp: &ApiResponse) -> Result<(), QuickstartError> {
    match next_step(resp) {
        NextStep::Accepted { created: true } => Ok(()),
        NextStep::FixSignature {
            reason,
            signature_base: Some(signature_base),
        } => Err(QuickstartError::Signature {
            reason,
            signature_base,
        }),
        other => Err(QuickstartError::NotCreated(other)),
    }
}

/// `POST /operator/v1/payments/{id}/confirm` with the operator token.
async fn confirm(creds: &SandboxCredentials, payment_id: &str) -> Result<Value, QuickstartError> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .map_err(QuickstartError::ConfirmClient)?;
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
        .map_err(|source| QuickstartError::OperatorUnreachable {
            url: url.clone(),
            source,
        })?;
    let status = resp.status();
    let body: Value = resp.json().await.map_err(QuickstartError::ConfirmNotJson)?;
    if status != reqwest::StatusCode::OK {
        return Err(QuickstartError::ConfirmRefused {
            status: status.as_u16(),
            code: exact(&body["code"]),
            message: exact(&body["message"]),
        });
    }
    Ok(body)
}

fn unix_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}
