//! SQLite-specific behaviour beyond the contract suite: races decided by the database under a
//! multi-threaded runtime, group commit isolation, migrations, reopening and closing.

use std::sync::Arc;

use payments_core::payment::PaymentStatus;
use payments_core::request_log::RequestLogEntry;
use payments_core::store::{
    purge_all, AdmitOutcome, AuditStore, InsertOutcome, MerchantStoreExt, NonceUse, OutboxStore,
    PaymentChange, PaymentStore, RequestLogStore, Retained, SettingStore, Store, StoreError,
    NONCE_PURGE_BATCH,
};
use payments_core::testing::contract::{
    appeal_id, changed, event_id, full_payment, ms, old_request_log, old_request_log_reads_back,
    payment_id, project_id, sample_audit, sample_event, sample_payment, sample_request, T0,
};
use payments_core::Timestamp;
use payments_store_sql::schema::SchemaError;
use payments_store_sqlite::{
    OpenError, SealWrites, SqliteOptions, SqliteStore, Synchronous, SCHEMA_VERSION,
};
use tempfile::TempDir;

fn fresh() -> (TempDir, Arc<SqliteStore>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = SqliteStore::open(dir.path().join("store.db"), SqliteOptions::default())
        .expect("open a fresh database");
    (dir, Arc::new(store))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_racing_inserts_store_one_payment() {
    let (_dir, store) = fresh();
    let tasks: Vec<_> = (0..64u128)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let p = sample_payment(payment_id(i), project_id(1), "the-same-order");
                (p.id, store.insert_payment(&p).await)
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut existing = Vec::new();
    for task in tasks {
        let (id, outcome) = task.await.expect("the task finishes");
        match outcome.expect("insert_payment") {
            InsertOutcome::Inserted => winners.push(id),
            InsertOutcome::Existing(p) => existing.push(p.id),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one insert wins");
    assert_eq!(existing.len(), 63);
    assert!(existing.iter().all(|id| *id == winners[0]));
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![(PaymentStatus::Created, 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_racing_nonce_uses_accept_one() {
    let (_dir, store) = fresh();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .use_nonce(
                        project_id(1),
                        "nonce-1",
                        T0,
                        T0 + std::time::Duration::from_secs(300),
                    )
                    .await
            })
        })
        .collect();
    let mut accepted = 0;
    for task in tasks {
        if task.await.expect("the task finishes").expect("use_nonce") {
            accepted += 1;
        }
    }
    assert_eq!(accepted, 1);
}

/// The transactions committed to the write-ahead log `wal` since it was last emptied: its
/// frames (of the log's current generation, by salt) that end a commit.
fn wal_commits(wal: &std::path::Path) -> usize {
    let bytes = std::fs::read(wal).expect("the write-ahead log");
    if bytes.len() < 32 {
        return 0;
    }
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let page_size = word(8) as usize;
    let salts = (word(16), word(20));
    let mut commits = 0;
    let mut at = 32;
    while at + 24 + page_size <= bytes.len() {
        if (word(at + 8), word(at + 12)) != salts {
            break;
        }
        if word(at + 4) != 0 {
            commits += 1;
        }
        at += 24 + page_size;
    }
    commits
}

/// Failing requests (conflicts, duplicates) committed in the same batches as good ones roll
/// back alone: every good write lands, no failed one leaves a trace. The batches are made
/// certain: another connection holds the database's write lock while the requests queue, so
/// the writer's first transaction waits and then takes in the queue; the write-ahead log shows
/// fewer commits than good requests (a batch held several).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_request_does_not_abort_its_batch() {
    let (dir, store) = fresh();
    let base = sample_payment(payment_id(0), project_id(1), "contended");
    store.insert_payment(&base).await.expect("insert");
    let v2 = changed(&base, PaymentStatus::Processing, T0);
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: v2.clone(),
            expected_version: 1,
            event: None,
            audit: None,
        })
        .await
        .expect("commit");

    // Empty the log, so that it holds the commits of the requests below only, and take the
    // write lock.
    let path = dir.path().join("store.db");
    let blocker = rusqlite::Connection::open(&path).expect("a second connection");
    let (busy, _, _): (i64, i64, i64) = blocker
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .expect("checkpoint");
    assert_eq!(busy, 0, "the log was emptied");
    blocker
        .execute_batch("BEGIN IMMEDIATE")
        .expect("the write lock");

    let good = 24;
    let tasks: Vec<_> = (1..=2 * good as u128)
        .map(|i| {
            let store = Arc::clone(&store);
            let base = base.clone();
            tokio::spawn(async move {
                if i % 2 == 0 {
                    // Stale: computed from version 1.
                    let stale = changed(&base, PaymentStatus::Error, T0);
                    let r = store
                        .commit_change(&PaymentChange {
                            history: None,
                            ledger: None,
                            event: Some(sample_event(&stale, event_id(i), T0)),
                            audit: Some(sample_audit(T0, "stale", "x")),
                            payment: stale,
                            expected_version: 1,
                        })
                        .await;
                    assert_eq!(r, Err(StoreError::Conflict));
                } else {
                    let p = sample_payment(payment_id(i), project_id(1), &format!("o{i}"));
                    assert_eq!(store.insert_payment(&p).await, Ok(InsertOutcome::Inserted));
                }
            })
        })
        .collect();
    // The writer waits for the lock (its busy timeout is 5 s) while the requests queue.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    blocker
        .execute_batch("ROLLBACK")
        .expect("the lock released");
    for task in tasks {
        task.await.expect("every task's assertions hold");
    }
    let commits = wal_commits(&dir.path().join("store.db-wal"));
    assert!(
        (1..good).contains(&commits),
        "{good} good requests committed in {commits} transactions: no batch held more than one"
    );
    for i in (1..=2 * good as u128).filter(|i| i % 2 == 1) {
        assert!(store.payment(payment_id(i)).await.expect("read").is_some());
    }
    assert_eq!(store.payment(base.id).await.expect("read"), Some(v2));
    assert!(store
        .events_for_payment(base.id)
        .await
        .expect("events")
        .is_empty());
    assert!(store
        .find_audit_records(100)
        .await
        .expect("audit")
        .is_empty());
}

/// `admit_create` is one write: when the insert fails (here a reused payment id), the nonce
/// recorded before it in the same job is rolled back too, so the client may send the request
/// again after the `503`/`500`; and 64 racing creates of one merchant payment id with 64
/// nonces store one payment and keep every nonce.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admit_create_is_one_atomic_write() {
    let (_dir, store) = fresh();
    let a = project_id(1);
    let nonce = |n: &'static str| NonceUse {
        project: a,
        nonce: n,
        now: T0,
        expires_at: T0 + std::time::Duration::from_secs(300),
    };
    let first = sample_payment(payment_id(1), a, "order-1");
    let mpid = first.merchant_payment_id.clone();
    assert_eq!(
        store
            .admit_create(Some(nonce("n-1")), a, &mpid, Some(&first), None)
            .await
            .unwrap(),
        AdmitOutcome::Inserted
    );
    let reused_id = sample_payment(first.id, a, "order-2");
    let failed = store
        .admit_create(
            Some(nonce("n-2")),
            a,
            &reused_id.merchant_payment_id,
            Some(&reused_id),
            None,
        )
        .await;
    assert!(
        matches!(failed, Err(StoreError::Duplicate(_))),
        "{failed:?}"
    );
    assert!(
        store
            .use_nonce(a, "n-2", T0, T0 + std::time::Duration::from_secs(1))
            .await
            .unwrap(),
        "the failed write's nonce was rolled back with it"
    );

    let tasks: Vec<_> = (0..64u128)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let p = sample_payment(payment_id(100 + i), a, "raced");
                let n = format!("race-{i}");
                let use_ = NonceUse {
                    project: a,
                    nonce: &n,
                    now: T0,
                    expires_at: T0 + std::time::Duration::from_secs(300),
                };
                store
                    .admit_create(Some(use_), a, &p.merchant_payment_id, Some(&p), None)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut inserted = 0;
    for task in tasks {
        match task.await.unwrap() {
            AdmitOutcome::Inserted => inserted += 1,
            AdmitOutcome::Existing(p) => assert_eq!(p.merchant_payment_id.as_str(), "raced"),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(inserted, 1);
    for i in 0..64 {
        assert!(
            !store
                .use_nonce(
                    a,
                    &format!("race-{i}"),
                    T0,
                    T0 + std::time::Duration::from_secs(1)
                )
                .await
                .unwrap(),
            "nonce race-{i} was kept"
        );
    }
}

fn user_version(path: &std::path::Path) -> u32 {
    let conn = rusqlite::Connection::open(path).expect("open");
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("user_version")
}

/// The old request log's row of `e` (schema 27's `request_log`).
fn old_request_row(conn: &rusqlite::Connection, e: &RequestLogEntry) {
    conn.execute(
        "INSERT INTO request_log (project_id, at, method, path, status, error_code, request_id, \
         latency_us, source, merchant_payment_id, payment_id, clock_skew_ms, diagnosis, message) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        rusqlite::params![
            e.project_id.to_string(),
            e.at.unix_millis(),
            e.method,
            e.path,
            e.status,
            e.error_code,
            e.request_id,
            e.latency_us,
            e.source,
            e.merchant_payment_id,
            e.payment_id.map(|p| p.to_string()),
            e.clock_skew_ms,
            e.diagnosis.as_ref().map(|d| d.to_json()),
            e.message,
        ],
    )
    .expect("an old request log row");
}

/// Schema 28 turns the old request log's rows into writes, and empties the old table.
#[tokio::test]
async fn the_old_request_log_reads_back_after_schema_28() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("old-log.db");
    drop(SqliteStore::open(&path, SqliteOptions::default()).expect("open"));
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch("DROP TABLE request_log_writes; PRAGMA user_version = 27")
        .expect("back to schema 27");
    for e in &old_request_log() {
        old_request_row(&conn, e);
    }
    drop(conn);
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("migrate");
    old_request_log_reads_back(&store).await;
    let conn = rusqlite::Connection::open(&path).expect("open");
    let left: i64 = conn
        .query_row("SELECT count(*) FROM request_log", [], |r| r.get(0))
        .expect("count");
    assert_eq!(left, 0, "the old table is emptied");
}

/// A write of the request log is one row per project, and the purge takes a write whole once
/// the newest of its requests is old (never a part of it).
#[tokio::test]
async fn a_request_log_write_is_one_row_and_goes_whole() {
    let (dir, store) = fresh();
    let (p, other) = (project_id(1), project_id(2));
    let log: Vec<_> = (0..100)
        .map(|t| sample_request(if t < 90 { p } else { other }, T0 + ms(t), 200))
        .collect();
    store.insert_requests(&log, 1_000).await.expect("write");
    let conn = rusqlite::Connection::open(dir.path().join("store.db")).expect("open");
    let rows: Vec<(String, i64)> = conn
        .prepare("SELECT project_id, entries FROM request_log_writes ORDER BY id")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(rows, [(p.to_string(), 90), (other.to_string(), 10)]);
    let purged = store.purge_requests(T0 + ms(50), 10).await.expect("purge");
    assert_eq!(
        (purged.deleted, purged.more),
        (0, false),
        "both hold newer ones"
    );
    let purged = store.purge_requests(T0 + ms(95), 10).await.expect("purge");
    assert_eq!(
        (purged.deleted, purged.more),
        (90, false),
        "the first write, whole"
    );
    let purged = store.purge_requests(T0 + ms(100), 1).await.expect("purge");
    assert_eq!(
        (purged.deleted, purged.more),
        (10, true),
        "one write of the limit"
    );
}

/// Two stores on one database file, as two processes would open it.
fn two_stores() -> (TempDir, SqliteStore, SqliteStore) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("shared.db");
    let one = SqliteStore::open(&path, SqliteOptions::default()).expect("open one");
    let two = SqliteStore::open(&path, SqliteOptions::default()).expect("open two");
    (dir, one, two)
}

/// The nonce tests' expiries: a second and ten minutes after `T0`.
fn short_and_long() -> (Timestamp, Timestamp) {
    (
        T0 + std::time::Duration::from_secs(1),
        T0 + std::time::Duration::from_secs(600),
    )
}

#[test]
fn a_fresh_database_gets_the_current_schema_version() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("fresh.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    drop(store);
    // Nine early steps of its own, then the baseline of the shared numbering.
    assert_eq!(SCHEMA_VERSION, 28);
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    let conn = rusqlite::Connection::open(&path).expect("open");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
    // Opening again applies nothing and keeps the version.
    drop(SqliteStore::open(&path, SqliteOptions::default()).expect("reopen"));
    assert_eq!(user_version(&path), SCHEMA_VERSION);
}

/// The events list filtered by `delivery_state` (the merchant API's and the cabinet's) reads
/// through schema 19's index, in the list's order: no read of every event of the project, no
/// sort.
#[test]
fn the_events_of_one_delivery_state_are_read_through_their_index() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("plan.db");
    drop(SqliteStore::open(&path, SqliteOptions::default()).expect("open"));
    let conn = rusqlite::Connection::open(&path).expect("open");
    let plan: Vec<String> = conn
        .prepare(
            "EXPLAIN QUERY PLAN SELECT event_id FROM outbox_events \
             WHERE project_id = ?1 AND state = ?2 AND created_at >= ?3 \
             ORDER BY created_at DESC, event_id DESC LIMIT 21",
        )
        .expect("a plan")
        .query_map(rusqlite::params!["p", "failed", 0], |r| r.get(3))
        .expect("the plan's rows")
        .collect::<Result<_, _>>()
        .expect("text");
    let plan = plan.join("; ");
    assert!(plan.contains("outbox_events_project_state"), "{plan}");
    assert!(!plan.contains("TEMP B-TREE"), "sorted apart: {plan}");
}

#[test]
fn a_database_from_a_newer_build_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("newer.db");
    drop(SqliteStore::open(&path, SqliteOptions::default()).expect("open"));
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 6))
        .expect("set user_version");
    drop(conn);

    let err = SqliteStore::open(&path, SqliteOptions::default()).expect_err("refused");
    assert!(
        matches!(err, OpenError::Schema(SchemaError::NewerSchema { found, supported }) if found == SCHEMA_VERSION + 6 && supported == SCHEMA_VERSION),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("schema version {}", SCHEMA_VERSION + 6)),
        "{message}"
    );
    assert!(
        message.contains(&format!("version {SCHEMA_VERSION} this build supports")),
        "{message}"
    );
    // The refused database was not touched.
    assert_eq!(user_version(&path), SCHEMA_VERSION + 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("reopen.db");
    let p = full_payment(payment_id(1), project_id(1), "kept");
    let next = changed(&p, PaymentStatus::Completed, T0);
    let event = sample_event(&next, event_id(1), T0);
    {
        let options = SqliteOptions {
            synchronous: Synchronous::Normal,
            readers: 1,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open(&path, options).expect("open");
        store.insert_payment(&p).await.expect("insert");
        store
            .commit_change(&PaymentChange {
                history: None,
                ledger: None,
                payment: next.clone(),
                expected_version: p.version,
                event: Some(event.clone()),
                audit: None,
            })
            .await
            .expect("commit");
        store.upsert_setting("k", "v").await.expect("setting");
        assert!(store
            .use_nonce(
                project_id(1),
                "n",
                T0,
                T0 + std::time::Duration::from_secs(1)
            )
            .await
            .expect("nonce"));
    }
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("reopen");
    assert_eq!(store.payment(p.id).await.expect("read"), Some(next));
    let events = store.events_for_payment(p.id).await.expect("events");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].outbox, event);
    assert_eq!(store.setting("k").await.expect("setting"), Some("v".into()));
    assert!(!store
        .use_nonce(project_id(1), "n", T0, T0)
        .await
        .expect("nonce"));
}

/// `close` from the thread of a current-thread runtime (how a test server, or an embedding
/// on such a runtime, stops), while a write on that runtime has sent its job and waits for
/// its answer: the writer commits it, answers, and ends, and `close` returns, although the
/// waiting task cannot run again until it does. The write used to keep its handle on the
/// writer's queue until its answer was awaited, and the writer waited for more jobs forever.
#[test]
fn close_on_a_current_thread_runtime_returns_with_a_write_waiting_for_its_answer() {
    let (dir, store) = fresh();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        rt.block_on(async {
            let writer = Arc::clone(&store);
            let write = tokio::spawn(async move {
                let p = sample_payment(payment_id(1), project_id(1), "o1");
                writer.insert_payment(&p).await
            });
            // The write runs until it waits for its answer, its job queued.
            tokio::task::yield_now().await;
            store.close();
            assert_eq!(
                write.await.expect("the write ends"),
                Ok(InsertOutcome::Inserted)
            );
        });
        let _ = done.send(());
    });
    let closed = finished.recv_timeout(std::time::Duration::from_secs(10));
    assert!(closed.is_ok(), "close did not return within 10 s");
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_commits_queued_writes_then_refuses_writes() {
    let (_dir, store) = fresh();
    assert!(store.is_ready());
    let writes: Vec<_> = (0..32u128)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let p = sample_payment(payment_id(i), project_id(1), &format!("o{i}"));
                store.insert_payment(&p).await
            })
        })
        .collect();
    let mut results = Vec::new();
    for w in writes {
        results.push(w.await.expect("the task finishes"));
    }
    let closer = Arc::clone(&store);
    tokio::task::spawn_blocking(move || closer.close())
        .await
        .expect("close");
    assert!(!store.is_ready());
    assert!(results.iter().all(|r| r == &Ok(InsertOutcome::Inserted)));
    let late = sample_payment(payment_id(99), project_id(1), "late");
    assert!(matches!(
        store.insert_payment(&late).await,
        Err(StoreError::Unavailable { .. })
    ));
    // Reads keep working on the pool.
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![(PaymentStatus::Created, 32)]
    );
}

#[test]
fn a_version_1_database_is_upgraded_in_place() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("v1.db");
    // A database exactly as a v1 build left it, with a project row.
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(include_str!("../src/migrations/0001_initial.sql"))
        .expect("v1 schema");
    conn.execute_batch(
        "PRAGMA user_version = 1;
         INSERT INTO merchants (id, name, paused, callback_url, created_at)
           VALUES ('00000000-0000-4000-8000-000000000001', 'm', 0, NULL, 0);
         INSERT INTO projects (id, merchant_id, name, active, test_mode, lifetime_secs,
           lifetime_nanos, contract, callback_url, ip_allow_list, signature_required,
           rate_per_second, rate_burst, created_at)
           VALUES ('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001',
             'p', 1, 0, 900, 0, '{\"currencies\":[\"RUB\"],\"methods\":[]}', NULL, '[]', 0, 50, 100, 0);",
    )
    .expect("v1 rows");
    drop(conn);
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("upgrade");
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let project = rt
        .block_on(MerchantStoreExt::project(
            &store,
            "00000000-0000-4000-8000-000000000002"
                .parse()
                .expect("uuid"),
        ))
        .expect("read")
        .expect("the v1 project survives the upgrade");
    assert_eq!(project.name, "p");
    assert!(
        !project.paused,
        "v2 adds paused = false to existing projects"
    );
}

/// The change to a payment updates only what transitions change; a change that alters a field
/// fixed at creation is refused as a conflict and writes nothing (not silently half-applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_a_field_fixed_at_creation_is_refused() {
    let (_dir, store) = fresh();
    let p = full_payment(payment_id(1), project_id(1), "fixed");
    store.insert_payment(&p).await.expect("insert");
    let mut next = changed(&p, PaymentStatus::Completed, T0);
    next.fingerprint = "another request".to_string();
    let refused = store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: next.clone(),
            expected_version: p.version,
            event: None,
            audit: None,
        })
        .await;
    assert_eq!(refused, Err(StoreError::Conflict));
    assert_eq!(store.payment(p.id).await.expect("read"), Some(p.clone()));

    next.fingerprint = p.fingerprint.clone();
    next.amount = payments_core::amount::Amount::parse("1.5").expect("an amount");
    store
        .commit_change(&PaymentChange {
            history: None,
            ledger: None,
            payment: next.clone(),
            expected_version: p.version,
            event: None,
            audit: None,
        })
        .await
        .expect("a change of mutable fields");
    assert_eq!(store.payment(p.id).await.expect("read"), Some(next));
}

/// A purge larger than one chunk (5,000 per writer job) deletes every expired nonce and keeps
/// the live ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_nonce_purge_runs_in_chunks_and_misses_nothing() {
    let (_dir, store) = fresh();
    let a = project_id(1);
    let (short, long) = short_and_long();
    let names: Vec<String> = (0..12_345).map(|i| format!("old-{i}")).collect();
    for chunk in names.chunks(1_000) {
        let uses = chunk.iter().map(|n| store.use_nonce(a, n, T0, short));
        for fresh in futures_util::future::join_all(uses).await {
            assert!(fresh.expect("use_nonce"));
        }
    }
    for i in 0..10 {
        assert!(store
            .use_nonce(a, &format!("live-{i}"), T0, long)
            .await
            .expect("use_nonce"));
    }
    assert_eq!(
        purge_all(&*store, Retained::Nonces, short, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        12_345
    );
    assert_eq!(
        purge_all(&*store, Retained::Nonces, short, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        0
    );
    assert!(
        store.use_nonce(a, "old-0", short, long).await.expect("use"),
        "a purged nonce is free again"
    );
    assert!(
        !store
            .use_nonce(a, "live-3", short, long)
            .await
            .expect("use"),
        "live nonces stay"
    );
}

/// Migration 3 counts the payments a version 2 database already holds, and the store keeps
/// counting from there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_2_database_gets_its_status_counts() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("v2.db");
    {
        let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
        for i in 0..5u128 {
            let mut p = sample_payment(payment_id(i), project_id(1), &format!("o{i}"));
            if i < 2 {
                p.status = PaymentStatus::Completed;
            }
            store.insert_payment(&p).await.expect("insert");
        }
        store.close();
    }
    // Back to version 2: what later migrations add is dropped.
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(payments_store_sqlite::testing::DOWNGRADE_TO_VERSION_2)
        .expect("back to v2");
    drop(conn);
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("upgrade");
    assert_eq!(user_version(&path), SCHEMA_VERSION);
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![(PaymentStatus::Created, 3), (PaymentStatus::Completed, 2)]
    );
    // Migration 25 keyed the payments written before it: found in any case of their letters.
    let mut any_case = payments_core::store::PaymentQuery::new(project_id(1), 20);
    any_case.merchant_payment_id_prefix_any_case = Some("O".into());
    assert_eq!(store.find_payments(&any_case).await.expect("find").len(), 5);
    let p = sample_payment(payment_id(9), project_id(1), "o9");
    store.insert_payment(&p).await.expect("insert");
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![(PaymentStatus::Created, 4), (PaymentStatus::Completed, 2)]
    );
}

/// A read-only open reads and refuses every write as an I/O cause; it migrates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_store_reads_and_refuses_writes() {
    let (dir, store) = fresh();
    let p = sample_payment(payment_id(1), project_id(1), "o1");
    store.insert_payment(&p).await.expect("insert");
    store.close();
    let ro = SqliteStore::open(
        dir.path().join("store.db"),
        SqliteOptions {
            read_only: true,
            ..SqliteOptions::default()
        },
    )
    .expect("open read-only");
    assert_eq!(ro.payment(p.id).await.expect("read"), Some(p));
    let err = ro.check_writable().await.expect_err("read-only");
    assert_eq!(err.cause(), "io", "{err}");
    let q = sample_payment(payment_id(2), project_id(1), "o2");
    assert!(matches!(
        ro.insert_payment(&q).await,
        Err(StoreError::Unavailable { .. })
    ));
    drop(ro);
    let conn = rusqlite::Connection::open(dir.path().join("store.db")).expect("open");
    conn.execute_batch("PRAGMA user_version = 2")
        .expect("older");
    drop(conn);
    let err = SqliteStore::open(
        dir.path().join("store.db"),
        SqliteOptions {
            read_only: true,
            ..SqliteOptions::default()
        },
    )
    .expect_err("an older schema is not migrated read-only");
    assert!(
        matches!(err, OpenError::SchemaMismatch { found: 2, .. }),
        "{err:?}"
    );
}

/// With `migrate` off (every command but `serve` and `migrate`), an older database is refused
/// with a message naming `payments-server migrate`, and left as it was; a current one opens.
#[test]
fn an_older_database_is_refused_without_migrate_and_left_unchanged() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("old.db");
    drop(SqliteStore::open(&path, SqliteOptions::default()).expect("open"));
    let no_migrate = SqliteOptions {
        migrate: false,
        ..SqliteOptions::default()
    };
    drop(SqliteStore::open(&path, no_migrate.clone()).expect("a current database opens"));
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION - 1))
        .expect("set user_version");
    drop(conn);

    let err = SqliteStore::open(&path, no_migrate.clone()).expect_err("refused");
    assert!(
        matches!(err, OpenError::Schema(SchemaError::NeedsMigration { found, supported }) if found == SCHEMA_VERSION - 1 && supported == SCHEMA_VERSION),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("run `payments-server migrate`"),
        "{err}"
    );
    assert_eq!(
        user_version(&path),
        SCHEMA_VERSION - 1,
        "nothing was migrated"
    );

    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
        .expect("set user_version");
    drop(conn);
    let err = SqliteStore::open(&path, no_migrate).expect_err("refused");
    assert!(
        matches!(err, OpenError::Schema(SchemaError::NewerSchema { .. })),
        "{err:?}"
    );
}

/// The index of used nonces belongs to one store's writer connection, and another store on
/// the same file (another process: a second embedder, a `payments-server` command) records
/// nonces in the same log: each store sees the other's nonces as used, both through
/// `use_nonce` and through `commit_change_once` without a change, and a purge in one leaves
/// the other's live nonces alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_file_share_their_used_nonces() {
    let (_dir, one, two) = two_stores();
    let a = project_id(1);
    let (short, long) = short_and_long();
    assert!(one.use_nonce(a, "from-one", T0, long).await.expect("use"));
    assert!(
        !two.use_nonce(a, "from-one", T0, long).await.expect("use"),
        "a nonce the other store recorded is a replay"
    );
    assert!(two.use_nonce(a, "from-two", T0, short).await.expect("use"));
    assert!(!one.use_nonce(a, "from-two", T0, long).await.expect("use"));
    let key = |nonce| NonceUse {
        project: a,
        nonce,
        now: T0,
        expires_at: long,
    };
    assert!(!one
        .commit_change_once(key("from-two"), None)
        .await
        .expect("read"));
    assert!(one
        .commit_change_once(key("never-used"), None)
        .await
        .expect("read"));
    // Each store frees what expired; the other's live nonce stays used.
    assert_eq!(
        purge_all(&one, Retained::Nonces, short, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        1
    );
    assert!(
        !two.use_nonce(a, "from-one", short, long)
            .await
            .expect("use"),
        "a live nonce survives the other store's purge"
    );
    assert!(
        one.use_nonce(a, "from-two", short, long)
            .await
            .expect("use"),
        "an expired nonce is free again"
    );
    assert!(!two
        .use_nonce(a, "from-two", short, long)
        .await
        .expect("use"));
}

/// Nonces recorded before the upgrade to the append-only log (schema 8) stay used after it,
/// and the expired ones are free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonces_recorded_before_the_nonce_log_stay_used_after_the_upgrade() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("v2-nonces.db");
    drop(SqliteStore::open(&path, SqliteOptions::default()).expect("open"));
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(payments_store_sqlite::testing::DOWNGRADE_TO_VERSION_2)
        .expect("back to v2");
    let a = project_id(1).to_string();
    let live = (T0 + std::time::Duration::from_secs(600)).unix_millis();
    let expired = (T0 + std::time::Duration::from_secs(1)).unix_millis();
    conn.execute(
        "INSERT INTO nonces (project_id, nonce, expires_at) VALUES (?1, 'live', ?2), \
         (?1, 'expired', ?3)",
        rusqlite::params![a, live, expired],
    )
    .expect("old nonces");
    drop(conn);
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("upgrade");
    let now = T0 + std::time::Duration::from_secs(2);
    let until = T0 + std::time::Duration::from_secs(900);
    assert!(!store
        .use_nonce(project_id(1), "live", now, until)
        .await
        .expect("use"));
    assert!(store
        .use_nonce(project_id(1), "expired", now, until)
        .await
        .expect("use"));
    store.close();
    let conn = rusqlite::Connection::open(&path).expect("open");
    let logged: i64 = conn
        .query_row("SELECT count(*) FROM nonce_log", [], |r| r.get(0))
        .expect("count");
    assert_eq!(
        logged, 1,
        "the re-used one is appended; the old rows stay where they were"
    );
}

/// A nonce use is appended to the log, and a purge deletes the expired rows of the log too
/// (the file does not keep every nonce ever used).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nonce_log_is_appended_to_and_purged() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("log.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let a = project_id(1);
    let (short, long) = short_and_long();
    for i in 0..5 {
        assert!(store
            .use_nonce(a, &format!("n-{i}"), T0, short)
            .await
            .expect("use"));
    }
    assert!(store.use_nonce(a, "kept", T0, long).await.expect("use"));
    // Taken over at its expiry: a second row, the index keeps the later expiry.
    assert!(store.use_nonce(a, "n-0", short, long).await.expect("use"));
    let rows = |path: &std::path::Path| -> Vec<(String, i64)> {
        let conn = rusqlite::Connection::open(path).expect("open");
        let mut stmt = conn
            .prepare("SELECT nonce, expires_at FROM nonce_log ORDER BY seq")
            .expect("prepare");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .map(|r| r.expect("row"))
            .collect()
    };
    let logged = rows(&path);
    assert_eq!(logged.len(), 7);
    assert_eq!(logged[0], ("n-0".to_string(), short.unix_millis()));
    assert_eq!(logged[6], ("n-0".to_string(), long.unix_millis()));
    assert_eq!(
        purge_all(&store, Retained::Nonces, short, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        4
    );
    let names: Vec<String> = rows(&path).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["kept", "n-0"]);
    assert!(!store.use_nonce(a, "n-0", short, long).await.expect("use"));
}

/// Keys kept longer than an hour (the upstream's notification ids) are recorded in the table
/// keyed by them, not in the log; a key is used whichever of the two holds it, and a purge
/// frees both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_kept_keys_and_short_nonces_are_one_set() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("keys.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let a = project_id(1);
    let month = T0 + std::time::Duration::from_secs(30 * 24 * 3600);
    let minute = T0 + std::time::Duration::from_secs(60);
    assert!(store.use_nonce(a, "long", T0, month).await.expect("use"));
    assert!(!store.use_nonce(a, "long", T0, minute).await.expect("use"));
    assert!(store.use_nonce(a, "short", T0, minute).await.expect("use"));
    assert!(!store.use_nonce(a, "short", T0, month).await.expect("use"));
    let key = |nonce| NonceUse {
        project: a,
        nonce,
        now: T0,
        expires_at: month,
    };
    assert!(!store
        .commit_change_once(key("long"), None)
        .await
        .expect("read"));
    assert!(!store
        .commit_change_once(key("short"), None)
        .await
        .expect("read"));
    let count = |sql: &str| -> i64 {
        let conn = rusqlite::Connection::open(&path).expect("open");
        conn.query_row(sql, [], |r| r.get(0)).expect("count")
    };
    assert_eq!(
        count("SELECT count(*) FROM nonce_log WHERE nonce = 'short'"),
        1
    );
    assert_eq!(count("SELECT count(*) FROM nonces WHERE nonce = 'long'"), 1);
    assert_eq!(
        count("SELECT count(*) FROM nonce_log WHERE nonce = 'long'"),
        0
    );
    assert_eq!(
        purge_all(&store, Retained::Nonces, month, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        2
    );
    assert_eq!(count("SELECT count(*) FROM nonces"), 0);
    assert_eq!(
        count("SELECT count(*) FROM nonce_log"),
        1,
        "the log's newest row is kept"
    );
    assert!(store
        .use_nonce(a, "long", month, month + std::time::Duration::from_secs(1))
        .await
        .expect("use"));
}

/// The log's sequence numbers never go back, also when a purge finds every row expired: a
/// store that has seen row n must find the next nonce another store records, which would
/// otherwise take a number it has already seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_of_the_whole_log_does_not_hide_the_next_nonce_from_another_store() {
    let (_dir, one, two) = two_stores();
    let a = project_id(1);
    let (short, long) = short_and_long();
    assert!(one.use_nonce(a, "first", T0, short).await.expect("use"));
    // Two catches up with the first row.
    assert!(two.use_nonce(a, "other", T0, short).await.expect("use"));
    assert_eq!(
        purge_all(&one, Retained::Nonces, short, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        2
    );
    assert!(one.use_nonce(a, "next", short, long).await.expect("use"));
    assert!(
        !two.use_nonce(a, "next", short, long).await.expect("use"),
        "the other store's nonce after a purge is a replay"
    );
}

/// A store frees the expired nonces it learnt from another store on the same file even when
/// that store purged their log rows first (the index is swept whole after another
/// connection's commits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nonces_purged_by_another_store_leave_this_stores_index_too() {
    let (_dir, one, two) = two_stores();
    let a = project_id(1);
    let (short, long) = short_and_long();
    assert!(two.use_nonce(a, "x", T0, short).await.expect("use"));
    assert!(two.use_nonce(a, "y", T0, long).await.expect("use"));
    // One learns x and y.
    assert!(one.use_nonce(a, "z", T0, long).await.expect("use"));
    assert_eq!(
        purge_all(&two, Retained::Nonces, short, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        1,
        "x"
    );
    assert_eq!(
        purge_all(&one, Retained::Nonces, short, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        1,
        "x leaves one's index although its log row is gone"
    );
    assert_eq!(
        purge_all(&one, Retained::Nonces, short, NONCE_PURGE_BATCH)
            .await
            .expect("purge"),
        0
    );
}

/// A database the store creates is its owner's alone, and so are the `-wal` and `-shm` files
/// SQLite makes beside it (an embedder's process usually runs with umask 022, which would make
/// them readable by every user of the machine); one that others could read is made so at open.
#[cfg(unix)]
#[tokio::test]
async fn the_database_files_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| {
        std::fs::metadata(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .permissions()
            .mode()
            & 0o777
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("new.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    store
        .upsert_setting("files.check", "on")
        .await
        .expect("a write, so that the WAL has content");
    for suffix in ["", "-wal", "-shm"] {
        let file = dir.path().join(format!("new.db{suffix}"));
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    store.close();

    let old = dir.path().join("old.db");
    std::fs::write(&old, b"").expect("an empty file");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    SqliteStore::open(&old, SqliteOptions::default())
        .expect("open")
        .close();
    assert_eq!(mode(&old), 0o600);
}

fn install(store: &SqliteStore, current: u8, previous: &[u8], writes: SealWrites) {
    store
        .requisite_sealing()
        .install(
            payments_core::testing::sealing_keys(current, previous),
            Arc::new(payments_core::testing::SeededRandom::new(u64::from(
                current,
            ))),
            writes,
        )
        .expect("installed once");
}

/// The stored requisite columns of payment `n`, as the file holds them.
fn raw_requisites(path: &std::path::Path, n: u128) -> Vec<Option<String>> {
    let conn = rusqlite::Connection::open(path).expect("open the file");
    conn.query_row(
        "SELECT requisite, holder_name, qrcode_link, deeplink_url FROM payments WHERE id = ?1",
        [payment_id(n).to_string()],
        |r| (0..4).map(|i| r.get::<_, Option<String>>(i)).collect(),
    )
    .expect("the payment's row")
}

/// Requisites are sealed in the file and read back in clear through every read path; a
/// rotation's re-seal moves them to the new key; a store without the key refuses them as
/// corrupt; writes in clear (a rolling upgrade) are sealed by the next re-seal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requisites_are_sealed_at_rest_and_resealed_after_a_rotation() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store.db");
    let a = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&a, 1, &[], SealWrites::Sealed);
    let p = full_payment(payment_id(1), project_id(1), "sealed-1");
    let req = p
        .requisites
        .clone()
        .expect("the full payment has requisites");
    assert_eq!(a.insert_payment(&p).await.unwrap(), InsertOutcome::Inserted);
    let raw = raw_requisites(&path, 1);
    let key_a = payments_core::testing::sealing_keys(1, &[])
        .current_id()
        .unwrap()
        .to_string();
    for value in raw.iter() {
        let value = value.as_deref().expect("all four are set");
        assert!(value.starts_with(&format!("v1.{key_a}.")), "{value}");
    }
    assert_eq!(a.payment(payment_id(1)).await.unwrap(), Some(p.clone()));
    let mut q = payments_core::store::PaymentQuery::new(project_id(1), 10);
    q.merchant_payment_id_prefix = Some("sealed".into());
    assert_eq!(a.find_payments(&q).await.unwrap(), vec![p.clone()]);
    assert_eq!(
        a.sealed_requisite_keys().await.unwrap(),
        vec![(key_a.clone(), 1)]
    );
    // A change writes them sealed again, under a fresh nonce.
    let next = changed(&p, PaymentStatus::Completed, T0);
    a.commit_change(&PaymentChange {
        history: None,
        ledger: None,
        payment: next.clone(),
        expected_version: p.version,
        event: None,
        audit: None,
    })
    .await
    .unwrap();
    let rewritten = raw_requisites(&path, 1);
    assert_ne!(rewritten, raw);
    assert_eq!(a.payment(payment_id(1)).await.unwrap(), Some(next.clone()));
    a.close();

    // Without the key, the payment is refused, never shown sealed.
    let stranger = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&stranger, 9, &[], SealWrites::Sealed);
    assert!(matches!(
        stranger.payment(payment_id(1)).await,
        Err(StoreError::Corrupt(_))
    ));
    stranger.close();

    // A rolling upgrade's node writes in clear; the rotation's re-seal seals everything.
    let plain = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&plain, 1, &[], SealWrites::Plain);
    let q2 = sample_payment(payment_id(2), project_id(1), "plain-2");
    let mut q2 = changed(&q2, PaymentStatus::Processing, T0);
    q2.requisites = Some(req.clone());
    plain.insert_payment(&q2).await.unwrap();
    assert_eq!(
        raw_requisites(&path, 2)[0].as_deref(),
        Some(req.requisite.as_str())
    );
    plain.close();
    let b = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&b, 2, &[1], SealWrites::Sealed);
    let report = b.reseal_requisites().await.unwrap();
    assert_eq!(
        (report.resealed, report.current, report.changed_meanwhile),
        (2, 0, 0)
    );
    let key_b = payments_core::testing::sealing_keys(2, &[])
        .current_id()
        .unwrap()
        .to_string();
    assert_eq!(b.sealed_requisite_keys().await.unwrap(), vec![(key_b, 2)]);
    assert_eq!(b.reseal_requisites().await.unwrap().current, 2);
    assert_eq!(b.payment(payment_id(1)).await.unwrap(), Some(next));
    assert_eq!(b.payment(payment_id(2)).await.unwrap(), Some(q2));
    b.close();
    // The old key alone opens nothing any more.
    let old = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&old, 1, &[], SealWrites::Sealed);
    assert!(old.payment(payment_id(2)).await.is_err());
}

/// Payments written before schema 16 (a sealed requisite, no `requisite_last4`) are found by
/// their last four digits after the backfill, which opens each requisite and cuts it by the
/// core's rule; a second run has nothing left to do; a requisite too short is counted, not
/// guessed. A payment written by this build has its last four from the write itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last4_backfill_makes_old_payments_findable() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&store, 1, &[], SealWrites::Sealed);
    let by_last4 = |last4: &str| {
        let mut q = payments_core::store::PaymentQuery::new(project_id(1), 10);
        q.requisite_last4 = Some(last4.to_string());
        q
    };
    for (n, requisite) in [
        (1u128, "2200123456789010"),
        (2, "+7 900 555-90-10"),
        (3, "12-3"),
    ] {
        let mut p = full_payment(payment_id(n), project_id(1), &format!("old-{n}"));
        p.created_at = T0 + std::time::Duration::from_secs(u64::try_from(n).expect("small"));
        p.requisites.as_mut().expect("requisites").requisite = requisite.to_string();
        assert_eq!(
            store.insert_payment(&p).await.unwrap(),
            InsertOutcome::Inserted
        );
    }
    let found =
        |v: Vec<payments_core::payment::Payment>| v.into_iter().map(|p| p.id).collect::<Vec<_>>();
    assert_eq!(
        found(store.find_payments(&by_last4("9010")).await.unwrap()),
        vec![payment_id(2), payment_id(1)],
        "written by this build: found at once"
    );
    // As an older build wrote them.
    rusqlite::Connection::open(&path)
        .expect("open the file")
        .execute("UPDATE payments SET requisite_last4 = NULL", [])
        .expect("cleared");
    assert!(store
        .find_payments(&by_last4("9010"))
        .await
        .unwrap()
        .is_empty());
    let report = store.backfill_requisite_last4().await.unwrap();
    assert_eq!(
        (report.filled, report.too_short, report.changed_meanwhile),
        (2, 1, 0)
    );
    assert_eq!(
        found(store.find_payments(&by_last4("9010")).await.unwrap()),
        vec![payment_id(2), payment_id(1)],
        "found after the backfill"
    );
    let again = store.backfill_requisite_last4().await.unwrap();
    assert_eq!((again.filled, again.too_short), (0, 1), "idempotent");
    store.close();
}

/// The stored content of appeal `n`'s receipt `index`, as the file holds it.
fn raw_receipt(path: &std::path::Path, n: u128, index: u8) -> Vec<u8> {
    let conn = rusqlite::Connection::open(path).expect("open the file");
    conn.query_row(
        "SELECT content FROM appeal_receipts WHERE appeal_id = ?1 AND idx = ?2",
        rusqlite::params![appeal_id(n).to_string(), index],
        |r| r.get(0),
    )
    .expect("the receipt's row")
}

/// An appeal's receipts are sealed in the file, each bound to its appeal and index (one moved
/// to another place does not open: corrupt, never shown); a store without the key refuses
/// them; a node writing in clear (sealing off for a rolling upgrade) writes them plain and
/// still reads the sealed ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_are_sealed_at_rest_and_bound_to_their_place() {
    use payments_core::appeal::AppealInsert;
    use payments_core::receipt::ReceiptKind;
    use payments_core::store::AppealStore;
    use payments_core::testing::contract::{sample_appeal, sample_receipt};

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store.db");
    let a = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&a, 1, &[], SealWrites::Sealed);
    let receipts = [
        sample_receipt(ReceiptKind::Png, 1, 5_000),
        sample_receipt(ReceiptKind::Pdf, 2, 40),
    ];
    let appeal = sample_appeal(1, project_id(1), payment_id(1), T0, &receipts);
    assert_eq!(
        a.insert_appeal(&appeal, &receipts).await.unwrap(),
        AppealInsert::Inserted
    );
    let key = payments_core::testing::sealing_keys(1, &[])
        .current_id()
        .unwrap()
        .to_string();
    let stored: Vec<Vec<u8>> = (0..2).map(|i| raw_receipt(&path, 1, i)).collect();
    for (raw, receipt) in stored.iter().zip(&receipts) {
        assert!(raw.starts_with(format!("v1.{key}.").as_bytes()));
        assert_eq!(raw.len(), receipt.len() + 52, "sealed as bytes, no base64");
        assert!(!raw.windows(16).any(|w| receipt.bytes().starts_with(w)));
    }
    for (i, receipt) in receipts.iter().enumerate() {
        let back = a.appeal_receipt(appeal.id, i as u8).await.unwrap();
        assert_eq!(back.as_ref(), Some(receipt));
    }
    a.close();

    // Receipt 0's content moved to receipt 1's row does not open there.
    let conn = rusqlite::Connection::open(&path).expect("open the file");
    conn.execute(
        "UPDATE appeal_receipts SET content = ?1 WHERE appeal_id = ?2 AND idx = 1",
        rusqlite::params![stored[0], appeal.id.to_string()],
    )
    .expect("move a receipt");
    drop(conn);
    let b = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&b, 1, &[], SealWrites::Sealed);
    assert!(matches!(
        b.appeal_receipt(appeal.id, 1).await,
        Err(StoreError::Corrupt(_))
    ));
    assert_eq!(
        b.appeal_receipt(appeal.id, 0).await.unwrap().as_ref(),
        Some(&receipts[0])
    );
    b.close();

    // Without the key: refused, never shown sealed.
    let stranger = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&stranger, 9, &[], SealWrites::Sealed);
    assert!(matches!(
        stranger.appeal_receipt(appeal.id, 0).await,
        Err(StoreError::Corrupt(_))
    ));
    stranger.close();

    // Writes in clear: plain in the file, and both forms read.
    let plain = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&plain, 1, &[], SealWrites::Plain);
    let other = sample_appeal(2, project_id(1), payment_id(2), T0, &receipts[..1]);
    assert_eq!(
        plain.insert_appeal(&other, &receipts[..1]).await.unwrap(),
        AppealInsert::Inserted
    );
    assert_eq!(raw_receipt(&path, 2, 0), receipts[0].bytes());
    for id in [appeal.id, other.id] {
        let back = plain.appeal_receipt(id, 0).await.unwrap();
        assert_eq!(back.as_ref(), Some(&receipts[0]));
    }
}

/// An appeal's change never alters the columns fixed at creation: one that would is refused as
/// a conflict, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_appeal_change_to_a_field_fixed_at_creation_is_refused() {
    use payments_core::appeal::{AppealInsert, AppealState};
    use payments_core::store::{AppealChange, AppealStore};
    use payments_core::testing::contract::sample_appeal;

    let (_dir, store) = fresh();
    let appeal = sample_appeal(1, project_id(1), payment_id(1), T0, &[]);
    assert_eq!(
        store.insert_appeal(&appeal, &[]).await.unwrap(),
        AppealInsert::Inserted
    );
    let mut next = appeal.clone();
    (next.state, next.version) = (AppealState::UnderReview, 2);
    next.payer_bank = Some("another bank".into());
    let change = AppealChange {
        appeal: next.clone(),
        expected_version: 1,
        payments: Vec::new(),
        audit: None,
    };
    assert_eq!(
        store.commit_appeal(&change).await,
        Err(StoreError::Conflict)
    );
    assert_eq!(store.appeal(appeal.id).await.unwrap(), Some(appeal.clone()));
    next.payer_bank = appeal.payer_bank.clone();
    let change = AppealChange {
        appeal: next.clone(),
        ..change
    };
    store.commit_appeal(&change).await.unwrap();
    assert_eq!(store.appeal(appeal.id).await.unwrap(), Some(next));
}

/// The appeals' reads go through schema 22's indexes: a payment's active appeal through the
/// partial unique index, a project's page and the expiry sweep's in their order, without a sort.
#[test]
fn appeals_are_read_through_their_indexes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("plan.db");
    drop(SqliteStore::open(&path, SqliteOptions::default()).expect("open"));
    let conn = rusqlite::Connection::open(&path).expect("open");
    let plan = |sql: &str| -> String {
        let n = sql.matches('?').count();
        conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("a plan")
            .query_map(rusqlite::params_from_iter(vec![0; n]), |r| {
                r.get::<_, String>(3)
            })
            .expect("the plan's rows")
            .collect::<Result<Vec<_>, _>>()
            .expect("text")
            .join("; ")
    };
    let active =
        plan(payments_store_sql::appeals::ACTIVE_APPEAL.text(payments_store_sql::Dialect::Sqlite));
    assert!(active.contains("appeals_active_payment"), "{active}");
    let project = payments_core::appeal::AppealQuery {
        project: Some(project_id(1)),
        after: Some((T0, appeal_id(1))),
        ..payments_core::appeal::AppealQuery::newest(20)
    };
    let (sql, _) = payments_store_sql::appeals::page(&project, payments_store_sql::Dialect::Sqlite);
    let project = plan(&sql);
    assert!(project.contains("appeals_project_created"), "{project}");
    assert!(!project.contains("TEMP B-TREE"), "sorted apart: {project}");
    let key =
        plan(payments_store_sql::appeals::APPEAL_BY_KEY.text(payments_store_sql::Dialect::Sqlite));
    assert!(key.contains("appeals_project_key"), "{key}");
}

/// A column of the payments (`amount_key`, `merchant_payment_id_key`), by id.
fn keys(conn: &rusqlite::Connection, column: &str) -> Vec<Option<String>> {
    let mut s = conn
        .prepare(&format!("SELECT {column} FROM payments ORDER BY id"))
        .expect("prepare");
    s.query_map([], |r| r.get::<_, Option<String>>(0))
        .expect("read")
        .collect::<Result<Vec<_>, _>>()
        .expect("keys")
}

/// Migration 23's fill keys the payments an older build wrote (no `amount_key`) as this
/// build's writes do (`Amount::normalized`), whatever the scale the amount was written with:
/// the `amount` filter finds them after the fill and not before; a second fill changes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_amount_key_fill_keys_old_payments_as_a_write_does() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&store, 1, &[], SealWrites::Sealed);
    let (payments, normalized) = payments_core::testing::contract::payments_of_every_scale();
    for p in &payments {
        assert_eq!(
            store.insert_payment(p).await.unwrap(),
            InsertOutcome::Inserted
        );
    }
    let conn = rusqlite::Connection::open(&path).expect("open the file");
    let keys = |conn: &rusqlite::Connection| keys(conn, "amount_key");
    let written = keys(&conn);
    conn.execute("UPDATE payments SET amount_key = NULL", [])
        .expect("as an older build wrote them");
    let by_amount = |text: &str| {
        let mut q = payments_core::store::PaymentQuery::new(project_id(1), 20);
        q.amount = Some(payments_core::amount::Amount::parse(text).expect("an amount"));
        q
    };
    assert!(store
        .find_payments(&by_amount("100"))
        .await
        .unwrap()
        .is_empty());
    for _ in 0..2 {
        conn.execute_batch(payments_store_sql::schema::AMOUNT_KEY_FILL_SQLITE)
            .expect("fill");
        assert_eq!(keys(&conn), written, "the fill's keys are a write's");
    }
    assert_eq!(
        written.iter().flatten().cloned().collect::<Vec<_>>(),
        normalized
    );
    assert_eq!(
        store
            .find_payments(&by_amount("100.000"))
            .await
            .unwrap()
            .len(),
        2
    );
}

/// Migration 25's fill keys the merchant payment ids an older build wrote (no
/// `merchant_payment_id_key`) as this build's writes do (`merchant_payment_id_key`, the
/// letters in lower case): the search in any case finds them after the fill and not before; a
/// second fill changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_merchant_payment_id_key_fill_keys_old_payments_as_a_write_does() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let (payments, lowered) = payments_core::testing::contract::payments_of_every_case();
    for p in &payments {
        assert_eq!(
            store.insert_payment(p).await.unwrap(),
            InsertOutcome::Inserted
        );
    }
    let conn = rusqlite::Connection::open(&path).expect("open the file");
    let keys = |conn: &rusqlite::Connection| keys(conn, "merchant_payment_id_key");
    let written = keys(&conn);
    assert_eq!(
        written.iter().flatten().cloned().collect::<Vec<_>>(),
        lowered
    );
    conn.execute("UPDATE payments SET merchant_payment_id_key = NULL", [])
        .expect("as an older build wrote them");
    let mut any_case = payments_core::store::PaymentQuery::new(project_id(1), 20);
    any_case.merchant_payment_id_prefix_any_case = Some("ORD-100".into());
    assert!(store.find_payments(&any_case).await.unwrap().is_empty());
    for _ in 0..2 {
        conn.execute_batch(payments_store_sql::schema::MERCHANT_PAYMENT_ID_KEY_FILL_SQLITE)
            .expect("fill");
        assert_eq!(keys(&conn), written, "the fill's keys are a write's");
    }
    assert_eq!(store.find_payments(&any_case).await.unwrap().len(), 3);
}

/// A connection to a fresh database of the current schema in `dir`, for its query plans.
fn planner(dir: &TempDir) -> rusqlite::Connection {
    let path = dir.path().join("plan.db");
    drop(SqliteStore::open(&path, SqliteOptions::default()).expect("open"));
    rusqlite::Connection::open(&path).expect("open")
}

/// SQLite's plan of a statement (its values all 0), its steps joined by `; `.
fn query_plan(
    conn: &rusqlite::Connection,
    (sql, values): (String, Vec<payments_store_sql::SqlValue>),
) -> String {
    conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("a plan")
        .query_map(rusqlite::params_from_iter(vec![0; values.len()]), |r| {
            r.get::<_, String>(3)
        })
        .expect("the plan's rows")
        .collect::<Result<Vec<_>, _>>()
        .expect("text")
        .join("; ")
}

/// The search's branches of schema 25 read through its indexes: a merchant payment id
/// prefix in any case through `payments_project_mpid_key`, a metadata value under any key
/// through `payment_metadata_value` in the list's order (no sort of its matches, one lookup
/// per row for the payment's smaller keys), alone and as branches of one union; never
/// through a read of every payment of the project; a card number through its last four
/// digits' index.
#[test]
fn the_search_keys_are_read_through_their_indexes() {
    use payments_store_sql::listing::{payment_page, PrefixRead};
    use payments_store_sql::Dialect;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let conn = planner(&dir);
    let plan = |statement| query_plan(&conn, statement);
    let mut prefix = payments_core::store::PaymentQuery::new(project_id(1), 21);
    prefix.merchant_payment_id_prefix_any_case = Some("ord-".into());
    let sealing = payments_store_sql::sealing::RequisiteSealing::new();
    let narrow = plan(payment_page(
        &prefix,
        Dialect::Sqlite,
        &[PrefixRead::Matches],
        &sealing,
    ));
    assert!(narrow.contains("payments_project_mpid_key"), "{narrow}");
    let mut value = payments_core::store::PaymentQuery::new(project_id(1), 21);
    value.metadata_value = Some("ivan@example.com".into());
    value.before = Some((T0, payment_id(9)));
    let by_value = plan(payment_page(&value, Dialect::Sqlite, &[], &sealing));
    assert!(by_value.contains("payment_metadata_value"), "{by_value}");
    assert!(
        !by_value.contains("TEMP B-TREE"),
        "sorted apart: {by_value}"
    );
    let mut union = prefix.clone();
    union.union = vec![value];
    let both = plan(payment_page(
        &union,
        Dialect::Sqlite,
        &[PrefixRead::Matches, PrefixRead::Time],
        &sealing,
    ));
    for index in ["payments_project_mpid_key", "payment_metadata_value"] {
        assert!(both.contains(index), "{index}: {both}");
    }
    // A card number: its last four digits' index, the digests under both installed keys
    // checked on the rows it reads.
    let keyed = payments_store_sql::sealing::RequisiteSealing::new();
    keyed
        .install(
            payments_core::testing::sealing_keys(1, &[2]),
            Arc::new(payments_core::testing::SeededRandom::new(1)),
            SealWrites::Sealed,
        )
        .expect("installed");
    let mut card = payments_core::store::PaymentQuery::new(project_id(1), 21);
    card.requisite_number = payments_core::payment::RequisiteNumber::of("2200 1234 5678 4242");
    let (sql, values) = payment_page(&card, Dialect::Sqlite, &[], &keyed);
    assert_eq!(
        values.len(),
        1 + 1 + 2 + 2 + 1,
        "project, last4, digests, key ids: {sql}"
    );
    let by_card = plan((sql, values));
    assert!(by_card.contains("payments_project_last4"), "{by_card}");
    for p in [&narrow, &by_value, &both, &by_card] {
        assert!(!p.contains("SCAN payments"), "a read of every payment: {p}");
    }
}

/// A broad prefix's questions (`listing::PrefixPlan`) read through the indexes they are
/// written for: its count through the id's own index, its probe of the newest
/// payments through `payments_project_created`, and its newest match from
/// `payments_project_mpid_key` alone (schema 27: the index holds the time), never through
/// the time's index (which reads every newer payment that does not match), however the time
/// window and the cursor bound it.
#[test]
fn a_broad_prefix_is_planned_through_its_indexes() {
    use payments_store_sql::listing::{PrefixPlan, PrefixRead, NARROW_PREFIX};
    use payments_store_sql::Dialect;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let conn = planner(&dir);
    let plan = |statement| query_plan(&conn, statement);
    let mut q = payments_core::store::PaymentQuery::new(project_id(1), 50);
    q.merchant_payment_id_prefix = Some("ord-".into());
    q.created_from = Some(T0);
    q.created_to = Some(T0 + std::time::Duration::from_secs(3600));
    q.before = Some((T0 + std::time::Duration::from_secs(60), payment_id(9)));
    let mut asked = PrefixPlan::new(&q);
    let broad = i64::try_from(NARROW_PREFIX + 1).expect("small");
    let mut plans = Vec::new();
    for told in [broad, 0] {
        plans.push(plan(asked.question(Dialect::Sqlite).expect("a question")));
        asked.answer(&[Some(told)]);
    }
    plans.push(plan(
        asked.question(Dialect::Sqlite).expect("the third question"),
    ));
    asked.answer(&[Some(1_000)]);
    assert_eq!(asked.question(Dialect::Sqlite), None);
    assert_eq!(
        asked.reads(),
        [PrefixRead::From(Timestamp::from_unix_millis(1_000))]
    );
    let [count, probe, newest] = &plans[..] else {
        panic!("three questions: {plans:?}")
    };
    assert!(
        count.contains("COVERING INDEX payments_merchant_id"),
        "{count}"
    );
    assert!(probe.contains("payments_project_created"), "{probe}");
    assert!(
        newest.contains("COVERING INDEX payments_project_mpid_key"),
        "{newest}"
    );
}

/// The ids of the payments `q` finds.
async fn found(
    store: &SqliteStore,
    q: &payments_core::store::PaymentQuery,
) -> Vec<payments_core::ids::PaymentId> {
    let page = store.find_payments(q).await.expect("find");
    page.into_iter().map(|p| p.id).collect()
}

/// Schema 25's requisite digest: the file holds the card number neither in clear nor
/// unkeyed, only sealed and as its digest under the installed key (`<key id>.<HMAC>`); a
/// search by the full number compares the digest, and a payment whose digest the installed
/// keys cannot check (none: written before schema 25; or a dropped key's) is found by its
/// last four digits, as before, until `backfill_requisite_last4` digests it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_number_is_found_by_its_keyed_digest_never_kept_in_clear() {
    use payments_core::payment::RequisiteNumber;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    install(&store, 1, &[], SealWrites::Sealed);
    for (n, card) in [(1, "2200 1234 5678 4242"), (2, "2200 9999 8888 4242")] {
        let mut p = sample_payment(payment_id(n), project_id(1), &format!("c{n}"));
        p.created_at = T0 + std::time::Duration::from_secs(u64::try_from(n).expect("small"));
        p.requisites = Some(payments_core::testing::contract::paid_to(card));
        store.insert_payment(&p).await.expect("insert");
    }
    let conn = rusqlite::Connection::open(&path).expect("open the file");
    // Every column the table has, named (the schema's own list, so a column added later is
    // checked too).
    let columns: String = conn
        .query_row(
            "SELECT group_concat(name, ', ') FROM pragma_table_info('payments')",
            [],
            |r| r.get(0),
        )
        .expect("the columns");
    let mut all = conn
        .prepare(&format!("SELECT {columns} FROM payments"))
        .expect("prepare");
    let width = all.column_count();
    let texts: Vec<String> = all
        .query_map([], |r| {
            Ok((0..width)
                .filter_map(|i| r.get::<_, Option<String>>(i).ok().flatten())
                .collect::<Vec<_>>())
        })
        .expect("read")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows")
        .concat();
    for clear in ["2200123456784242", "2200 1234 5678", "22001234"] {
        assert!(
            !texts.iter().any(|t| t.contains(clear)),
            "{clear} in {texts:?}"
        );
    }
    let key = payments_core::testing::sealing_keys(1, &[]);
    let digests = keys(&conn, "requisite_digest");
    assert_eq!(
        digests[0],
        key.digest("2200123456784242"),
        "the digits' digest under the current key"
    );
    assert_ne!(digests[0], digests[1]);
    let by_card = {
        let mut q = payments_core::store::PaymentQuery::new(project_id(1), 20);
        q.requisite_number = RequisiteNumber::of("2200 1234 5678 4242");
        q
    };
    assert_eq!(found(&store, &by_card).await, vec![payment_id(1)]);
    for unchecked in ["'ffffffff.a-dropped-keys-digest'", "NULL"] {
        conn.execute(
            &format!("UPDATE payments SET requisite_digest = {unchecked} WHERE merchant_payment_id = 'c2'"),
            [],
        )
        .expect("as an older build wrote it, or under a dropped key");
        assert_eq!(
            found(&store, &by_card).await,
            vec![payment_id(2), payment_id(1)],
            "{unchecked}: by the last four digits"
        );
    }
    let report = store.backfill_requisite_last4().await.expect("backfill");
    assert_eq!((report.filled, report.too_short), (1, 0));
    assert_eq!(keys(&conn, "requisite_digest"), digests, "as a write does");
    assert_eq!(found(&store, &by_card).await, vec![payment_id(1)]);
}
