//! Requisites at rest: after creates through a real server, neither the SQLite files (the
//! database, its WAL) nor a `pg_dump` hold any card or phone number or holder name the
//! payments were issued, while the API still answers them. A server told to write them in
//! clear (a rolling upgrade's setting) does, which shows the scan finds them when they are
//! there; `callback-secret reseal` then seals those too and leaves no copy behind.
//!
//! Before each scan every operator action on payments has run (confirm, cancel, re-check,
//! resolve, resend, the sandbox's test helper): each writes an audit record with the payment
//! before and after, which holds its requisites masked. An audit record as earlier builds
//! wrote it (the requisites in clear) is masked by the re-seal.

use std::path::Path;

use payments_client::{MerchantClient, SandboxCredentials};
use serde_json::json;

use crate::support::{cli_json, serve, serve_with, wait_ready};

/// `n` creates (both methods) through the server at the data dir's sandbox credentials: each
/// payment's id, merchant payment id, requisite and holder name.
async fn create(data: &Path, tag: &str, n: usize) -> Vec<[String; 4]> {
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let client = MerchantClient::from_credentials(&creds).unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let method = if i % 2 == 0 { "card_transfer" } else { "sbp" };
        let mpid = format!("at-rest-{tag}-{i}");
        let body = json!({"merchant_payment_id": mpid, "amount": "1500.00",
                          "payment_method": method,
                          "callback_url": "https://merchant.example/callbacks"});
        // Paced as a client of the project's rate limit is: a 429 waits and repeats.
        let r = loop {
            let r = client.create_payment(&body).await.unwrap();
            if r.status.as_u16() != 429 {
                break r;
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        };
        assert_eq!(r.status.as_u16(), 201, "{}", r.json);
        assert_eq!(r.json["status"], "processing", "{}", r.json);
        let field = |name: &str| r.json[name].as_str().unwrap().to_string();
        out.push([field("id"), mpid, field("requisite"), field("holder_name")]);
    }
    out
}

/// A payment of the sandbox's test project, created and completed by the test helper
/// (`POST /api/v1/test/payments/{id}/complete`, an audited action of the merchant API)
/// through the running server of `data`: its id, merchant id, requisite and holder name.
async fn test_helper(data: &Path) -> [String; 4] {
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let test = creds
        .for_test_project()
        .expect("the sandbox has a test project");
    let client = MerchantClient::from_credentials(&test).unwrap();
    let body = json!({"merchant_payment_id": "at-rest-helper", "amount": "900.00",
                      "payment_method": "card_transfer"});
    let r = client.create_payment(&body).await.unwrap();
    assert_eq!(r.status.as_u16(), 201, "{}", r.json);
    let field = |name: &str| r.json[name].as_str().unwrap().to_string();
    let made = [
        field("id"),
        field("merchant_payment_id"),
        field("requisite"),
        field("holder_name"),
    ];
    let helper = format!("/api/v1/test/payments/{}/complete", made[0]);
    let r = client.post(&helper, b"{}").await.unwrap();
    assert_eq!(r.status.as_u16(), 200, "{}", r.json);
    made
}

/// Every operator action on payments through the CLI, on a stopped server's data (`extra`:
/// the database arguments): confirm, re-check, resolve, cancel and resend, each writing an
/// audit record of the payment before and after. The newest records then include the test
/// helper's ([`test_helper`]).
fn operate_cli(data: &Path, extra: &[&str], payments: &[[String; 4]]) {
    let id = |i: usize| payments[i][0].as_str();
    let steps: [(&[&str], &str); 5] = [
        (&["payment", "confirm", id(0)], "completed"),
        (&["payment", "recheck", id(0)], "appeal"),
        (
            &["payment", "resolve", id(0), "--status", "completed"],
            "completed",
        ),
        (&["payment", "cancel", id(1)], "canceled"),
        (&["payment", "resend", id(0)], "completed"),
    ];
    for (args, status) in steps {
        let mut all = args.to_vec();
        all.extend(extra);
        let out = cli_json(data, &all);
        assert_eq!(out["payment"]["status"], status, "{args:?}: {out}");
    }
    let audit = cli_json(data, &[&["audit", "--limit", "10"][..], extra].concat());
    let actions: Vec<&str> = audit["records"].as_array().map_or(Vec::new(), |a| {
        a.iter().filter_map(|r| r["action"].as_str()).collect()
    });
    for action in [
        "payment.confirm",
        "payment.recheck",
        "payment.recheck_resolve",
        "payment.cancel",
        "payment.resend_callback",
        "test_payment.confirm",
    ] {
        assert!(actions.contains(&action), "{action}: {audit}");
    }
}

/// Each payment's GET still answers its requisite and holder name.
async fn readable(data: &Path, payments: &[[String; 4]]) {
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let client = MerchantClient::from_credentials(&creds).unwrap();
    for [id, _, requisite, holder] in payments {
        let r = loop {
            let r = client.get_payment(id).await.unwrap();
            if r.status.as_u16() != 429 {
                break r;
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        };
        assert_eq!(r.status.as_u16(), 200, "{}", r.json);
        assert_eq!(r.json["requisite"], requisite.as_str());
        assert_eq!(r.json["holder_name"], holder.as_str());
    }
}

/// A payment's state as audit records of earlier builds kept it: its requisite and holder
/// name in clear.
fn old_audit_state(p: &[String; 4]) -> String {
    json!({"id": p[0], "merchant_payment_id": p[1], "status": "completed",
           "requisite": p[2], "holder_name": p[3]})
    .to_string()
}

/// Which of the payments' merchant ids and requisites (or holder names) occur in `bytes`.
fn found(bytes: &[u8], payments: &[[String; 4]]) -> (usize, Vec<String>) {
    let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
    let ids = payments.iter().filter(|p| has(&p[1])).count();
    let secrets = payments
        .iter()
        .flat_map(|p| [&p[2], &p[3]])
        .filter(|s| has(s))
        .cloned()
        .collect();
    (ids, secrets)
}

/// The bytes of every file of the SQLite database (the database, its WAL and shared memory).
fn sqlite_files(data: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for name in ["payments.db", "payments.db-wal", "payments.db-shm"] {
        if let Ok(b) = std::fs::read(data.join(name)) {
            bytes.extend(b);
        }
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_files_hold_no_requisite() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    // Sealed (the default): 100 creates, none of them in the files; the API answers them.
    let (mut server, base, _) = serve(&data, &[]);
    wait_ready(&mut server, &base).await;
    let sealed = create(&data, "sealed", 100).await;
    readable(&data, &sealed).await;
    let helped = test_helper(&data).await;
    drop(server);
    operate_cli(&data, &[], &sealed);
    let (ids, secrets) = found(&sqlite_files(&data), &sealed);
    assert_eq!(ids, 100, "the scan reads the payments' rows");
    assert!(secrets.is_empty(), "in the files: {secrets:?}");
    let (ids, secrets) = found(&sqlite_files(&data), &[helped]);
    assert_eq!(
        (ids, secrets.len()),
        (1, 0),
        "the test payment: {secrets:?}"
    );

    // An audit record as earlier builds wrote it (a payment's requisites in clear): the
    // re-seal masks it and leaves no copy behind; a second run finds nothing to mask.
    rusqlite::Connection::open(data.join("payments.db"))
        .unwrap()
        .execute(
            "INSERT INTO audit (at, actor, action, target, before_state, after_state) \
             VALUES (0, 'operator:old', 'payment.confirm', ?1, ?2, ?2)",
            rusqlite::params![sealed[0][0], old_audit_state(&sealed[0])],
        )
        .unwrap();
    let (_, secrets) = found(&sqlite_files(&data), &sealed[..1]);
    assert_eq!(secrets.len(), 2, "the old record: {secrets:?}");
    let out = cli_json(&data, &["callback-secret", "reseal"]);
    assert_eq!(out["audit_records_masked"], 1, "{out}");
    assert_eq!(out["requisites_resealed"], 0, "{out}");
    let (_, secrets) = found(&sqlite_files(&data), &sealed);
    assert!(secrets.is_empty(), "still in the files: {secrets:?}");
    let again = cli_json(&data, &["callback-secret", "reseal"]);
    assert_eq!(again["audit_records_masked"], 0, "{again}");

    // In clear (a rolling upgrade's setting): the scan finds every one.
    let (mut server, base, _) = serve_with(
        &data,
        "127.0.0.1",
        &[],
        &[("PAYMENTS_SECRETS__SEAL_REQUISITES", "false")],
    );
    wait_ready(&mut server, &base).await;
    let clear = create(&data, "clear", 20).await;
    drop(server);
    let (ids, secrets) = found(&sqlite_files(&data), &clear);
    assert_eq!(ids, 20, "the scan reads the payments' rows");
    assert_eq!(secrets.len(), 40, "written in clear: {secrets:?}");

    // The re-seal seals them, and leaves no copy of them behind in the files.
    let out = cli_json(&data, &["callback-secret", "reseal"]);
    assert_eq!(out["requisites_resealed"], 20, "{out}");
    assert_eq!(out["requisites_already_current"], 101, "{out}");
    assert_eq!(out["audit_records_masked"], 0, "{out}");
    let (_, secrets) = found(&sqlite_files(&data), &clear);
    assert!(secrets.is_empty(), "still in the files: {secrets:?}");
    let (mut server, base, _) = serve(&data, &[]);
    wait_ready(&mut server, &base).await;
    readable(&data, &clear).await;
    readable(&data, &sealed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn a_pg_dump_holds_no_requisite() {
    let base_url = crate::support::database_url();
    let url = crate::support::fresh_schema(&base_url).await;
    let schema = url
        .rsplit_once("search_path%3D")
        .map(|(_, s)| s.to_string())
        .expect("the test schema's name");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let dump = || {
        let out = std::process::Command::new("pg_dump")
            .args(["--schema", &schema, "--data-only", &base_url])
            .output()
            .expect("pg_dump runs (Debian's postgresql-client)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };

    let (mut server, base, _) = serve(&data, &["--database-url", &url]);
    wait_ready(&mut server, &base).await;
    let sealed = create(&data, "sealed", 100).await;
    readable(&data, &sealed).await;
    let helped = test_helper(&data).await;
    drop(server);
    operate_cli(&data, &["--database-url", &url], &sealed);
    let (ids, secrets) = found(&dump(), &[helped]);
    assert_eq!(
        (ids, secrets.len()),
        (1, 0),
        "the test payment: {secrets:?}"
    );
    let (ids, secrets) = found(&dump(), &sealed);
    assert_eq!(ids, 100, "the dump holds the payments' rows");
    assert!(secrets.is_empty(), "in the dump: {secrets:?}");

    // An audit record as earlier builds wrote it: the re-seal masks it.
    let db = crate::support::sql(&url).await;
    db.execute(
        "INSERT INTO audit (at, actor, action, target, before_state, after_state) \
         VALUES (0, 'operator:old', 'payment.confirm', $1, $2, $2)",
        &[&sealed[0][0], &old_audit_state(&sealed[0])],
    )
    .await
    .unwrap();
    let (_, secrets) = found(&dump(), &sealed[..1]);
    assert_eq!(secrets.len(), 2, "the old record: {secrets:?}");
    let reseal = ["callback-secret", "reseal", "--database-url", &url];
    let out = cli_json(&data, &reseal);
    assert_eq!(out["audit_records_masked"], 1, "{out}");
    let (_, secrets) = found(&dump(), &sealed);
    assert!(secrets.is_empty(), "still in the dump: {secrets:?}");
    assert_eq!(cli_json(&data, &reseal)["audit_records_masked"], 0);

    let (mut server, base, _) = serve_with(
        &data,
        "127.0.0.1",
        &["--database-url", &url],
        &[("PAYMENTS_SECRETS__SEAL_REQUISITES", "false")],
    );
    wait_ready(&mut server, &base).await;
    let clear = create(&data, "clear", 10).await;
    drop(server);
    let (ids, secrets) = found(&dump(), &clear);
    assert_eq!((ids, secrets.len()), (10, 20), "in clear: {secrets:?}");

    let out = cli_json(
        &data,
        &["callback-secret", "reseal", "--database-url", &url],
    );
    assert_eq!(out["requisites_resealed"], 10, "{out}");
    assert_eq!(out["requisites_already_current"], 101, "{out}");
    assert_eq!(out["audit_records_masked"], 0, "{out}");
    let (_, secrets) = found(&dump(), &clear);
    assert!(secrets.is_empty(), "still in the dump: {secrets:?}");
}

/// `payment backfill-last4` gives payments written without their last four digits (as a
/// build before schema 16 wrote them) the digits of their sealed requisite, through a real
/// data dir and its key file; the list API then finds them by `requisite_last4`; a second run
/// fills nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last4_backfill_makes_old_payments_findable() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (mut server, base, _) = serve(&data, &[]);
    wait_ready(&mut server, &base).await;
    let made = create(&data, "last4", 6).await;
    drop(server);
    let cleared = rusqlite::Connection::open(data.join("payments.db"))
        .unwrap()
        .execute("UPDATE payments SET requisite_last4 = NULL", [])
        .unwrap();
    assert!(cleared >= 6, "{cleared}");

    let out = cli_json(&data, &["payment", "backfill-last4"]);
    assert_eq!(out["filled"].as_u64(), Some(cleared as u64), "{out}");
    assert_eq!(out["too_short"], 0, "{out}");
    let again = cli_json(&data, &["payment", "backfill-last4"]);
    assert_eq!(again["filled"], 0, "{again}");

    let (mut server, base, _) = serve(&data, &[]);
    wait_ready(&mut server, &base).await;
    let creds = SandboxCredentials::from_file(data.join("sandbox-credentials.json")).unwrap();
    let client = MerchantClient::from_credentials(&creds).unwrap();
    for [id, _, requisite, _] in &made {
        let digits: String = requisite.chars().filter(char::is_ascii_digit).collect();
        let r = client
            .list_payments(&format!(
                "requisite_last4={}&limit=100",
                &digits[digits.len() - 4..]
            ))
            .await
            .unwrap();
        assert_eq!(r.status.as_u16(), 200, "{}", r.json);
        assert!(
            r.json["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["id"] == id.as_str()),
            "{requisite}: {}",
            r.json
        );
    }
}
