//! Web cabinet user commands: add (prints a one-time invitation link), list, invite (a new
//! link, also a password reset), disable, enable. The same functions as the operator API's
//! `/operator/v1/users`.

use clap::Subcommand;
use std::sync::Arc;

use payments_cabinet::store::CabinetStore;
use payments_core::service::{Actor, PaymentService};
use payments_core::ApiError;
use serde_json::Value;

use super::output::{fields, table, Output};
use crate::config::Settings;
use payments_http::operator::users;

/// User commands.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a cabinet user and print its one-time invitation link (it sets its password there,
    /// then sets up two-factor sign-in at its first sign-in).
    Add {
        /// The user's e-mail address (its sign-in name).
        #[arg(long)]
        email: String,
        /// A merchant user: it sees this merchant's projects only.
        #[arg(long, value_name = "MERCHANT_ID", required_unless_present = "support")]
        merchant: Option<String>,
        /// A support user: it sees every merchant and runs the operator's payment operations.
        #[arg(long, conflicts_with = "merchant")]
        support: bool,
    },
    /// List the cabinet users.
    List,
    /// Print a new invitation link for a user (earlier links stop working); also a password
    /// reset: the current password works until the link is used.
    Invite {
        /// User id (from `user list`).
        user: String,
    },
    /// Disable a user: it cannot sign in and its sessions end.
    Disable {
        /// User id.
        user: String,
    },
    /// Enable a disabled user.
    Enable {
        /// User id.
        user: String,
    },
}

/// The cabinet URL the links point at: `cabinet_public_url`, else the listener's.
pub fn cabinet_url(settings: &Settings) -> String {
    match &settings.cabinet.public_url {
        Some(u) => u.clone(),
        None => format!(
            "{}://{}",
            if settings.tls.cert.is_some() {
                "https"
            } else {
                "http"
            },
            settings.cabinet.listen
        ),
    }
}

fn invite_text(v: &Value) -> String {
    format!(
        "{}\ninvitation link (works once, until {}):\n  {}\n",
        fields(&v["user"], 0),
        v["invite_expires_at"].as_str().unwrap_or(""),
        v["invite_url"].as_str().unwrap_or("")
    )
}

/// Runs a user command.
pub(super) async fn user(
    svc: &PaymentService,
    cabinet_store: Option<&Arc<dyn CabinetStore>>,
    command: UserCommand,
    actor: &Actor,
    cabinet_url: &str,
) -> Result<Output, ApiError> {
    let cabinet = users::cabinet(svc, cabinet_store)?;
    Ok(match command {
        UserCommand::Add {
            email,
            merchant,
            support,
        } => {
            let role = if support { "support" } else { "merchant" };
            let v = users::create_user(
                &cabinet,
                &email,
                role,
                merchant.as_deref(),
                actor,
                Some(cabinet_url),
            )
            .await?;
            Output::new(v.clone(), invite_text(&v))
        }
        UserCommand::List => {
            let v = users::list_users(&cabinet).await?;
            let rows: Vec<Vec<String>> = v["users"]
                .as_array()
                .map(|list| {
                    list.iter()
                        .map(|u| {
                            let s = |k: &str| match &u[k] {
                                Value::String(s) => s.clone(),
                                Value::Null => "-".into(),
                                other => other.to_string(),
                            };
                            vec![
                                s("id"),
                                s("email"),
                                s("role"),
                                s("merchant_id"),
                                s("two_factor"),
                                s("disabled"),
                            ]
                        })
                        .collect()
                })
                .unwrap_or_default();
            let text = table(
                &["id", "email", "role", "merchant", "two-factor", "disabled"],
                rows,
            );
            Output::new(v, text)
        }
        UserCommand::Invite { user } => {
            let v = users::invite_user(&cabinet, &user, actor, Some(cabinet_url)).await?;
            Output::new(v.clone(), invite_text(&v))
        }
        UserCommand::Disable { user } => {
            Output::object(users::set_disabled(&cabinet, &user, true, actor).await?)
        }
        UserCommand::Enable { user } => {
            Output::object(users::set_disabled(&cabinet, &user, false, actor).await?)
        }
    })
}
