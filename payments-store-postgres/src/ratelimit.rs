//! The global per-project rate limit: the core's GCRA rule on one row per project.

use async_trait::async_trait;
use payments_core::ratelimit::{Gcra, Grant, RateDecision, RateLimiter};
use payments_core::store::StoreError;
use payments_core::{ProjectId, Timestamp};

use crate::codec::{execute, query_opt, read};
use crate::PgStore;

/// A [`RateLimiter`] shared by every node on the database: the project's theoretical arrival
/// time lives in the UNLOGGED table `rate_limits` and one statement applies
/// [`Gcra::decide_many`] to it atomically (the row lock orders concurrent statements of one
/// project). It runs in its own autocommit statement, never inside a create's transaction, so
/// a project's creates do not queue behind its bucket row, and an UNLOGGED table's commit
/// waits for no flush. The server puts a
/// `payments_http::coalescing::CoalescingRateLimiter` in front of it,
/// so that a node's concurrent requests of one project share one statement.
#[derive(Debug, Clone)]
pub struct PgRateLimiter {
    store: PgStore,
}

impl PgRateLimiter {
    /// The limiter over `store`'s pool.
    pub fn new(store: PgStore) -> Self {
        PgRateLimiter { store }
    }
}

/// Applies [`Gcra::decide_many`] to the project's row in one statement: the row is locked
/// (`FOR UPDATE` waits for a concurrent update and then reads its result), the same rule in
/// SQL moves the TAT by the requests that pass, and the statement returns the TAT it started
/// from and how many passed. No row yet: returns nothing (the caller inserts one).
const ACQUIRE_MANY: &str = "\
WITH cur AS (\
    SELECT project_id, GREATEST(tat, $2::bigint) AS t0 FROM rate_limits \
    WHERE project_id = $1 FOR UPDATE\
), decided AS (\
    SELECT project_id, t0, CASE WHEN t0 - $2::bigint <= $4::bigint \
        THEN LEAST($5::bigint, ($4::bigint - (t0 - $2::bigint)) / $3::bigint + 1) \
        ELSE 0 END AS allowed FROM cur\
), moved AS (\
    UPDATE rate_limits r SET tat = d.t0 + d.allowed * $3::bigint FROM decided d \
    WHERE r.project_id = d.project_id AND d.allowed > 0 RETURNING r.tat\
) SELECT t0, allowed FROM decided";

#[async_trait]
impl RateLimiter for PgRateLimiter {
    async fn acquire(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
    ) -> Result<RateDecision, StoreError> {
        self.acquire_many(project, rule, now, 1)
            .await
            .map(|grant| grant.decision(0))
    }

    async fn acquire_many(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
        n: u32,
    ) -> Result<Grant, StoreError> {
        let client = self.store.client().await?;
        let pid = project.to_string();
        let now_us = Gcra::micros(now);
        let n_sql = i64::from(n);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [&pid, &now_us, &rule.emission_us, &rule.tolerance_us, &n_sql];
        let mut row = query_opt(&client, ACQUIRE_MANY, &params).await?;
        if row.is_none() {
            // The project's first request: a row at `now` is the same as no state (the rule
            // takes max(tat, now)); a concurrent first request may have made it already.
            execute(
                &client,
                "INSERT INTO rate_limits (project_id, tat) VALUES ($1, $2) \
                 ON CONFLICT (project_id) DO NOTHING",
                &[&pid, &now_us],
            )
            .await?;
            row = query_opt(&client, ACQUIRE_MANY, &params).await?;
        }
        let row = row.ok_or_else(|| {
            payments_core::store::UnavailableCause::Other
                .error("the rate-limit row vanished while it was read")
        })?;
        let (t0, allowed) = read(&row, |c| Ok((c.int("t0")?, c.int("allowed")?)))?;
        let (grant, _) = rule.decide_many(Some(t0), now_us, n);
        if i64::from(grant.allowed) != allowed {
            return Err(StoreError::Corrupt(format!(
                "the rate-limit statement let {allowed} of {n} requests pass where the rule lets {}",
                grant.allowed
            )));
        }
        Ok(grant)
    }
}
