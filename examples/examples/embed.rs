//! Embeds the payment service in an application of its own and completes one payment: the
//! merchant API mounted under `/pay` of the application's axum router, the operator API on a
//! private listener, the callback dispatcher and the sweeper running beside them, a requisite
//! provider and a rate source written in the example, and SQLite in a fresh directory.
//!
//! ```sh
//! cargo run -p payments-examples --example embed            # or: -- path/to/empty/dir
//! ```
//!
//! The code is `payments_examples::embed` (`examples/src/embed.rs`); its test runs it in CI.

use std::path::PathBuf;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let dir = match std::env::args_os().nth(1) {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir().join(format!("payments-embed-{}", std::process::id())),
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("embed: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    match payments_examples::embed::run(&dir).await {
        Ok(r) => {
            println!("Application at {} (merchant API under /pay).", r.base_url);
            println!(
                "Created {} ({}): requisite {} from the application's own pool, {} USDT.",
                r.payment_id, r.create_status, r.requisite, r.amount_usdt
            );
            println!(
                "Confirmed by the application; verified callback '{}' after {} ms; read back as {}.",
                r.callback_status,
                r.callback_after.as_millis(),
                r.final_status
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("embed failed at {e}");
            ExitCode::FAILURE
        }
    }
}
