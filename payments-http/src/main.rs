//! `payments-server`: see `payments-server --help`.
fn main() {}
