//! The ledger's inputs from outside: a merchant's query string of
//! `GET /api/v1/balance/entries` and `/balance/statement`, and an operator's payout or
//! adjustment (amount, USDT address, transaction hash).
//!
//! Input: `query 0xFF amount 0xFF address 0xFF reference`, each UTF-8.
//!
//! Properties:
//! - nothing panics;
//! - an amount that parses writes itself with exactly 4 decimals, and that text parses to the
//!   same amount; the positive and non-zero readings agree with the plain one;
//! - an address or a reference that parses is canonical: its text parses to itself (an
//!   Ethereum address and a hash in lower case, a hash without `0x`, 64 digits);
//! - a list query that parses has a limit from 1 to 100, and its cursor's text reads back as
//!   the same cursor; a statement period that parses is non-empty and at most 367 days.

use payments_core::ledger::{TxReference, Usdt, UsdtAddress, UsdtNetwork};
use payments_core::service::{EntryCursor, MAX_STATEMENT_DAYS};

/// Runs the target on the fuzzer's bytes `data`; panics when a property does not hold (see the
/// module's documentation).
pub fn check(data: &[u8]) {
    let [query, amount, address, reference] = crate::split::<4>(data);
    if let Ok(query) = std::str::from_utf8(query) {
        if let Ok(q) = payments_http::query::entry_list(query) {
            assert!((1..=100).contains(&q.limit), "limit {}", q.limit);
            if let Some(c) = q.cursor {
                assert_eq!(
                    EntryCursor::parse(&c.to_string()),
                    Some(c),
                    "cursor round trip"
                );
            }
        }
        if let Ok((from, to)) = payments_http::query::period(query) {
            assert!(from < to, "an empty period");
            assert!(to.duration_since(from).as_secs() <= MAX_STATEMENT_DAYS * 86_400);
        }
    }
    if let Ok(amount) = std::str::from_utf8(amount) {
        let plain = Usdt::parse(amount);
        if let Ok(u) = plain {
            let text = u.to_string();
            let (_, decimals) = text.split_once('.').expect("a dot");
            assert_eq!(decimals.len(), 4, "{text}");
            assert_eq!(Usdt::parse(&text), Ok(u), "{amount:?} -> {text}");
        }
        assert_eq!(
            Usdt::parse_positive(amount).ok(),
            plain.ok().filter(|u| u.units() > 0)
        );
        assert_eq!(
            Usdt::parse_nonzero(amount).ok(),
            plain.ok().filter(|u| u.units() != 0)
        );
    }
    if let Ok(address) = std::str::from_utf8(address) {
        if let Ok(a) = UsdtAddress::parse(address) {
            assert_eq!(UsdtAddress::parse(a.as_str()).as_ref(), Ok(&a), "canonical");
            match a.network() {
                UsdtNetwork::Tron => assert!(a.as_str().starts_with('T') && a.as_str().len() == 34),
                UsdtNetwork::Ethereum => {
                    assert_eq!(a.as_str(), a.as_str().to_ascii_lowercase());
                    assert_eq!(a.as_str().len(), 42);
                }
            }
        }
    }
    if let Ok(reference) = std::str::from_utf8(reference) {
        if let Ok(r) = TxReference::parse(reference) {
            assert_eq!(r.as_str().len(), 64);
            assert_eq!(r.as_str(), r.as_str().to_ascii_lowercase());
            assert_eq!(TxReference::parse(r.as_str()).as_ref(), Ok(&r), "canonical");
        }
    }
}
