//! Generates an Ed25519 key pair for request signing, with the OS random generator:
//! `<dir>/private.pem` (PKCS#8, mode 0600; keep it on the merchant's server) and
//! `<dir>/public.pem` (SPKI; register it in the cabinet). Prints the keyid and the raw public
//! key in base64: the cabinet takes the raw key only with the keyid beside it (a raw key could
//! be a private seed pasted by mistake), so the PEM file is the simpler form.
//!
//! ```sh
//! cargo run -p payments-examples --example keygen -- ./keys
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use payments_client::files::write_private;
use payments_core::auth::keys::{
    generate_signing_key, keyid, public_key_to_base64, public_key_to_pem, signing_key_to_pem,
};
use payments_http::system::OsRandom;

/// Generates an Ed25519 signing key pair.
#[derive(Debug, Parser)]
struct Args {
    /// The directory to write private.pem and public.pem into (created if missing). Existing
    /// files are never overwritten.
    dir: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keygen: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why no key pair was written.
#[derive(Debug, thiserror::Error)]
enum KeygenError {
    #[error("{} exists; refusing to overwrite a key (choose another directory)", .0.display())]
    Exists(PathBuf),
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn run(args: &Args) -> Result<(), KeygenError> {
    let private_path = args.dir.join("private.pem");
    let public_path = args.dir.join("public.pem");
    // Check both before writing either, so a refusal leaves nothing half-written.
    for path in [&private_path, &public_path] {
        if path.exists() {
            return Err(KeygenError::Exists(path.clone()));
        }
    }
    std::fs::create_dir_all(&args.dir).map_err(|source| KeygenError::Create {
        path: args.dir.clone(),
        source,
    })?;

    let key = generate_signing_key(&OsRandom);
    let public = key.verifying_key();
    // create_new: a file appearing between the check and now is still not overwritten.
    write_private(&private_path, signing_key_to_pem(&key).as_bytes()).map_err(|source| {
        KeygenError::Write {
            path: private_path.clone(),
            source,
        }
    })?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&public_path)
        .and_then(|mut f| f.write_all(public_key_to_pem(&public).as_bytes()))
        .map_err(|source| KeygenError::Write {
            path: public_path.clone(),
            source,
        })?;

    println!(
        "private key: {} (mode 0600, keep it secret)",
        private_path.display()
    );
    println!("public key:  {}", public_path.display());
    println!("keyid:       {}", keyid(&public));
    println!("raw public key (base64): {}", public_key_to_base64(&public));
    println!(
        "Register public.pem in the cabinet (or the raw key with this keyid); sign with private.pem."
    );
    Ok(())
}
