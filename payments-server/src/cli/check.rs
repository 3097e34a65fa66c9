//! `payments-server check-receiver`: a thin wrapper over [`crate::receiver_check`].

use clap::Args;
use payments_core::callback::{AddressPolicy, CallbackSecret};

use super::{settings, CliError, CommonArgs};
use crate::receiver_check::{check_receiver, CheckOptions};

/// Arguments of `check-receiver`.
#[derive(Debug, Args)]
pub struct CheckReceiverArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The receiver's callback URL.
    #[arg(long)]
    url: String,
    /// The project's callback secret (whsec_...). Also read from PAYMENTS_CHECK_SECRET.
    #[arg(long, env = "PAYMENTS_CHECK_SECRET", hide_env_values = true)]
    secret: String,
    /// A payment the events name; a receiver that reads the payment back needs a real one
    /// (a sandbox payment). Default: a random id.
    #[arg(long)]
    payment_id: Option<String>,
}

/// Runs the series, prints the table; `Ok(false)` when a case failed.
pub async fn check_receiver_command(args: CheckReceiverArgs) -> Result<bool, CliError> {
    let settings = settings(&args.common, &args.common)?;
    crate::telemetry::init(settings.log.format, "warn");
    settings.warn_deprecated();
    let secret = CallbackSecret::parse(args.secret.trim()).map_err(CliError::Secret)?;
    let policy = AddressPolicy {
        allow_local: settings.callbacks.allow_local,
    };
    let mut options = CheckOptions::new(args.url, secret, policy);
    options.payment_id = args.payment_id;
    if let Some(path) = &settings.callbacks.ca_file {
        options.extra_roots = crate::files::read_pem_roots(path)?;
    }
    let report = check_receiver(&options).await?;
    print!("{}", report.render());
    Ok(report.passed())
}
