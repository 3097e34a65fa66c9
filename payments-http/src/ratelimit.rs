//! Per-project request rate limits: one token bucket (governor's GCRA, lock-free) per project,
//! rebuilt when the project's limit setting changes. The table is read-locked on the hot path
//! (requests of known projects share the lock); only a new project or a changed limit writes.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, PoisonError, RwLock};

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use payments_core::project::{Project, RateLimit};
use payments_core::{ApiError, ErrorCode, ProjectId};

/// The limiters of all projects seen.
#[derive(Debug, Default)]
pub struct ProjectLimiters {
    buckets: RwLock<HashMap<ProjectId, (RateLimit, Arc<DefaultDirectRateLimiter>)>>,
}

impl ProjectLimiters {
    /// Takes one request from the project's bucket: `429 rate_limited` with `Retry-After` when
    /// it is empty.
    pub fn check(&self, project: &Project) -> Result<(), ApiError> {
        let known = self
            .buckets
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&project.id)
            .filter(|(limit, _)| *limit == project.rate_limit)
            .map(|(_, bucket)| bucket.clone());
        let limiter = match known {
            Some(bucket) => bucket,
            None => {
                let mut buckets = self.buckets.write().unwrap_or_else(PoisonError::into_inner);
                let entry = buckets
                    .entry(project.id)
                    .or_insert_with(|| (project.rate_limit, limiter(project.rate_limit)));
                if entry.0 != project.rate_limit {
                    *entry = (project.rate_limit, limiter(project.rate_limit));
                }
                entry.1.clone()
            }
        };
        limiter.check().map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            ApiError::new(
                ErrorCode::RateLimited,
                "the project's request rate limit is exceeded",
            )
            .with_retry_after(secs.max(1))
        })
    }
}

fn limiter(limit: RateLimit) -> Arc<DefaultDirectRateLimiter> {
    let per_second = NonZeroU32::new(limit.per_second).unwrap_or(NonZeroU32::MIN);
    let burst = NonZeroU32::new(limit.burst).unwrap_or(NonZeroU32::MIN);
    Arc::new(RateLimiter::direct(
        Quota::per_second(per_second).allow_burst(burst),
    ))
}
