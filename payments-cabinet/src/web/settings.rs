//! A project's integration settings on its access page: the IP allow-list, the callback URL and
//! the rotation of the callback secret.

use crate::accounts::Permission;
use axum::extract::{Path, State};
use payments_core::auth::IpAllowList;
use payments_core::callback::ROTATION_OVERLAP;
use payments_directory::DirectoryAccess;
use payments_directory::ProjectPatch;

use super::extract::{FormData, Signed};
use super::i18n::{tr, trf};
use super::once::{self, Flash, Slot};
use super::page::{error_page, ok, see_other, OrPage, PageResult};
use super::projects::{access_path, refusal, refused, visible_project};
use super::state::CabinetState;
use super::views::{Confirm, LineError};
use crate::accounts::{Change, Client};

/// The allow-list's lines: blank lines dropped, each other line checked by the core's parser
/// on its own so that every bad line gets its own error (line numbers as typed).
fn allow_list_lines(text: &str) -> (Vec<String>, Vec<LineError>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let rule = line.trim();
        if rule.is_empty() {
            continue;
        }
        match IpAllowList::parse([rule]) {
            Ok(_) => rules.push(rule.to_string()),
            Err(e) => errors.push(LineError {
                line: i + 1,
                message: e.to_string(),
            }),
        }
    }
    (rules, errors)
}

pub(crate) async fn allow_list(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let text = form.get("ip_allow_list").to_string();
    let (rules, allow_errors) = allow_list_lines(&text);
    let refuse = |flash: Flash| {
        refused(
            &st,
            &signed,
            &project,
            "allow-list",
            flash.input("ip_allow_list", text.clone()),
        )
    };
    if !allow_errors.is_empty() {
        let mut flash = refusal(&project);
        flash.lines = allow_errors
            .into_iter()
            .map(|e| (e.line, e.message))
            .collect();
        return refuse(flash).await;
    }
    let before = project.ip_allow_list.join(", ");
    let patch = ProjectPatch {
        ip_allow_list: Some(rules.clone()),
        ..ProjectPatch::default()
    };
    match st
        .cabinet
        .service()
        .directory()
        .update_project(project.id, patch, &signed.current.actor())
        .await
    {
        Ok(_) => {
            st.cabinet
                .audit_log()
                .change(
                    &signed.current,
                    &client,
                    Change {
                        merchant: merchant.id,
                        project: Some(project.id),
                        action: "project.ip_allow_list",
                        target: &project.id.to_string(),
                        detail: Some(format!("[{before}] -> [{}]", rules.join(", "))),
                    },
                )
                .await
                .or_page(&st)?;
            Ok(see_other(&access_path(
                &project,
                "?done=allow_list",
                "allow-list",
            )))
        }
        Err(e) if e.code() == payments_core::ErrorCode::BadRequest => {
            refuse(refusal(&project).error("ip_allow_list", e.to_string())).await
        }
        Err(e) => Err(error_page(e, &st)),
    }
}

pub(crate) async fn callback_url(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
    form: FormData,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let url = form.get("callback_url").trim().to_string();
    let patch = ProjectPatch {
        callback_url: Some((!url.is_empty()).then(|| url.clone())),
        ..ProjectPatch::default()
    };
    match st
        .cabinet
        .service()
        .directory()
        .update_project(project.id, patch, &signed.current.actor())
        .await
    {
        Ok(after) => {
            let shown = after
                .callback_url
                .as_ref()
                .map_or("none".to_string(), |u| u.as_str().to_string());
            st.cabinet
                .audit_log()
                .change(
                    &signed.current,
                    &client,
                    Change {
                        merchant: merchant.id,
                        project: Some(project.id),
                        action: "project.callback_url",
                        target: &project.id.to_string(),
                        detail: Some(shown),
                    },
                )
                .await
                .or_page(&st)?;
            Ok(see_other(&access_path(
                &project,
                "?done=callback_url",
                "callback",
            )))
        }
        Err(e) if e.code() == payments_core::ErrorCode::BadRequest => {
            let flash = refusal(&project)
                .error(
                    "callback_url",
                    trf("Callback URL: {message}", &[("message", &e)]),
                )
                .input("callback_url", url);
            refused(&st, &signed, &project, "callback", flash).await
        }
        Err(e) => Err(error_page(e, &st)),
    }
}

fn overlap_hours() -> u64 {
    ROTATION_OVERLAP.as_secs() / 3600
}

pub(crate) async fn roll_secret_page(
    State(st): State<CabinetState>,
    signed: Signed,
    Path(id): Path<String>,
) -> PageResult {
    let (project, _) = visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let held = st
        .cabinet
        .service()
        .store()
        .callback_secrets(project.id)
        .await
        .or_page(&st)?
        .len();
    let hours = overlap_hours();
    let mut paragraphs = vec![
        tr("A new callback secret is shown once, right after it is made.").to_string(),
        trf(
            "For {hours} hours after it, callbacks are signed with both the new and the current secret (two v1 values in X-Callback-Signature), so your receiver can switch without losing a callback.",
            &[("hours", &hours)],
        ),
        trf(
            "At most two secrets are valid at a time: issuing another within those {hours} hours drops the oldest at once.",
            &[("hours", &hours)],
        ),
    ];
    if held == 2 {
        paragraphs.push(
            tr("This project has two secrets now: the older of them stops signing when you confirm.")
                .into(),
        );
    }
    Ok(ok(&Confirm {
        chrome: st
            .chrome(
                trf(
                    "{project}: issue a callback secret",
                    &[("project", &project.name)],
                ),
                Some(&signed.current),
            )
            .section("projects"),
        paragraphs,
        action: format!("/projects/{}/callback-secret", project.id),
        button: tr("Issue a new secret").into(),
        danger: false,
        cancel: access_path(&project, "", "callback"),
    }))
}

pub(crate) async fn roll_secret(
    State(st): State<CabinetState>,
    signed: Signed,
    client: Client,
    Path(id): Path<String>,
) -> PageResult {
    let (project, merchant) =
        visible_project(&st, &signed.current, &id, Permission::Integration).await?;
    let secret = st
        .cabinet
        .service()
        .directory()
        .rotate_callback_secret(project.id, &signed.current.actor())
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
                action: "callback_secret.rotate",
                target: &project.id.to_string(),
                detail: None,
            },
        )
        .await
        .or_page(&st)?;
    let hours = overlap_hours();
    // Shown once, on the page this answer leads to: a reload there rotates nothing.
    let slot = Slot::Value {
        title: trf("{project}: new callback secret", &[("project", &project.name)]),
        section: "projects".into(),
        heading: tr("Your new callback secret").into(),
        label: tr("Callback secret").into(),
        value: secret.expose().to_string(),
        notes: vec![
            trf(
                "Callbacks are signed with this secret from now on, and for {hours} hours also with the previous one.",
                &[("hours", &hours)],
            ),
            tr("Verify X-Callback-Signature with HMAC-SHA256 over the timestamp, a dot and the body (docs/callbacks.md).").into(),
        ],
        back: access_path(&project, "", "callback"),
    };
    Ok(once::show_once(&st, signed.current.session.id, slot).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bad_line_of_an_allow_list_is_named() {
        let (rules, errors) =
            allow_list_lines("203.0.113.7\n\n  10.0.0.0/8 \nnot-an-ip\n10.0.0.1/8\n2001:db8::/32");
        assert_eq!(rules, vec!["203.0.113.7", "10.0.0.0/8", "2001:db8::/32"]);
        let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![4, 5]);
        assert!(
            errors[0].message.contains("not-an-ip"),
            "{}",
            errors[0].message
        );
        assert!(
            errors[1].message.contains("10.0.0.0/8"),
            "{}",
            errors[1].message
        );
    }
}
