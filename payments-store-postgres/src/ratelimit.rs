//! The global per-project rate limit: the core's GCRA rule on one row per project.

use async_trait::async_trait;
use payments_core::ratelimit::{Gcra, RateDecision, RateLimiter};
use payments_core::store::StoreError;
use payments_core::{ProjectId, Timestamp};

use crate::codec::{query_opt, Cols};
use crate::PgStore;

/// A [`RateLimiter`] shared by every node on the database: the project's theoretical arrival
/// time lives in the UNLOGGED table `rate_limits` and one statement applies [`Gcra::decide`]
/// to it atomically (the row lock orders concurrent requests of one project). It runs in its
/// own autocommit statement, never inside a create's transaction, so a project's creates do
/// not queue behind its bucket row, and an UNLOGGED table's commit waits for no flush.
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

#[async_trait]
impl RateLimiter for PgRateLimiter {
    async fn acquire(
        &self,
        project: ProjectId,
        rule: Gcra,
        now: Timestamp,
    ) -> Result<RateDecision, StoreError> {
        let client = self.store.client().await?;
        let pid = project.to_string();
        let now_us = Gcra::micros(now);
        // The same rule as Gcra::decide, in SQL: a new project starts at `now`; a request
        // passes when max(tat, now) - now <= tolerance and then moves the TAT one interval on.
        let passed = query_opt(
            &client,
            "INSERT INTO rate_limits AS r (project_id, tat) VALUES ($1, $2::bigint + $3::bigint) \
             ON CONFLICT (project_id) DO UPDATE SET tat = GREATEST(r.tat, $2) + $3 \
             WHERE GREATEST(r.tat, $2) - $2 <= $4::bigint \
             RETURNING tat",
            &[&pid, &now_us, &rule.emission_us, &rule.tolerance_us],
        )
        .await?;
        if passed.is_some() {
            return Ok(RateDecision::Allowed);
        }
        let stored = query_opt(
            &client,
            "SELECT tat FROM rate_limits WHERE project_id = $1",
            &[&pid],
        )
        .await?
        .map(|row| Cols::new(&row).int("tat"))
        .transpose()?;
        Ok(match rule.decide(stored, now_us).0 {
            // The row moved on between the two statements (its TAT fell behind `now` in
            // between): refused all the same, for one interval.
            RateDecision::Allowed => RateDecision::Limited {
                retry_after: std::time::Duration::from_micros(
                    u64::try_from(rule.emission_us).unwrap_or(1),
                ),
            },
            limited => limited,
        })
    }
}
