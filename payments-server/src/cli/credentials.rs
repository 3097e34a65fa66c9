//! Token, key and callback-secret commands.

use payments_directory::DirectoryAccess;
use std::path::PathBuf;

use clap::Subcommand;
use std::sync::Arc;

use payments_cabinet::store::CabinetStore;
use payments_core::auth::keys::KeyConfirmation;
use payments_core::service::{Actor, PaymentService};
use payments_core::ApiError;
use payments_directory::TokenRequest;
use serde_json::{json, Value};
use std::time::Duration;

use super::output::{fields, table, Output};
use crate::server::OpenedStore;
use payments_http::operator::{body, lookup, view};

/// Token commands.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issue a project token; it is printed once and never again.
    Issue {
        /// Project id.
        project: String,
        /// Scopes: payments:create, payments:read, payments:test, events:read, events:resend
        /// (repeat or comma-separate).
        #[arg(long = "scope", required = true, value_delimiter = ',')]
        scopes: Vec<String>,
        /// What the token is for (`shop backend`): shown in the cabinet and the list.
        #[arg(long)]
        name: Option<String>,
        /// Days until the token stops working (1 to 3650); without it, until revoked.
        #[arg(long = "expires-in-days")]
        expires_in_days: Option<u64>,
    },
    /// List a project's tokens (prefixes only).
    List {
        /// Project id.
        project: String,
    },
    /// Revoke a token: the next request with it fails.
    Revoke {
        /// Project id.
        project: String,
        /// Token id (from `token list`).
        token_id: String,
    },
}

/// Key commands.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Register an Ed25519 public key; prints its keyid.
    Register {
        /// Project id.
        project: String,
        /// A PEM public key file.
        #[arg(
            long,
            value_name = "PEM",
            required_unless_present = "base64",
            conflicts_with = "base64"
        )]
        file: Option<PathBuf>,
        /// The 32-byte raw public key in base64.
        #[arg(long, value_name = "RAW")]
        base64: Option<String>,
        /// The keyid your key generator printed: the key is registered only if its keyid is
        /// this one (a raw key may be a private key's seed pasted by mistake).
        #[arg(long, value_name = "KEYID")]
        expected_keyid: Option<String>,
    },
    /// List a project's keys.
    List {
        /// Project id.
        project: String,
    },
    /// Revoke a key: it stops verifying with the next request.
    Revoke {
        /// Project id.
        project: String,
        /// The keyid (ed25519-...).
        keyid: String,
    },
}

/// Callback secret commands.
#[derive(Debug, Subcommand)]
pub enum CallbackSecretCommand {
    /// Issue a new callback secret (printed once); the previous one signs for 24 h more.
    Rotate {
        /// Project id.
        project: String,
    },
    /// Re-seal every stored callback secret with the current key file (after adding a new
    /// `secrets_key_file` with the old one in `secrets_previous_key_files`, or to seal the
    /// plaintext secrets of a data dir from before sealing). The secrets do not change.
    Reseal,
}

pub(super) async fn token(
    svc: &PaymentService,
    command: TokenCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    match command {
        TokenCommand::Issue {
            project,
            scopes,
            name,
            expires_in_days,
        } => {
            let request = TokenRequest {
                scopes: body::scopes(&scopes)?,
                name,
                lifetime: expires_in_days.map(|d| Duration::from_secs(d.saturating_mul(86_400))),
            };
            let id = lookup::project(svc, &project).await?.id;
            let issued = svc.directory().issue_token_as(id, request, actor).await?;
            let json = view::issued_token(&issued);
            let text = format!(
                "Token (shown once; store it now, it cannot be shown again):\n  {}\n\n{}",
                issued.token.expose(),
                fields(&view::token(&issued.record), 0)
            );
            Ok(Output::new(json, text))
        }
        TokenCommand::List { project } => {
            let list = lookup::tokens(svc, &project).await?;
            let rows = list
                .iter()
                .map(|t| {
                    let scopes: Vec<&str> = t.scopes.iter().map(|s| s.as_str()).collect();
                    vec![
                        t.id.to_string(),
                        t.prefix.clone(),
                        scopes.join(","),
                        t.name.clone().unwrap_or_else(|| "-".into()),
                        t.created_at.to_string(),
                        t.expires_at.map_or("-".into(), |r| r.to_string()),
                        t.revoked_at.map_or("-".into(), |r| r.to_string()),
                    ]
                })
                .collect();
            let json: Vec<Value> = list.iter().map(view::token).collect();
            Ok(Output::new(
                json!({ "tokens": json }),
                table(
                    &[
                        "ID", "PREFIX", "SCOPES", "NAME", "CREATED", "EXPIRES", "REVOKED",
                    ],
                    rows,
                ),
            ))
        }
        TokenCommand::Revoke { project, token_id } => {
            let project = lookup::project(svc, &project).await?.id;
            let token = lookup::token_id(&token_id)?;
            svc.directory().revoke_token(project, token, actor).await?;
            Ok(Output::new(
                json!({ "revoked": token }),
                format!("Token {token} revoked."),
            ))
        }
    }
}

pub(super) async fn key(
    svc: &PaymentService,
    command: KeyCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    match command {
        KeyCommand::Register {
            project,
            file,
            base64,
            expected_keyid,
        } => {
            let input = match (file, base64) {
                (Some(path), _) => crate::files::read_limited_string(&path, crate::files::PEM)
                    .map_err(|e| ApiError::bad_request(format!("--file: {e}")))?,
                (None, Some(raw)) => raw,
                (None, None) => return Err(ApiError::bad_request("give --file or --base64")),
            };
            let id = lookup::project(svc, &project).await?.id;
            let confirmation = KeyConfirmation::given(expected_keyid.as_deref());
            let record = svc
                .directory()
                .register_key_confirmed(id, &input, confirmation, actor)
                .await?;
            Ok(Output::object(view::key(&record)))
        }
        KeyCommand::List { project } => {
            let list = lookup::keys(svc, &project).await?;
            let rows = list
                .iter()
                .map(|k| {
                    vec![
                        k.keyid.to_string(),
                        k.created_at.to_string(),
                        k.revoked_at.map_or("-".into(), |r| r.to_string()),
                    ]
                })
                .collect();
            let json: Vec<Value> = list.iter().map(view::key).collect();
            Ok(Output::new(
                json!({ "keys": json }),
                table(&["KEYID", "CREATED", "REVOKED"], rows),
            ))
        }
        KeyCommand::Revoke { project, keyid } => {
            let project = lookup::project(svc, &project).await?.id;
            let keyid = lookup::key_id(&keyid);
            svc.directory().revoke_key(project, &keyid, actor).await?;
            Ok(Output::new(
                json!({ "revoked": keyid }),
                format!("Key {keyid} revoked."),
            ))
        }
    }
}

pub(super) async fn callback_secret(
    svc: &PaymentService,
    store: &OpenedStore,
    command: CallbackSecretCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    match command {
        CallbackSecretCommand::Rotate { project } => {
            let id = lookup::project(svc, &project).await?.id;
            let secret = svc.directory().rotate_callback_secret(id, actor).await?;
            Ok(Output::new(
                json!({ "project_id": id, "callback_secret": secret }),
                format!(
                    "Callback secret (shown once; store it now):\n  {}\n\
                     The previous secret keeps signing for 24 hours.",
                    secret.expose()
                ),
            ))
        }
        CallbackSecretCommand::Reseal => {
            let report = svc.directory().reseal_callback_secrets(actor).await?;
            // The web cabinet's TOTP keys are sealed with the same key file.
            let (totp_resealed, totp_current) =
                reseal_totp_keys(svc, &store.cabinet_store()).await?;
            // And the payments' requisites, a page per transaction.
            let requisites = store.reseal_requisites().await?;
            if requisites.changed_meanwhile == 0 {
                // Nothing is left under another key: a node with only the old key is refused.
                svc.adopt_sealing_key().await?;
            }
            Ok(Output::new(
                json!({
                    "key_id": report.key_id,
                    "resealed": report.resealed,
                    "already_current": report.current,
                    "totp_keys_resealed": totp_resealed,
                    "totp_keys_already_current": totp_current,
                    "requisites_resealed": requisites.resealed,
                    "requisites_already_current": requisites.current,
                    "requisites_changed_meanwhile": requisites.changed_meanwhile,
                    "audit_records_masked": requisites.audit_records_masked,
                }),
                format!(
                    "Callback secrets sealed with key {}: {} re-sealed, {} already were.\n\
                     Cabinet TOTP keys: {} re-sealed, {} already were.\n\
                     Payment requisites: {} re-sealed, {} already were{}.\n\
                     Audit records with requisites in clear (written by earlier builds): {} \
                     masked.\n\
                     {}",
                    report.key_id,
                    report.resealed,
                    report.current,
                    totp_resealed,
                    totp_current,
                    requisites.resealed,
                    requisites.current,
                    if requisites.changed_meanwhile > 0 {
                        format!(
                            ", {} changed meanwhile (run it again)",
                            requisites.changed_meanwhile
                        )
                    } else {
                        String::new()
                    },
                    requisites.audit_records_masked,
                    if requisites.changed_meanwhile > 0 {
                        "Keep the previous key files until a run re-seals everything."
                    } else {
                        "Previous key files can now be removed from secrets_previous_key_files."
                    }
                ),
            ))
        }
    }
}

/// Re-seals the web cabinet users' TOTP keys with the current key: `(re-sealed, already
/// current)`.
#[cfg(feature = "cabinet")]
async fn reseal_totp_keys(
    svc: &PaymentService,
    cabinet_store: &Arc<dyn CabinetStore>,
) -> Result<(u64, u64), ApiError> {
    let cabinet = payments_http::operator::users::cabinet(svc, Some(cabinet_store))?;
    cabinet.two_factor().reseal_totp_keys().await
}

/// A build without the web cabinet cannot re-seal its users' TOTP keys: refused while the
/// database has cabinet users, so that no previous key is dropped while data still needs it.
#[cfg(not(feature = "cabinet"))]
async fn reseal_totp_keys(
    _: &PaymentService,
    cabinet_store: &Arc<dyn CabinetStore>,
) -> Result<(u64, u64), ApiError> {
    use payments_cabinet::store::CabinetStoreExt;
    let users = cabinet_store.users().await?.len();
    if users > 0 {
        return Err(ApiError::bad_request(format!(
            "callback secrets were re-sealed, but the database has {users} web cabinet users \
             whose TOTP keys this build (without feature `cabinet`) cannot re-seal: run \
             `callback-secret reseal` with a build that has it before removing previous keys"
        )));
    }
    Ok((0, 0))
}
