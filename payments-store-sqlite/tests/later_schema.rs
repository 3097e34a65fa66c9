//! A running store keeps answering after a later build migrates the database file under it:
//! every statement of the port is prepared (the contracts' `every_statement`, the core's and the cabinet's), another connection adds a column to every table as a later migration would, and the same store runs
//! every statement again. (SQLite prepares a statement again when the schema changed, but a
//! statement that selected `*` would then return the new column too; every statement names its
//! columns, so the answers stay the same.)

use payments_core::testing::contract;
use payments_store_sqlite::{SqliteOptions, SqliteStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_store_keeps_answering_after_a_later_migration_adds_columns() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path, SqliteOptions::default()).expect("open");
    let (merchant, project) = contract::every_statement(&store, 1).await;
    payments_cabinet::testing::contract::every_statement(&store, 1, merchant, project).await;

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
}
