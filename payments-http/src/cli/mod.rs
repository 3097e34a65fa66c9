//! The operator commands of `payments-server` for a person at a terminal: the operator API's
//! functions run directly on the data dir's database, through the same core service functions
//! and the same JSON views, so the API and the CLI cannot diverge. They work whether or not a
//! server runs on the same data dir (SQLite in WAL mode takes both). Output is readable text;
//! `--json` prints what the operator API would answer.
//!
//! The commands are split by concern: `directory` (merchants and projects), `credentials`
//! (tokens, keys, callback secrets), `payment` (payment operations and the audit trail) and
//! `output` (the text rendering). `check` is `check-receiver`, which sends a merchant's
//! callback receiver a scored series of callbacks ([`crate::receiver_check`]).

mod check;
mod credentials;
mod directory;
mod output;
mod payment;

use std::path::PathBuf;

use clap::{Args, Subcommand};
use payments_core::service::{Actor, PaymentService};
use payments_core::ApiError;
use serde::Serialize;

use crate::config::Settings;
use crate::server::open_service;

pub use check::{check_receiver_command, CheckReceiverArgs};
pub use credentials::{CallbackSecretCommand, KeyCommand, TokenCommand};
pub use directory::{parse_rate_limit, MerchantCommand, OnOff, ProjectCommand, ProjectSettings};
use output::Output;
pub use payment::{AuditArgs, PaymentCommand};

/// Settings every command shares. Serialized, it is the flag layer of these flags (only the
/// ones given).
#[derive(Debug, Clone, Args, Serialize)]
pub struct CommonArgs {
    /// TOML settings file.
    #[arg(long, env = "PAYMENTS_CONFIG", global = true)]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Data directory (database, sandbox credentials). Default ./data.
    #[arg(long, global = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// sandbox (default) or production.
    #[arg(long, global = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// PostgreSQL instead of the data dir's SQLite (postgres://user:password@host:port/db;
    /// also PAYMENTS_DATABASE_URL, which keeps the password out of the process list).
    #[arg(long, global = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
}

/// Loads the settings: the defaults, the `--config` file, `PAYMENTS_*` variables, then `flags`
/// (`common` itself, or a command's arguments that flatten it and serialize only the flags
/// given).
pub fn settings(common: &CommonArgs, flags: impl Serialize) -> Result<Settings, String> {
    Settings::load(common.config.as_deref(), flags).map_err(|e| e.0)
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
    /// Callback secrets: rotate (shown once), reseal (with the current key file).
    CallbackSecret(Group<CallbackSecretCommand>),
    /// Payment operations: confirm, cancel, recheck, resolve, resend, events, show.
    Payment(Group<PaymentCommand>),
    /// The audit trail, newest first.
    Audit(AuditArgs),
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
    let settings = settings(common, common)?;
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
        OperatorCommand::Merchant(g) => directory::merchant(svc, g.command, actor).await,
        OperatorCommand::Project(g) => directory::project(svc, g.command, actor).await,
        OperatorCommand::Token(g) => credentials::token(svc, g.command, actor).await,
        OperatorCommand::Key(g) => credentials::key(svc, g.command, actor).await,
        OperatorCommand::CallbackSecret(g) => {
            credentials::callback_secret(svc, g.command, actor).await
        }
        OperatorCommand::Payment(g) => payment::payment(svc, g.command, actor).await,
        OperatorCommand::Audit(a) => payment::audit(svc, a.limit).await,
    }
}
