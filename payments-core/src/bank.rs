//! The bank catalog and bank-code resolution.
//!
//! [`BankCatalog`] holds the public catalog of `GET /api/v1/banks` (shipped as
//! `data/banks.json` and embedded at build time), lists it, resolves a create request's
//! `bank_code` by the spec's "Bank code resolution" rules, and recognises the bank a requisite
//! provider names. Names are compared after [`fold`]ing case, so `сбербанк` finds `Сбербанк`.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The catalog file, embedded so that the core reads no file at run time.
const EMBEDDED_JSON: &str = include_str!("../data/banks.json");

/// How many characters of a client's value an error message repeats.
const ECHO_LIMIT: usize = 64;

/// A two-letter country code (`geo_code`, a bank's `country`): two ASCII letters, stored in
/// upper case. Parsing accepts either case.
///
/// Serializes as the upper-case string (`"RU"`); deserializes by [`CountryCode::parse`].
/// `Debug` shows the letters: `CountryCode(RU)`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountryCode([u8; 2]);

impl CountryCode {
    /// The default `geo_code` of a create request.
    pub const RU: CountryCode = CountryCode(*b"RU");

    /// Parses two ASCII letters in either case; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.as_bytes() {
            [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => Some(CountryCode([
                a.to_ascii_uppercase(),
                b.to_ascii_uppercase(),
            ])),
            _ => None,
        }
    }

    /// The code in upper case.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("constructed only from ASCII letters")
    }
}

impl fmt::Debug for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CountryCode({})", self.as_str())
    }
}

impl fmt::Display for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CountryCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CountryCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        CountryCode::parse(&raw).ok_or_else(|| {
            serde::de::Error::invalid_value(
                serde::de::Unexpected::Str(&raw),
                &"two Latin letters (a country code)",
            )
        })
    }
}

/// Why a create's `bank_code` names no bank: `422 bank_not_found`, the error's text as the
/// message (the name as the request sent it, quoted and cut).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BankNotFound {
    /// An empty or whitespace-only name.
    #[error("bank_code is empty; omit it to accept any bank")]
    Empty,
    /// A name the catalog does not have.
    #[error("bank_code {0} is not a bank of the catalog (see GET /api/v1/banks)")]
    Unknown(String),
    /// A name of banks of several countries, none of them `geo_code`.
    #[error("bank_code {name} is ambiguous: present in {}; none is geo_code {geo_code}", countries.join(", "))]
    Ambiguous {
        /// The name, quoted as the message shows it.
        name: String,
        /// The countries that have a bank of that name.
        countries: Vec<String>,
        /// The payment's country.
        geo_code: CountryCode,
    },
}

/// Parses the `geo_code` query parameter of `GET /api/v1/banks`.
///
/// The value must be exactly two Latin letters; lower case is accepted and upper-cased
/// (`ru` keeps RU), surrounding whitespace is not trimmed. Anything else (`R`, `RUS`, `1A`,
/// the empty string, `Ру`) is `400 invalid_geo_code`. A well-formed code of a country the
/// catalog does not cover is not an error: its listing is empty.
pub fn parse_geo_query(raw: &str) -> Result<CountryCode, InvalidGeoCode> {
    CountryCode::parse(raw).ok_or_else(|| {
        InvalidGeoCode(format!(
            "geo_code must be two Latin letters, got {}",
            echo(raw)
        ))
    })
}

/// A `geo_code` query parameter that is not two Latin letters (`400 invalid_geo_code`); the
/// message echoes the value, escaped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidGeoCode(String);

/// One catalog entry: an institution of one country, by the name its customers know.
///
/// Serializes as the Bank item of `GET /api/v1/banks`: `{"name": "...", "country": "RU"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Bank {
    name: String,
    country: CountryCode,
}

impl Bank {
    /// The catalog name: the exact value accepted in `bank_code` and written to `bank_code` and
    /// `requisite_bank` of a payment. Non-empty, without surrounding whitespace.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The institution's country.
    pub fn country(&self) -> CountryCode {
        self.country
    }
}

/// Why a catalog file was rejected by [`BankCatalog::from_json`]. `index` is the entry's
/// position (from 0) in the file's array.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The file is not a JSON array of `{"name", "country"}` objects of strings.
    #[error("bank catalog is not a JSON array of {{\"name\", \"country\"}} objects: {0}")]
    Json(#[from] serde_json::Error),
    /// A `country` that is not exactly two upper-case ASCII letters.
    #[error("bank catalog entry {index}: country {country:?} is not two upper-case ASCII letters")]
    InvalidCountry {
        /// Position of the entry.
        index: usize,
        /// The value found.
        country: String,
    },
    /// A `name` that is empty or only whitespace.
    #[error("bank catalog entry {index}: name is empty")]
    EmptyName {
        /// Position of the entry.
        index: usize,
    },
    /// A `name` with leading or trailing whitespace (requests are trimmed, so it could never be
    /// named exactly).
    #[error("bank catalog entry {index}: name {name:?} has surrounding whitespace")]
    UntrimmedName {
        /// Position of the entry.
        index: usize,
        /// The value found.
        name: String,
    },
    /// Two entries of one country whose names are equal after case folding.
    #[error(
        "bank catalog entry {index}: {name:?} duplicates entry {first_index} {first_name:?} \
         in {country} (names are compared ignoring case)"
    )]
    Duplicate {
        /// Position of the later entry.
        index: usize,
        /// The later entry's name.
        name: String,
        /// Position of the earlier entry.
        first_index: usize,
        /// The earlier entry's name.
        first_name: String,
        /// Their country.
        country: CountryCode,
    },
}

/// An entry of the catalog file, before validation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBank {
    name: String,
    country: String,
}

/// The bank catalog: the list behind `GET /api/v1/banks` and the index behind `bank_code`
/// resolution.
///
/// Entries are kept in listing order: by country code (ASCII), then by [`fold`]ed name
/// (code-point order). Names of one country never fold alike (the catalog rejects that), so the
/// order is total and does not depend on the file's order.
///
/// Build it once ([`BankCatalog::embedded`]) and share it; lookups do not allocate beyond
/// folding the requested name.
#[derive(Debug, Clone)]
pub struct BankCatalog {
    /// In listing order.
    banks: Vec<Bank>,
    /// Folded name -> positions in `banks`, ascending, hence ordered by country.
    by_name: HashMap<String, Vec<usize>>,
}

/// What a name lookup found.
enum Lookup<'a> {
    /// The entry to use.
    Found(&'a Bank),
    /// No entry of any country has the name.
    Unknown,
    /// Several countries have the name and none is the one asked for (positions in `banks`).
    Ambiguous(&'a [usize]),
}

impl BankCatalog {
    /// The catalog shipped with the crate (`data/banks.json`, see `data/README.md`).
    pub fn embedded() -> BankCatalog {
        BankCatalog::from_json(EMBEDDED_JSON).expect(
            "data/banks.json is a valid catalog: the test embedded_catalog_is_valid_and_complete \
             parses it",
        )
    }

    /// Parses and validates a catalog file: a JSON array of `{"name": "...", "country": "XX"}`.
    ///
    /// Rejects a country that is not exactly two upper-case ASCII letters, a name that is empty
    /// or has surrounding whitespace, and two names of one country that are equal after
    /// [`fold`]ing case. The same name in different countries is allowed.
    pub fn from_json(json: &str) -> Result<Self, CatalogError> {
        let raw: Vec<RawBank> = serde_json::from_str(json)?;
        let mut banks = Vec::with_capacity(raw.len());
        // (country, folded name) -> file position; every accepted entry is pushed, so a file
        // position is also the entry's position in `banks` until the sort below.
        let mut seen: HashMap<(CountryCode, String), usize> = HashMap::new();
        for (index, entry) in raw.into_iter().enumerate() {
            let country = match entry.country.as_bytes() {
                [a, b] if a.is_ascii_uppercase() && b.is_ascii_uppercase() => CountryCode([*a, *b]),
                _ => {
                    return Err(CatalogError::InvalidCountry {
                        index,
                        country: entry.country,
                    })
                }
            };
            if entry.name.trim().is_empty() {
                return Err(CatalogError::EmptyName { index });
            }
            if entry.name.trim() != entry.name {
                return Err(CatalogError::UntrimmedName {
                    index,
                    name: entry.name,
                });
            }
            let key = (country, fold(&entry.name));
            if let Some(&first_index) = seen.get(&key) {
                let first: &Bank = &banks[first_index];
                return Err(CatalogError::Duplicate {
                    index,
                    name: entry.name,
                    first_index,
                    first_name: first.name.clone(),
                    country,
                });
            }
            seen.insert(key, index);
            banks.push(Bank {
                name: entry.name,
                country,
            });
        }

        let mut keyed: Vec<(String, Bank)> =
            banks.into_iter().map(|b| (fold(&b.name), b)).collect();
        keyed.sort_by(|(fa, a), (fb, b)| (a.country, fa).cmp(&(b.country, fb)));
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        let mut banks = Vec::with_capacity(keyed.len());
        for (position, (folded, bank)) in keyed.into_iter().enumerate() {
            by_name.entry(folded).or_default().push(position);
            banks.push(bank);
        }
        Ok(BankCatalog { banks, by_name })
    }

    /// Resolves a create request's `bank_code` by the spec's "Bank code resolution" rules.
    ///
    /// Surrounding whitespace is trimmed and case is ignored ([`fold`]). The entry of the
    /// `geo_code` country wins; otherwise a name that only one country has is accepted
    /// (cross-border). An unknown name, or a name of several countries none of which is
    /// `geo_code`, is `422 bank_not_found`, and the message says which of the two it was.
    ///
    /// An empty or whitespace-only `bank_code` means "any bank": the caller treats it as absent
    /// and does not call this; if it does, the answer is `bank_not_found`.
    pub fn resolve(&self, bank_code: &str, geo_code: CountryCode) -> Result<&Bank, BankNotFound> {
        let name = bank_code.trim();
        if name.is_empty() {
            return Err(BankNotFound::Empty);
        }
        match self.lookup(name, geo_code) {
            Lookup::Found(bank) => Ok(bank),
            Lookup::Unknown => Err(BankNotFound::Unknown(echo(name))),
            Lookup::Ambiguous(positions) => Err(BankNotFound::Ambiguous {
                name: echo(name),
                countries: positions
                    .iter()
                    .map(|&p| self.banks[p].country.as_str().to_string())
                    .collect(),
                geo_code,
            }),
        }
    }

    /// Recognises the bank a requisite provider names: the catalog entry, if the name (trimmed,
    /// case ignored) is that of an entry of `country`, or of exactly one entry anywhere.
    ///
    /// `None` means "not recognised": the payment's `requisite_bank` then carries the
    /// provider's own name. A name of several other countries is not recognised, since the
    /// country would be a guess.
    pub fn recognise(&self, provider_name: &str, country: CountryCode) -> Option<&Bank> {
        match self.lookup(provider_name.trim(), country) {
            Lookup::Found(bank) => Some(bank),
            Lookup::Unknown | Lookup::Ambiguous(_) => None,
        }
    }

    /// The catalog in listing order (country code, then folded name), all of it or one
    /// country's entries. A country without entries gives an empty list.
    pub fn list(&self, geo_code: Option<CountryCode>) -> Vec<&Bank> {
        match geo_code {
            None => self.banks.iter().collect(),
            Some(country) => {
                // `banks` is sorted by country, so one country's entries are one run.
                let start = self.banks.partition_point(|b| b.country < country);
                let end = self.banks.partition_point(|b| b.country <= country);
                self.banks[start..end].iter().collect()
            }
        }
    }

    /// The countries that have at least one entry, in ASCII order.
    pub fn countries(&self) -> Vec<CountryCode> {
        let mut countries: Vec<CountryCode> = self.banks.iter().map(|b| b.country).collect();
        countries.dedup();
        countries
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.banks.len()
    }

    /// Whether the catalog has no entries.
    pub fn is_empty(&self) -> bool {
        self.banks.is_empty()
    }

    fn lookup(&self, name: &str, country: CountryCode) -> Lookup<'_> {
        let Some(positions) = self.by_name.get(&fold(name)) else {
            return Lookup::Unknown;
        };
        if let Some(&p) = positions
            .iter()
            .find(|&&p| self.banks[p].country == country)
        {
            return Lookup::Found(&self.banks[p]);
        }
        match positions.as_slice() {
            [only] => Lookup::Found(&self.banks[*only]),
            several => Lookup::Ambiguous(several),
        }
    }
}

/// The case folding under which bank names are compared: Unicode lower case
/// ([`str::to_lowercase`], so Cyrillic, Greek and Latin with diacritics fold correctly), with
/// the Turkish I folded to plain `i`: dotless `ı` becomes `i`, and the combining dot that `İ`
/// lower-cases to is dropped. Without that, `IS BANKASI`, `iş bankası` and `İş Bankası` would
/// be three different names.
pub fn fold(name: &str) -> String {
    let mut folded = String::with_capacity(name.len());
    for c in name.chars().flat_map(char::to_lowercase) {
        match c {
            'ı' => folded.push('i'),
            '\u{307}' if folded.ends_with('i') => {}
            c => folded.push(c),
        }
    }
    folded
}

/// A client's value quoted for an error message, cut to [`ECHO_LIMIT`] characters.
fn echo(value: &str) -> String {
    let mut chars = value.chars();
    let head: String = chars.by_ref().take(ECHO_LIMIT).collect();
    if chars.next().is_some() {
        format!("{head:?}...")
    } else {
        format!("{head:?}")
    }
}

#[cfg(test)]
mod tests;
