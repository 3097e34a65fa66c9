//! The operator commands of `payments-server` for a person at a terminal: the operator API's
//! functions run directly on the data dir's database, through the same core service functions
//! and the same JSON views, so the API and the CLI cannot diverge. They work whether or not a
//! server runs on the same data dir (SQLite in WAL mode takes both). Output is readable text;
//! `--json` prints what the operator API would answer.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use payments_core::amount::Amount;
use payments_core::project::RateLimit;
use payments_core::service::{project_value, Actor, PaymentService, ProjectPatch};
use payments_core::transition::Trigger;
use payments_core::ApiError;
use serde_json::{json, Value};

use crate::config::PartialSettings;
use crate::operator::{body, event_json, lookup, view};
use crate::server::open_service;

/// Settings every command shares.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// TOML settings file.
    #[arg(long, env = "PAYMENTS_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Data directory (database, sandbox credentials). Default ./data.
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    /// sandbox (default) or production.
    #[arg(long, global = true)]
    pub environment: Option<String>,
}

/// Loads the settings: file, then `PAYMENTS_*` variables, then `common` and `flags`.
pub fn settings(
    common: &CommonArgs,
    flags: PartialSettings,
) -> Result<crate::config::Settings, String> {
    let file = match &common.config {
        Some(p) => PartialSettings::from_file(p).map_err(|e| e.0)?,
        None => PartialSettings::default(),
    };
    let env = PartialSettings::from_env(std::env::vars()).map_err(|e| e.0)?;
    let flags = PartialSettings {
        data_dir: common.data_dir.clone(),
        environment: common.environment.clone(),
        ..flags
    };
    file.overridden_by(env)
        .overridden_by(flags)
        .finish()
        .map_err(|e| e.0)
}

/// A command group: the shared settings, the output format and the command.
#[derive(Debug, Args)]
pub struct Group<C: Subcommand> {
    #[command(flatten)]
    common: CommonArgs,
    /// Print JSON (the operator API's answer) instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: C,
}

/// The operator commands.
#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Merchants: create, list, show, pause, resume, set-callback-url.
    Merchant(Group<MerchantCommand>),
    /// Projects: create, list, show, set.
    Project(Group<ProjectCommand>),
    /// Project tokens: issue (shown once), list, revoke.
    Token(Group<TokenCommand>),
    /// Request-signing keys: register, list, revoke.
    Key(Group<KeyCommand>),
    /// The project callback secret: rotate (shown once).
    CallbackSecret(Group<CallbackSecretCommand>),
    /// Payment operations: confirm, cancel, recheck, resolve, resend, events, show.
    Payment(Group<PaymentCommand>),
    /// The audit trail, newest first.
    Audit(AuditArgs),
}

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
        #[command(flatten)]
        settings: ProjectSettings,
    },
}

/// Token commands.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issue a project token; it is printed once and never again.
    Issue {
        /// Project id.
        project: String,
        /// Scopes: payments:create, payments:read, payments:test (repeat or comma-separate).
        #[arg(long = "scope", required = true, value_delimiter = ',')]
        scopes: Vec<String>,
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
}

/// Payment operations.
#[derive(Debug, Subcommand)]
pub enum PaymentCommand {
    /// Money received: complete the payment (optionally with the amount actually paid).
    Confirm {
        /// Payment id.
        id: String,
        /// The amount received, if different.
        #[arg(long)]
        amount: Option<String>,
    },
    /// Cancel the payment.
    Cancel {
        /// Payment id.
        id: String,
    },
    /// Start a re-check (status appeal).
    Recheck {
        /// Payment id.
        id: String,
    },
    /// Record the re-check result.
    Resolve {
        /// Payment id.
        id: String,
        /// completed, canceled or unchanged.
        #[arg(long)]
        status: String,
        /// With completed: the amount received, if different.
        #[arg(long)]
        amount: Option<String>,
    },
    /// Send the payment's callback again (one attempt).
    Resend {
        /// Payment id.
        id: String,
    },
    /// The payment's callback events with every delivery attempt.
    Events {
        /// Payment id.
        id: String,
    },
    /// Show the payment.
    Show {
        /// Payment id.
        id: String,
    },
}

/// `audit` arguments.
#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// How many records (newest first).
    #[arg(long, default_value_t = 20)]
    limit: usize,
}

impl OperatorCommand {
    fn common(&self) -> (&CommonArgs, bool) {
        match self {
            OperatorCommand::Merchant(g) => (&g.common, g.json),
            OperatorCommand::Project(g) => (&g.common, g.json),
            OperatorCommand::Token(g) => (&g.common, g.json),
            OperatorCommand::Key(g) => (&g.common, g.json),
            OperatorCommand::CallbackSecret(g) => (&g.common, g.json),
            OperatorCommand::Payment(g) => (&g.common, g.json),
            OperatorCommand::Audit(a) => (&a.common, a.json),
        }
    }
}

/// What a command prints: the JSON answer (for `--json`) and the text for people.
#[derive(Debug)]
struct Output {
    json: Value,
    text: String,
}

impl Output {
    fn new(json: Value, text: String) -> Output {
        Output { json, text }
    }

    /// The JSON, and as text the object's fields one per line.
    fn object(json: Value) -> Output {
        let text = fields(&json, 0);
        Output { json, text }
    }
}

/// The audit actor of CLI actions: `cli:<unix user>`.
pub fn cli_actor() -> Actor {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "operator".to_string());
    Actor(format!("cli:{user}"))
}

/// Runs an operator command on the data dir's database and prints its result.
pub async fn run(command: OperatorCommand) -> Result<(), String> {
    let (common, json) = command.common();
    let settings = settings(common, PartialSettings::default())?;
    crate::telemetry::init(settings.log_format, "warn");
    let opened = open_service(&settings, false).await.map_err(|e| e.0)?;
    let result = execute(&opened.service, command, &cli_actor()).await;
    opened.store.close();
    let out = result.map_err(|e| format!("{}: {}", e.code, e.message))?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&out.json).expect("JSON values serialise")
        );
    } else {
        print!("{}", out.text);
        if !out.text.ends_with('\n') {
            println!();
        }
    }
    Ok(())
}

async fn execute(
    svc: &PaymentService,
    command: OperatorCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    match command {
        OperatorCommand::Merchant(g) => merchant(svc, g.command, actor).await,
        OperatorCommand::Project(g) => project(svc, g.command, actor).await,
        OperatorCommand::Token(g) => token(svc, g.command, actor).await,
        OperatorCommand::Key(g) => key(svc, g.command, actor).await,
        OperatorCommand::CallbackSecret(g) => callback_secret(svc, g.command, actor).await,
        OperatorCommand::Payment(g) => payment(svc, g.command, actor).await,
        OperatorCommand::Audit(a) => {
            let records = lookup::audit(svc, a.limit).await?;
            let list: Vec<Value> = records.iter().map(view::audit).collect();
            let rows = records
                .iter()
                .map(|r| {
                    vec![
                        r.at.to_string(),
                        r.actor.clone(),
                        r.action.clone(),
                        r.target.clone(),
                    ]
                })
                .collect();
            Ok(Output::new(
                json!({ "records": list }),
                table(&["AT", "ACTOR", "ACTION", "TARGET"], rows),
            ))
        }
    }
}

async fn merchant(
    svc: &PaymentService,
    command: MerchantCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    let update = |id: String, paused: Option<bool>, url: Option<Option<String>>| async move {
        let id = lookup::merchant(svc, &id).await?.id;
        let m = svc.update_merchant(id, paused, url, actor).await?;
        Ok::<_, ApiError>(Output::object(view::merchant(&m)))
    };
    match command {
        MerchantCommand::Create { name, callback_url } => {
            let m = svc.create_merchant(&name, callback_url, actor).await?;
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

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// The settings flags as a project patch, read with the operator API's parsers.
fn project_patch(s: ProjectSettings) -> Result<ProjectPatch, ApiError> {
    let contract_text = match (&s.contract_file, s.contract) {
        (Some(path), _) => Some(std::fs::read_to_string(path).map_err(|e| {
            ApiError::bad_request(format!("--contract-file {}: {e}", path.display()))
        })?),
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

async fn project(
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
            let p = svc.create_project(merchant, &name, patch, actor).await?;
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
            let p = svc.update_project(id, patch, actor).await?;
            Ok(Output::object(project_value(&p)))
        }
    }
}

async fn token(
    svc: &PaymentService,
    command: TokenCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    match command {
        TokenCommand::Issue { project, scopes } => {
            let scopes = body::scopes(&scopes)?;
            let id = lookup::project(svc, &project).await?.id;
            let issued = svc.issue_token(id, scopes, actor).await?;
            let json = view::issued_token(&issued);
            let text = format!(
                "Token (shown once; store it now, it cannot be shown again):\n  {}\n\n{}",
                issued.token,
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
                        t.created_at.to_string(),
                        t.revoked_at.map_or("-".into(), |r| r.to_string()),
                    ]
                })
                .collect();
            let json: Vec<Value> = list.iter().map(view::token).collect();
            Ok(Output::new(
                json!({ "tokens": json }),
                table(&["ID", "PREFIX", "SCOPES", "CREATED", "REVOKED"], rows),
            ))
        }
        TokenCommand::Revoke { project, token_id } => {
            let project = lookup::project(svc, &project).await?.id;
            let token = lookup::token_id(&token_id)?;
            svc.revoke_token(project, token, actor).await?;
            Ok(Output::new(
                json!({ "revoked": token }),
                format!("Token {token} revoked."),
            ))
        }
    }
}

async fn key(svc: &PaymentService, command: KeyCommand, actor: &Actor) -> Result<Output, ApiError> {
    match command {
        KeyCommand::Register {
            project,
            file,
            base64,
        } => {
            let input = match (file, base64) {
                (Some(path), _) => std::fs::read_to_string(&path).map_err(|e| {
                    ApiError::bad_request(format!("--file {}: {e}", path.display()))
                })?,
                (None, Some(raw)) => raw,
                (None, None) => return Err(ApiError::bad_request("give --file or --base64")),
            };
            let id = lookup::project(svc, &project).await?.id;
            let record = svc.register_key(id, &input, actor).await?;
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
            svc.revoke_key(project, &keyid, actor).await?;
            Ok(Output::new(
                json!({ "revoked": keyid }),
                format!("Key {keyid} revoked."),
            ))
        }
    }
}

async fn callback_secret(
    svc: &PaymentService,
    command: CallbackSecretCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    match command {
        CallbackSecretCommand::Rotate { project } => {
            let id = lookup::project(svc, &project).await?.id;
            let secret = svc.rotate_callback_secret(id, actor).await?;
            Ok(Output::new(
                json!({ "project_id": id, "callback_secret": secret }),
                format!(
                    "Callback secret (shown once; store it now):\n  {secret}\n\
                     The previous secret keeps signing for 24 hours."
                ),
            ))
        }
    }
}

fn amount(a: Option<String>) -> Result<Option<Amount>, ApiError> {
    a.map(|a| {
        Amount::from_json(&Value::String(a))
            .map_err(|e| ApiError::bad_request(format!("amount: {e}")))
    })
    .transpose()
}

async fn payment(
    svc: &PaymentService,
    command: PaymentCommand,
    actor: &Actor,
) -> Result<Output, ApiError> {
    let (id, trigger) = match command {
        PaymentCommand::Confirm { id, amount: a } => (id, Trigger::Confirm { amount: amount(a)? }),
        PaymentCommand::Cancel { id } => (id, Trigger::Cancel),
        PaymentCommand::Recheck { id } => (id, Trigger::StartRecheck),
        PaymentCommand::Resolve {
            id,
            status,
            amount: a,
        } => (id, body::resolve_trigger(&status, amount(a)?)?),
        PaymentCommand::Resend { id } => (id, Trigger::ResendCallback),
        PaymentCommand::Events { id } => {
            let pid = lookup::payment_id(&id)?;
            svc.store().payment(pid).await?.ok_or_else(|| {
                ApiError::new(
                    payments_core::ErrorCode::PaymentNotFound,
                    "payment not found",
                )
            })?;
            let records = svc.store().events_for_payment(pid).await?;
            let list: Vec<Value> = records.iter().map(event_json).collect();
            let mut text = String::new();
            if list.is_empty() {
                text.push_str("No callback events.\n");
            }
            for e in &list {
                text.push_str(&fields(e, 0));
                text.push('\n');
            }
            return Ok(Output::new(json!({ "events": list }), text));
        }
        PaymentCommand::Show { id } => {
            let pid = lookup::payment_id(&id)?;
            let p = svc.store().payment(pid).await?.ok_or_else(|| {
                ApiError::new(
                    payments_core::ErrorCode::PaymentNotFound,
                    "payment not found",
                )
            })?;
            return Ok(Output::object(json!(p.view())));
        }
    };
    let id = lookup::payment_id(&id)?;
    let result = svc.operate(id, trigger, actor).await?;
    let json = view::operation(&result);
    let mut text = fields(&json["payment"], 0);
    if let Some(e) = &result.event {
        // Without a running server the event waits in the outbox until one starts.
        text.push_str(&format!(
            "\nCallback event {} queued for {}.\n",
            e.event.event_id,
            e.destination.as_str()
        ));
    }
    Ok(Output::new(json, text))
}

/// A JSON value as indented `name: value` lines.
fn fields(v: &Value, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::new();
    match v {
        Value::Object(map) => {
            let width = map.keys().map(String::len).max().unwrap_or(0);
            // Identifiers first, then the rest in the map's (alphabetical) order.
            let first = |k: &&String| !matches!(k.as_str(), "id" | "keyid");
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by_key(first);
            for k in keys {
                let v = &map[k];
                if is_nested(v) {
                    out.push_str(&format!("{pad}{k}:\n{}", fields(v, indent + 2)));
                } else {
                    out.push_str(&format!("{pad}{k:width$}  {}\n", scalar(v)));
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                if is_nested(item) {
                    out.push_str(&format!("{pad}-\n{}", fields(item, indent + 2)));
                } else {
                    out.push_str(&format!("{pad}- {}\n", scalar(item)));
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
    out
}

fn is_nested(v: &Value) -> bool {
    match v {
        Value::Object(m) => !m.is_empty(),
        Value::Array(a) => a.iter().any(|i| i.is_object() || i.is_array()),
        _ => false,
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::Bool(b) => yes_no(*b),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "(none)".to_string(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(", "),
        Value::Object(_) => "{}".to_string(),
        Value::Number(n) => n.to_string(),
    }
}

/// Rows under a header, columns padded to their widest cell.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    if rows.is_empty() {
        return "(none)\n".to_string();
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        s.truncate(s.trim_end().len());
        s.push('\n');
        s
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
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

    #[test]
    fn fields_render_nested_values_indented() {
        let v = json!({"id": "p1", "paused": false, "rate_limit": {"per_second": 5}, "ips": []});
        assert_eq!(
            fields(&v, 0),
            "id          p1\nips         (none)\npaused      no\nrate_limit:\n  per_second  5\n"
        );
    }
}
