//! Drives a running sandbox through one complete payment: create (signed), show the payer's
//! requisite, confirm it through the operator API (what the cabinet's "paid" button does),
//! read it back as `completed`, print the settlement. Exits non-zero on any unexpected answer.
//!
//! ```sh
//! cargo run -p payments-http --bin payments-server -- serve     # in one terminal
//! cargo run -p payments-examples --example quickstart           # in another
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let path = std::env::args_os().nth(1).map_or_else(
        || PathBuf::from("./data/sandbox-credentials.json"),
        PathBuf::from,
    );
    let creds = match payments_examples::load_credentials(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quickstart: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "Sandbox at {} (credentials {}).",
        creds.base_url,
        path.display()
    );
    match payments_examples::quickstart(&creds).await {
        Ok(report) => {
            println!("{report}");
            println!("Done: one payment created, paid and settled.");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("quickstart failed at {e}");
            ExitCode::FAILURE
        }
    }
}
