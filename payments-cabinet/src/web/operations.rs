//! The payment card's operations: the sandbox's Paid / Canceled buttons (the test helpers'
//! `test_outcome`) and support's operations (`operate`), each confirmed through the card again,
//! and the resend of the payment's callback.

use crate::accounts::Permission;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use payments_core::amount::{Amount, AmountError};
use payments_core::payment::Payment;
use payments_core::project::Project;
use payments_core::transition::{RecheckOutcome, Trigger};

use super::extract::{FormData, Signed};
use super::i18n::{tr, trf};
use super::once::{self, Flash};
use super::page::{ok, see_other, OrPage, PageError, PageResult};
use super::payments::{card_name, visible_payment};
use super::state::CabinetState;
use super::views::{status_text, Confirm};
use crate::accounts::{Change, Client};

/// A refused operation form: the text shown on the card, under the payment's status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OperationFormError {
    /// The amount field does not parse.
    #[error("amount: {0}")]
    Amount(#[source] AmountError),
    /// An amount with a resolution other than `completed`.
    #[error("amount: only with status completed")]
    AmountWithoutCompleted,
    /// A resolution status the service does not know.
    #[error("status: must be completed, canceled or unchanged")]
    Status,
}

/// Why an operation was refused: the card's status and the reason it shows.
type Refusal = (StatusCode, String);

/// Runs a payment operation for the signed-in user and shows the card again through a
/// redirect: after a refusal the card shows the reason once, with its status (`409`/`400`).
async fn run_operation(
    st: &CabinetState,
    signed: &Signed,
    client: &Client,
    id: &str,
    trigger: Result<Trigger, OperationFormError>,
    test: bool,
) -> PageResult {
    let need = match &trigger {
        _ if test => Permission::TestOutcomes,
        Ok(Trigger::ResendCallback) => Permission::Resend,
        _ => Permission::Payments,
    };
    let (payment, project) = visible_payment(st, &signed.current, id, need).await?;
    let result = match trigger {
        Err(e) => Err((StatusCode::BAD_REQUEST, e.to_string())),
        Ok(t) => match perform(st, signed, &payment, &project, t, test).await {
            Some(result) => result,
            None => return Err(PageError::NotFound.render(st)),
        },
    };
    match result {
        Ok(trigger) => {
            audit(st, signed, client, &payment, &project, &trigger, test).await?;
            let done = if matches!(trigger, Trigger::ResendCallback) {
                "resent"
            } else {
                "operated"
            };
            Ok(see_other(&format!("/payments/{}?done={done}", payment.id)))
        }
        Err((code, message)) => {
            let flash = Flash::new(card_name(&payment), code).error("payment-status", message);
            Ok(once::refuse(
                st,
                signed.current.session.id,
                &format!("/payments/{}", payment.id),
                "",
                flash,
            )
            .await)
        }
    }
}

/// Asks the service for the operation: the sandbox buttons, the merchant's resend of the
/// callback, or support's operations. `None` when the signed-in user may not run it.
async fn perform(
    st: &CabinetState,
    signed: &Signed,
    payment: &Payment,
    project: &Project,
    trigger: Trigger,
    test: bool,
) -> Option<Result<Trigger, Refusal>> {
    let service = st.cabinet.service();
    let actor = signed.current.actor();
    let refused = |e: payments_core::ApiError| (status(&e), e.message);
    let result = match trigger {
        // The sandbox buttons: the test helpers' operation, allowed to the project's users.
        t if test => service
            .payments()
            .test_outcome(project, &payment.id.to_string(), t.clone(), &actor)
            .await
            .map(|_| t)
            .map_err(|e| refused(e.into())),
        // The merchant's "send callback" of a closed payment, test or live (the spec's manual
        // resend): the merchant API's operation (`POST /api/v1/payments/{id}/resend`).
        Trigger::ResendCallback if !signed.current.is_support() => service
            .callbacks()
            .resend_payment_callback(project, payment.id, &actor)
            .await
            .map(|_| Trigger::ResendCallback)
            .map_err(refused),
        // Support's operations: the operator's.
        t if signed.current.is_support() => service
            .payments()
            .operate(payment.id, t.clone(), &actor)
            .await
            .map(|_| t)
            .map_err(|e| refused(e.into())),
        _ => return None,
    };
    Some(result)
}

/// Writes the operation done into the audit log (`payment.*`, or `test_payment.*` for the
/// sandbox's).
async fn audit(
    st: &CabinetState,
    signed: &Signed,
    client: &Client,
    payment: &Payment,
    project: &Project,
    trigger: &Trigger,
    test: bool,
) -> Result<(), Response> {
    let name = if test || (payment.is_test() && !signed.current.is_support()) {
        format!("test_payment.{}", trigger.name())
    } else {
        format!("payment.{}", trigger.name())
    };
    st.cabinet
        .audit_log()
        .change(
            &signed.current,
            client,
            Change {
                merchant: project.merchant_id,
                project: Some(project.id),
                action: &name,
                target: &payment.id.to_string(),
                detail: None,
            },
        )
        .await
        .or_page(st)?;
    Ok(())
}

pub(crate) fn status(e: &payments_core::ApiError) -> StatusCode {
    match e.code {
        payments_core::ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
        payments_core::ErrorCode::InvalidTransition => StatusCode::CONFLICT,
        payments_core::ErrorCode::PaymentNotFound | payments_core::ErrorCode::NotFound => {
            StatusCode::NOT_FOUND
        }
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

fn amount(s: &str) -> Result<Option<Amount>, OperationFormError> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    Amount::parse(s)
        .map(Some)
        .map_err(OperationFormError::Amount)
}

pub(crate) async fn test_paid(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(
        &st,
        &signed,
        &client,
        &id,
        Ok(Trigger::Confirm { amount: None }),
        true,
    )
    .await
}

pub(crate) async fn test_canceled(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(&st, &signed, &client, &id, Ok(Trigger::Cancel), true).await
}

pub(crate) async fn confirm(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let trigger = amount(form.get("amount")).map(|amount| Trigger::Confirm { amount });
    run_operation(&st, &signed, &client, &id, trigger, false).await
}

pub(crate) async fn cancel(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(&st, &signed, &client, &id, Ok(Trigger::Cancel), false).await
}

pub(crate) async fn recheck(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(&st, &signed, &client, &id, Ok(Trigger::StartRecheck), false).await
}

pub(crate) async fn resolve(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let trigger = amount(form.get("amount")).and_then(|amount| {
        let outcome = match (form.get("status"), amount) {
            ("completed", amount) => RecheckOutcome::Completed { amount },
            ("canceled", None) => RecheckOutcome::Canceled,
            ("unchanged", None) => RecheckOutcome::Unchanged,
            ("canceled" | "unchanged", Some(_)) => {
                return Err(OperationFormError::AmountWithoutCompleted)
            }
            _ => return Err(OperationFormError::Status),
        };
        Ok(Trigger::ResolveRecheck(outcome))
    });
    run_operation(&st, &signed, &client, &id, trigger, false).await
}

pub(crate) async fn resend_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
) -> PageResult {
    let (payment, _) = visible_payment(&st, &signed.current, &id, Permission::Resend).await?;
    Ok(ok(&Confirm {
        chrome: st
            .chrome(
                trf(
                    "Resend the callback of {payment}?",
                    &[("payment", &payment.merchant_payment_id.as_str())],
                ),
                Some(&signed.current),
            )
            .section("projects"),
        paragraphs: vec![
            trf(
                "A new callback event with a new event_id and the payment's current status ({status}) is sent once, signed like any callback, to the payment's callback destination. No automatic retries follow.",
                &[("status", &status_text(payment.status.as_str()))],
            ),
            tr("Only a closed payment can be resent; for another the service refuses and says why.")
                .into(),
        ],
        action: format!("/payments/{}/resend", payment.id),
        button: tr("Resend the callback").into(),
        danger: false,
        cancel: format!("/payments/{}", payment.id),
    }))
}

pub(crate) async fn resend(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    run_operation(
        &st,
        &signed,
        &client,
        &id,
        Ok(Trigger::ResendCallback),
        false,
    )
    .await
}
