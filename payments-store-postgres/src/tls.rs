//! TLS to PostgreSQL, named as libpq names it in the database URL: `sslmode=verify-full` with
//! `sslrootcert=<CA file>` encrypts every connection and checks that the server's certificate
//! chains to that CA and names the host the URL connects to (a DNS name or an IP address in
//! its subject alternative names). Without `sslmode` (or with `disable`), connections are in
//! clear, as before. `prefer` is taken as in clear too (it never checked anyone); `require`,
//! `verify-ca` and `allow` are refused: each accepts a server it has not identified, which a
//! payment system must not send its data to.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::OpenError;

/// How a node reaches its database.
#[derive(Clone)]
pub(crate) enum Transport {
    /// In clear.
    Plain,
    /// TLS, the server verified against the CA file and the URL's host.
    Verified(MakeRustlsConnect),
}

/// The connection settings of a URL and how to reach the server.
pub(crate) struct Target {
    pub(crate) config: Config,
    pub(crate) transport: Transport,
}

/// The TLS parameters taken out of a database URL (the driver does not know them), and the
/// URL without them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsParams {
    /// The URL as the driver parses it.
    pub(crate) url: String,
    /// `sslrootcert` when `sslmode=verify-full`; `None` in clear.
    pub(crate) root: Option<PathBuf>,
}

/// Splits the TLS parameters off `url` (the URL form, `postgres://...?sslmode=...`, or the
/// key=value form, `host=... sslmode=...`).
pub(crate) fn split(url: &str) -> Result<TlsParams, OpenError> {
    let (rest, pairs): (String, Vec<(String, String)>) =
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let (head, query) = url.split_once('?').unwrap_or((url, ""));
            let mut kept = Vec::new();
            let mut taken = Vec::new();
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                if matches!(k, "sslmode" | "sslrootcert") {
                    taken.push((k.to_string(), percent_decode(v)?));
                } else {
                    kept.push(pair);
                }
            }
            let rest = if kept.is_empty() {
                head.to_string()
            } else {
                format!("{head}?{}", kept.join("&"))
            };
            (rest, taken)
        } else {
            let mut kept = Vec::new();
            let mut taken = Vec::new();
            for word in url.split_whitespace() {
                match word.split_once('=') {
                    Some((k, v)) if matches!(k, "sslmode" | "sslrootcert") => {
                        taken.push((k.to_string(), v.trim_matches('\'').to_string()));
                    }
                    _ => kept.push(word),
                }
            }
            (kept.join(" "), taken)
        };
    let get = |name: &str| {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let root = get("sslrootcert");
    match get("sslmode").as_deref() {
        None | Some("disable") | Some("prefer") => {
            if root.is_some() {
                return Err(OpenError::Url(
                    "sslrootcert is given without sslmode=verify-full: add sslmode=verify-full \
                     (or remove sslrootcert)"
                        .into(),
                ));
            }
            Ok(TlsParams {
                url: rest,
                root: None,
            })
        }
        Some("verify-full") => match root {
            Some(root) if !root.is_empty() => Ok(TlsParams {
                url: rest,
                root: Some(PathBuf::from(root)),
            }),
            _ => Err(OpenError::Url(
                "sslmode=verify-full needs sslrootcert=<the CA certificate file (PEM) that \
                 signed the database server's certificate>"
                    .into(),
            )),
        },
        Some(other @ ("require" | "verify-ca" | "allow")) => Err(OpenError::Url(format!(
            "sslmode={other} accepts a database server it has not identified: use \
             sslmode=verify-full with sslrootcert=<CA file>"
        ))),
        Some(other) => Err(OpenError::Url(format!(
            "sslmode={other} is not a mode (disable or verify-full)"
        ))),
    }
}

/// `%XX` escapes decoded (a CA file path in a URL query).
fn percent_decode(s: &str) -> Result<String, OpenError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| OpenError::Url(format!("a bad %-escape in {s:?}")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| OpenError::Url(format!("{s:?} is not UTF-8")))
}

/// The transport of `root`: a rustls client trusting only the certificates in that PEM file.
pub(crate) fn transport(root: Option<&Path>) -> Result<Transport, OpenError> {
    let Some(root) = root else {
        return Ok(Transport::Plain);
    };
    let bad = |e: String| OpenError::Url(format!("sslrootcert {}: {e}", root.display()));
    let pem = std::fs::read(root).map_err(|e| bad(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    let mut n = 0;
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        let cert = cert.map_err(|e| bad(e.to_string()))?;
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
        n += 1;
    }
    if n == 0 {
        return Err(bad("no certificate in it (PEM expected)".into()));
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| bad(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Transport::Verified(MakeRustlsConnect::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_come_off_the_url() {
        let p = split("postgres://u@db:5432/p?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem")
            .unwrap();
        assert_eq!(p.url, "postgres://u@db:5432/p");
        assert_eq!(p.root.as_deref(), Some(Path::new("/etc/ca.pem")));
        let p = split("postgres://u@db/p?application_name=x&sslmode=verify-full&sslrootcert=/c&options=-c%20a%3Db")
            .unwrap();
        assert_eq!(
            p.url,
            "postgres://u@db/p?application_name=x&options=-c%20a%3Db"
        );
        assert_eq!(p.root.as_deref(), Some(Path::new("/c")));
        let p = split("host=db user=u sslmode=verify-full sslrootcert=/c").unwrap();
        assert_eq!(p.url, "host=db user=u");
        assert_eq!(p.root.as_deref(), Some(Path::new("/c")));
        for plain in [
            "postgres://u@db/p",
            "postgres://u@db/p?sslmode=disable",
            "postgres://u@db/p?sslmode=prefer",
        ] {
            let p = split(plain).unwrap();
            assert_eq!(p.root, None, "{plain}");
            assert_eq!(p.url, "postgres://u@db/p");
        }
    }

    #[test]
    fn modes_that_do_not_identify_the_server_are_refused() {
        for (url, says) in [
            ("postgres://db/p?sslmode=require", "sslmode=verify-full"),
            (
                "postgres://db/p?sslmode=verify-ca&sslrootcert=/c",
                "not identified",
            ),
            ("postgres://db/p?sslmode=verify-full", "needs sslrootcert"),
            (
                "postgres://db/p?sslrootcert=/c",
                "without sslmode=verify-full",
            ),
            ("postgres://db/p?sslmode=nope", "not a mode"),
            (
                "postgres://db/p?sslmode=verify-full&sslrootcert=%zz",
                "%-escape",
            ),
        ] {
            let e = split(url).unwrap_err().to_string();
            assert!(e.contains(says), "{url}: {e}");
        }
        let e = transport(Some(Path::new("/nonexistent/ca.pem")))
            .err()
            .expect("a missing file is refused")
            .to_string();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    }
}
