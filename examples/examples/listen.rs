//! Callbacks to a laptop: follows the project's callback events and forwards each new one to
//! a local receiver, signed with a secret of your own, printing each delivery and its answer.
//!
//! ```sh
//! cargo run -p payments-examples --example callback_receiver -- --project test \
//!     --secret whsec_local_secret_at_least_32_characters &
//! cargo run -p payments-examples --example listen -- --project test \
//!     --forward-to http://127.0.0.1:9090/callbacks --secret whsec_local_secret_at_least_32_characters
//! ```
//!
//! The token needs the scope `events:read`. Credentials come from
//! `./data/sandbox-credentials.json` unless `--base-url`, `--token` and `--private-key` are
//! given; `--project test` follows the sandbox's test project (`test_project` of that file),
//! and the first line printed names the project followed. Events that exist for the project
//! are forwarded whatever became of their own delivery: a test payment's callback (sent with "Send callback" on the payment card or
//! `POST /api/v1/payments/{id}/resend_callback`) reaches the laptop although the sandbox never
//! sends to a private address.

use std::process::ExitCode;

use clap::Parser;
use payments_examples::listen::ListenArgs;

#[tokio::main]
async fn main() -> ExitCode {
    let args = ListenArgs::parse();
    let (mut listener, line) = match args.listener() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{line}");
    listener
        .run(|line| println!("{line}"), async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    ExitCode::SUCCESS
}
