//! Duplicate names in a structured-field Dictionary (RFC 9651). The parser keeps the last of
//! duplicate member names and of duplicate parameter names in one scope, silently; a header
//! that names a member or a parameter twice is ambiguous (which one did the sender mean, which
//! one did an intermediary check?), so the service refuses it. [`find_duplicate`] walks the
//! raw field with `sfv`'s visitor API and reports the first duplicate.

use std::convert::Infallible;
use std::fmt;

use sfv::visitor::{
    DictionaryVisitor, EntryVisitor, InnerListVisitor, ItemVisitor, ParameterVisitor,
};
use sfv::{BareItemFromInput, KeyRef};

/// A name given twice in one scope of a Dictionary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Duplicate {
    /// A member name (`a=1, a=2`).
    Member(String),
    /// A parameter name of one member, of its inner list or of an item of its inner list
    /// (`a=1;p=1;p=2`, `a=(x y);p=1;p=2`).
    Parameter {
        /// The member the parameter belongs to.
        member: String,
        /// The parameter name.
        parameter: String,
    },
}

impl fmt::Display for Duplicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Duplicate::Member(m) => write!(f, "member \"{m}\" appears twice"),
            Duplicate::Parameter { member, parameter } => {
                write!(
                    f,
                    "parameter \"{parameter}\" appears twice in member \"{member}\""
                )
            }
        }
    }
}

/// The first duplicate member or parameter name of the Dictionary `value`; `Ok(None)` if every
/// name is unique in its scope. A value that is not a Dictionary is the parser's error.
pub(crate) fn find_duplicate(value: &str) -> Result<Option<Duplicate>, sfv::Error> {
    sfv::Parser::new(value).parse_dictionary_with_visitor(Members {
        seen: Vec::new(),
        found: None,
    })
}

/// Records `found` unless an earlier duplicate was found already.
fn note(found: &mut Option<Duplicate>, duplicate: Duplicate) {
    found.get_or_insert(duplicate);
}

struct Members<'de> {
    seen: Vec<&'de str>,
    found: Option<Duplicate>,
}

impl<'de> DictionaryVisitor<'de> for Members<'de> {
    type Out = Option<Duplicate>;
    type Error = Infallible;

    fn entry(&mut self, key: &'de KeyRef) -> Result<impl EntryVisitor<'de>, Self::Error> {
        let name = key.as_str();
        if self.seen.contains(&name) {
            note(&mut self.found, Duplicate::Member(name.to_owned()));
        }
        self.seen.push(name);
        Ok(Entry {
            member: name,
            found: &mut self.found,
        })
    }

    fn finish(self) -> Result<Self::Out, Self::Error> {
        Ok(self.found)
    }
}

/// One member's value: an item or an inner list.
struct Entry<'a, 'de> {
    member: &'de str,
    found: &'a mut Option<Duplicate>,
}

impl<'de> EntryVisitor<'de> for Entry<'_, 'de> {
    type Error = Infallible;

    fn item(self) -> Result<impl ItemVisitor<'de>, Self::Error> {
        Ok(Item {
            member: self.member,
            found: self.found,
        })
    }

    fn inner_list(self) -> Result<impl InnerListVisitor<'de>, Self::Error> {
        Ok(Entry {
            member: self.member,
            found: self.found,
        })
    }
}

impl<'de> InnerListVisitor<'de> for Entry<'_, 'de> {
    type Error = Infallible;

    fn item(&mut self) -> Result<impl ItemVisitor<'de>, Self::Error> {
        Ok(Item {
            member: self.member,
            found: &mut *self.found,
        })
    }

    fn finish(self) -> Result<impl ParameterVisitor<'de>, Self::Error> {
        Ok(Params {
            member: self.member,
            seen: Vec::new(),
            found: self.found,
        })
    }
}

/// An item (a member's value or an element of its inner list), whose parameters follow.
struct Item<'a, 'de> {
    member: &'de str,
    found: &'a mut Option<Duplicate>,
}

impl<'de> ItemVisitor<'de> for Item<'_, 'de> {
    type Out = ();
    type Error = Infallible;

    fn bare_item(
        self,
        _: BareItemFromInput<'de>,
    ) -> Result<impl ParameterVisitor<'de, Out = ()>, Self::Error> {
        Ok(Params {
            member: self.member,
            seen: Vec::new(),
            found: self.found,
        })
    }
}

/// The parameters of one scope.
struct Params<'a, 'de> {
    member: &'de str,
    seen: Vec<&'de str>,
    found: &'a mut Option<Duplicate>,
}

impl<'de> ParameterVisitor<'de> for Params<'_, 'de> {
    type Out = ();
    type Error = Infallible;

    fn parameter(
        &mut self,
        key: &'de KeyRef,
        _: BareItemFromInput<'de>,
    ) -> Result<(), Self::Error> {
        let name = key.as_str();
        if self.seen.contains(&name) {
            note(
                self.found,
                Duplicate::Parameter {
                    member: self.member.to_owned(),
                    parameter: name.to_owned(),
                },
            );
        }
        self.seen.push(name);
        Ok(())
    }

    fn finish(self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dup(value: &str) -> Option<Duplicate> {
        find_duplicate(value).expect("a valid dictionary")
    }

    #[test]
    fn finds_duplicate_members_and_parameters_in_every_scope() {
        assert_eq!(dup("a=1, b=2;p=1, c=(x;p=1 y;p=2);p=3"), None);
        assert_eq!(
            dup("sha-256=:AAAA:, sha-256=:BBBB:"),
            Some(Duplicate::Member("sha-256".into()))
        );
        assert_eq!(
            dup("a=1;p=1;q=2;p=3"),
            Some(Duplicate::Parameter {
                member: "a".into(),
                parameter: "p".into()
            })
        );
        assert_eq!(
            dup(r#"sig1=("@method");created=1;keyid="a";created=2"#),
            Some(Duplicate::Parameter {
                member: "sig1".into(),
                parameter: "created".into()
            })
        );
        assert_eq!(
            dup(r#"sig1=("@method";sf;sf)"#),
            Some(Duplicate::Parameter {
                member: "sig1".into(),
                parameter: "sf".into()
            })
        );
        // The same parameter name in different scopes is no duplicate.
        assert_eq!(dup("a=(x;p y;p);p, b;p"), None);
        // The first duplicate is reported.
        assert_eq!(dup("a=1, a=2;p;p"), Some(Duplicate::Member("a".into())));
        assert!(find_duplicate("a=(").is_err());
    }
}
