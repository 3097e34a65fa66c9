//! Reading the `Signature-Input` and `Signature` structured fields (RFC 9651 via `sfv`) and
//! the signature parameters the service interprets.

use super::{HttpRequestParts, SignatureFailure};

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

/// Counts Dictionary member names to find duplicates, which `sfv::Dictionary` would merge
/// silently (RFC 9651 keeps the last).
struct LabelCollector(Vec<String>);

impl<'de> sfv::visitor::DictionaryVisitor<'de> for LabelCollector {
    type Out = Vec<String>;
    type Error = std::convert::Infallible;

    fn entry(
        &mut self,
        key: &'de sfv::KeyRef,
    ) -> Result<impl sfv::visitor::EntryVisitor<'de>, Self::Error> {
        self.0.push(key.as_str().to_owned());
        Ok(sfv::visitor::Ignored)
    }

    fn finish(self) -> Result<Self::Out, Self::Error> {
        Ok(self.0)
    }
}

/// Parses a Dictionary header, refusing duplicate member names.
pub(super) fn parse_dictionary(
    value: &str,
    malformed: fn(String) -> SignatureFailure,
) -> Result<sfv::Dictionary, SignatureFailure> {
    let labels = sfv::Parser::new(value)
        .parse_dictionary_with_visitor(LabelCollector(Vec::new()))
        .map_err(|e| malformed(e.to_string()))?;
    for (i, label) in labels.iter().enumerate() {
        if labels[..i].contains(label) {
            return Err(SignatureFailure::DuplicateLabel(label.clone()));
        }
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
