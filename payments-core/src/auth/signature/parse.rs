//! Reading the `Signature-Input` and `Signature` structured fields (RFC 9651 via `sfv`) and
//! the signature parameters the service interprets.

use super::{HttpRequestParts, SignatureFailure};
use crate::auth::sf::Duplicate;

/// Signature parameters of RFC 9421 section 2.3 that the service interprets.
#[derive(Default)]
pub(super) struct Params {
    pub(super) created: Option<i64>,
    pub(super) expires: Option<i64>,
    pub(super) keyid: Option<String>,
    pub(super) alg: Option<String>,
    pub(super) nonce: Option<String>,
}

impl Params {
    pub(super) fn parse(params: &sfv::Parameters) -> Result<Params, SignatureFailure> {
        let integer = |key: &'static str| -> Result<Option<i64>, SignatureFailure> {
            params
                .get(key)
                .map(|v| {
                    v.as_integer()
                        .map(i64::from)
                        .ok_or(SignatureFailure::InvalidParameter(key))
                })
                .transpose()
        };
        let string = |key: &'static str| -> Result<Option<String>, SignatureFailure> {
            params
                .get(key)
                .map(|v| {
                    v.as_string()
                        .map(|s| s.as_str().to_owned())
                        .ok_or(SignatureFailure::InvalidParameter(key))
                })
                .transpose()
        };
        // `tag` and unknown parameters stay in the base but carry no meaning here.
        Ok(Params {
            created: integer("created")?,
            expires: integer("expires")?,
            keyid: string("keyid")?,
            alg: string("alg")?,
            nonce: string("nonce")?,
        })
    }
}

/// Parses a Dictionary header, refusing duplicate member names (labels) and duplicate
/// parameter names in one scope (`created` twice, ...), which `sfv::Dictionary` would merge
/// silently (RFC 9651 keeps the last).
pub(super) fn parse_dictionary(
    value: &str,
    malformed: fn(String) -> SignatureFailure,
) -> Result<sfv::Dictionary, SignatureFailure> {
    match crate::auth::sf::find_duplicate(value).map_err(|e| malformed(e.to_string()))? {
        Some(Duplicate::Member(label)) => return Err(SignatureFailure::DuplicateLabel(label)),
        Some(Duplicate::Parameter { member, parameter }) => {
            return Err(SignatureFailure::DuplicateParameter {
                label: member,
                parameter,
            })
        }
        None => {}
    }
    sfv::Parser::new(value)
        .parse()
        .map_err(|e: sfv::Error| malformed(e.to_string()))
}

/// A header that must be structured: non-ASCII content is reported as malformed.
pub(super) fn structured_field(
    parts: &HttpRequestParts<'_>,
    name: &str,
    malformed: fn(String) -> SignatureFailure,
) -> Result<Option<String>, SignatureFailure> {
    parts
        .field_value(name)
        .map_err(|_| malformed("contains characters other than visible ASCII".to_owned()))
}
