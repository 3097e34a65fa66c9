//! The check every [`RateLimiter`] passes.

use super::*;
use crate::project::RateLimit;
use crate::ratelimit::{Gcra, Grant, RateDecision, RateLimiter};

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
/// burst; [`RateLimiter::acquire_many`] decides a batch as that many requests in a row would.
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

    // Batches: the first ones of a batch pass while the burst lasts, the rest wait one
    // interval; a batch past the burst changes nothing.
    let d = project_id(4);
    assert_eq!(
        handles[0]
            .acquire_many(d, rule, T0, 4)
            .await
            .expect("acquire_many"),
        Grant {
            allowed: 3,
            retry_after: Some(Duration::from_millis(500))
        }
    );
    assert_eq!(
        handles[1 % n]
            .acquire_many(d, rule, T0 + ms(100), 2)
            .await
            .expect("acquire_many"),
        Grant {
            allowed: 0,
            retry_after: Some(Duration::from_millis(400))
        }
    );
    assert_eq!(
        handles[2 % n]
            .acquire_many(d, rule, T0 + ms(1000), 2)
            .await
            .expect("acquire_many"),
        Grant {
            allowed: 2,
            retry_after: None
        }
    );
    assert!(!allowed(handles[0], d, rule, T0 + ms(1000)).await);
    // Concurrent batches through every handle share one burst.
    let e = project_id(5);
    let grants = join_all((0..8).map(|i| handles[i % n].acquire_many(e, burst, T0, 3))).await;
    let passed: u32 = grants
        .into_iter()
        .map(|g| g.expect("acquire_many").allowed)
        .sum();
    assert_eq!(
        passed, 5,
        "a burst of 5 lets 5 of 8 concurrent batches of 3 through"
    );
}
