//! The request as signatures see it: [`HttpRequestParts`], with the derived components and the
//! combined header values that go into a signature base.

use super::SignatureFailure;

/// The parts of an HTTP request that signatures cover, borrowed from the adapter's request.
///
/// `headers` are the header lines in wire order (names in any case, values as raw bytes); lines
/// with the same name are combined by the verifier. An axum adapter fills it with
/// `headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()))` (the `http` crate keeps the order
/// of lines with the same name).
#[derive(Debug, Clone, Copy)]
pub struct HttpRequestParts<'a> {
    /// The request method, e.g. `POST`, as sent (case-sensitive).
    pub method: &'a str,
    /// The scheme of the configured public base URL (`https`), not of the hop to the server.
    pub scheme: &'a str,
    /// The `Host` header (or HTTP/2 `:authority`) as received.
    pub authority: &'a str,
    /// The raw request target in origin form, percent-encoding as received: `/path?query`.
    pub path_and_query: &'a str,
    /// Header lines in wire order.
    pub headers: &'a [(&'a str, &'a [u8])],
    /// The request body, exactly as received.
    pub body: &'a [u8],
}

impl<'a> HttpRequestParts<'a> {
    /// The raw path: the request target up to `?`; `/` if empty (RFC 9421 section 2.2.6).
    pub fn path(&self) -> &'a str {
        let path = self
            .path_and_query
            .split_once('?')
            .map_or(self.path_and_query, |(p, _)| p);
        if path.is_empty() {
            "/"
        } else {
            path
        }
    }

    /// The raw query after `?`, if the target has a `?`.
    pub fn query(&self) -> Option<&'a str> {
        self.path_and_query.split_once('?').map(|(_, q)| q)
    }

    /// Whether the request has a non-empty query string (then `@query` must be covered).
    pub fn has_query(&self) -> bool {
        self.query().is_some_and(|q| !q.is_empty())
    }

    /// The request target (`@request-target`), `/` if empty.
    pub fn request_target(&self) -> &'a str {
        if self.path_and_query.is_empty() {
            "/"
        } else {
            self.path_and_query
        }
    }

    /// `@authority`: lower-cased, the scheme's default port removed (RFC 9421 section 2.2.3).
    pub fn normalized_authority(&self) -> String {
        let authority = self.authority.trim().to_ascii_lowercase();
        let default_port = match self.scheme.to_ascii_lowercase().as_str() {
            "https" => Some(":443"),
            "http" => Some(":80"),
            _ => None,
        };
        match default_port.and_then(|p| authority.strip_suffix(p)) {
            Some(stripped) => stripped.to_owned(),
            None => authority,
        }
    }

    /// The combined value of a header field: every line with that name (case-insensitive) in
    /// wire order, each trimmed of leading and trailing spaces and tabs, joined with `", "`.
    /// `None` if no line has that name. A value with bytes other than visible ASCII, space or
    /// tab is an error: it cannot be put in the signature base unambiguously.
    ///
    /// <https://www.rfc-editor.org/rfc/rfc9421#section-2.1>
    pub fn field_value(&self, name: &str) -> Result<Option<String>, SignatureFailure> {
        let mut value = String::new();
        Ok(self.write_field_value(name, &mut value)?.then_some(value))
    }

    /// Appends [`field_value`](Self::field_value) of `name` to `out`, without a `String` of its
    /// own; `false` (nothing appended) when the request has no such field.
    pub(crate) fn write_field_value(
        &self,
        name: &str,
        out: &mut String,
    ) -> Result<bool, SignatureFailure> {
        let mut found = false;
        for (_, value) in self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            if !value
                .iter()
                .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
            {
                return Err(SignatureFailure::InvalidComponentValue(name.to_owned()));
            }
            let value = std::str::from_utf8(value)
                .expect("bytes were checked to be ASCII")
                .trim_matches([' ', '\t']);
            if found {
                out.push_str(", ");
            }
            out.push_str(value);
            found = true;
        }
        Ok(found)
    }
}
