//! The check every [`RateLimiter`] passes.

use super::*;
use crate::project::RateLimit;
use crate::ratelimit::{Gcra, RateDecision, RateLimiter};

async fn allowed<L: RateLimiter + ?Sized>(
    l: &L,
    project: ProjectId,
    rule: Gcra,
    at: Timestamp,
) -> bool {
    match l.acquire(project, rule, at).await.expect("acquire") {
        RateDecision::Allowed => true,
        RateDecision::Limited { .. } => false,
    }
}

/// A limiter, through each of `handles` (one limiter several times, or several nodes' limiters
/// on one database; fresh state), applies [`Gcra`]: the burst at once, then one request per
/// emission interval, with the wait until the next one; projects are independent; a changed
/// limit counts from the next request; concurrent requests through every handle get exactly the
/// burst.
pub async fn rate_limiter<L: RateLimiter + ?Sized>(handles: &[&L]) {
    let n = handles.len();
    let rule = Gcra::new(RateLimit {
        per_second: 2,
        burst: 3,
    });
    let (a, b, c) = (project_id(1), project_id(2), project_id(3));
    for i in 0..3 {
        assert!(
            allowed(handles[i % n], a, rule, T0).await,
            "request {i} of the burst"
        );
    }
    assert_eq!(
        handles[0].acquire(a, rule, T0).await.expect("acquire"),
        RateDecision::Limited {
            retry_after: Duration::from_millis(500)
        },
        "over the burst, the wait is one emission interval"
    );
    assert_eq!(
        handles[1 % n]
            .acquire(a, rule, T0 + ms(200))
            .await
            .expect("acquire"),
        RateDecision::Limited {
            retry_after: Duration::from_millis(300)
        }
    );
    assert!(allowed(handles[2 % n], a, rule, T0 + ms(500)).await);
    assert!(!allowed(handles[0], a, rule, T0 + ms(500)).await);

    // Another project has its own allowance.
    for i in 0..3 {
        assert!(allowed(handles[i % n], b, rule, T0 + ms(500)).await);
    }
    assert!(!allowed(handles[0], b, rule, T0 + ms(500)).await);

    // A larger burst applies to the next request of the same project.
    let wider = Gcra::new(RateLimit {
        per_second: 2,
        burst: 10,
    });
    assert!(allowed(handles[1 % n], a, wider, T0 + ms(500)).await);

    // Concurrent requests through every handle: exactly the burst passes.
    let burst = Gcra::new(RateLimit {
        per_second: 1,
        burst: 5,
    });
    let results = join_all((0..24).map(|i| handles[i % n].acquire(c, burst, T0))).await;
    let passed = results
        .into_iter()
        .map(|r| r.expect("acquire"))
        .filter(|d| *d == RateDecision::Allowed)
        .count();
    assert_eq!(
        passed, 5,
        "a burst of 5 lets 5 of 24 concurrent requests through"
    );
}
