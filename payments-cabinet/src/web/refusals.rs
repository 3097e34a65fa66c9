//! The refusals of sign-in steps and new passwords in the page's language.

use super::i18n::{tr, trf};
use super::views::when_text;
use crate::accounts::SignInError;
use crate::secrets::{PasswordRule, PASSWORD_MAX_CHARS, PASSWORD_MIN_CHARS};

/// A sign-in step's refusal in the page's language (the account's message names no value but
/// the time a throttle ends, in the cabinet's date format).
pub(crate) fn sign_in_refusal(e: &SignInError) -> String {
    match e {
        SignInError::BadPassword => tr("The e-mail address or the password is not right.").into(),
        SignInError::BadCode => {
            tr("The code is not right, or it was already used. Wait for the next code.").into()
        }
        SignInError::BadRecoveryCode => {
            tr("The recovery code is not right, or it was already used.").into()
        }
        SignInError::Throttled { until } => trf(
            "Too many failed attempts. Try again after {time}.",
            &[("time", &when_text(*until))],
        ),
        SignInError::Busy => {
            tr("The service is busy checking other sign-ins. Try again in a few seconds.").into()
        }
        SignInError::SessionEnded => tr("The session has ended. Sign in again.").into(),
        SignInError::Store(_) => tr("The service cannot answer now. Try again in a moment.").into(),
    }
}

/// A refused new password (`message`: the account's `password: <rule>`) in the page's
/// language: each [`PasswordRule`] has its text; another message is shown as it is.
pub(crate) fn password_refusal(message: &str) -> String {
    let rule = message.strip_prefix("password: ").unwrap_or(message);
    let rules = [
        PasswordRule::TooShort,
        PasswordRule::TooLong,
        PasswordRule::IsEmail,
    ];
    match rules.into_iter().find(|r| r.to_string() == rule) {
        Some(PasswordRule::TooShort) => trf(
            "The password must have at least {count} characters.",
            &[("count", &PASSWORD_MIN_CHARS)],
        ),
        Some(PasswordRule::TooLong) => trf(
            "The password must have at most {count} characters.",
            &[("count", &PASSWORD_MAX_CHARS)],
        ),
        Some(PasswordRule::IsEmail) => tr("The password must not be the e-mail address.").into(),
        None => rule.to_string(),
    }
}
