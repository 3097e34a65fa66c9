//! `GET /api/v1/payments` over real sockets: newest first, pages that neither skip nor repeat
//! a payment while creates run beside them, each filter, strict query parameters, the scope,
//! the project's signature policy (the query string is signed) and the shared rate limit.

use payments_directory::DirectoryAccess;
use std::collections::HashSet;

use payments_core::auth::Scope;
use payments_core::project::RateLimit;
use payments_core::service::Actor;
use payments_directory::ProjectPatch;
use payments_http::testing::TestServer;
use reqwest::{Method, StatusCode};

use crate::support::body;

/// Every page of `query` (without `limit` and `cursor`), `limit` at a time: the ids in order.
async fn all_pages(c: &payments_client::MerchantClient, query: &str, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let mut q = format!("limit={limit}");
        if !query.is_empty() {
            q = format!("{query}&{q}");
        }
        if let Some(c) = &cursor {
            q = format!("{q}&cursor={c}");
        }
        let r = c.list_payments(&q).await.expect("a page");
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        let data = r.json["data"].as_array().expect("data");
        assert!(data.len() <= limit);
        ids.extend(
            data.iter()
                .map(|p| p["id"].as_str().expect("an id").to_string()),
        );
        assert_eq!(r.json["has_more"], r.json["next_cursor"].is_string());
        match r.json["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return ids,
        }
    }
    panic!("more than 100 pages");
}

fn ids_of(r: &payments_client::ApiResponse) -> Vec<String> {
    r.json["data"]
        .as_array()
        .unwrap_or_else(|| panic!("no data: {}", r.json))
        .iter()
        .map(|p| {
            p["merchant_payment_id"]
                .as_str()
                .expect("an id")
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_newest_first_neither_skip_nor_repeat_while_payments_are_created() {
    let s = TestServer::sandbox().await;
    let c = s.client();
    let mut created = Vec::new();
    for i in 0..25 {
        let mut b = body(&format!("l-{i:02}"), "100");
        if i % 5 == 0 {
            b["payment_method"] = "card_transfer".into();
        }
        let r = c.create_payment(&b).await.expect("a create");
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
        created.push(r.json["id"].as_str().expect("an id").to_string());
    }
    // Paging by 7 while 20 more payments are created beside it.
    let writer = {
        let c = c.clone();
        tokio::spawn(async move {
            for i in 0..20 {
                let r = c
                    .create_payment(&body(&format!("w-{i:02}"), "100"))
                    .await
                    .expect("a create");
                assert_eq!(r.status, StatusCode::CREATED);
            }
        })
    };
    let paged = all_pages(&c, "", 7).await;
    writer.await.expect("the writer");
    let unique: HashSet<&String> = paged.iter().collect();
    assert_eq!(unique.len(), paged.len(), "no payment twice: {paged:?}");
    let before: Vec<&String> = paged.iter().filter(|id| created.contains(id)).collect();
    let expected: Vec<&String> = created.iter().rev().collect();
    assert_eq!(before, expected, "every earlier payment once, newest first");
    // A full listing afterwards has all 45, newest first: the writer's 20 first.
    let everything = all_pages(&c, "", 100).await;
    assert_eq!(everything.len(), 45);
    assert_eq!(
        &everything[20..],
        &created.iter().rev().cloned().collect::<Vec<_>>()[..]
    );

    // A page is the Payment resource, as GET answers it.
    let first = c.list_payments("limit=1").await.expect("a page");
    let one = &first.json["data"][0];
    let read = c
        .get_payment(one["id"].as_str().expect("an id"))
        .await
        .expect("a read");
    assert_eq!(one, &read.json);
    assert_eq!(first.json["has_more"], true);

    // Filters.
    let r = c
        .list_payments("payment_method=card_transfer")
        .await
        .expect("a page");
    assert_eq!(ids_of(&r), ["l-20", "l-15", "l-10", "l-05", "l-00"]);
    let r = c
        .list_payments("merchant_payment_id=l-07")
        .await
        .expect("a page");
    assert_eq!(ids_of(&r), ["l-07"]);
    let r = c
        .list_payments("merchant_payment_id_prefix=l-1")
        .await
        .expect("a page");
    assert_eq!(ids_of(&r).len(), 10);
    assert!(ids_of(&r).iter().all(|id| id.starts_with("l-1")));
    let r = c
        .list_payments("merchant_payment_id_prefix=L-1")
        .await
        .expect("a page");
    assert_eq!(ids_of(&r).len(), 0, "case counts");
    // Two test payments of the project in test mode, one completed by the test helper.
    s.patch_project(ProjectPatch {
        test_mode: Some(true),
        ..Default::default()
    })
    .await;
    let mut tests = Vec::new();
    for mpid in ["t-00", "t-01"] {
        let r = c
            .create_payment(&body(mpid, "100"))
            .await
            .expect("a create");
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
        tests.push(r.json["id"].as_str().expect("an id").to_string());
    }
    let done = c
        .post(&format!("/api/v1/test/payments/{}/complete", tests[1]), b"")
        .await
        .expect("complete");
    assert_eq!(done.status, StatusCode::OK, "{}", done.json);
    let r = c.list_payments("status=completed").await.expect("a page");
    assert_eq!(ids_of(&r), ["t-01"]);
    let r = c.list_payments("flow=project_test").await.expect("a page");
    assert_eq!(ids_of(&r), ["t-01", "t-00"]);
    let r = c
        .list_payments("flow=runtime_live&limit=100")
        .await
        .expect("a page");
    assert_eq!(ids_of(&r).len(), 45);
    let r = c
        .list_payments("status=processing&payment_method=card_transfer&limit=2")
        .await
        .expect("a page");
    assert_eq!(ids_of(&r), ["l-20", "l-15"]);
    assert_eq!(r.json["has_more"], true);
    // A time window: from the 11th payment's creation (inclusive) to the 13th's (exclusive).
    let mut times = Vec::new();
    for i in [10, 13] {
        let r = c.get_payment(&created[i]).await.expect("a read");
        times.push(r.json["created_at"].as_str().expect("a time").to_string());
    }
    let (from, to) = (times[0].clone(), times[1].clone());
    let enc = |t: &str| t.replace('+', "%2B");
    let r = c
        .list_payments(&format!(
            "created_from={}&created_to={}&merchant_payment_id_prefix=l-",
            enc(&from),
            enc(&to)
        ))
        .await
        .expect("a page");
    let window = ids_of(&r);
    assert!(window.contains(&"l-10".to_string()) && !window.contains(&"l-13".to_string()));
    assert!(
        window
            .iter()
            .all(|id| ("l-10".."l-13").contains(&id.as_str())),
        "{window:?}"
    );

    // The amount by value, whatever the scale; the last four digits of the requisite.
    for (mpid, amount) in [("a-1", "250.50"), ("a-2", "250.5"), ("a-3", "25.05")] {
        let r = c
            .create_payment(&body(mpid, amount))
            .await
            .expect("a create");
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    }
    let r = c.list_payments("amount=250.500").await.expect("a page");
    assert_eq!(ids_of(&r), ["a-2", "a-1"]);
    let a3 = c.list_payments("amount=25.05").await.expect("a page");
    assert_eq!(ids_of(&a3), ["a-3"]);
    let requisite = a3.json["data"][0]["requisite"]
        .as_str()
        .expect("the sandbox issued a requisite")
        .to_string();
    let digits: String = requisite.chars().filter(char::is_ascii_digit).collect();
    let last4 = &digits[digits.len() - 4..];
    let r = c
        .list_payments(&format!("requisite_last4={last4}&limit=100"))
        .await
        .expect("a page");
    assert!(ids_of(&r).contains(&"a-3".to_string()), "{}", r.json);
    assert!(
        r.json["data"]
            .as_array()
            .expect("data")
            .iter()
            .all(|p| p["requisite"].as_str().is_some_and(|q| q
                .chars()
                .filter(char::is_ascii_digit)
                .collect::<String>()
                .ends_with(last4))),
        "{}",
        r.json
    );

    // Refusals: 400 naming the parameter, before anything is listed.
    for (query, word) in [
        ("amount=0", "amount"),
        ("amount=1e3", "amount"),
        ("requisite_last4=123", "requisite_last4"),
        ("requisite_last4=12a4", "requisite_last4"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("stauts=completed", "stauts"),
        ("status=paid", "status"),
        ("cursor=bm90LWEtY3Vyc29y", "cursor"),
        ("created_from=yesterday", "created_from"),
    ] {
        let r = c.list_payments(query).await.expect("an answer");
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::BAD_REQUEST, Some("bad_request")),
            "{query}: {}",
            r.json
        );
        assert!(
            r.json["message"].as_str().is_some_and(|m| m.contains(word)),
            "{query}: {}",
            r.json
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn the_list_needs_payments_read_follows_the_signature_policy_and_shares_the_rate_limit() {
    let s = TestServer::sandbox().await;
    let c = s.client();
    let r = c
        .create_payment(&body("s-1", "100"))
        .await
        .expect("a create");
    assert_eq!(r.status, StatusCode::CREATED);
    let actor = Actor("t".into());
    for (scopes, status) in [
        (vec![Scope::PaymentsCreate], StatusCode::FORBIDDEN),
        (vec![Scope::PaymentsRead], StatusCode::OK),
    ] {
        let t = s
            .state
            .service
            .directory()
            .issue_token(s.project(), scopes, &actor)
            .await
            .expect("a token");
        let r = c
            .with_token(t.token.expose())
            .list_payments("")
            .await
            .expect("an answer");
        assert_eq!(r.status, status, "{}", r.json);
        if status == StatusCode::FORBIDDEN {
            assert_eq!(r.code(), Some("insufficient_scope"));
        }
    }
    // Unsigned is fine until the project requires signatures; then the signature covers the
    // query string: a filter changed after signing does not verify.
    let unsigned = c
        .prepare(Method::GET, "/api/v1/payments?limit=5", b"", None)
        .expect("a request");
    assert_eq!(
        c.send(&unsigned).await.expect("an answer").status,
        StatusCode::OK
    );
    s.patch_project(ProjectPatch {
        signature_required: Some(true),
        ..Default::default()
    })
    .await;
    let unsigned = c
        .prepare(Method::GET, "/api/v1/payments?limit=5", b"", None)
        .expect("a request");
    assert_eq!(
        c.send(&unsigned).await.expect("an answer").code(),
        Some("signature_invalid")
    );
    let mut signed = c
        .prepare(
            Method::GET,
            "/api/v1/payments?limit=5",
            b"",
            Some(&payments_client::SignSpec::default()),
        )
        .expect("a request");
    signed.path_and_query = "/api/v1/payments?limit=6".into();
    let r = c.send(&signed).await.expect("an answer");
    assert_eq!(r.code(), Some("signature_invalid"), "{}", r.json);
    let r = c.list_payments("limit=5").await.expect("an answer");
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(ids_of(&r), ["s-1"]);

    // One rate limit for the project: a list, a read, then a list over the burst of 2 (after
    // two idle seconds, so that the requests above count no more).
    s.patch_project(ProjectPatch {
        rate_limit: Some(RateLimit {
            per_second: 1,
            burst: 2,
        }),
        ..Default::default()
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let id = r.json["data"][0]["id"].as_str().expect("an id").to_string();
    let statuses = [
        c.list_payments("").await.expect("an answer").status,
        c.get_payment(&id).await.expect("an answer").status,
        c.list_payments("").await.expect("an answer").status,
    ];
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    s.stop().await;
}
