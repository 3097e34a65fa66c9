//! A node of this build keeps answering after a later build migrates the database under it.
//!
//! A rolling upgrade runs `payments-server migrate` from the new build while nodes of the
//! previous build still serve. Their pooled connections keep prepared statements, and
//! PostgreSQL refuses to run a cached plan whose result type changed (`0A000: cached plan must
//! not change result type`): a statement selecting `*` from a table that gained a column fails
//! on every call until the node restarts, while `/readyz` says ready. Here one store prepares
//! every statement of the port (the contracts' `every_statement`, the core's and the cabinet's), a second connection adds a
//! column to every table as a later migration would, and the same store, with the same pooled
//! connections, runs every statement again.

mod support;

use payments_core::testing::contract;
use payments_store_postgres::{PgOptions, PgStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL: DATABASE_URL"]
async fn a_running_node_keeps_answering_after_a_later_migration_adds_columns() {
    let base = support::database_url();
    let url = support::fresh_schema(&base).await;
    // One pooled connection: the one that prepared the statements is the one that runs them
    // again after the migration.
    let store = PgStore::connect(
        &url,
        PgOptions {
            pool_size: 1,
            ..PgOptions::default()
        },
    )
    .await
    .expect("connect and migrate");
    let (merchant, project) = contract::every_statement(&store, 1).await;
    payments_cabinet::testing::contract::every_statement(&store, 1, merchant, project).await;

    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("a second connection");
    let task = tokio::spawn(connection);
    let tables: Vec<String> = client
        .query(
            "SELECT table_name::TEXT FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
            &[],
        )
        .await
        .expect("list the tables")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        tables.len() >= 15,
        "the schema's tables were found: {tables:?}"
    );
    for table in &tables {
        client
            .batch_execute(&format!(
                "ALTER TABLE {table} ADD COLUMN later_build TEXT DEFAULT 'later'"
            ))
            .await
            .unwrap_or_else(|e| panic!("add a column to {table}: {e}"));
    }
    drop(client);
    let _ = task.await;

    let (merchant, project) = contract::every_statement(&store, 2).await;
    payments_cabinet::testing::contract::every_statement(&store, 2, merchant, project).await;
}
