//! Checks of the request log ([`crate::store::RequestLogStore`]): every field kept, pages
//! newest first by `(at, id)` with their filters, at most `keep` per project, and the purge by
//! age.

use super::*;
use crate::request_log::{RequestLogEntry, RequestLogQuery, SignatureDiagnosis, StatusFilter};
use crate::store::Purged;
use crate::testing::matching::Matches;

/// A logged request of `project` at `at` answered `status` (a `4xx` or `5xx` with a code).
pub fn sample_request(project: ProjectId, at: Timestamp, status: u16) -> RequestLogEntry {
    RequestLogEntry {
        id: 0,
        project_id: project,
        at,
        method: "POST".into(),
        path: "/api/v1/payments".into(),
        status,
        error_code: match status {
            401 => Some("signature_invalid".into()),
            409 => Some("request_replayed".into()),
            s if s >= 400 => Some("bad_request".into()),
            _ => None,
        },
        // Not ASCII, and as long as the log keeps: every byte comes back.
        message: (status >= 400).then(|| {
            let m = format!("refused with {status}: «{}»", "ё".repeat(200));
            crate::request_log::bounded_message(&m)
        }),
        request_id: format!("req-{}-{status}", at.unix_millis()),
        latency_us: 1_234,
        source: "203.0.113.7".into(),
        merchant_payment_id: Some("order-1".into()),
        payment_id: None,
        clock_skew_ms: Some(-1_500),
        diagnosis: (status == 401).then(|| SignatureDiagnosis {
            reason: "signature does not verify".into(),
            hint: Some("compare the bases".into()),
            covered: vec!["@method".into(), "@path".into()],
            signature_base: Some(
                "\"@method\": POST\n\"@path\": /api/v1/payments\n\
                 \"@signature-params\": (\"@method\" \"@path\");created=1"
                    .into(),
            ),
            keyid: Some("ed25519-other-project".into()),
            code: Some(("missing_header".into(), vec!["content-digest".into()])),
        }),
    }
}

fn ids(page: &[RequestLogEntry]) -> Vec<String> {
    page.iter().map(|e| e.request_id.clone()).collect()
}

async fn page<S: Store>(store: &S, q: &RequestLogQuery) -> Vec<RequestLogEntry> {
    store.find_requests(q).await.expect("find_requests")
}

/// Every field comes back as written; a page is newest first by `(at, id)` (two requests at
/// one millisecond in the order they were written), continues from its cursor and never shows
/// another project's requests.
pub async fn request_log_round_trip_and_order<S: Store>(store: &S) {
    let (p, other) = (project_id(1), project_id(2));
    let mut read = sample_request(p, T0 + ms(5), 200);
    read.method = "GET".into();
    read.path = format!("/api/v1/payments/{}", payment_id(9));
    read.payment_id = Some(payment_id(9));
    read.merchant_payment_id = None;
    read.clock_skew_ms = None;
    read.request_id = "same-ms-first".into();
    let mut second = sample_request(p, T0 + ms(5), 401);
    second.request_id = "same-ms-second".into();
    let older = sample_request(p, T0 + ms(1), 409);
    let newest = sample_request(p, T0 + ms(9), 201);
    store
        .insert_requests(&[read.clone(), second.clone(), older.clone()], 100)
        .await
        .expect("append");
    store
        .insert_requests(
            &[newest.clone(), sample_request(other, T0 + ms(7), 500)],
            100,
        )
        .await
        .expect("append");

    let all = page(store, &RequestLogQuery::new(p, 10)).await;
    assert_eq!(
        ids(&all),
        [
            newest.request_id.as_str(),
            "same-ms-second",
            "same-ms-first",
            older.request_id.as_str()
        ],
        "newest first by (at, id)"
    );
    let unstored = |e: &RequestLogEntry| RequestLogEntry { id: 0, ..e.clone() };
    assert_eq!(
        unstored(&all[1]),
        second,
        "every field of a 401 with its diagnosis"
    );
    assert_eq!(unstored(&all[2]), read, "every field of a read");
    assert!(all.iter().all(|e| e.id > 0), "stored entries have ids");
    assert!(all[1].id > all[2].id, "ids in the order written");

    // Pages of two from the cursor.
    let first = page(store, &RequestLogQuery::new(p, 2)).await;
    assert_eq!(ids(&first), ids(&all[..2]));
    let last = &first[1];
    let next = page(
        store,
        &RequestLogQuery {
            before: Some((last.at, last.id)),
            ..RequestLogQuery::new(p, 2)
        },
    )
    .await;
    assert_eq!(ids(&next), ids(&all[2..]));
    assert_eq!(
        page(store, &RequestLogQuery::new(project_id(3), 10)).await,
        []
    );
}

/// The filters: a status class, one status, an error code, a time from which; together.
pub async fn request_log_filters<S: Store>(store: &S) {
    let p = project_id(1);
    let log: Vec<_> = [(1, 201), (2, 401), (3, 409), (4, 422), (5, 503), (6, 401)]
        .into_iter()
        .map(|(t, s)| sample_request(p, T0 + ms(t), s))
        .collect();
    store.insert_requests(&log, 100).await.expect("append");
    let statuses = |page: Vec<RequestLogEntry>| page.iter().map(|e| e.status).collect::<Vec<_>>();
    let q = |f: &dyn Fn(&mut RequestLogQuery)| {
        let mut q = RequestLogQuery::new(p, 10);
        f(&mut q);
        q
    };
    assert_eq!(
        statuses(page(store, &q(&|q| q.status = Some(StatusFilter::Class(4)))).await),
        [401, 422, 409, 401]
    );
    assert_eq!(
        statuses(page(store, &q(&|q| q.status = Some(StatusFilter::Exactly(401)))).await),
        [401, 401]
    );
    assert_eq!(
        statuses(
            page(
                store,
                &q(&|q| q.error_code = Some("request_replayed".into()))
            )
            .await
        ),
        [409]
    );
    assert_eq!(
        statuses(page(store, &q(&|q| q.since = Some(T0 + ms(4)))).await),
        [401, 503, 422]
    );
    assert_eq!(
        statuses(
            page(
                store,
                &q(&|q| {
                    q.status = Some(StatusFilter::Class(4));
                    q.error_code = Some("signature_invalid".into());
                    q.since = Some(T0 + ms(3));
                })
            )
            .await
        ),
        [401]
    );
    // Every filter is the query's own rule ([`RequestLogQuery::matches`]).
    let every = page(store, &RequestLogQuery::new(p, 10)).await;
    let filtered = q(&|q| q.status = Some(StatusFilter::Class(5)));
    assert_eq!(
        page(store, &filtered).await,
        every
            .into_iter()
            .filter(|e| filtered.matches(e))
            .collect::<Vec<_>>()
    );
}

/// A write keeps at most `keep` requests of each project it touched, the newest by
/// `(at, id)`; another project's are left alone.
pub async fn request_log_keeps_the_newest<S: Store>(store: &S) {
    let (p, other) = (project_id(1), project_id(2));
    let theirs: Vec<_> = (0..4)
        .map(|t| sample_request(other, T0 + ms(t), 200))
        .collect();
    store.insert_requests(&theirs, 100).await.expect("append");
    // Written out of time order: the newest by time are kept, not the last written.
    let mine: Vec<_> = [5, 1, 4, 2, 3]
        .into_iter()
        .map(|t| sample_request(p, T0 + ms(t), 200))
        .collect();
    store.insert_requests(&mine, 3).await.expect("append");
    let kept: Vec<_> = page(store, &RequestLogQuery::new(p, 10))
        .await
        .iter()
        .map(|e| e.at)
        .collect();
    assert_eq!(kept, [T0 + ms(5), T0 + ms(4), T0 + ms(3)]);
    // Batch by batch too.
    for t in 6..9 {
        store
            .insert_requests(&[sample_request(p, T0 + ms(t), 200)], 3)
            .await
            .expect("append");
    }
    let kept: Vec<_> = page(store, &RequestLogQuery::new(p, 10))
        .await
        .iter()
        .map(|e| e.at)
        .collect();
    assert_eq!(kept, [T0 + ms(8), T0 + ms(7), T0 + ms(6)]);
    assert_eq!(
        page(store, &RequestLogQuery::new(other, 10)).await.len(),
        4,
        "another project's log is its own"
    );
    store.insert_requests(&[], 3).await.expect("an empty batch");
}

/// The purge deletes requests older than its time, of every project, at most `limit` a batch,
/// and says whether there may be more. (Each request is its own write here: a store may keep a
/// write's requests of a project together until the newest of them is old.)
pub async fn request_log_purge_by_age<S: Store>(store: &S) {
    let (p, other) = (project_id(1), project_id(2));
    for t in 0..5 {
        let project = if t % 2 == 0 { p } else { other };
        store
            .insert_requests(&[sample_request(project, T0 + ms(t * 10), 200)], 100)
            .await
            .expect("append");
    }
    let first = store.purge_requests(T0 + ms(35), 2).await.expect("purge");
    assert_eq!((first.deleted, first.more), (2, true));
    let rest = store.purge_requests(T0 + ms(35), 10).await.expect("purge");
    assert_eq!((rest.deleted, rest.more), (2, false));
    let left: Vec<_> = [p, other]
        .into_iter()
        .map(|project| async move { page(store, &RequestLogQuery::new(project, 10)).await })
        .collect();
    let left: Vec<Timestamp> = join_all(left)
        .await
        .into_iter()
        .flatten()
        .map(|e| e.at)
        .collect();
    assert_eq!(
        left,
        [T0 + ms(40)],
        "only the request at or after the time is left"
    );
    assert_eq!(
        store.purge_requests(T0 + ms(35), 10).await.expect("purge"),
        Purged::default()
    );
}

/// Requests as an older schema's request log held them, row by row in this order, for the
/// engines' upgrade tests ([`old_request_log_reads_back`]): two projects, and two requests of
/// one project in one millisecond.
pub fn old_request_log() -> Vec<RequestLogEntry> {
    let p = project_id(1);
    let mut read = sample_request(p, T0 + ms(5), 200);
    read.method = "GET".into();
    read.path = format!("/api/v1/payments/{}", payment_id(9));
    read.payment_id = Some(payment_id(9));
    vec![
        sample_request(p, T0 + ms(5), 401),
        sample_request(project_id(2), T0 + ms(7), 500),
        read,
        sample_request(p, T0 + ms(1), 409),
    ]
}

/// After an upgrade from a database holding [`old_request_log`]: every field of every request
/// reads back, each project's newest first by `(at, then the old order)`.
pub async fn old_request_log_reads_back<S: Store + ?Sized>(store: &S) {
    let old = old_request_log();
    let unstored = |e: &RequestLogEntry| RequestLogEntry { id: 0, ..e.clone() };
    let read = |project| async move {
        let page = store
            .find_requests(&RequestLogQuery::new(project, 10))
            .await
            .expect("find_requests");
        page.iter().map(unstored).collect::<Vec<_>>()
    };
    assert_eq!(
        read(project_id(1)).await,
        [old[2].clone(), old[0].clone(), old[3].clone()]
    );
    assert_eq!(read(project_id(2)).await, [old[1].clone()]);
}
