//! Merchant and project commands.

use payments_directory::DirectoryAccess;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use payments_core::project::RateLimit;
use payments_core::service::{Actor, PaymentService};
use payments_core::ApiError;
use payments_directory::{project_value, ProjectPatch};
use serde_json::{json, Value};

use super::output::{table, yes_no, Output};
use payments_http::operator::{body, lookup, view};

/// Merchant commands.
#[derive(Debug, Subcommand)]
pub enum MerchantCommand {
    /// Create a merchant.
    Create {
        /// Display name.
        #[arg(long)]
        name: String,
        /// The merchant's common callback URL.
        #[arg(long)]
        callback_url: Option<String>,
    },
    /// List merchants.
    List,
    /// Show a merchant.
    Show {
        /// Merchant id.
        id: String,
    },
    /// Pause a merchant: its payments are refused with 422 payment_not_routable.
    Pause {
        /// Merchant id.
        id: String,
    },
    /// Resume a paused merchant.
    Resume {
        /// Merchant id.
        id: String,
    },
    /// Set or clear the merchant's common callback URL.
    SetCallbackUrl {
        /// Merchant id.
        id: String,
        /// The URL.
        #[arg(required_unless_present = "clear")]
        url: Option<String>,
        /// Remove the URL.
        #[arg(long, conflicts_with = "url")]
        clear: bool,
    },
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    /// Turn on.
    On,
    /// Turn off.
    Off,
}

impl OnOff {
    fn bool(self) -> bool {
        self == OnOff::On
    }
}

/// Project settings a create or a set may change.
#[derive(Debug, Args)]
pub struct ProjectSettings {
    /// Test mode (sandbox only).
    #[arg(long, value_name = "on|off")]
    test_mode: Option<OnOff>,
    /// Payment lifetime in seconds (60 to 604800).
    #[arg(long, value_name = "SECS")]
    lifetime: Option<u64>,
    /// The contract from a JSON file (see --contract).
    #[arg(long, value_name = "FILE", conflicts_with = "contract")]
    contract_file: Option<PathBuf>,
    /// The contract as JSON: {"currencies": ["RUB"], "methods": [{"method": "sbp",
    /// "min_amount": "10", "max_amount": "100000", "fee_percent": "11"}]}.
    #[arg(long, value_name = "JSON")]
    contract: Option<String>,
    /// Project callback URL.
    #[arg(long, conflicts_with = "clear_callback_url")]
    callback_url: Option<String>,
    /// Remove the project callback URL.
    #[arg(long)]
    clear_callback_url: bool,
    /// An allow-list rule (address or CIDR network); repeat for more. Replaces the list.
    #[arg(long, value_name = "IP|CIDR", conflicts_with = "clear_allow_list")]
    allow_ip: Vec<String>,
    /// Empty the IP allow-list (no address check).
    #[arg(long)]
    clear_allow_list: bool,
    /// Require signatures on GET endpoints.
    #[arg(long, value_name = "on|off")]
    signature_required: Option<OnOff>,
    /// Pause the project (new payments are 422 payment_not_routable) or resume it.
    #[arg(long, value_name = "on|off")]
    paused: Option<OnOff>,
    /// Rate limit: requests per second, optionally /burst (default burst: twice the rate).
    #[arg(long, value_name = "PER_SEC[/BURST]")]
    rate_limit: Option<String>,
    /// The hosted payer page of the project's payments (and their `payment_page_url`).
    #[arg(long, value_name = "on|off")]
    payer_page: Option<OnOff>,
    /// The payer page's language: ru or en.
    #[arg(long, value_name = "ru|en")]
    payer_language: Option<String>,
    /// The payer page's "Back to the shop" link: an https URL.
    #[arg(long, value_name = "URL", conflicts_with = "clear_return_url")]
    return_url: Option<String>,
    /// Remove the payer page's return link.
    #[arg(long)]
    clear_return_url: bool,
}

/// Project commands.
#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project (standard contract and defaults unless set here).
    Create {
        /// The owning merchant's id.
        #[arg(long)]
        merchant: String,
        /// Display name.
        #[arg(long)]
        name: String,
        /// The project's settings given as flags.
        #[command(flatten)]
        settings: ProjectSettings,
    },
    /// Show a project's settings.
    Show {
        /// Project id.
        id: String,
    },
    /// List projects.
    List {
        /// Only this merchant's projects.
        #[arg(long)]
        merchant: Option<String>,
    },
    /// Change a project's settings (effective with the next request).
    Set {
        /// Project id.
        id: String,
        /// New display name.
        #[arg(long)]
        name: Option<String>,
        /// Activate or deactivate (an inactive project's tokens fail).
        #[arg(long, value_name = "on|off")]
        active: Option<OnOff>,
        /// The project's settings given as flags.
        #[command(flatten)]
        settings: ProjectSettings,
    },
}

pub(super) async fn merchant(
    svc: &PaymentService,
    command: MerchantCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    let update = |id: String, paused: Option<bool>, url: Option<Option<String>>| async move {
        let id = lookup::merchant(svc, &id).await?.id;
        let m = svc
            .directory()
            .update_merchant(id, paused, url, actor)
            .await?;
        Ok::<_, ApiError>(Output::object(view::merchant(&m)))
    };
    match command {
        MerchantCommand::Create { name, callback_url } => {
            let m = svc
                .directory()
                .create_merchant(&name, callback_url, actor)
                .await?;
            Ok(Output::object(view::merchant(&m)))
        }
        MerchantCommand::List => {
            let list = lookup::merchants(svc).await?;
            let rows = list
                .iter()
                .map(|m| {
                    vec![
                        m.id.to_string(),
                        m.name.clone(),
                        yes_no(m.paused),
                        m.callback_url
                            .as_ref()
                            .map_or("-".into(), |u| u.as_str().to_string()),
                    ]
                })
                .collect();
            let json: Vec<Value> = list.iter().map(view::merchant).collect();
            Ok(Output::new(
                json!({ "merchants": json }),
                table(&["ID", "NAME", "PAUSED", "CALLBACK_URL"], rows),
            ))
        }
        MerchantCommand::Show { id } => Ok(Output::object(view::merchant(
            &lookup::merchant(svc, &id).await?,
        ))),
        MerchantCommand::Pause { id } => update(id, Some(true), None).await,
        MerchantCommand::Resume { id } => update(id, Some(false), None).await,
        MerchantCommand::SetCallbackUrl { id, url, clear } => {
            update(id, None, Some(if clear { None } else { url })).await
        }
    }
}
/// The settings flags as a project patch, read with the operator API's parsers.
fn project_patch(s: ProjectSettings) -> Result<ProjectPatch, ApiError> {
    let contract_text = match (&s.contract_file, s.contract) {
        (Some(path), _) => Some(
            crate::files::read_limited_string(path, crate::files::CONTRACT)
                .map_err(|e| ApiError::bad_request(format!("--contract-file: {e}")))?,
        ),
        (None, text) => text,
    };
    let contract = contract_text
        .map(|t| {
            let v: Value = serde_json::from_str(&t)
                .map_err(|e| ApiError::bad_request(format!("contract: not JSON: {e}")))?;
            body::contract(&v)
        })
        .transpose()?;
    let callback_url = if s.clear_callback_url {
        Some(None)
    } else {
        s.callback_url.map(Some)
    };
    let ip_allow_list = if s.clear_allow_list {
        Some(Vec::new())
    } else if s.allow_ip.is_empty() {
        None
    } else {
        Some(s.allow_ip)
    };
    Ok(ProjectPatch {
        test_mode: s.test_mode.map(OnOff::bool),
        lifetime: s.lifetime.map(Duration::from_secs),
        contract,
        callback_url,
        ip_allow_list,
        signature_required: s.signature_required.map(OnOff::bool),
        paused: s.paused.map(OnOff::bool),
        rate_limit: s.rate_limit.as_deref().map(parse_rate_limit).transpose()?,
        payer_page: s.payer_page.map(OnOff::bool),
        payer_language: s.payer_language.as_deref().map(str::parse).transpose()?,
        return_url: if s.clear_return_url {
            Some(None)
        } else {
            s.return_url.map(Some)
        },
        ..ProjectPatch::default()
    })
}

/// `PER_SEC[/BURST]`; the burst defaults to twice the rate, like the default 50/100.
pub fn parse_rate_limit(s: &str) -> Result<RateLimit, ApiError> {
    let bad = || ApiError::bad_request(format!("rate_limit: {s:?} is not PER_SEC[/BURST]"));
    let (rate, burst) = match s.split_once('/') {
        Some((r, b)) => (r, Some(b)),
        None => (s, None),
    };
    let per_second: u32 = rate.trim().parse().map_err(|_| bad())?;
    let burst = match burst {
        Some(b) => b.trim().parse().map_err(|_| bad())?,
        None => per_second.saturating_mul(2),
    };
    Ok(RateLimit { per_second, burst })
}

pub(super) async fn project(
    svc: &PaymentService,
    command: ProjectCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    match command {
        ProjectCommand::Create {
            merchant,
            name,
            settings,
        } => {
            let patch = project_patch(settings)?;
            let merchant = lookup::merchant(svc, &merchant).await?.id;
            let p = svc
                .directory()
                .create_project(merchant, &name, patch, actor)
                .await?;
            Ok(Output::object(project_value(&p)))
        }
        ProjectCommand::Show { id } => Ok(Output::object(project_value(
            &lookup::project(svc, &id).await?,
        ))),
        ProjectCommand::List { merchant } => {
            let list = lookup::projects(svc, merchant.as_deref()).await?;
            let rows = list
                .iter()
                .map(|p| {
                    vec![
                        p.id.to_string(),
                        p.merchant_id.to_string(),
                        p.name.clone(),
                        yes_no(p.active),
                        yes_no(p.test_mode),
                    ]
                })
                .collect();
            let json: Vec<Value> = list.iter().map(project_value).collect();
            Ok(Output::new(
                json!({ "projects": json }),
                table(&["ID", "MERCHANT", "NAME", "ACTIVE", "TEST_MODE"], rows),
            ))
        }
        ProjectCommand::Set {
            id,
            name,
            active,
            settings,
        } => {
            let patch = ProjectPatch {
                name,
                active: active.map(OnOff::bool),
                ..project_patch(settings)?
            };
            if patch == ProjectPatch::default() {
                return Err(ApiError::bad_request(
                    "nothing to change: give at least one setting (see --help)",
                ));
            }
            let id = lookup::project(svc, &id).await?.id;
            let p = svc.directory().update_project(id, patch, actor).await?;
            Ok(Output::object(project_value(&p)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_burst_defaults_to_twice_the_rate() {
        assert_eq!(
            parse_rate_limit("5").unwrap(),
            RateLimit {
                per_second: 5,
                burst: 10
            }
        );
        assert_eq!(
            parse_rate_limit("5/7").unwrap(),
            RateLimit {
                per_second: 5,
                burst: 7
            }
        );
        assert!(parse_rate_limit("5/").is_err());
        assert!(parse_rate_limit("fast").is_err());
    }
}
