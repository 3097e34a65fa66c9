//! The agreement between `docs/openapi.yaml` and the server.
//!
//! 1. Routes (`routes`): every `(method, path)` of the merchant router
//!    ([`merchant::route_list`], which the router is built from) is an operation of the file,
//!    and every operation of the file is routed; the sandbox-only operations are exactly
//!    [`merchant::SANDBOX_ROUTES`].
//! 2. Error codes (`error_codes`): the file's `ErrorCode` enum is [`ErrorCode::ALL`], and every
//!    error response of every operation lists only codes whose HTTP status is that response's
//!    status.
//! 3. Examples (`examples`) in the file validate against their own schemas.
//! 4. Real responses (`responses`) of the real server (127.0.0.1:0, fresh data dir) validate
//!    against the schema the file gives for their `(path, method, status)`, and carry the
//!    response headers the file marks as required.
//! 5. The operator API (`operator`): every route of the operator router
//!    ([`operator::route_list`], which the router is built from) is an operation of
//!    `docs/operator-openapi.yaml` and the reverse; the operations without a token are exactly
//!    [`operator::PUBLIC_ROUTES`]; every reference resolves and every schema compiles; real
//!    operator answers validate against the file.
//!
//! [`operator::route_list`]: payments_http::operator::route_list
//! [`operator::PUBLIC_ROUTES`]: payments_http::operator::PUBLIC_ROUTES

mod error_codes;
mod examples;
mod operator;
mod responses;
mod routes;
mod support;
