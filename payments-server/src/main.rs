//! `payments-server`: the payment-acceptance server and its operator commands.
//!
//! `payments-server serve` runs the merchant API, the operator API, the callback dispatcher and
//! the lifecycle sweeper. Settings: a TOML file (`--config`), `PAYMENTS_*` environment
//! variables, then flags, each overriding the one before. The other commands (merchant,
//! project, token, key, callback-secret, payment, audit, providers) act on the data dir's database
//! directly; see [`payments_server::cli`]. Only `serve` and `migrate` change the schema: the
//! other commands refuse a database older than the build, naming `migrate`. `status` reports
//! the store, its schema version and queues. `check-receiver` checks a merchant's callback
//! receiver ([`payments_server::receiver_check`]); `check request` and `check callback` check a
//! merchant's signing and callback verification offline.

use payments_directory::DirectoryAccess;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use payments_server::cli::{
    settings, CheckArgs, CheckReceiverArgs, CliError, CommonArgs, OperatorCommand,
};
use payments_server::config::NotABoolean;
use payments_server::server::{open_service, shutdown_signal, Application};
use serde::Serialize;

/// mimalloc instead of glibc's malloc: under concurrent reads the tokio workers waited on
/// glibc's arena locks (a buffer allocated on one worker and freed on another takes the other
/// arena's lock); see docs/performance.md ("the allocator"). Only the server binary chooses it:
/// an embedder of the libraries keeps its own allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "payments-server",
    version,
    about = "Payment-acceptance server (API v1)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the merchant API, the operator API, the web cabinet, the callback dispatcher and the
    /// sweeper.
    Serve(ServeArgs),
    /// Operator API tokens, named per person or system: issue, list, revoke, rotate. Without a
    /// subcommand: issue the `default` token (the previous default token stops working).
    OperatorToken(OperatorTokenArgs),
    /// Write a consistent copy of the database to FILE while the server runs (SQLite online
    /// backup, mode 0600, never overwrites). A server started on the restored copy holds
    /// callbacks until `payments-server callbacks release` (docs/runbooks/restore.md).
    Backup(BackupArgs),
    /// Apply the database migrations of this build and exit (for deploys: run it once before
    /// starting nodes of a new build). SQLite (the data dir's database) or PostgreSQL
    /// (--database-url). Besides `serve`, the only command that changes the schema: the
    /// others refuse an older database.
    Migrate(CommonArgs),
    /// Show the store, its schema version beside this build's, the data dir and database
    /// sizes, payments by status, pending and failed callbacks and the dispatch hold. Changes
    /// nothing; exits non-zero when the database cannot be read (older than this build: run
    /// `migrate`).
    Status(StatusArgs),
    /// Send a callback receiver a scored series of signed callbacks (valid, replayed, tampered,
    /// wrong secret, stale and non-numeric timestamps, unknown scheme, rotation, slow read,
    /// large response); exits non-zero if any case fails. See docs/callbacks.md.
    CheckReceiver(CheckReceiverArgs),
    /// A merchant's offline checks, with no server and no database: `check request` runs the
    /// server's signature checks on a captured request, `check callback` writes a signed
    /// callback or verifies a captured one (docs/integration/README.md).
    Check(CheckArgs),
    /// The sealing key (callback secrets, TOTP keys, payment requisites): `generate FILE`
    /// writes a new key (mode 0600, never over an existing file) and prints its id. Every node
    /// of one database needs the same key file: generate it once and copy it to each node
    /// before the first start (docs/operations.md, several nodes).
    SecretsKey(SecretsKeyArgs),
    #[command(flatten)]
    Operator(OperatorCommand),
}

/// `operator-token` arguments.
#[derive(Debug, Args)]
struct OperatorTokenArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Option<payments_server::cli::OperatorTokenCommand>,
}

/// `secrets-key` arguments.
#[derive(Debug, Args)]
struct SecretsKeyArgs {
    #[command(flatten)]
    common: CommonArgs,
    #[command(subcommand)]
    command: SecretsKeyCommand,
}

/// The `secrets-key` subcommands.
#[derive(Debug, clap::Subcommand)]
enum SecretsKeyCommand {
    /// Write a new key to FILE (which must not exist) and print its id.
    Generate {
        /// The key file to write, e.g. /etc/payments/secrets.key; default: the settings'
        /// `secrets.key_file` (`<data_dir>/secrets.key` unless set).
        file: Option<PathBuf>,
    },
}

/// `status` arguments.
#[derive(Debug, Args)]
struct StatusArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `backup` arguments.
#[derive(Debug, Args)]
struct BackupArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The backup file to write (must not exist).
    file: PathBuf,
}

/// Serialized, the flag layer of the settings: only the flags given.
#[derive(Debug, Args, Serialize)]
struct ServeArgs {
    #[command(flatten)]
    #[serde(flatten)]
    common: CommonArgs,
    /// Merchant API address. Default 127.0.0.1:8080.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<String>,
    /// Operator API address. Default 127.0.0.1:8081.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    operator_listen: Option<String>,
    /// Web cabinet address. Default 127.0.0.1:8082.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    cabinet_listen: Option<String>,
    /// TLS certificate chain (PEM) for the merchant listener.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) for the merchant listener.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    tls_key: Option<PathBuf>,
    /// Public base URL merchants use (its scheme is what they sign for @target-uri).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    public_url: Option<String>,
    /// text or json.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    log_format: Option<String>,
    /// Send callbacks (default on). With off the callback dispatcher does not run: closed
    /// payments' events are still stored in the outbox and are sent once a server with
    /// dispatch on runs over the same data dir. Accepts on/off, true/false, yes/no, 1/0.
    #[arg(long, value_name = "on|off", value_parser = flag_bool)]
    #[serde(skip_serializing_if = "Option::is_none")]
    callback_dispatch: Option<bool>,
}

/// A boolean flag value in the forms `PAYMENTS_*` booleans take; an empty value is refused
/// here (on the command line it is more likely an unset shell variable than a choice).
fn flag_bool(v: &str) -> Result<bool, FlagError> {
    if v.trim().is_empty() {
        return Err(FlagError::Empty);
    }
    Ok(payments_server::config::parse_bool(v)?)
}

/// Why a `--callback-dispatch` value was refused.
#[derive(Debug, thiserror::Error)]
enum FlagError {
    /// An empty value.
    #[error("expected on or off")]
    Empty,
    /// Not a boolean.
    #[error(transparent)]
    NotABoolean(#[from] NotABoolean),
}

async fn serve(args: ServeArgs) -> Result<(), CliError> {
    let settings = settings(&args.common, &args)?;
    // Held until serve returns: dropping it writes the queued lines (a normal stop loses none).
    let _log = payments_server::telemetry::init_server(&settings.log, &settings.telemetry);
    settings.warn_deprecated();
    let app = Application::build(settings).await?;
    if let Some(path) = app.bootstrapped_credentials() {
        tracing::info!(file = %path.display(), "sandbox bootstrapped: credentials written (token, keys, secrets are in that file only)");
    }
    Ok(app.run_until_stopped(shutdown_signal()).await?)
}

async fn backup(args: BackupArgs) -> Result<(), CliError> {
    let settings = settings(&args.common, &args.common)?;
    payments_server::telemetry::init(settings.log.format, "warn");
    settings.warn_deprecated();
    let report = payments_server::cli::backup(&settings, &args.file)?;
    println!(
        "Backup written: {} ({} bytes, schema version {}, {:.1} s). A server started on it holds \
         callbacks until `payments-server callbacks release`. Back up the secrets key file \
         separately (docs/runbooks/restore.md).",
        report.file.display(),
        report.bytes,
        report.schema_version,
        report.elapsed.as_secs_f64()
    );
    Ok(())
}

fn secrets_key(args: SecretsKeyArgs) -> Result<(), CliError> {
    let SecretsKeyCommand::Generate { file } = args.command;
    let file = match file {
        Some(file) => file,
        None => payments_server::data_dir::key_file(&settings(&args.common, &args.common)?),
    };
    let id = payments_server::cli::generate_key(&file)?;
    println!(
        "Key {id} written to {} (mode 0600). Copy this file to every node of the database and \
         point secrets.key_file at it; keep a backup apart from the database's.",
        file.display()
    );
    Ok(())
}

async fn operator_token(args: OperatorTokenArgs) -> Result<(), CliError> {
    if let Some(command) = args.command {
        return payments_server::cli::run_operator_token(&args.common, args.json, command).await;
    }
    let common = args.common;
    let settings = settings(&common, &common)?;
    payments_server::telemetry::init(settings.log.format, "warn");
    settings.warn_deprecated();
    let opened = open_service(&settings, common.setup()).await?;
    let token = opened.service.directory().issue_operator_token().await;
    opened.store.close();
    println!("{}", token.map_err(CliError::OperatorToken)?);
    Ok(())
}

async fn migrate(common: CommonArgs) -> Result<(), CliError> {
    let settings = settings(&common, &common)?;
    payments_server::telemetry::init(settings.log.format, "warn");
    settings.warn_deprecated();
    let (before, after) = payments_server::server::migrate(&settings).await?;
    if before == after {
        println!("schema version {after}: nothing to apply");
    } else {
        println!("schema version {before} -> {after}");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    // Before anything of this process opens SQLite (it takes its process-wide options then).
    payments_store_sqlite::configure_process();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::OperatorToken(args) => operator_token(args).await,
        Command::Backup(args) => backup(args).await,
        Command::SecretsKey(args) => secrets_key(args),
        Command::Migrate(common) => migrate(common).await,
        Command::Status(args) => {
            payments_server::cli::status_command(&args.common, args.json).await
        }
        Command::Operator(command) => payments_server::cli::run(command).await,
        Command::Check(args) => match payments_server::cli::check_command(args) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::FAILURE,
            Err(e) => Err(e),
        },
        Command::CheckReceiver(args) => {
            match payments_server::cli::check_receiver_command(args).await {
                Ok(true) => Ok(()),
                Ok(false) => return ExitCode::FAILURE,
                Err(e) => Err(e),
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("payments-server: {e}");
            ExitCode::FAILURE
        }
    }
}
