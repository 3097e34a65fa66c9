//! `payments-server check request|callback`: a merchant's CI checks its integration with no
//! server and no database. `request` runs the server's checks of a signed request on a
//! captured one ([`payments_core::service::check_request_offline`]); `callback` writes a
//! callback signed as the dispatcher signs it
//! ([`payments_core::callback::CallbackSecrets::sign_attempt`]), or verifies a captured one as
//! a receiver must ([`payments_core::callback::CallbackVerifier`]).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use payments_core::auth::{parse_public_key, KeyError};
use payments_core::callback::{
    CallbackSecret, CallbackSecrets, CallbackVerifier, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use payments_core::service::{
    check_request_offline, OfflineCheck, RawRequest, RawRequestError, NOT_CHECKED_OFFLINE,
};
use payments_core::{ApiError, Clock as _, Timestamp};
use payments_http::system::SystemClock;
use serde_json::{json, Value};

use super::output::{fields, Output};
use super::{print_output, CliError};
use crate::receiver_check::{event_id_of, sample_event};

/// Arguments of `check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: CheckCommand,
}

/// The offline checks.
#[derive(Debug, Subcommand)]
pub enum CheckCommand {
    /// Check one signed request (a raw HTTP/1.1 request in FILE) as the server would: form,
    /// token, signature, covered components, Content-Digest, time window, keyid. Exits 0 when
    /// the server would accept its signature, 1 otherwise.
    Request(RequestArgs),
    /// Write a callback signed as the dispatcher signs it (a raw HTTP/1.1 request on standard
    /// output), or `--verify` a captured one as a receiver must (exits 1 when refused).
    Callback(CallbackArgs),
}

/// Arguments of `check request`.
#[derive(Debug, Args)]
pub struct RequestArgs {
    /// The project's public key: a file (PEM or base64) or the base64 itself.
    #[arg(long, value_name = "FILE|BASE64")]
    public_key: String,
    /// The project token the request must carry (otherwise only its form is checked). Also
    /// read from PAYMENTS_CHECK_TOKEN.
    #[arg(long, env = "PAYMENTS_CHECK_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Check as at this time (RFC 3339), for a request captured earlier. Default: now.
    #[arg(long, value_parser = parse_at)]
    at: Option<Timestamp>,
    /// The scheme of the server's public base URL (for a covered `@scheme` or
    /// `@target-uri`).
    #[arg(long, default_value = "https")]
    scheme: String,
    /// The request: request line, headers, blank line, body (`-` for standard input).
    file: PathBuf,
}

/// Arguments of `check callback`.
#[derive(Debug, Args)]
pub struct CallbackArgs {
    /// The project's callback secret (whsec_...). Also read from PAYMENTS_CHECK_SECRET.
    #[arg(long, env = "PAYMENTS_CHECK_SECRET", hide_env_values = true)]
    secret: String,
    /// Verify this captured callback (a raw HTTP/1.1 request, `-` for standard input) instead
    /// of writing one.
    #[arg(long, value_name = "FILE")]
    verify: Option<PathBuf>,
    /// The event body to sign, exactly as sent (default: a `completed` event of a random
    /// payment). Its `event_id` goes into X-Callback-Event-Id.
    #[arg(long, value_name = "FILE", conflicts_with = "verify")]
    body: Option<PathBuf>,
    /// The receiver's URL: the request line's path and the Host header.
    #[arg(
        long,
        default_value = "http://127.0.0.1:9090/callbacks",
        conflicts_with = "verify"
    )]
    url: String,
    /// Sign, or verify, as at this time (RFC 3339). Default: now.
    #[arg(long, value_parser = parse_at)]
    at: Option<Timestamp>,
}

/// Why an offline check could not run (its input, not the request checked).
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CheckInputError {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `--public-key` is not an Ed25519 public key.
    #[error("--public-key: {0}")]
    Key(#[source] KeyError),
    /// The file is not one HTTP/1.1 request.
    #[error("{}: {source}", path.display())]
    Request {
        /// The file.
        path: PathBuf,
        /// Why.
        source: RawRequestError,
    },
    /// `--url` is not an `http` or `https` URL with a host.
    #[error("--url {0:?}: expected http(s)://host[:port]/path")]
    Url(String),
}

/// `--at` is not an RFC 3339 time.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not an RFC 3339 time like 2026-10-01T12:00:00Z")]
pub struct NotRfc3339(String);

fn parse_at(s: &str) -> Result<Timestamp, NotRfc3339> {
    Timestamp::parse_rfc3339(s).ok_or_else(|| NotRfc3339(s.to_string()))
}

/// Runs `check`, prints its result; `Ok(false)` when the request or callback is refused.
pub fn check_command(args: CheckArgs) -> Result<bool, CliError> {
    let out = match args.command {
        CheckCommand::Request(a) => check_request(&a)?,
        CheckCommand::Callback(a) => match &a.verify {
            Some(file) => verify_callback(&a, file)?,
            None => sign_callback(&a)?,
        },
    };
    print_output(&out, args.json);
    Ok(!out.failed)
}

fn read(path: &Path) -> Result<Vec<u8>, CheckInputError> {
    let read = if path == Path::new("-") {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).map(|_| buf)
    } else {
        std::fs::read(path)
    };
    read.map_err(|source| CheckInputError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_request(path: &Path) -> Result<RawRequest, CheckInputError> {
    RawRequest::parse(&read(path)?).map_err(|source| CheckInputError::Request {
        path: path.to_path_buf(),
        source,
    })
}

fn now_or(at: Option<Timestamp>) -> Timestamp {
    at.unwrap_or_else(|| SystemClock.now())
}

/// `check request`: the server's answer to the request's credentials, or what it verified.
fn check_request(a: &RequestArgs) -> Result<Output, CliError> {
    let key_text = match std::fs::read_to_string(&a.public_key) {
        Ok(text) => text,
        Err(_) if !Path::new(&a.public_key).exists() => a.public_key.clone(),
        Err(source) => {
            let path = PathBuf::from(&a.public_key);
            return Err(CheckInputError::Read { path, source }.into());
        }
    };
    let key = parse_public_key(&key_text).map_err(CheckInputError::Key)?;
    let request = read_request(&a.file)?;
    let now = now_or(a.at);
    let result = request.with_parts(&a.scheme, |parts| {
        check_request_offline(parts, &key, a.token.as_deref(), now)
    });
    let not_checked = json!(NOT_CHECKED_OFFLINE);
    let mut out = match result {
        Ok(check) => accepted(&check),
        Err(refusal) => refused(ApiError::from(refusal)),
    };
    out.json["checked_at"] = json!(now.to_rfc3339());
    out.json["not_checked"] = not_checked.clone();
    out.text.push_str(&format!(
        "checked as at {}\nnot checked offline (the server checks them with its records):\n{}",
        now.to_rfc3339(),
        fields(&not_checked, 2)
    ));
    Ok(out)
}

fn accepted(check: &OfflineCheck) -> Output {
    let s = &check.signature;
    let json = json!({
        "accepted": true,
        "keyid": s.keyid.as_str(),
        "label": s.label,
        "covered": s.covered,
        "created": s.created,
        "expires": s.expires,
        "nonce": s.nonce.as_ref().map(|n| n.as_str()),
        "token": if check.token_compared { "the expected one" } else { "well-formed (pass --token to compare)" },
    });
    let text = format!(
        "accepted: the server would accept this request's signature\n{}",
        fields(&json, 2)
    );
    Output::new(json, text)
}

fn refused(api: ApiError) -> Output {
    let json = json!({
        "accepted": false,
        "code": api.code.as_str(),
        "message": api.message,
        "signature_base": api.signature_base,
    });
    let mut text = format!("refused: {}: {}\n", api.code.as_str(), api.message);
    if let Some(base) = &api.signature_base {
        text.push_str("the signature base the server built:\n");
        for line in base.lines() {
            text.push_str(&format!("  {line}\n"));
        }
    }
    Output {
        json,
        text,
        failed: true,
    }
}

/// `check callback`: a callback signed at `--at` (or now) with the secret, as a raw request.
fn sign_callback(a: &CallbackArgs) -> Result<Output, CliError> {
    let secret = CallbackSecret::parse(a.secret.trim()).map_err(CliError::Secret)?;
    let url = url::Url::parse(&a.url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
        .ok_or_else(|| CheckInputError::Url(a.url.clone()))?;
    let (event_id, body) = match &a.body {
        Some(path) => {
            let body = read(path)?;
            (event_id_of(&body), body)
        }
        None => sample_event(
            &payments_core::random::uuid_v4(&payments_http::system::OsRandom).to_string(),
        ),
    };
    let now = now_or(a.at);
    let signature = CallbackSecrets::new(secret, now).sign_attempt(now, &body);
    let host = &url[url::Position::BeforeHost..url::Position::AfterPort];
    let target = &url[url::Position::BeforePath..url::Position::AfterQuery];
    let mut headers = vec![("Host", host.to_owned())];
    headers.extend(signature.headers(&event_id));
    headers.push(("Content-Length", body.len().to_string()));
    let mut text = format!("POST {target} HTTP/1.1\r\n");
    for (name, value) in &headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    let body_text = String::from_utf8_lossy(&body).into_owned();
    text.push_str(&body_text);
    let json = json!({
        "method": "POST",
        "url": url.as_str(),
        "headers": headers.iter().map(|(n, v)| json!([n, v])).collect::<Vec<Value>>(),
        "body": body_text,
    });
    Ok(Output::new(json, text))
}

/// `check callback --verify FILE`: the receiver's verification of a captured callback.
fn verify_callback(a: &CallbackArgs, file: &Path) -> Result<Output, CliError> {
    let secret = CallbackSecret::parse(a.secret.trim()).map_err(CliError::Secret)?;
    let request = read_request(file)?;
    let header = |name: &str| {
        request
            .headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    };
    let now = now_or(a.at);
    let verified = CallbackVerifier::new(vec![secret]).verify(
        &header(TIMESTAMP_HEADER),
        &header(SIGNATURE_HEADER),
        request.body(),
        now,
    );
    let (json, text, failed) = match verified {
        Ok(()) => (
            json!({"accepted": true, "checked_at": now.to_rfc3339()}),
            format!(
                "accepted: the signature is the secret's, within the time tolerance at {}",
                now.to_rfc3339()
            ),
            false,
        ),
        Err(e) => (
            json!({"accepted": false, "message": e.to_string(), "checked_at": now.to_rfc3339()}),
            format!("refused (a receiver answers 401 and changes nothing): {e}"),
            true,
        ),
    };
    Ok(Output { json, text, failed })
}
