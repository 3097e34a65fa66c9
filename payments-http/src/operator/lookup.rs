//! Reading the directory for the operator API and the CLI: ids as given in a path or on a
//! command line, unknown or malformed ones `404 not_found`.

use payments_core::ids::KeyId;
use payments_core::project::{AuditRecord, KeyRecord, Merchant, Project, TokenRecord};
use payments_core::service::PaymentService;
use payments_core::store::CredentialStoreExt;
use payments_core::store::MerchantStoreExt;
use payments_core::{ApiError, ErrorCode, MerchantId, PaymentId, ProjectId, TokenId};

/// The most audit records one request reads.
pub const MAX_AUDIT: usize = 1000;

fn not_found(what: &str) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("{what} not found"))
}

/// A merchant by id.
pub async fn merchant(service: &PaymentService, id: &str) -> Result<Merchant, ApiError> {
    let id: MerchantId = id.trim().parse().map_err(|_| not_found("merchant"))?;
    service
        .store()
        .merchant(id)
        .await?
        .ok_or_else(|| not_found("merchant"))
}

/// A project by id.
pub async fn project(service: &PaymentService, id: &str) -> Result<Project, ApiError> {
    let id: ProjectId = id.trim().parse().map_err(|_| not_found("project"))?;
    service
        .store()
        .project(id)
        .await?
        .ok_or_else(|| not_found("project"))
}

/// Every merchant.
pub async fn merchants(service: &PaymentService) -> Result<Vec<Merchant>, ApiError> {
    Ok(service.store().merchants().await?)
}

/// Every project, or a merchant's (an unknown merchant is `404`).
pub async fn projects(
    service: &PaymentService,
    merchant_id: Option<&str>,
) -> Result<Vec<Project>, ApiError> {
    let owner = match merchant_id {
        Some(m) => Some(merchant(service, m).await?.id),
        None => None,
    };
    let all = service.store().projects().await?;
    Ok(all
        .into_iter()
        .filter(|p| owner.is_none_or(|m| p.merchant_id == m))
        .collect())
}

/// A project's tokens (records only; tokens themselves are never stored).
pub async fn tokens(
    service: &PaymentService,
    project_id: &str,
) -> Result<Vec<TokenRecord>, ApiError> {
    let p = project(service, project_id).await?;
    Ok(service.store().tokens(p.id).await?)
}

/// A project's keys.
pub async fn keys(service: &PaymentService, project_id: &str) -> Result<Vec<KeyRecord>, ApiError> {
    let p = project(service, project_id).await?;
    Ok(service.store().keys(p.id).await?)
}

/// A token id as given.
pub fn token_id(id: &str) -> Result<TokenId, ApiError> {
    id.trim().parse().map_err(|_| not_found("token"))
}

/// A key id as given (any string; an unknown one is `404` at revocation).
pub fn key_id(id: &str) -> KeyId {
    KeyId::new(id.trim())
}

/// A payment id as given: malformed is `404 payment_not_found`, like an unknown one.
pub fn payment_id(id: &str) -> Result<PaymentId, ApiError> {
    id.trim()
        .parse()
        .map_err(|_| ApiError::new(ErrorCode::PaymentNotFound, "payment not found"))
}

/// The newest `limit` audit records (at most [`MAX_AUDIT`]), newest first.
pub async fn audit(service: &PaymentService, limit: usize) -> Result<Vec<AuditRecord>, ApiError> {
    Ok(service
        .store()
        .find_audit_records(limit.min(MAX_AUDIT))
        .await?)
}
