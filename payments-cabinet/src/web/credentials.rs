//! A project's API credentials on its access page: issuing and revoking tokens, registering
//! and revoking signing keys.

use crate::accounts::Permission;
use axum::extract::{Path, State};
use axum::response::Response;
use payments_core::auth::keys::{KeyConfirmation, KeyConfirmationError};
use payments_core::auth::Scope;
use payments_core::ids::{KeyId, TokenId};
use payments_core::project::{Project, TokenRecord};
use payments_core::service::AdminError;
use payments_directory::DirectoryAccess;
use payments_directory::{NewToken, TokenRequest};

use super::extract::{FormData, Signed};
use super::i18n::{tr, trf};
use super::once::{self, Slot};
use super::page::{error_page, see_other, OrPage, PageError, PageResult};
use super::projects::{
    access_path, confirm_page, refusal, refused, token_lifetime, visible_project,
};
use super::state::CabinetState;
use super::views::when_text;
use crate::accounts::{Change, Client};
use payments_core::store::CredentialStoreExt;

pub(crate) async fn create_token(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let name = form.get("name").to_string();
    let expires = form.get("expires").trim().to_string();
    let refuse = |field: &str, message: String| {
        let flash = refusal(&project)
            .error(field, message)
            .input("name", name.clone())
            .input("expires", expires.clone());
        refused(&st, &signed, &project, "tokens", flash)
    };
    let scopes: Result<Vec<Scope>, _> = form.all("scopes").iter().map(|s| s.parse()).collect();
    let scopes = match scopes {
        Ok(s) if !s.is_empty() => s,
        _ => return refuse("scopes", tr("Choose at least one scope.").into()).await,
    };
    let Some(lifetime) = token_lifetime(&expires) else {
        return refuse(
            "expires",
            tr("Expires: choose one of the offered periods.").into(),
        )
        .await;
    };
    let request = TokenRequest {
        scopes,
        name: Some(name.clone()),
        lifetime,
    };
    let issued = match st
        .cabinet
        .service()
        .directory()
        .issue_token_as(project.id, request, &signed.current.actor())
        .await
    {
        Ok(issued) => issued,
        Err(e) if e.code() == payments_core::ErrorCode::BadRequest => {
            let (field, message) = token_refusal(&e);
            return refuse(field, message).await;
        }
        Err(e) => return Err(error_page(e, &st)),
    };
    st.cabinet
        .audit_log()
        .change(
            &signed.current,
            &client,
            Change {
                merchant: merchant.id,
                project: Some(project.id),
                action: "token.issue",
                target: &issued.record.id.to_string(),
                detail: Some(token_detail(&issued.record)),
            },
        )
        .await
        .or_page(&st)?;
    let slot = token_slot(&project, &issued);
    Ok(once::show_once(&st, signed.current.session.id, slot).await)
}

/// A refused token form's field and message: the field's name in the page's language, the
/// core's message as it is.
fn token_refusal(e: &AdminError) -> (&'static str, String) {
    let text = e.to_string();
    let (field, label) = if text.starts_with("name: ") {
        ("name", tr("Name"))
    } else if text.starts_with("expires: ") {
        ("expires", tr("Expires"))
    } else {
        ("scopes", tr("Scopes"))
    };
    let message = text.split_once(": ").map_or(text.as_str(), |(_, m)| m);
    (field, format!("{label}: {message}"))
}

/// The audit log's detail of an issued token: its name, prefix and expiry.
fn token_detail(record: &TokenRecord) -> String {
    match record.expires_at {
        Some(at) => format!(
            "\"{}\", prefix {}, expires {}",
            record.name.as_deref().unwrap_or_default(),
            record.prefix,
            when_text(at)
        ),
        None => format!(
            "\"{}\", prefix {}, no expiry",
            record.name.as_deref().unwrap_or_default(),
            record.prefix
        ),
    }
}

/// The new token, shown once, on the page the answer leads to: a reload there issues nothing.
fn token_slot(project: &Project, issued: &NewToken) -> Slot {
    let scopes: Vec<&str> = issued.record.scopes.iter().map(|s| s.as_str()).collect();
    let until = issued
        .record
        .expires_at
        .map_or(tr("works until revoked").to_string(), |at| {
            trf("expires {time}", &[("time", &when_text(at))])
        });
    Slot::Value {
        title: trf("{project}: new token", &[("project", &project.name)]),
        section: "projects".into(),
        heading: tr("Your new API token").into(),
        label: tr("Token").into(),
        value: issued.token.expose().to_string(),
        notes: vec![
            trf(
                "{name}: scopes {scopes}; {until}.",
                &[
                    ("name", &issued.record.name.as_deref().unwrap_or_default()),
                    ("scopes", &scopes.join(", ")),
                    ("until", &until),
                ],
            ),
            tr("Send it as Authorization: Bearer <token>. The list shows only its prefix from now on.")
                .into(),
        ],
        back: access_path(project, "", "tokens"),
    }
}

pub(crate) async fn revoke_token_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path((id, token)): Path<(String, String)>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let record = own_token(&st, &project, &token).await?;
    Ok(confirm_page(
        &st,
        &signed.current,
        match &record.name {
            Some(name) => trf(
                "Revoke token “{name}” ({prefix}…)?",
                &[("name", name), ("prefix", &record.prefix)],
            ),
            None => trf("Revoke token {prefix}…?", &[("prefix", &record.prefix)]),
        },
        vec![
            trf(
                "Requests with the token {prefix}… of project {project} will fail with 401 token_invalid from the moment you confirm. This cannot be undone; issue a new token first if something still uses it.",
                &[("prefix", &record.prefix), ("project", &project.name)],
            ),
        ],
        format!("/projects/{}/tokens/{}/revoke", project.id, record.id),
        tr("Revoke the token"),
        access_path(&project, "", "tokens"),
    ))
}

async fn own_token(
    st: &CabinetState,
    project: &Project,
    token: &str,
) -> Result<TokenRecord, Response> {
    let not_found = || PageError::NotFound.render(st);
    let id: TokenId = token.parse().map_err(|_| not_found())?;
    st.cabinet
        .service()
        .store()
        .tokens(project.id)
        .await
        .or_page(st)?
        .into_iter()
        .find(|t| t.id == id)
        .ok_or_else(not_found)
}

pub(crate) async fn revoke_token(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path((id, token)): Path<(String, String)>,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let record = own_token(&st, &project, &token).await?;
    st.cabinet
        .service()
        .directory()
        .revoke_token(project.id, record.id, &signed.current.actor())
        .await
        .or_page(&st)?;
    st.cabinet
        .audit_log()
        .change(
            &signed.current,
            &client,
            Change {
                merchant: merchant.id,
                project: Some(project.id),
                action: "token.revoke",
                target: &record.id.to_string(),
                detail: Some(format!("prefix {}", record.prefix)),
            },
        )
        .await
        .or_page(&st)?;
    Ok(see_other(&access_path(
        &project,
        "?done=token_revoked",
        "tokens",
    )))
}

pub(crate) async fn register_key(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let input = form.get("public_key");
    // A raw 32-byte key is saved only with the keyid the merchant's generator printed: it may
    // be a private seed, whose keyid is another (the core's rule, `KeyConfirmation::pasted`).
    let confirmation = KeyConfirmation::pasted(Some(form.get("expected_keyid")));
    match st
        .cabinet
        .service()
        .directory()
        .register_key_confirmed(project.id, input, confirmation, &signed.current.actor())
        .await
    {
        Ok(record) => {
            st.cabinet
                .audit_log()
                .change(
                    &signed.current,
                    &client,
                    Change {
                        merchant: merchant.id,
                        project: Some(project.id),
                        action: "key.register",
                        target: record.keyid.as_str(),
                        detail: None,
                    },
                )
                .await
                .or_page(&st)?;
            Ok(see_other(&access_path(
                &project,
                &format!("?key={}", record.keyid),
                "keys",
            )))
        }
        Err(AdminError::KeyUnconfirmed(e)) => {
            // Nothing pasted comes back; the keyid of it does, for the merchant to compare.
            let flash = refusal(&project).error("expected_keyid", unconfirmed(&e));
            refused(&st, &signed, &project, "keys", flash).await
        }
        Err(e) if e.code() == payments_core::ErrorCode::BadRequest => {
            let text = e.to_string();
            let message = text
                .strip_prefix("public_key: ")
                .unwrap_or(&text)
                .to_string();
            // What was pasted is never carried back into the page (nor kept in the slot):
            // it may be a private key, and a public key is pasted again in a moment.
            let flash = refusal(&project).error(
                "public_key",
                trf("Public key: {message}", &[("message", &message)]),
            );
            refused(&st, &signed, &project, "keys", flash).await
        }
        Err(e) => Err(error_page(e, &st)),
    }
}

/// What the key form says when the keyid of a pasted key was not confirmed.
fn unconfirmed(e: &KeyConfirmationError) -> String {
    let keyid = e.derived().as_str();
    match e {
        KeyConfirmationError::Mismatch { .. } => trf(
            "What you pasted has keyid {keyid}, not the keyid you gave: it is not the public key your key generator printed that keyid for, and nothing was registered. If you pasted your private key, treat it as exposed and generate a new key pair.",
            &[("keyid", &keyid)],
        ),
        _ => trf(
            "What you pasted is a raw 32-byte key with keyid {keyid}, and nothing was registered: a raw key cannot be told from a private key's seed. If {keyid} is the keyid your key generator printed, paste the key again with it below; or paste the PEM public key.",
            &[("keyid", &keyid)],
        ),
    }
}

async fn own_key(
    st: &CabinetState,
    project: &Project,
    keyid: &str,
) -> Result<payments_core::project::KeyRecord, Response> {
    st.cabinet
        .service()
        .store()
        .key(project.id, &KeyId::new(keyid))
        .await
        .or_page(st)?
        .ok_or_else(|| PageError::NotFound.render(st))
}

pub(crate) async fn revoke_key_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path((id, keyid)): Path<(String, String)>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let key = own_key(&st, &project, &keyid).await?;
    Ok(confirm_page(
        &st,
        &signed.current,
        tr("Revoke signing key?").into(),
        vec![trf(
            "Requests signed with {keyid} will fail with 401 signature_invalid from the moment you confirm. This cannot be undone.",
            &[("keyid", &key.keyid)],
        )],
        format!("/projects/{}/keys/{}/revoke", project.id, key.keyid),
        tr("Revoke the key"),
        access_path(&project, "", "keys"),
    ))
}

pub(crate) async fn revoke_key(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path((id, keyid)): Path<(String, String)>,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let key = own_key(&st, &project, &keyid).await?;
    st.cabinet
        .service()
        .directory()
        .revoke_key(project.id, &key.keyid, &signed.current.actor())
        .await
        .or_page(&st)?;
    st.cabinet
        .audit_log()
        .change(
            &signed.current,
            &client,
            Change {
                merchant: merchant.id,
                project: Some(project.id),
                action: "key.revoke",
                target: key.keyid.as_str(),
                detail: None,
            },
        )
        .await
        .or_page(&st)?;
    Ok(see_other(&access_path(
        &project,
        "?done=key_revoked",
        "keys",
    )))
}
