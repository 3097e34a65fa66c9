//! The directory and its credentials, a bounded context over the core's ports: merchants and
//! projects ([`provision`]), project API tokens, keys and callback secrets, operator tokens
//! ([`operator`]), and a merchant's first project with its credentials in one call
//! ([`provisioning`]). Each operation leaves an audit record.
//!
//! The rules of using a credential (a token's scopes, a signature's key, an operator token's
//! hash) are the core's (`payments_core::auth`); here is who may be set up, and how. The
//! service is reached from a [`PaymentService`](payments_core::service::PaymentService) with
//! [`DirectoryAccess`]: `service.directory().create_merchant(..)`.

pub mod operator;
pub mod provision;
pub mod provisioning;

use payments_core::service::ServiceState;

pub use operator::{
    check_token_name, NewOperatorToken, DEFAULT_OPERATOR_TOKEN_NAME, MAX_ROTATION_OVERLAP,
    OPERATOR_TOKEN_SETTING,
};
pub use provision::{
    contract_from_json, project_json, project_value, token_name, NewToken, ProjectPatch,
    TokenRequest, MAX_LIFETIME, TOKEN_LIFETIME_MAX, TOKEN_LIFETIME_MIN, TOKEN_NAME_MAX,
};
pub use provisioning::{
    Credentials, KeySource, Provision, ProvisionError, Provisioned, PROVISION_TURN,
};

/// Directory and credentials: merchants, projects, API tokens, keys, callback secrets,
/// operator tokens, provisioning. A view of a service's shared state, borrowed for one call.
#[derive(Clone, Copy)]
pub struct Directory<'a> {
    state: &'a ServiceState,
}

impl std::ops::Deref for Directory<'_> {
    type Target = ServiceState;
    fn deref(&self) -> &ServiceState {
        self.state
    }
}

impl std::fmt::Debug for Directory<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory").finish_non_exhaustive()
    }
}

/// The [`Directory`] of a service: `service.directory()` on a
/// [`PaymentService`](payments_core::service::PaymentService) (which reads as its
/// [`ServiceState`]) with this trait in scope.
pub trait DirectoryAccess {
    /// The [`Directory`] service.
    fn directory(&self) -> Directory<'_>;
}

impl DirectoryAccess for ServiceState {
    fn directory(&self) -> Directory<'_> {
        Directory { state: self }
    }
}
