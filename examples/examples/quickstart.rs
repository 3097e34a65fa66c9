//! Drives a running sandbox through one complete payment: create (signed), show the payer's
//! requisite, confirm it through the operator API (what the cabinet's "paid" button does),
//! read it back as `completed`, print the settlement. Exits non-zero on any unexpected answer.
//!
//! ```sh
//! cargo run -p payments-server --bin payments-server -- serve     # in one terminal
//! cargo run -p payments-examples --example quickstart           # in another
//! ```
//!
//! With `--callback-url http://127.0.0.1:9090/callbacks` the payment's `completed` callback
//! goes to a local receiver (the server needs `PAYMENTS_CALLBACKS__ALLOW_LOCAL=1`).

use std::path::PathBuf;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    // [CREDENTIALS_FILE] [--callback-url URL]
    let mut path = PathBuf::from("./data/sandbox-credentials.json");
    let mut callback_url = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--callback-url" => match args.next() {
                Some(url) => callback_url = Some(url),
                None => {
                    eprintln!("quickstart: --callback-url needs a URL");
                    return ExitCode::FAILURE;
                }
            },
            "-h" | "--help" => {
                println!("usage: quickstart [CREDENTIALS_FILE] [--callback-url URL]");
                return ExitCode::SUCCESS;
            }
            _ => path = PathBuf::from(arg),
        }
    }
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
    match payments_examples::quickstart_with_callback(&creds, callback_url.as_deref()).await {
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
