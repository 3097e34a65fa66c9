//! Text forms of domain values that are not a column type. Decoding never trusts the
//! database: anything that does not parse is [`StoreError::Corrupt`].

use payments_core::auth::Scope;
use payments_core::callback::address::AddressPolicy;
use payments_core::callback::destination::CallbackUrl;
use payments_core::ids::ProjectId;
use payments_core::payment::Currency;
use payments_core::project::{Contract, MethodTerms};
use payments_core::settlement::FeePercent;
use payments_core::store::StoreError;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// A stored value that does not decode.
pub fn corrupt(what: &str, value: impl std::fmt::Debug) -> StoreError {
    StoreError::Corrupt(format!("{what}: {value:?}"))
}

/// Scopes as space-separated wire names.
pub fn scopes_text(scopes: &[Scope]) -> String {
    scopes
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Scopes from [`scopes_text`].
pub fn parse_scopes(text: &str) -> Result<Vec<Scope>, StoreError> {
    text.split(' ')
        .filter(|s| !s.is_empty())
        .map(|name| name.parse().map_err(|_| corrupt("scope", name)))
        .collect()
}

/// Project ids as space-separated text (a cabinet user's projects).
pub fn projects_text(projects: &[ProjectId]) -> String {
    projects
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Project ids from [`projects_text`].
pub fn parse_projects(text: &str) -> Result<Vec<ProjectId>, StoreError> {
    text.split(' ')
        .filter(|s| !s.is_empty())
        .map(|id| id.parse().map_err(|_| corrupt("projects", id)))
        .collect()
}

/// Stored URLs were validated on the way in; reading back only restores the type.
pub fn parse_url(s: &str) -> Result<CallbackUrl, StoreError> {
    CallbackUrl::parse(s, AddressPolicy { allow_local: true }).map_err(|e| corrupt("url", e))
}

/// An unsigned count as an SQL integer.
pub fn uint(n: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(n).map_err(|_| corrupt(what, n))
}

/// A `LIMIT` value (saturating: a larger limit means "all").
pub fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The stored JSON of a contract; decimals as text.
#[derive(Serialize, Deserialize)]
struct ContractDoc {
    currencies: Vec<String>,
    methods: Vec<TermsDoc>,
}

#[derive(Serialize, Deserialize)]
struct TermsDoc {
    method: String,
    min_amount: Option<String>,
    max_amount: Option<String>,
    fee_percent: String,
}

/// A project's contract as stored JSON.
pub fn contract_json(c: &Contract) -> String {
    let doc = ContractDoc {
        currencies: c
            .currencies
            .iter()
            .map(|x| x.as_str().to_string())
            .collect(),
        methods: c
            .methods
            .iter()
            .map(|t| TermsDoc {
                method: t.method.as_str().to_string(),
                min_amount: t.min_amount.map(|d| d.to_string()),
                max_amount: t.max_amount.map(|d| d.to_string()),
                fee_percent: t.fee_percent.as_decimal().to_string(),
            })
            .collect(),
    };
    serde_json::to_string(&doc).expect("a struct of strings always serialises")
}

/// A contract from [`contract_json`].
pub fn parse_contract(s: &str) -> Result<Contract, StoreError> {
    let bad = |what: &str| corrupt("contract", format!("{what} in {s}"));
    let doc: ContractDoc = serde_json::from_str(s).map_err(|_| bad("invalid JSON"))?;
    let dec = |d: &str| d.parse::<Decimal>().map_err(|_| bad("a bad decimal"));
    Ok(Contract {
        currencies: doc
            .currencies
            .iter()
            .map(|c| Currency::parse(c).ok_or_else(|| bad("a bad currency")))
            .collect::<Result<_, _>>()?,
        methods: doc
            .methods
            .iter()
            .map(|t| {
                Ok(MethodTerms {
                    method: t.method.parse().map_err(|_| bad("a bad method"))?,
                    min_amount: t.min_amount.as_deref().map(dec).transpose()?,
                    max_amount: t.max_amount.as_deref().map(dec).transpose()?,
                    fee_percent: FeePercent::new(dec(&t.fee_percent)?)
                        .map_err(|_| bad("a bad fee"))?,
                })
            })
            .collect::<Result<_, StoreError>>()?,
    })
}
