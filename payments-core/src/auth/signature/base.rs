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

    /// The component identifier as it appears in the signature base: the serialised sf-string.
    fn identifier(&self) -> String {
        // Names were checked to be tokens or known derived names: valid sf-string content.
        format!("\"{}\"", self.name)
    }

    /// The component value in `parts`, RFC 9421 sections 2.1 and 2.2.
    fn value(&self, parts: &HttpRequestParts<'_>) -> Result<String, SignatureFailure> {
        match self.kind {
            ComponentKind::Field => parts
                .field_value(&self.name)?
                .ok_or_else(|| SignatureFailure::MissingHeader(self.name.clone())),
            ComponentKind::Derived(d) => Ok(match d {
                Derived::Method => parts.method.to_owned(),
                Derived::TargetUri => format!(
                    "{}://{}{}",
                    parts.scheme.to_ascii_lowercase(),
                    parts.normalized_authority(),
                    parts.request_target()
                ),
                Derived::Authority => parts.normalized_authority(),
                Derived::Scheme => parts.scheme.to_ascii_lowercase(),
                Derived::RequestTarget => parts.request_target().to_owned(),
                Derived::Path => parts.path().to_owned(),
                Derived::Query => format!("?{}", parts.query().unwrap_or("")),
            }),
        }
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
    let list: sfv::List = vec![sfv::ListEntry::InnerList(params.clone())];
    list.serialize()
        .expect("a list with one member always serialises to a non-empty string")
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
    let mut base = String::new();
    for component in components {
        let value = component.value(parts)?;
        if matches!(component.kind, ComponentKind::Derived(_)) {
            check_derived(component, &value)?;
        }
        base.push_str(&component.identifier());
        base.push_str(": ");
        base.push_str(&value);
        base.push('\n');
    }
    base.push_str("\"@signature-params\": ");
    base.push_str(signature_params);
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
