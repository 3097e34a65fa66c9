//! The state machine against the spec's "States and transitions" table, rules 1-4 and the
//! Events section: one test per table row, every illegal trigger, and a property test over
//! random trigger sequences with an independent model of the table.

#[path = "../common/mod.rs"]
mod common;

mod property;
mod rules;
mod support;
mod table;
