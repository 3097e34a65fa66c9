//! The operator commands of `payments-server` for a person at a terminal: the operator API's
//! functions run directly on the data dir's database, through the same core service functions
//! and the same JSON views, so the API and the CLI cannot diverge. They work whether or not a
//! server runs on the same data dir (SQLite in WAL mode takes both). Output is readable text;
//! `--json` prints what the operator API would answer. They open the database without
//! migrating it: on a database older than the build they refuse, naming `payments-server
//! migrate` ([`open_service`] without `create`).
//!
//! The commands are split by concern: `directory` (merchants and projects), `credentials`
//! (tokens, keys, callback secrets), `payment` (payment operations and the audit trail) and
//! `output` (the text rendering). `check` is `check-receiver`, which sends a merchant's
//! callback receiver a scored series of callbacks ([`crate::receiver_check`]); `offline` is
//! `check request` and `check callback`, a merchant's checks with no server.

mod check;
mod credentials;
mod directory;
mod ledger;
mod offline;
mod ops;
mod output;
mod payment;
mod providers;
mod status;
#[cfg(feature = "cabinet")]
mod users;

use std::path::PathBuf;

use clap::{Args, Subcommand};

use payments_core::service::{Actor, PaymentService};
use payments_core::ApiError;
use serde::Serialize;

use crate::config::{ConfigError, Settings};
use crate::server::{open_service, OpenedStore, Setup, StartError};

pub use check::{check_receiver_command, CheckReceiverArgs};
pub use credentials::{CallbackSecretCommand, KeyCommand, TokenCommand};
pub use directory::{parse_rate_limit, MerchantCommand, OnOff, ProjectCommand, ProjectSettings};
pub use ledger::LedgerCommand;
pub use offline::{check_command, CheckArgs, CheckCommand, CheckInputError};
pub use ops::{operator_token_json, CallbacksCommand, FailedFilterArgs, OperatorTokenCommand};
use output::Output;
pub use payment::{AuditArgs, PaymentCommand};
pub use providers::ProvidersArgs;
pub use status::{status, status_command, StatusReport};
#[cfg(feature = "cabinet")]
pub use users::{cabinet_url, UserCommand};

/// Why a command failed; `payments-server` prints it after its name and exits non-zero.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The settings could not be loaded.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store or the service could not be opened.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The service refused or failed the operation (`code: message`).
    #[error(transparent)]
    Api(#[from] ApiError),
    /// A new operator token could not be issued.
    #[error(transparent)]
    OperatorToken(payments_core::service::AdminError),
    /// The command ran and printed problems it found.
    #[error("the command found problems (printed above)")]
    Problems,
    /// The backup could not be written.
    #[error(transparent)]
    Backup(#[from] payments_store_sqlite::BackupError),
    /// `status` could not read the whole report (printed above); the reason.
    #[error("status incomplete: {0}")]
    StatusIncomplete(String),
    /// `--secret` of `check-receiver` is not a callback secret.
    #[error("--secret: {0}")]
    Secret(#[source] payments_core::callback::CallbackSecretError),
    /// `callbacks.ca_file` could not be used.
    #[error(transparent)]
    CaFile(#[from] payments_http::dispatcher::DispatcherError),
    /// `check-receiver` could not send its cases.
    #[error(transparent)]
    Check(#[from] crate::receiver_check::CheckError),
    /// `check request` or `check callback` could not read its input.
    #[error(transparent)]
    CheckInput(#[from] CheckInputError),
    /// `backup` over settings that name PostgreSQL: it copies the data dir's SQLite database
    /// only, which would be the wrong data (or a stale file).
    #[error(
        "backup copies the SQLite database of the data dir, but these settings use PostgreSQL \
         (store.database_url): back it up with pg_dump, e.g. `pg_dump --format=custom \
         --file=payments.dump \"$DATABASE_URL\"`, and the secrets key file separately \
         (docs/runbooks/restore.md)"
    )]
    BackupOnPostgres,
    /// `secrets-key generate` would overwrite a key file.
    #[error("{}: a key file is there already; a new key never replaces one (move it away first \
             if it is really not in use)", .0.display())]
    KeyFileExists(PathBuf),
    /// `secrets-key generate` could not write the key file.
    #[error(transparent)]
    KeyFile(#[from] crate::data_dir::DataDirError),
}

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
    /// also PAYMENTS_STORE__DATABASE_URL, which keeps the password out of the process list).
    #[arg(long, global = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
    /// Create the secrets key file if it is missing (refused when the database already holds
    /// sealed secrets: restore their key instead). Without it a command never creates one;
    /// `status` never does.
    #[arg(long, global = true)]
    #[serde(skip)]
    pub create_key: bool,
}

impl CommonArgs {
    /// What a command given these flags may set up: nothing, or a missing secrets key with
    /// `--create-key`.
    pub fn setup(&self) -> Setup {
        if self.create_key {
            Setup::CommandCreatingKey
        } else {
            Setup::Command
        }
    }
}

/// Loads the settings: the defaults, the `--config` file, `PAYMENTS_*` variables, then `flags`
/// (`common` itself, or a command's arguments that flatten it and serialize only the flags
/// given).
pub fn settings(common: &CommonArgs, flags: impl Serialize) -> Result<Settings, ConfigError> {
    Settings::load(common.config.as_deref(), flags)
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
    /// Payment operations: confirm, cancel, recheck, resolve, resend, events, show,
    /// reconcile, backfill-last4.
    Payment(Group<PaymentCommand>),
    /// The audit trail, newest first.
    Audit(AuditArgs),
    /// The requisite providers' health as every node of the database last reported it
    /// (breakers, failures in a row, the last failure, the report's age).
    Providers(ProvidersArgs),
    /// Callbacks as a whole: failed (list), resend-failed (bulk), hold, release, status.
    Callbacks(Group<CallbacksCommand>),
    /// Project balances: balance, entries, statement, payout, adjust, reconcile.
    Ledger(Group<LedgerCommand>),
    /// Web cabinet users: add (prints an invitation link), list, invite, disable, enable.
    #[cfg(feature = "cabinet")]
    User(Group<UserCommand>),
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
            OperatorCommand::Providers(a) => (&a.common, a.json),
            OperatorCommand::Callbacks(g) => (&g.common, g.json),
            OperatorCommand::Ledger(g) => (&g.common, g.json),
            #[cfg(feature = "cabinet")]
            OperatorCommand::User(g) => (&g.common, g.json),
        }
    }
}

/// The audit actor of CLI actions: `cli:<unix user>` from `USER` or `LOGNAME`, else
/// `cli:uid=<n>` (a service manager or `sudo -u` may set neither; the uid still says who).
pub fn cli_actor() -> Actor {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty());
    Actor(match user {
        Some(user) => format!("cli:{user}"),
        None => format!(
            "cli:uid={}",
            process_uid().map_or("?".into(), |u| u.to_string())
        ),
    })
}

/// This process's user id: the owner of `/proc/self` (Linux); `None` elsewhere.
fn process_uid() -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").ok().map(|m| m.uid())
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Runs an operator command on the data dir's database and prints its result.
pub async fn run(command: OperatorCommand) -> Result<(), CliError> {
    let (common, json) = command.common();
    let settings = settings(common, common)?;
    crate::telemetry::init(settings.log.format, "warn");
    settings.warn_deprecated();
    let opened = open_service(&settings, common.setup()).await?;
    let result = execute(
        &opened.service,
        &opened.store,
        command,
        &cli_actor(),
        &settings,
    )
    .await;
    opened.store.close();
    let out = result?;
    print_output(&out, json);
    if out.failed {
        return Err(CliError::Problems);
    }
    Ok(())
}

async fn execute(
    svc: &PaymentService,
    store: &OpenedStore,
    command: OperatorCommand,
    actor: &Actor,
    settings: &Settings,
) -> Result<Output, ApiError> {
    match command {
        OperatorCommand::Merchant(g) => directory::merchant(svc, g.command, actor).await,
        OperatorCommand::Project(g) => directory::project(svc, g.command, actor).await,
        OperatorCommand::Token(g) => credentials::token(svc, g.command, actor).await,
        OperatorCommand::Key(g) => credentials::key(svc, g.command, actor).await,
        OperatorCommand::CallbackSecret(g) => {
            credentials::callback_secret(svc, store, g.command, actor).await
        }
        OperatorCommand::Payment(g) if matches!(g.command, PaymentCommand::BackfillLast4) => {
            payment::backfill_last4(store).await
        }
        OperatorCommand::Payment(g) => payment::payment(svc, g.command, actor).await,
        OperatorCommand::Audit(a) => payment::audit(svc, a.limit).await,
        OperatorCommand::Providers(_) => providers::providers(svc, settings).await,
        OperatorCommand::Callbacks(g) => ops::callbacks(svc, g.command, actor).await,
        OperatorCommand::Ledger(g) => ledger::ledger(svc, g.command, actor).await,
        #[cfg(feature = "cabinet")]
        OperatorCommand::User(g) => {
            let url = cabinet_url(settings);
            users::user(svc, Some(&store.cabinet_store()), g.command, actor, &url).await
        }
    }
}

/// `operator-token` with a subcommand: named tokens on the data dir's database.
pub async fn run_operator_token(
    common: &CommonArgs,
    json: bool,
    command: OperatorTokenCommand,
) -> Result<(), CliError> {
    let settings = settings(common, common)?;
    crate::telemetry::init(settings.log.format, "warn");
    settings.warn_deprecated();
    let opened = open_service(&settings, common.setup()).await?;
    let result = ops::operator_token(&opened.service, command, &cli_actor()).await;
    opened.store.close();
    let out = result?;
    print_output(&out, json);
    Ok(())
}

fn print_output(out: &Output, json: bool) {
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
}

/// The reason written into every backup: a server started on a restored copy holds callback
/// dispatch until an operator releases it, so it does not re-send what the original already
/// sent to real merchants.
pub fn backup_hold_reason(at: payments_core::Timestamp) -> String {
    format!(
        "restored from a backup taken at {}: check what the original sent since, then run \
         `payments-server callbacks release`",
        at.to_rfc3339()
    )
}

/// `payments-server secrets-key generate <file>`: a new sealing key in a new file (mode 0600),
/// for the first deploy of several nodes (one key, copied to every node before any of them
/// starts) and for a rotation. Never overwrites a file. Returns the key's id.
pub fn generate_key(file: &std::path::Path) -> Result<String, CliError> {
    if file.exists() {
        return Err(CliError::KeyFileExists(file.to_path_buf()));
    }
    let key = crate::data_dir::create_key_file(file, &payments_http::system::OsRandom)?;
    Ok(key.id().to_string())
}

/// `payments-server backup <file>`: an online copy of the data dir's database (see
/// [`payments_store_sqlite::backup`]) that holds callback dispatch when restored.
pub fn backup(
    settings: &Settings,
    file: &std::path::Path,
) -> Result<payments_store_sqlite::BackupReport, CliError> {
    use payments_core::Clock as _;
    if settings.store.database_url.is_some() {
        return Err(CliError::BackupOnPostgres);
    }
    let db = settings.data_dir.join(crate::data_dir::DATABASE_FILE);
    let reason = backup_hold_reason(payments_http::system::SystemClock.now());
    payments_store_sqlite::backup(
        &db,
        file,
        &[(payments_core::service::CALLBACK_HOLD_SETTING, &reason)],
    )
    .map_err(CliError::Backup)
}
