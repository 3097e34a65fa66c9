//! The per-project budget of list reads: a project running as many list reads as it may waits
//! for a place up to the budget's wait, then is refused `429 rate_limited`; another project is
//! not counted against it; the long poll's re-read skips a turn instead of waiting.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_executor::block_on;
use payments_core::service::{EventListQuery, PaymentListQuery};
use payments_core::ErrorCode;

use crate::common::{merchant, project, Harness};

/// Pending once (waking itself at once), then ready: lets the other side of a `join` run.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[test]
fn a_project_over_its_list_budget_waits_then_is_refused_and_others_list_on() {
    let h = Harness::new(7);
    let m = merchant(1, None);
    let (a, b) = (project(1, &m, false, None), project(2, &m, false, None));
    h.add(&m, &a);
    h.add(&m, &b);
    let all = PaymentListQuery::default();

    let first = h.service.scan_place_now(a.id).expect("a first place");
    let second = h.service.scan_place_now(a.id).expect("a second place");
    assert!(
        h.service.scan_place_now(a.id).is_none(),
        "two at once by default"
    );
    assert_eq!(h.service.scanning_projects(), 1);

    // A third list of A waits (on the service's clock) and is refused once a second passed.
    let (refused, ()) = block_on(async {
        futures_util::future::join(h.service.payments().list_payments(&a, &all), async {
            for _ in 0..200 {
                h.advance(Duration::from_millis(10));
                YieldOnce(false).await;
            }
        })
        .await
    });
    let e = refused.expect_err("no place came");
    assert_eq!(e.code, ErrorCode::RateLimited, "{e:?}");
    assert_eq!(e.retry_after, Some(1));
    // B's lists are not counted against A's.
    block_on(h.service.payments().list_payments(&b, &all)).expect("B lists");
    let q = EventListQuery::default();
    block_on(h.service.callbacks().list_events(&b, &q)).expect("B lists its events");
    // A long poll's re-read of A finds no place and skips its turn; it does not fail.
    assert_eq!(
        block_on(h.service.callbacks().recheck_events(&a, &q)),
        Ok(None)
    );

    drop(first);
    block_on(h.service.payments().list_payments(&a, &all)).expect("a place given back is free");
    assert!(block_on(h.service.callbacks().recheck_events(&a, &q))
        .expect("a re-read")
        .is_some());
    drop(second);
    assert_eq!(
        h.service.scanning_projects(),
        0,
        "idle projects are forgotten"
    );
}
