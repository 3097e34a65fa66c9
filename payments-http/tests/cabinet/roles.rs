//! Who may use what in the cabinet: each page and form a merchant's user reaches and what it
//! needs, and which team role holds what, written out apart from the cabinet's own table so
//! that a change there fails the tests. Shared with payments-server's browser tests, which
//! include this file.

#![allow(dead_code)]

use payments_cabinet::store::TeamRole;

/// What a page or form needs, as the table below names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Payments,
    Integration,
    Resend,
    TestOutcomes,
    Appeals,
    Money,
    Audit,
    Team,
}

/// Whether `role` holds `need`: the table the cabinet guide shows, written out again here
/// so that a change of the cabinet's table fails this test.
pub fn holds(role: TeamRole, need: Need) -> bool {
    use TeamRole::*;
    match need {
        Need::Payments => true,
        Need::Integration | Need::TestOutcomes => matches!(role, Owner | Admin | Developer),
        Need::Resend => matches!(role, Owner | Admin | Developer | SupportAgent),
        Need::Appeals => matches!(role, Owner | Admin | SupportAgent),
        Need::Money => matches!(role, Owner | Admin | Finance),
        Need::Audit | Need::Team => matches!(role, Owner | Admin),
    }
}

/// Every page and form of the cabinet a merchant's user reaches through a project, a payment
/// or the team: method, path (`{p}` the project, `{pay}` a test payment, `{m}` a member,
/// `{x}` an id nothing has) and what it needs.
pub const ROUTES: &[(&str, &str, Need)] = &[
    ("GET", "/", Need::Payments),
    ("GET", "/projects", Need::Payments),
    ("GET", "/payments/search?q=team-1", Need::Payments),
    ("GET", "/projects/{p}", Need::Integration),
    ("POST", "/projects/{p}/tokens", Need::Integration),
    ("GET", "/projects/{p}/tokens/{x}/revoke", Need::Integration),
    ("POST", "/projects/{p}/tokens/{x}/revoke", Need::Integration),
    ("POST", "/projects/{p}/keys", Need::Integration),
    ("GET", "/projects/{p}/keys/nokey/revoke", Need::Integration),
    ("POST", "/projects/{p}/keys/nokey/revoke", Need::Integration),
    ("POST", "/projects/{p}/allow-list", Need::Integration),
    ("POST", "/projects/{p}/callback-url", Need::Integration),
    ("GET", "/projects/{p}/payer-page", Need::Integration),
    ("GET", "/projects/{p}/callback-secret", Need::Integration),
    ("GET", "/projects/{p}/requests", Need::Integration),
    ("GET", "/projects/{p}/payments", Need::Payments),
    ("GET", "/projects/{p}/payments.csv", Need::Money),
    ("GET", "/projects/{p}/balance", Need::Money),
    ("GET", "/projects/{p}/balance/entries.csv", Need::Money),
    ("GET", "/projects/{p}/deliveries", Need::Payments),
    ("GET", "/projects/{p}/deliveries/recover", Need::Resend),
    ("POST", "/projects/{p}/deliveries/recover", Need::Resend),
    ("GET", "/projects/{p}/events/{x}", Need::Payments),
    ("GET", "/projects/{p}/events/{x}/resend", Need::Resend),
    ("POST", "/projects/{p}/events/{x}/resend", Need::Resend),
    ("GET", "/payments/{pay}", Need::Payments),
    ("GET", "/payments/{pay}/resend", Need::Resend),
    ("POST", "/payments/{pay}/resend", Need::Resend),
    ("POST", "/payments/{pay}/appeals", Need::Appeals),
    ("GET", "/audit", Need::Audit),
    ("GET", "/team", Need::Team),
    ("POST", "/team", Need::Team),
    ("GET", "/team/{m}", Need::Team),
    ("POST", "/team/{m}", Need::Team),
    ("GET", "/team/{m}/remove", Need::Team),
    // Last: the test outcome closes the payment for the roles after the first that may.
    ("POST", "/payments/{pay}/test/paid", Need::TestOutcomes),
];
