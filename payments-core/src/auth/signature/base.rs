//! The signature base of RFC 9421 section 2.5: covered component identifiers, their values in a
//! request, and the base string itself.

use sfv::FieldType as _;

use super::{HttpRequestParts, SignatureFailure};

/// A derived component of RFC 9421 section 2.2 that this implementation computes for requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Derived {
    /// `@method`, section 2.2.1.
    Method,
    /// `@target-uri`, section 2.2.2.
    TargetUri,
    /// `@authority`, section 2.2.3.
    Authority,
    /// `@scheme`, section 2.2.4.
    Scheme,
    /// `@request-target`, section 2.2.5.
    RequestTarget,
    /// `@path`, section 2.2.6.
    Path,
    /// `@query`, section 2.2.7.
    Query,
}

impl Derived {
    fn from_name(name: &str) -> Option<Derived> {
        Some(match name {
            "@method" => Derived::Method,
            "@target-uri" => Derived::TargetUri,
            "@authority" => Derived::Authority,
            "@scheme" => Derived::Scheme,
            "@request-target" => Derived::RequestTarget,
            "@path" => Derived::Path,
            "@query" => Derived::Query,
            _ => return None,
        })
    }
}

/// What a covered component refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ComponentKind {
    /// A derived component (`@...`).
    Derived(Derived),
    /// An HTTP field, by its lower-case name.
    Field,
}

/// One entry of the covered components list.
///
/// <https://www.rfc-editor.org/rfc/rfc9421#section-2>
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Component {
    /// The component name, e.g. `@method` or `content-digest`.
    pub(crate) name: String,
    pub(crate) kind: ComponentKind,
}

impl Component {
    /// Interprets one item of a covered-components inner list.
    ///
    /// Component parameters (`sf`, `key`, `bs`, `req`, `tr`, `name`, RFC 9421 section 2.1 and
    /// 2.2.8) change the value that is signed; none is supported, so any parameter is an error
    /// rather than something silently ignored.
    pub(crate) fn from_item(item: &sfv::Item) -> Result<Component, SignatureFailure> {
        let Some(name) = item.bare_item.as_string() else {
            return Err(SignatureFailure::InvalidComponentIdentifier(
                item.serialize(),
            ));
        };
        let name = name.as_str();
        if let Some((param, _)) = item.params.first() {
            return Err(SignatureFailure::UnsupportedComponentParameter {
                component: name.to_owned(),
                parameter: param.as_str().to_owned(),
            });
        }
        Component::from_name(name)
    }

    /// Interprets a bare component name such as `@path` or `x-request-id`.
    pub(crate) fn from_name(name: &str) -> Result<Component, SignatureFailure> {
        if name.starts_with('@') {
            return match Derived::from_name(name) {
                Some(d) => Ok(Component {
                    name: name.to_owned(),
                    kind: ComponentKind::Derived(d),
                }),
                None => Err(SignatureFailure::UnsupportedDerivedComponent(
                    name.to_owned(),
                )),
            };
        }
        // RFC 9421 section 2.1: field names are lower-cased tokens (RFC 9110 section 5.1).
        let is_tchar =
            |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err(SignatureFailure::InvalidComponentIdentifier(format!(
                "\"{name}\""
            )));
        }
        Ok(Component {
            name: name.to_owned(),
            kind: ComponentKind::Field,
        })
    }

    /// Appends the component's line to the signature base without its newline: the
    /// identifier (the serialised sf-string), `": "` and the value in `parts` (RFC 9421
    /// sections 2.1, 2.2 and 2.5).
    fn write_line(
        &self,
        parts: &HttpRequestParts<'_>,
        base: &mut String,
    ) -> Result<(), SignatureFailure> {
        // Names were checked to be tokens or known derived names: valid sf-string content.
        base.push('"');
        base.push_str(&self.name);
        base.push_str("\": ");
        let start = base.len();
        match self.kind {
            ComponentKind::Field => {
                if !parts.write_field_value(&self.name, base)? {
                    return Err(SignatureFailure::MissingHeader(self.name.clone()));
                }
                return Ok(());
            }
            ComponentKind::Derived(d) => match d {
                Derived::Method => base.push_str(parts.method),
                Derived::TargetUri => {
                    base.push_str(&parts.scheme.to_ascii_lowercase());
                    base.push_str("://");
                    base.push_str(&parts.normalized_authority());
                    base.push_str(parts.request_target());
                }
                Derived::Authority => base.push_str(&parts.normalized_authority()),
                Derived::Scheme => base.push_str(&parts.scheme.to_ascii_lowercase()),
                Derived::RequestTarget => base.push_str(parts.request_target()),
                Derived::Path => base.push_str(parts.path()),
                Derived::Query => {
                    base.push('?');
                    base.push_str(parts.query().unwrap_or(""));
                }
            },
        }
        check_derived(self, &base[start..])
    }
}

/// Checks that a derived value can go into the base (visible ASCII and spaces, no newline).
fn check_derived(component: &Component, value: &str) -> Result<(), SignatureFailure> {
    if value.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        Ok(())
    } else {
        Err(SignatureFailure::InvalidComponentValue(
            component.name.clone(),
        ))
    }
}

/// The serialised `@signature-params` value: the inner list with its parameters, in the order
/// received (RFC 9421 section 2.3). `sfv`'s serialisation is canonical, which is also what the
/// signer signed per section 2.3 ("serialization of the signature parameters").
pub(crate) fn serialize_signature_params(params: &sfv::InnerList) -> String {
    let mut out = String::new();
    write_signature_params(params, &mut out);
    out
}

/// Appends [`serialize_signature_params`] of `params` to `out` (no copy of the list).
fn write_signature_params(params: &sfv::InnerList, out: &mut String) {
    let mut list = sfv::ListSerializer::with_buffer(out);
    let mut inner = list.inner_list();
    inner.items(&params.items);
    let _ = inner.finish().parameters(&params.params);
}

/// Builds the signature base: one line per covered component, then `@signature-params`; LF
/// between lines, none at the end.
///
/// <https://www.rfc-editor.org/rfc/rfc9421#section-2.5>
pub(crate) fn signature_base(
    parts: &HttpRequestParts<'_>,
    components: &[Component],
    signature_params: &str,
) -> Result<String, SignatureFailure> {
    let mut base = component_lines(parts, components, signature_params.len())?;
    base.push_str(signature_params);
    Ok(base)
}

/// [`signature_base`] with the `@signature-params` value serialised from the parsed inner
/// list straight into the base.
pub(crate) fn signature_base_of(
    parts: &HttpRequestParts<'_>,
    components: &[Component],
    signature_params: &sfv::InnerList,
) -> Result<String, SignatureFailure> {
    let mut base = component_lines(parts, components, 160)?;
    write_signature_params(signature_params, &mut base);
    Ok(base)
}

/// The lines of the covered components and the start of the `@signature-params` line, in a
/// string with room for `params_len` more bytes.
fn component_lines(
    parts: &HttpRequestParts<'_>,
    components: &[Component],
    params_len: usize,
) -> Result<String, SignatureFailure> {
    let mut base = String::with_capacity(64 * components.len() + 24 + params_len);
    for component in components {
        component.write_line(parts, &mut base)?;
        base.push('\n');
    }
    base.push_str("\"@signature-params\": ");
    Ok(base)
}

/// Parses the covered components of a Signature-Input member; duplicates are an error
/// (RFC 9421 section 2.5 step 1: each component identifier appears once).
pub(crate) fn parse_components(list: &sfv::InnerList) -> Result<Vec<Component>, SignatureFailure> {
    let mut components: Vec<Component> = Vec::with_capacity(list.items.len());
    for item in &list.items {
        let component = Component::from_item(item)?;
        if components.iter().any(|c| c.name == component.name) {
            return Err(SignatureFailure::DuplicateComponent(component.name));
        }
        components.push(component);
    }
    Ok(components)
}
