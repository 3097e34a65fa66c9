//! PostgreSQL-specific behaviour beyond the contract suite: migrations applied once by nodes
//! starting together, a newer schema refused, an older one refused without `migrate`, turns of
//! background work across nodes, request-log writes that never wait for another node's trim,
//! and an unreachable database answered as unavailable within the pool's limits.

mod support;

use std::time::{Duration, Instant};

use payments_core::store::{PaymentStore, Store, StoreError};
use payments_core::testing::contract::{payment_id, T0};
use payments_store_postgres::{inspect, migrate, OpenError, PgOptions, PgStore, SCHEMA_VERSION};
use payments_store_sql::schema::{SchemaError, BASELINE};

async fn exec(url: &str, sql: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let task = tokio::spawn(connection);
    client.batch_execute(sql).await.expect("execute");
    drop(client);
    let _ = task.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn nodes_starting_together_migrate_once() {
    let base = support::database_url();
    let url = support::fresh_schema(&base).await;
    let starts = (0..6).map(|_| PgStore::connect(&url, support::options()));
    for store in futures_util::future::join_all(starts).await {
        store.expect("every node starts");
    }
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let task = tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )
        .await
        .expect("read versions");
    let versions: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    // PostgreSQL's five early steps, the baseline, then the shared migrations.
    let shared =
        i32::try_from(BASELINE).expect("small")..=i32::try_from(SCHEMA_VERSION).expect("small");
    assert_eq!(
        versions,
        (1..=5).chain(shared).collect::<Vec<_>>(),
        "each migration applied once"
    );
    drop(client);
    let _ = task.await;
    // The migrate subcommand's function: nothing left to do.
    assert_eq!(
        migrate(&url, Duration::from_secs(5))
            .await
            .expect("migrate"),
        (SCHEMA_VERSION, SCHEMA_VERSION)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn a_newer_schema_is_refused_unless_it_only_expanded() {
    let base = support::database_url();
    let url = support::fresh_schema(&base).await;
    drop(
        PgStore::connect(&url, support::options())
            .await
            .expect("first start"),
    );
    let next = SCHEMA_VERSION + 1;
    // A newer build's expand migration: this build keeps working.
    exec(
        &url,
        &format!("INSERT INTO schema_migrations (version, min_reader) VALUES ({next}, 1)"),
    )
    .await;
    PgStore::connect(&url, support::options())
        .await
        .expect("an expanded schema is still readable");
    // A contract migration that needs the newer build: refused, nothing touched.
    exec(
        &url,
        &format!(
            "INSERT INTO schema_migrations (version, min_reader) VALUES ({}, {next})",
            next + 1
        ),
    )
    .await;
    let err = PgStore::connect(&url, support::options())
        .await
        .expect_err("refused");
    assert!(
        matches!(err, OpenError::Schema(SchemaError::NewerSchema { found, supported }) if found == next + 1 && supported == SCHEMA_VERSION),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn one_node_at_a_time_takes_a_turn() {
    let base = support::database_url();
    let nodes = support::fresh_nodes(&base, 3).await;
    let until = T0 + Duration::from_secs(10);
    let first =
        futures_util::future::join_all(nodes.iter().map(|n| n.take_turn("sweep", T0, until))).await;
    let taken = first
        .into_iter()
        .filter(|r| *r.as_ref().expect("turn"))
        .count();
    assert_eq!(taken, 1, "one of three nodes takes the turn");
    assert!(!nodes[1]
        .take_turn("sweep", until - Duration::from_millis(1), until)
        .await
        .expect("turn"));
    // Another task has its own turns.
    assert!(nodes[2]
        .take_turn("nonce-purge", T0, until)
        .await
        .expect("turn"));
    // When the turn ends, the next one goes to whoever asks first.
    assert!(nodes[2]
        .take_turn("sweep", until, until + Duration::from_secs(10))
        .await
        .expect("turn"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn an_unreachable_database_is_unavailable_within_the_limits() {
    // A port nobody listens on: connecting fails at once.
    let err = PgStore::connect("postgres://postgres@127.0.0.1:1/none", PgOptions::default())
        .await
        .expect_err("nothing listens");
    assert!(matches!(err, OpenError::Connect(_)), "{err:?}");

    let base = support::database_url();
    // A database that does not exist: the server's own words and SQLSTATE, not the client's
    // "db error" (what `payments-server status` and a failed start print).
    let missing = match base.rsplit_once('/') {
        Some((server, _)) => format!("{server}/payments_no_such_database"),
        None => panic!("DATABASE_URL names a database: {base}"),
    };
    let err = PgStore::connect(&missing, PgOptions::default())
        .await
        .expect_err("no such database");
    let text = err.to_string();
    assert!(
        text.contains("3D000") && text.contains("payments_no_such_database"),
        "{text}"
    );
    // A pool of one whose connection is held: the next call waits the pool's limit, then 503.
    let url = support::fresh_schema(&base).await;
    let store = PgStore::connect(
        &url,
        PgOptions {
            pool_size: 1,
            wait_timeout: Duration::from_millis(300),
            ..PgOptions::default()
        },
    )
    .await
    .expect("connect");
    // Another session locks the payments table; the store's one connection blocks on it.
    let (locker, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let task = tokio::spawn(connection);
    locker
        .batch_execute("BEGIN; LOCK TABLE payments IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock");
    let blocked = {
        let store = store.clone();
        tokio::spawn(async move { store.payment(payment_id(1)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let err = store
        .payment(payment_id(2))
        .await
        .expect_err("no connection within the wait");
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered within the wait limit: {:?}",
        started.elapsed()
    );
    locker.batch_execute("COMMIT").await.expect("unlock");
    assert_eq!(blocked.await.expect("the blocked read ends"), Ok(None));
    drop(locker);
    let _ = task.await;
    store.close();
    assert!(!store.is_ready());
}

/// Migration 2 counts the payments a version 1 database already holds, and its trigger keeps
/// counting from there, through status changes on several connections (counter shards).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn a_version_1_database_gets_its_status_counts() {
    use payments_core::payment::PaymentStatus;
    use payments_core::store::PaymentChange;
    use payments_core::testing::contract::{changed, project_id, sample_payment};

    let base = support::database_url();
    let url = support::fresh_schema(&base).await;
    {
        let store = PgStore::connect(&url, support::options())
            .await
            .expect("connect");
        for i in 0..5u128 {
            let mut p = sample_payment(payment_id(i), project_id(1), &format!("o{i}"));
            if i < 2 {
                p.status = PaymentStatus::Completed;
            }
            store.insert_payment(&p).await.expect("insert");
        }
        store.close();
    }
    exec(
        &url,
        payments_store_postgres::testing::DOWNGRADE_TO_VERSION_1,
    )
    .await;
    let store = PgStore::connect(&url, support::options())
        .await
        .expect("upgrade");
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![(PaymentStatus::Created, 3), (PaymentStatus::Completed, 2)]
    );
    // Migration 25 keyed the payments written before it: found in any case of their letters.
    let mut any_case = payments_core::store::PaymentQuery::new(project_id(1), 20);
    any_case.merchant_payment_id_prefix_any_case = Some("O".into());
    assert_eq!(store.find_payments(&any_case).await.expect("find").len(), 5);
    // Inserts and status changes from many connections at once.
    let inserts = (10..40u128).map(|i| {
        let store = store.clone();
        async move {
            let p = sample_payment(payment_id(i), project_id(1), &format!("o{i}"));
            store.insert_payment(&p).await.expect("insert");
            let done = changed(&p, PaymentStatus::Canceled, T0);
            store
                .commit_change(&PaymentChange {
                    history: None,
                    ledger: None,
                    expected_version: p.version,
                    payment: done,
                    event: None,
                    audit: None,
                })
                .await
                .expect("change");
        }
    });
    futures_util::future::join_all(inserts).await;
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        vec![
            (PaymentStatus::Created, 3),
            (PaymentStatus::Completed, 2),
            (PaymentStatus::Canceled, 30)
        ]
    );
}

/// With `migrate` off (every `payments-server` command but `serve` and `migrate`), an empty or
/// older database is refused with a message naming `payments-server migrate` and left as it
/// was; [`migrate`] upgrades it and it opens; a newer database is refused as with `migrate`
/// on unless that build only expanded the schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn without_migrate_an_older_database_is_refused_and_left_unchanged() {
    let base = support::database_url();
    let url = support::fresh_schema(&base).await;
    let no_migrate = PgOptions {
        migrate: false,
        ..support::options()
    };
    let version = |url: String| async move { inspect(&url).await.expect("inspect") };

    // An empty database: version 0, and not even the migrations table is created.
    let err = PgStore::connect(&url, no_migrate.clone())
        .await
        .expect_err("an empty database is refused");
    assert!(
        matches!(err, OpenError::Schema(SchemaError::NeedsMigration { found: 0, supported }) if supported == SCHEMA_VERSION),
        "{err:?}"
    );
    let info = version(url.clone()).await;
    assert_eq!((info.schema_version, info.min_reader), (0, 0));
    assert!(info.bytes > 0, "{info:?}");

    assert_eq!(
        migrate(&url, Duration::from_secs(5))
            .await
            .expect("migrate"),
        (0, SCHEMA_VERSION)
    );
    PgStore::connect(&url, no_migrate.clone())
        .await
        .expect("a current database opens")
        .close();

    exec(
        &url,
        payments_store_postgres::testing::DOWNGRADE_TO_VERSION_1,
    )
    .await;
    let err = PgStore::connect(&url, no_migrate.clone())
        .await
        .expect_err("an older database is refused");
    assert!(
        matches!(err, OpenError::Schema(SchemaError::NeedsMigration { found: 1, supported }) if supported == SCHEMA_VERSION),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("run `payments-server migrate`"),
        "{err}"
    );
    assert_eq!(
        version(url.clone()).await.schema_version,
        1,
        "nothing was migrated"
    );

    assert_eq!(
        migrate(&url, Duration::from_secs(5))
            .await
            .expect("migrate"),
        (1, SCHEMA_VERSION)
    );
    let store = PgStore::connect(&url, no_migrate.clone())
        .await
        .expect("the upgraded database opens");
    assert_eq!(
        store.backlog().await.expect("backlog").by_status,
        Vec::new(),
        "the upgraded schema serves"
    );
    store.close();

    // Newer: an expand migration still opens, a contract migration is refused.
    let next = SCHEMA_VERSION + 1;
    exec(
        &url,
        &format!("INSERT INTO schema_migrations (version, min_reader) VALUES ({next}, 1)"),
    )
    .await;
    PgStore::connect(&url, no_migrate.clone())
        .await
        .expect("an expanded schema is still readable")
        .close();
    exec(
        &url,
        &format!(
            "INSERT INTO schema_migrations (version, min_reader) VALUES ({}, {next})",
            next + 1
        ),
    )
    .await;
    let err = PgStore::connect(&url, no_migrate)
        .await
        .expect_err("refused");
    assert!(
        matches!(err, OpenError::Schema(SchemaError::NewerSchema { found, supported }) if found == next + 1 && supported == SCHEMA_VERSION),
        "{err:?}"
    );
}

/// Requisites are sealed in the database and read back in clear; a node writing in clear (a
/// rolling upgrade) and a rotation are both settled by the re-seal; a node without the key
/// refuses them as corrupt, never shows them sealed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn requisites_are_sealed_at_rest_and_resealed_after_a_rotation() {
    use std::sync::Arc;

    use payments_core::testing::contract::{full_payment, project_id};
    use payments_core::testing::SeededRandom;
    use payments_store_postgres::SealWrites;

    let url = support::fresh_schema(&support::database_url()).await;
    let keys = payments_core::testing::sealing_keys;
    let node = |current: u8, previous: &'static [u8], writes: SealWrites| {
        let url = url.clone();
        async move {
            let store = PgStore::connect(&url, support::options()).await.unwrap();
            store
                .requisite_sealing()
                .install(
                    keys(current, previous),
                    Arc::new(SeededRandom::new(u64::from(current))),
                    writes,
                )
                .unwrap();
            store
        }
    };
    let raw = |n: u128| {
        let url = url.clone();
        async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            tokio::spawn(connection);
            let row = client
                .query_one(
                    "SELECT requisite, holder_name FROM payments WHERE id = $1",
                    &[&payment_id(n).to_string()],
                )
                .await
                .expect("the row");
            (row.get::<_, String>(0), row.get::<_, String>(1))
        }
    };
    let key_a = keys(1, &[]).current_id().unwrap().to_string();
    let key_b = keys(2, &[]).current_id().unwrap().to_string();

    let a = node(1, &[], SealWrites::Sealed).await;
    let p = full_payment(payment_id(1), project_id(1), "sealed-1");
    a.insert_payment(&p).await.unwrap();
    let (requisite, holder) = raw(1).await;
    assert!(
        requisite.starts_with(&format!("v1.{key_a}.")),
        "{requisite}"
    );
    assert!(holder.starts_with(&format!("v1.{key_a}.")), "{holder}");
    assert_eq!(a.payment(payment_id(1)).await.unwrap(), Some(p.clone()));
    assert_eq!(a.sealed_requisite_keys().await.unwrap(), vec![(key_a, 1)]);

    let plain = node(1, &[], SealWrites::Plain).await;
    let q = full_payment(payment_id(2), project_id(1), "plain-2");
    plain.insert_payment(&q).await.unwrap();
    assert_eq!(raw(2).await.0, "2200123456789010");
    assert_eq!(plain.payment(payment_id(1)).await.unwrap(), Some(p.clone()));

    let stranger = node(9, &[], SealWrites::Sealed).await;
    assert!(matches!(
        stranger.payment(payment_id(1)).await,
        Err(StoreError::Corrupt(_))
    ));

    let b = node(2, &[1], SealWrites::Sealed).await;
    let report = b.reseal_requisites().await.unwrap();
    assert_eq!(
        (report.resealed, report.current, report.changed_meanwhile),
        (2, 0, 0)
    );
    assert_eq!(b.sealed_requisite_keys().await.unwrap(), vec![(key_b, 2)]);
    assert_eq!(b.reseal_requisites().await.unwrap().current, 2);
    assert_eq!(b.payment(payment_id(2)).await.unwrap(), Some(q));
    assert!(
        a.payment(payment_id(1)).await.is_err(),
        "key 1 alone no longer opens it"
    );
}

/// Payments written before schema 16 (a sealed requisite, no `requisite_last4`) are found by
/// their last four digits after the backfill; a second run has nothing left to do; a
/// requisite too short is counted, not guessed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn the_last4_backfill_makes_old_payments_findable() {
    use std::sync::Arc;

    use payments_core::store::{InsertOutcome, PaymentQuery};
    use payments_core::testing::contract::{full_payment, project_id};
    use payments_core::testing::SeededRandom;
    use payments_store_postgres::SealWrites;

    let url = support::fresh_schema(&support::database_url()).await;
    let store = PgStore::connect(&url, support::options()).await.unwrap();
    store
        .requisite_sealing()
        .install(
            payments_core::testing::sealing_keys(1, &[]),
            Arc::new(SeededRandom::new(1)),
            SealWrites::Sealed,
        )
        .unwrap();
    let by_last4 = |last4: &str| {
        let mut q = PaymentQuery::new(project_id(1), 10);
        q.requisite_last4 = Some(last4.to_string());
        q
    };
    for (n, requisite) in [
        (1u128, "2200123456789010"),
        (2, "+7 900 555-90-10"),
        (3, "12-3"),
    ] {
        let mut p = full_payment(payment_id(n), project_id(1), &format!("old-{n}"));
        p.created_at = T0 + Duration::from_secs(u64::try_from(n).expect("small"));
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
    exec(&url, "UPDATE payments SET requisite_last4 = NULL").await;
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
    // Payments written before schema 25 have no requisite digest: the backfill writes the
    // one a write of this build does.
    let digests = keys(&url, "requisite_digest").await;
    assert_eq!(digests.iter().flatten().count(), 3, "{digests:?}");
    exec(&url, "UPDATE payments SET requisite_digest = NULL").await;
    let report = store.backfill_requisite_last4().await.unwrap();
    assert_eq!((report.filled, report.too_short), (2, 1));
    let filled = keys(&url, "requisite_digest").await;
    assert_eq!(&filled[..2], &digests[..2], "as a write digests them");
    store.close();
}

/// A column of the payments (`amount_key`, `merchant_payment_id_key`), by id.
async fn keys(url: &str, column: &str) -> Vec<Option<String>> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let task = tokio::spawn(connection);
    let rows = client
        .query(&format!("SELECT {column} FROM payments ORDER BY id"), &[])
        .await
        .expect("read");
    drop(client);
    let _ = task.await;
    rows.iter().map(|r| r.get(0)).collect()
}

/// Migration 23's fill keys the payments an older build wrote (no `amount_key`) as this
/// build's writes do (`Amount::normalized`), whatever the scale; a second fill changes
/// nothing. Its trigger keys what a node of the previous build writes during a rolling upgrade:
/// an insert without the key, and an update of the amount that leaves the key as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn the_amount_key_fill_and_trigger_key_payments_as_a_write_does() {
    use payments_core::amount::Amount;
    use payments_core::store::{InsertOutcome, PaymentQuery};
    use payments_core::testing::contract::project_id;

    let url = support::fresh_schema(&support::database_url()).await;
    let store = PgStore::connect(&url, support::options()).await.unwrap();
    let (payments, normalized) = payments_core::testing::contract::payments_of_every_scale();
    for p in &payments {
        assert_eq!(
            store.insert_payment(p).await.unwrap(),
            InsertOutcome::Inserted
        );
    }
    let written = keys(&url, "amount_key").await;
    assert_eq!(
        written.iter().flatten().cloned().collect::<Vec<_>>(),
        normalized
    );
    exec(&url, "UPDATE payments SET amount_key = NULL").await;
    for _ in 0..2 {
        exec(&url, payments_store_sql::schema::AMOUNT_KEY_FILL_POSTGRES).await;
        assert_eq!(
            keys(&url, "amount_key").await,
            written,
            "the fill's keys are a write's"
        );
    }
    let by_amount = |text: &str| {
        let mut q = PaymentQuery::new(project_id(1), 20);
        q.amount = Some(Amount::parse(text).expect("an amount"));
        q
    };
    assert_eq!(
        store
            .find_payments(&by_amount("100.000"))
            .await
            .unwrap()
            .len(),
        2
    );
    // As a node of the previous build writes: neither statement names the key.
    exec(
        &url,
        &format!(
            "UPDATE payments SET amount = '8.50' WHERE id = '{}';\n\
             CREATE TEMP TABLE t AS SELECT * FROM payments WHERE id = '{}';\n\
             UPDATE t SET id = '{}', merchant_payment_id = 'older-build', amount = '42.000', \
             amount_key = NULL;\n\
             INSERT INTO payments SELECT * FROM t;",
            payment_id(0),
            payment_id(1),
            payment_id(50)
        ),
    )
    .await;
    let ids =
        |v: Vec<payments_core::payment::Payment>| v.into_iter().map(|p| p.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.find_payments(&by_amount("8.5")).await.unwrap()),
        vec![payment_id(0)]
    );
    assert_eq!(
        ids(store.find_payments(&by_amount("42")).await.unwrap()),
        vec![payment_id(50)]
    );
    assert_eq!(
        store.find_payments(&by_amount("100")).await.unwrap().len(),
        1
    );
    store.close();
}

/// A list read runs at most `scan_timeout`: a merchant payment id prefix of 20,001 payments,
/// one the newest of the project and the rest older than the 180,000 newer ones it reads past
/// in time order (its newest match is near, so the time order is read from the start), is
/// stopped and fails as unavailable with the cause `TimedOut` (answered `503`, "narrow the
/// filters"); an indexed page of the same project is answered as always.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn a_list_read_past_its_time_limit_is_stopped() {
    use payments_core::store::{PaymentQuery, UnavailableCause};
    use payments_core::testing::contract::{project_id, sample_payment};

    let base = support::database_url();
    let url = support::fresh_schema(&base).await;
    let store = PgStore::connect(
        &url,
        PgOptions {
            scan_timeout: Duration::from_millis(20),
            ..support::options()
        },
    )
    .await
    .expect("connect");
    let p = sample_payment(payment_id(1), project_id(1), "template");
    store.insert_payment(&p).await.expect("insert");
    exec(
        &url,
        &format!(
            // Replica mode skips the status counts' trigger (not what is tested here).
            "SET session_replication_role = replica; \
             INSERT INTO payments SELECT '00000000-0000-4000-8000-' || lpad(n::text, 12, '0'), \
             project_id, 'copy-' || CASE WHEN n <= 20000 OR n = 200000 THEN 'old-' ELSE 'new-' END || n, \
             {rest} FROM generate_series(1, 200000) AS n, payments \
             WHERE id = '{id}'; SET session_replication_role = origin; ANALYZE payments;",
            rest = payment_columns_after_mpid(&url).await,
            id = p.id,
        ),
    )
    .await;
    let scan = PaymentQuery {
        merchant_payment_id_prefix: Some("copy-old-".into()),
        ..PaymentQuery::new(project_id(1), 21)
    };
    let started = Instant::now();
    let stopped = store.find_payments(&scan).await;
    assert!(
        matches!(
            &stopped,
            Err(StoreError::Unavailable {
                cause: UnavailableCause::TimedOut,
                ..
            })
        ),
        "{stopped:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let page = store
        .find_payments(&PaymentQuery::new(project_id(1), 21))
        .await
        .expect("an indexed page is answered");
    assert_eq!(page.len(), 21);
}

/// The columns of `payments` after `merchant_payment_id`, in table order, comma-separated.
async fn payment_columns_after_mpid(url: &str) -> String {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let task = tokio::spawn(conn);
    let columns: Vec<String> = client
        .query(
            "SELECT column_name::text FROM information_schema.columns WHERE table_schema = \
             current_schema() AND table_name = 'payments' ORDER BY ordinal_position",
            &[],
        )
        .await
        .expect("columns")
        .iter()
        .map(|r| r.get(0))
        .collect();
    drop(client);
    let _ = task.await;
    let at = columns
        .iter()
        .position(|c| c == "merchant_payment_id")
        .expect("the column");
    assert_eq!(&columns[..at], ["id", "project_id"], "{columns:?}");
    columns[at + 1..].join(", ")
}

/// What a relay told one node: `Some(project)` for a project's event, `None` for "look
/// again".
struct Heard(tokio::sync::mpsc::UnboundedSender<Option<payments_core::ProjectId>>);

impl payments_core::store::OutboxWaker for Heard {
    fn wake(&self) {
        let _ = self.0.send(None);
    }

    fn queued(&self, project: payments_core::ProjectId) {
        let _ = self.0.send(Some(project));
    }
}

type Ears = tokio::sync::mpsc::UnboundedReceiver<Option<payments_core::ProjectId>>;

/// The next thing `ears` heard, within 10 s.
async fn next(ears: &mut Ears) -> Option<payments_core::ProjectId> {
    tokio::time::timeout(Duration::from_secs(10), ears.recv())
        .await
        .expect("heard within 10 s")
        .expect("the relay is running")
}

/// Two nodes over one database tell each other, and only each other, which projects they
/// queued events for; a node whose relay connection is cut is told to look again, and hears
/// the other again once it has connected anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn nodes_relay_their_outbox_wakes_to_each_other() {
    use payments_core::store::OutboxStore;
    let base = support::database_url();
    let url = support::fresh_schema(&base).await;
    let mut nodes = Vec::new();
    for _ in 0..2 {
        nodes.push(
            PgStore::connect(&url, support::options())
                .await
                .expect("a node"),
        );
    }
    let rng = payments_core::testing::SeededRandom::new(61);
    let project = || payments_core::ProjectId::generate(&rng);
    let mut ears = Vec::new();
    let mut tell = Vec::new();
    for node in &nodes {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let relay = node.outbox_relay().expect("PostgreSQL relays");
        tell.push(relay.join(std::sync::Arc::new(Heard(tx))));
        ears.push(rx);
    }
    // Each is told to look once it listens.
    for e in &mut ears {
        assert_eq!(next(e).await, None);
    }
    let (p1, p2) = (project(), project());
    tell[1].queued(p1);
    assert_eq!(next(&mut ears[0]).await, Some(p1));
    tell[0].queued(p2);
    assert_eq!(next(&mut ears[1]).await, Some(p2), "not its own p1 first");
    // A burst is delivered whole, in few notifications.
    let burst: std::collections::HashSet<_> = (0..500).map(|_| project()).collect();
    for p in &burst {
        tell[1].queued(*p);
    }
    let mut got = std::collections::HashSet::new();
    while got.len() < burst.len() {
        got.insert(next(&mut ears[0]).await.expect("a project"));
    }
    assert_eq!(got, burst);

    // Cut both relays' connections: each node is told to look again, twice (lost, then
    // listening anew), and they hear each other again.
    let schema_of = |url: &str| {
        let at = url.find("search_path%3D").expect("a test schema") + "search_path%3D".len();
        url[at..].to_string()
    };
    let cut = format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = \
         'relay payments_outbox_' || left(md5('{}'), 16)",
        schema_of(&url)
    );
    exec(&base, &cut).await;
    for e in &mut ears {
        assert_eq!(next(e).await, None, "lost");
        assert_eq!(next(e).await, None, "listening again");
    }
    let p3 = project();
    tell[1].queued(p3);
    assert_eq!(next(&mut ears[0]).await, Some(p3));
}

/// Migration 25's fill keys the merchant payment ids an older build wrote (no
/// `merchant_payment_id_key`) as this build's writes do (the letters in lower case); a
/// second fill changes nothing. Its trigger keys what a node of the previous build inserts
/// during a rolling upgrade (an insert that does not name the key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn the_merchant_payment_id_key_fill_and_trigger_key_payments_as_a_write_does() {
    use payments_core::store::{InsertOutcome, PaymentQuery};
    use payments_core::testing::contract::project_id;

    let url = support::fresh_schema(&support::database_url()).await;
    let store = PgStore::connect(&url, support::options()).await.unwrap();
    let (payments, lowered) = payments_core::testing::contract::payments_of_every_case();
    for p in &payments {
        assert_eq!(
            store.insert_payment(p).await.unwrap(),
            InsertOutcome::Inserted
        );
    }
    let written = keys(&url, "merchant_payment_id_key").await;
    assert_eq!(
        written.iter().flatten().cloned().collect::<Vec<_>>(),
        lowered
    );
    exec(&url, "UPDATE payments SET merchant_payment_id_key = NULL").await;
    for _ in 0..2 {
        exec(
            &url,
            payments_store_sql::schema::MERCHANT_PAYMENT_ID_KEY_FILL_POSTGRES,
        )
        .await;
        assert_eq!(
            keys(&url, "merchant_payment_id_key").await,
            written,
            "the fill's keys are a write's"
        );
    }
    // As a node of the previous build inserts: the statement does not name the key.
    exec(
        &url,
        &format!(
            "CREATE TEMP TABLE t AS SELECT * FROM payments WHERE id = '{}';\n\
             UPDATE t SET id = '{}', merchant_payment_id = 'ORD-OLDER', \
             merchant_payment_id_key = NULL;\n\
             INSERT INTO payments SELECT * FROM t;",
            payment_id(1),
            payment_id(50)
        ),
    )
    .await;
    let mut q = PaymentQuery::new(project_id(1), 20);
    q.merchant_payment_id_prefix_any_case = Some("ord-".into());
    let found: Vec<_> = store
        .find_payments(&q)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(found.contains(&payment_id(50)), "{found:?}");
    store.close();
}

/// Schema 28 turns the old request log's rows into writes (`json_agg` of each project's rows in
/// time order), and empties the old table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn the_old_request_log_reads_back_after_schema_28() {
    use payments_core::testing::contract::{old_request_log, old_request_log_reads_back};

    let url = support::fresh_schema(&support::database_url()).await;
    migrate(&url, Duration::from_secs(5))
        .await
        .expect("migrate");
    exec(
        &url,
        "DROP TABLE request_log_writes; DELETE FROM schema_migrations WHERE version = 28",
    )
    .await;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let task = tokio::spawn(connection);
    for e in &old_request_log() {
        client
            .execute(
                "INSERT INTO request_log (project_id, at, method, path, status, error_code, \
                 request_id, latency_us, source, merchant_payment_id, payment_id, clock_skew_ms, \
                 diagnosis, message) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                &[
                    &e.project_id.to_string(),
                    &e.at.unix_millis(),
                    &e.method,
                    &e.path,
                    &i32::from(e.status),
                    &e.error_code,
                    &e.request_id,
                    &i64::try_from(e.latency_us).expect("small"),
                    &e.source,
                    &e.merchant_payment_id,
                    &e.payment_id.map(|p| p.to_string()),
                    &e.clock_skew_ms,
                    &e.diagnosis.as_ref().map(|d| d.to_json()),
                    &e.message,
                ],
            )
            .await
            .expect("an old request log row");
    }
    assert_eq!(
        migrate(&url, Duration::from_secs(5))
            .await
            .expect("migrate"),
        (27, SCHEMA_VERSION)
    );
    let store = PgStore::connect(&url, support::options()).await.unwrap();
    old_request_log_reads_back(&store).await;
    let left: i64 = client
        .query_one("SELECT count(*) FROM request_log", &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(left, 0, "the old table is emptied");
    drop(client);
    let _ = task.await;
    store.close();
}

/// A write of the request log never waits for another transaction that is deleting the same
/// project's rows (another node's trim or purge): two nodes' writes that trim the same projects
/// in opposite orders each waited for the other's row locks, and PostgreSQL cancelled one as a
/// deadlock, its requests lost. The trim skips the rows held; a rolled-back holder leaves them
/// to the next write's trim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn a_request_log_write_never_waits_for_another_trim() {
    use payments_core::request_log::RequestLogQuery;
    use payments_core::store::RequestLogStore;
    use payments_core::testing::contract::{ms, project_id, sample_request};

    let url = support::fresh_schema(&support::database_url()).await;
    let store = PgStore::connect(&url, support::options()).await.unwrap();
    let (a, b) = (project_id(1), project_id(2));
    for t in 0..3 {
        for p in [a, b] {
            let one = [sample_request(p, T0 + ms(t), 200)];
            store.insert_requests(&one, 100).await.expect("append");
        }
    }
    // Another node's transaction is deleting project a's rows and has not committed.
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let task = tokio::spawn(connection);
    client.batch_execute("BEGIN").await.expect("begin");
    let held = client
        .execute(
            "DELETE FROM request_log_writes WHERE project_id = $1",
            &[&a.to_string()],
        )
        .await
        .expect("delete");
    assert_eq!(held, 3);
    // This node's write trims b, then a, keeping one request each.
    let write = [
        sample_request(b, T0 + ms(3), 200),
        sample_request(a, T0 + ms(3), 200),
    ];
    tokio::time::timeout(Duration::from_secs(20), store.insert_requests(&write, 1))
        .await
        .expect("the write waited for the other transaction's row locks")
        .expect("append");
    client.batch_execute("ROLLBACK").await.expect("rollback");
    let count = |p| {
        let store = &store;
        async move {
            let page = store.find_requests(&RequestLogQuery::new(p, 10)).await;
            page.expect("read").len()
        }
    };
    assert_eq!(count(b).await, 1, "b trimmed to one");
    assert_eq!(
        count(a).await,
        4,
        "a's rows held by the other transaction stayed"
    );
    store
        .insert_requests(&[sample_request(a, T0 + ms(4), 200)], 1)
        .await
        .expect("append");
    assert_eq!(count(a).await, 1, "the next write's trim took them");
    drop(client);
    let _ = task.await;
    store.close();
}
