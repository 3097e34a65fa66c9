//! The core's store contract suite against PostgreSQL: the same suite the memory and SQLite
//! stores pass (the cabinet's part included), then its races over three stores with separate pools on one database (three
//! nodes), and the rate-limit check over three nodes' limiters (bare, and coalescing as the
//! server runs them).

mod support;

use std::sync::Arc;

use payments_core::testing::contract;
use payments_http::coalescing::CoalescingRateLimiter;
use payments_store_postgres::{PgRateLimiter, PgStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn postgres_meets_the_store_contract() {
    let base = support::database_url();
    contract::run_all_async(|| support::fresh_store(&base)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn postgres_meets_the_cabinet_store_contract() {
    let base = support::database_url();
    payments_cabinet::testing::contract::run_cabinet_async(|| support::fresh_store(&base)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn three_nodes_on_one_database_meet_the_shared_checks() {
    let base = support::database_url();
    contract::run_shared_async(|| support::fresh_nodes(&base, 3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn three_nodes_share_one_rate_limit() {
    let base = support::database_url();
    let nodes: Vec<PgStore> = support::fresh_nodes(&base, 3).await;
    let limiters: Vec<PgRateLimiter> = nodes.iter().map(PgStore::rate_limiter).collect();
    let refs: Vec<&PgRateLimiter> = limiters.iter().collect();
    contract::rate_limiter(&refs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn three_nodes_share_one_rate_limit_through_coalescing_limiters() {
    let base = support::database_url();
    let nodes: Vec<PgStore> = support::fresh_nodes(&base, 3).await;
    // As the server runs it: each node coalesces its own requests of a project.
    let limiters: Vec<CoalescingRateLimiter> = nodes
        .iter()
        .map(|node| CoalescingRateLimiter::new(Arc::new(node.rate_limiter())))
        .collect();
    let refs: Vec<&CoalescingRateLimiter> = limiters.iter().collect();
    contract::rate_limiter(&refs).await;
}
