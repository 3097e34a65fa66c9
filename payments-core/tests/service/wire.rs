//! The operations' own errors answer exactly what their `ApiError` answered before they had
//! types of their own: the same code, message and `Retry-After` (the strings below are the
//! ones the operations wrote by hand before).

use payments_core::callback::destination::CallbackUrlError;
use payments_core::callback::CallbackVerifyError;
use payments_core::service::{AdminError, AuthError, NotificationError, OperateError, ReadError};
use payments_core::store::StoreError;
use payments_core::{ApiError, ErrorCode};

fn wire(e: impl Into<ApiError>) -> (&'static str, String, Option<u64>) {
    let e = e.into();
    (e.code.as_str(), e.message, e.retry_after)
}

fn unavailable() -> StoreError {
    payments_core::store::UnavailableCause::Overloaded.error("pool timed out")
}

#[test]
fn admin_errors_answer_the_wire_of_before() {
    let cases: Vec<(AdminError, &str, &str)> = vec![
        (
            AdminError::invalid("name must be 1 to 200 characters"),
            "bad_request",
            "name must be 1 to 200 characters",
        ),
        (
            AdminError::CallbackUrl(CallbackUrlError::NotAbsolute),
            "bad_request",
            "callback_url must be an absolute https:// URL",
        ),
        (
            AdminError::NotFound("project not found".into()),
            "not_found",
            "project not found",
        ),
        (
            AdminError::OperatorTokenInvalid,
            "token_invalid",
            "missing or invalid operator token",
        ),
        (
            AdminError::Secret("no callback secret".into()),
            "internal_error",
            "no callback secret",
        ),
    ];
    for (e, code, message) in cases {
        assert_eq!(e.code().as_str(), code, "{e:?}");
        assert_eq!(wire(e), (code, message.to_string(), None));
    }
    let store = AdminError::from(unavailable());
    assert_eq!(store.code(), ErrorCode::ServiceUnavailable);
    assert_eq!(wire(store), wire(unavailable()));
}

#[test]
fn read_errors_answer_the_wire_of_before() {
    assert_eq!(
        wire(ReadError::NotFound),
        ("payment_not_found", "payment not found".into(), None)
    );
    assert_eq!(ReadError::NotFound.code(), ErrorCode::PaymentNotFound);
    let damaged = ReadError::Damaged("the payer page link of payment x is damaged".into());
    assert_eq!(damaged.code(), ErrorCode::Internal);
    assert_eq!(
        wire(damaged),
        (
            "internal_error",
            "the payer page link of payment x is damaged".into(),
            None
        )
    );
    assert_eq!(wire(ReadError::from(unavailable())), wire(unavailable()));
    // A test helper that reads no payment answers as the read did.
    assert_eq!(
        wire(OperateError::from(ReadError::NotFound)),
        wire(ReadError::NotFound)
    );
}

#[test]
fn notification_errors_answer_the_wire_of_before() {
    let cases: Vec<(NotificationError, &str, &str, Option<u64>)> = vec![
        (
            NotificationError::Invalid("payment_id: not a payment id".into()),
            "bad_request",
            "payment_id: not a payment id",
            None,
        ),
        (
            NotificationError::Signature(CallbackVerifyError::TimestampNotNumeric),
            "signature_invalid",
            "notification signature: X-Callback-Timestamp is not a number of seconds",
            None,
        ),
        (
            NotificationError::Replayed,
            "request_replayed",
            "this signed notification was received before; sign every attempt anew",
            None,
        ),
        (
            NotificationError::PaymentNotFound,
            "payment_not_found",
            "payment not found",
            None,
        ),
        (
            NotificationError::Contended,
            "service_unavailable",
            "the payment is changing too often; try again",
            Some(1),
        ),
    ];
    for (e, code, message, retry) in cases {
        assert_eq!(e.code().as_str(), code, "{e:?}");
        assert_eq!(wire(e), (code, message.to_string(), retry));
    }
}

#[test]
fn a_replayed_nonce_and_a_trigger_that_is_no_test_outcome_answer_as_before() {
    assert_eq!(
        wire(AuthError::Replayed),
        (
            "request_replayed",
            "this X-Request-Nonce was already used; sign every request with a new nonce".into(),
            None
        )
    );
    assert_eq!(AuthError::Replayed.code(), ErrorCode::RequestReplayed);
    let auth = OperateError::from(AuthError::Replayed);
    assert_eq!(auth.code(), ErrorCode::RequestReplayed);
    assert_eq!(wire(auth), wire(AuthError::Replayed));
    let e = OperateError::NotATestOutcome("expire");
    assert_eq!(e.code(), ErrorCode::InvalidTransition);
    assert_eq!(
        wire(e),
        (
            "invalid_transition",
            "expire is not a test outcome".into(),
            None
        )
    );
}
