//! A running store keeps answering after a later build migrates the database file under it:
//! every statement of the port is prepared (the contracts' `every_statement`, the core's and the cabinet's, and the
//! appeals' statements, which the core's does not run yet: `appeal_statements` here), another
//! connection adds a column to every table as a later migration would, and the same store runs
//! every statement again. (SQLite prepares a statement again when the schema changed, but a
//! statement that selected `*` would then return the new column too; every statement names its
//! columns, so the answers stay the same.)

use payments_core::appeal::{
    Appeal, AppealInsert, AppealOrder, AppealQuery, AppealSource, AppealState,
};
use payments_core::receipt::{Receipt, ReceiptKind};
use payments_core::store::{AppealChange, Store};
use payments_core::testing::contract;
use payments_store_sqlite::{SqliteOptions, SqliteStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_store_keeps_answering_after_a_later_migration_adds_columns() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let (merchant, project) = contract::every_statement(&store, 1).await;
    payments_cabinet::testing::contract::every_statement(&store, 1, merchant, project).await;
    appeal_statements(&store, 1).await;

    let conn = rusqlite::Connection::open(&path).expect("a second connection");
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .and_then(|mut s| {
            s.query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .expect("list the tables");
    assert!(
        tables.len() >= 15,
        "the schema's tables were found: {tables:?}"
    );
    for table in &tables {
        conn.execute_batch(&format!(
            "ALTER TABLE {table} ADD COLUMN later_build TEXT DEFAULT 'later'"
        ))
        .unwrap_or_else(|e| panic!("add a column to {table}: {e}"));
    }
    drop(conn);

    let (merchant, project) = contract::every_statement(&store, 2).await;
    payments_cabinet::testing::contract::every_statement(&store, 2, merchant, project).await;
    appeal_statements(&store, 2).await;
}

/// The appeals' statements (schema 22), which the core's `contract::every_statement`, written
/// before appeals, does not run: an insert with its receipt, the reads of a refused insert
/// (the key, the payment's active appeal, the count per source), every read of the port and a
/// decision (`commit_appeal`, the transaction's `update_appeal`). Rounds keep their records
/// apart.
async fn appeal_statements<S: Store>(store: &S, round: u128) {
    let (project, payment) = (
        contract::project_id(round),
        contract::payment_id(round * 10),
    );
    let at = contract::T0 + contract::ms(i64::try_from(round).expect("small"));
    let receipt = contract::sample_receipt(ReceiptKind::Png, 1, 100);
    let appeal = contract::sample_appeal(
        round * 10,
        project,
        payment,
        at,
        std::slice::from_ref(&receipt),
    );
    let insert = |a: Appeal, receipts: Vec<Receipt>| async move {
        store
            .insert_appeal(&a, &receipts)
            .await
            .unwrap_or_else(|e| panic!("round {round}: insert_appeal: {e:?}"))
    };
    assert_eq!(
        insert(appeal.clone(), vec![receipt.clone()]).await,
        AppealInsert::Inserted
    );
    assert_eq!(
        insert(appeal.clone(), Vec::new()).await,
        AppealInsert::Existing(appeal.clone())
    );
    let mut payer = contract::sample_appeal(round * 10 + 1, project, payment, at, &[]);
    (payer.source, payer.idempotency_key) = (AppealSource::Payer, None);
    assert_eq!(
        insert(payer.clone(), Vec::new()).await,
        AppealInsert::Active(appeal.clone())
    );
    assert_eq!(
        store.appeal(appeal.id).await.ok(),
        Some(Some(appeal.clone()))
    );
    assert_eq!(
        store.appeal_receipt(appeal.id, 0).await.ok(),
        Some(Some(receipt))
    );
    let queries = [
        AppealQuery {
            project: Some(project),
            states: vec![AppealState::Open],
            ..AppealQuery::newest(10)
        },
        AppealQuery {
            payment: Some(payment),
            deadline_by: Some(appeal.deadline),
            order: AppealOrder::OldestFirst,
            after: Some((at - contract::ms(1), appeal.id)),
            ..AppealQuery::newest(10)
        },
    ];
    for q in queries {
        let page = store.find_appeals(&q).await.ok();
        assert_eq!(page, Some(vec![appeal.clone()]), "round {round}: {q:?}");
    }
    let mut decided = appeal.clone();
    (decided.state, decided.version) = (AppealState::Rejected, appeal.version + 1);
    let change = AppealChange {
        appeal: decided.clone(),
        expected_version: appeal.version,
        payments: Vec::new(),
        audit: None,
    };
    assert_eq!(store.commit_appeal(&change).await, Ok(()), "round {round}");
    assert_eq!(store.appeal(appeal.id).await.ok(), Some(Some(decided)));
    assert_eq!(insert(payer, Vec::new()).await, AppealInsert::Inserted);
}
