//! SQLite store for payments-core (see the crate README).
