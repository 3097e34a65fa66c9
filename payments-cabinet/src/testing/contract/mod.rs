//! The cabinet store's contract: the documented meaning of every method of the cabinet's ports ([`CabinetStore`]),
//! as async checks any store runs against itself (users, sessions and the sign-in step that
//! uses a TOTP step or a recovery code once, enrolment, invitations, one-time slots, sign-in
//! failures, the cabinet's audit log). [`MemoryCabinetStore`](super::MemoryCabinetStore) is the reference;
//! the SQLite and PostgreSQL stores run the same checks. What the cabinet reads through the
//! core's port (token use, the listings, payer page links) is checked by the core's suite
//! (`payments_core::testing::contract`).
//!
//! [`every_statement`] is the cabinet's part of an upgrade test: beside
//! `payments_core::testing::contract::every_statement`, on the same store.

mod audit;
mod failures;
mod sample;
mod sessions;
mod slots;
mod upgrade;
mod users;

use std::future::Future;

use payments_core::testing::contract::Check;

pub use audit::cabinet_audit_log;
pub use failures::cabinet_failures;
pub use sessions::{
    cabinet_concurrent_steps, cabinet_enrolment, cabinet_sessions, cabinet_totp_steps,
};
pub use slots::{cabinet_concurrent_slot_takes, cabinet_slot_bounds, cabinet_slots};
pub use upgrade::every_statement;
pub use users::{cabinet_invites, cabinet_recovery_codes, cabinet_users};

use crate::store::CabinetStore;

/// Every check of the suite with its name, in a stable order.
pub fn cabinet_checks<S: CabinetStore>() -> Vec<Check<S>> {
    vec![
        ("cabinet_users", |s| Box::pin(cabinet_users(s))),
        ("cabinet_sessions", |s| Box::pin(cabinet_sessions(s))),
        ("cabinet_totp_steps", |s| Box::pin(cabinet_totp_steps(s))),
        ("cabinet_concurrent_steps", |s| {
            Box::pin(cabinet_concurrent_steps(s))
        }),
        ("cabinet_recovery_codes", |s| {
            Box::pin(cabinet_recovery_codes(s))
        }),
        ("cabinet_enrolment", |s| Box::pin(cabinet_enrolment(s))),
        ("cabinet_invites", |s| Box::pin(cabinet_invites(s))),
        ("cabinet_slots", |s| Box::pin(cabinet_slots(s))),
        ("cabinet_slot_bounds", |s| Box::pin(cabinet_slot_bounds(s))),
        ("cabinet_concurrent_slot_takes", |s| {
            Box::pin(cabinet_concurrent_slot_takes(s))
        }),
        ("cabinet_failures", |s| Box::pin(cabinet_failures(s))),
        ("cabinet_audit_log", |s| Box::pin(cabinet_audit_log(s))),
    ]
}

/// Runs every check, each against a fresh store from `make`.
pub async fn run_cabinet<S: CabinetStore + 'static>(make: impl Fn() -> S) {
    run_cabinet_async(|| std::future::ready(make())).await;
}

/// [`run_cabinet`] for stores whose setup awaits.
pub async fn run_cabinet_async<S, F, Fut>(make: F)
where
    S: CabinetStore + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    for (name, check) in cabinet_checks::<S>() {
        let store = make().await;
        println!("cabinet store contract: {name}");
        check(&store).await;
    }
}
