//! Placeholder replaced by the callback branch.
use serde::Serialize;

use super::address::AddressPolicy;

/// Placeholder.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct CallbackUrl(String);

/// Placeholder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallbackUrlError(String);

impl CallbackUrl {
    /// Placeholder.
    pub fn parse(s: &str, policy: AddressPolicy) -> Result<CallbackUrl, CallbackUrlError> {
        let ok = s.starts_with("https://") || (policy.allow_local && s.starts_with("http://"));
        if ok && s.len() <= 2048 {
            Ok(CallbackUrl(s.to_string()))
        } else {
            Err(CallbackUrlError(
                "callback_url must be an absolute https URL".into(),
            ))
        }
    }
    /// Placeholder.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}
