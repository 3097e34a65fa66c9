//! One schema numbering for both engines, and the one rule that compares a database's schema
//! version with a build's.
//!
//! Before the numbering was shared, each engine numbered its own migrations: SQLite up to 9
//! (`PRAGMA user_version`), PostgreSQL up to 5 (its `schema_migrations` table). Those steps
//! stay as they were released, each engine's own (a released migration never changes), and
//! both end at the same schema: the *baseline*, version [`BASELINE`] here. A database that
//! finished its engine's early steps is recorded at the baseline, and every migration after it
//! is one entry of [`MIGRATIONS`]: one number for both engines and, where the SQL must differ,
//! one text per engine. Versions only grow: every early version of either engine is below the
//! baseline, so one comparison serves both.
//!
//! A migration is *expand* (new tables, new nullable or defaulted columns, new indexes: a node
//! of the previous build keeps working beside it during a rolling upgrade, and its statements
//! name their columns, so an added column changes none of their results) or *contract*
//! (dropping or renaming what older builds use). Its [`Migration::min_reader`] is the oldest
//! version a build must know to keep working on the database after it: an expand migration
//! keeps the previous one, a contract migration raises it, and ships one release after the code
//! stopped using what it removes.

/// One migration after the baseline, for both engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// What it does, for the logs.
    pub name: &'static str,
    /// Its SQL on SQLite.
    pub sqlite: &'static str,
    /// Its SQL on PostgreSQL (the same text where the SQL is the same).
    pub postgres: &'static str,
    /// The oldest schema version a build must know to keep working after it.
    pub min_reader: u32,
}

/// The schema both engines' early migrations end at.
pub const BASELINE: u32 = 10;

/// Migration 28 on one engine, given its id column's type, its time column's type, how it
/// aggregates the entries of a write in time order (around `entry`), and its JSON array
/// function. The table; a project's writes newest first (pages, the trim) and every project's
/// by age (the purge); then the old rows, each project's in time order, 4,096 a write
/// (`crate::request_log::ROW_ENTRIES`), each an array in the order of a stored entry
/// (`crate::request_log::Stored`).
macro_rules! request_log_writes {
    ($id:literal, $time:literal, $aggregate:literal, $array:literal) => {
        concat!(
            "CREATE TABLE request_log_writes (\n\
             id         ", $id, " PRIMARY KEY,\n\
             project_id TEXT    NOT NULL,\n\
             newest_at  ", $time, " NOT NULL,\n\
             oldest_at  ", $time, " NOT NULL,\n\
             entries    INTEGER NOT NULL,\n\
             body       TEXT    NOT NULL\n\
             );\n\
             CREATE INDEX request_log_writes_project ON request_log_writes \
             (project_id, newest_at, id);\n\
             CREATE INDEX request_log_writes_at ON request_log_writes (newest_at, id);\n\
             INSERT INTO request_log_writes (project_id, newest_at, oldest_at, entries, body) \
             SELECT project_id, max(at), min(at), count(*), ", $aggregate, " \
             FROM (SELECT project_id, at, id, \
             (row_number() OVER (PARTITION BY project_id ORDER BY at, id) - 1) / 4096 AS part, ",
            $array, "(at, method, path, status, error_code, request_id, latency_us, source, \
             merchant_payment_id, payment_id, clock_skew_ms, diagnosis, message) AS entry \
             FROM request_log) AS e GROUP BY project_id, part ORDER BY max(at);\n\
             DELETE FROM request_log;"
        )
    };
}

/// The migrations after the baseline: entry `i` brings the schema from version
/// `BASELINE + i` to `BASELINE + i + 1`. Append only: a released migration never changes.
pub const MIGRATIONS: &[Migration] = &[
    // 11: the merchant API's list of payments (`GET /api/v1/payments`) reads each filter
    // through an index. Expand: new indexes only.
    Migration {
        name: "payment list indexes",
        sqlite: "CREATE INDEX payments_project_status ON payments \
                 (project_id, status, created_at, id);\n\
                 CREATE INDEX payments_project_method ON payments \
                 (project_id, payment_method, created_at, id);\n\
                 CREATE INDEX payments_project_flow ON payments \
                 (project_id, flow, created_at, id);",
        postgres: "CREATE INDEX payments_project_status ON payments \
                   (project_id, status, created_at, id);\n\
                   CREATE INDEX payments_project_method ON payments \
                   (project_id, payment_method, created_at, id);\n\
                   CREATE INDEX payments_project_flow ON payments \
                   (project_id, flow, created_at, id);\n\
                   CREATE INDEX payments_project_mpid ON payments \
                   (project_id, merchant_payment_id COLLATE \"C\");",
        min_reader: BASELINE_MIN_READER,
    },
    // 12: the merchant's `metadata` on a payment (a JSON object of strings, NULL without).
    // Expand: a nullable column; a build of schema 11 names its columns and never sees it.
    Migration {
        name: "payment metadata",
        sqlite: "ALTER TABLE payments ADD COLUMN metadata TEXT;",
        postgres: "ALTER TABLE payments ADD COLUMN metadata TEXT;",
        min_reader: BASELINE_MIN_READER,
    },
    // 13: the provider a payment was routed to, and why (several providers). Expand: two
    // nullable columns; a build of schema 12 names its columns and never sees them.
    Migration {
        name: "payment route",
        sqlite: "ALTER TABLE payments ADD COLUMN provider TEXT;\n\
                 ALTER TABLE payments ADD COLUMN route_reason TEXT;",
        postgres: "ALTER TABLE payments ADD COLUMN provider TEXT;\n\
                   ALTER TABLE payments ADD COLUMN route_reason TEXT;",
        min_reader: BASELINE_MIN_READER,
    },
    // 14: the project ledger (the balance, its entries, payouts). Expand: new tables only; a
    // build of schema 13 never reads them (and writes no entry: its completions are found by
    // the reconciliation, `payments-server ledger reconcile`).
    Migration {
        name: "project ledger",
        sqlite: LEDGER_DDL,
        postgres: LEDGER_DDL,
        min_reader: BASELINE_MIN_READER,
    },
    // 15: the cabinet's one-time slots (what a page shows once: a new token, a rotated
    // callback secret, recovery codes; a refused form's input and errors). Expand: a new
    // table; a build of schema 14 never reads it.
    Migration {
        name: "cabinet one-time slots",
        sqlite: "CREATE TABLE cabinet_slots (\n\
                 id_hash    BLOB    NOT NULL PRIMARY KEY,\n\
                 owner      TEXT    NOT NULL,\n\
                 payload    TEXT    NOT NULL,\n\
                 created_at INTEGER NOT NULL,\n\
                 expires_at INTEGER NOT NULL\n\
                 ) WITHOUT ROWID;\n\
                 CREATE INDEX cabinet_slots_expires ON cabinet_slots (expires_at);",
        postgres: "CREATE TABLE cabinet_slots (\n\
                   id_hash    BYTEA  NOT NULL PRIMARY KEY,\n\
                   owner      TEXT   NOT NULL,\n\
                   payload    TEXT   NOT NULL,\n\
                   created_at BIGINT NOT NULL,\n\
                   expires_at BIGINT NOT NULL\n\
                   );\n\
                   CREATE INDEX cabinet_slots_expires ON cabinet_slots (expires_at);",
        min_reader: BASELINE_MIN_READER,
    },
    // 16: finding a payment (the cabinet's search, the list API's `amount` and
    // `requisite_last4`) and a project's return URL on the payer page. Expand: nullable
    // columns and new indexes; a build of schema 15 names its columns and never sees them.
    // The last four digits are kept in clear beside the sealed requisite (they are what a
    // receipt prints); a payment written by an older build has none until it is written again.
    Migration {
        name: "payment search and return URL",
        sqlite: SEARCH_DDL,
        postgres: SEARCH_DDL,
        min_reader: BASELINE_MIN_READER,
    },
    // 17: the merchant API's request log (the cabinet's "Requests" page). Expand: a new
    // table; a build of schema 16 never reads it and writes no rows to it.
    Migration {
        name: "request log",
        sqlite: "CREATE TABLE request_log (\n\
                 id                  INTEGER PRIMARY KEY,\n\
                 project_id          TEXT    NOT NULL,\n\
                 at                  INTEGER NOT NULL,\n\
                 method              TEXT    NOT NULL,\n\
                 path                TEXT    NOT NULL,\n\
                 status              INTEGER NOT NULL,\n\
                 error_code          TEXT,\n\
                 request_id          TEXT    NOT NULL,\n\
                 latency_us          INTEGER NOT NULL,\n\
                 source              TEXT    NOT NULL,\n\
                 merchant_payment_id TEXT,\n\
                 payment_id          TEXT,\n\
                 clock_skew_ms       INTEGER,\n\
                 diagnosis           TEXT\n\
                 );\n\
                 CREATE INDEX request_log_project ON request_log (project_id, at, id);\n\
                 CREATE INDEX request_log_at ON request_log (at, id);",
        postgres: "CREATE TABLE request_log (\n\
                   id                  BIGSERIAL PRIMARY KEY,\n\
                   project_id          TEXT    NOT NULL,\n\
                   at                  BIGINT  NOT NULL,\n\
                   method              TEXT    NOT NULL,\n\
                   path                TEXT    NOT NULL,\n\
                   status              INTEGER NOT NULL,\n\
                   error_code          TEXT,\n\
                   request_id          TEXT    NOT NULL,\n\
                   latency_us          BIGINT  NOT NULL,\n\
                   source              TEXT    NOT NULL,\n\
                   merchant_payment_id TEXT,\n\
                   payment_id          TEXT,\n\
                   clock_skew_ms       BIGINT,\n\
                   diagnosis           TEXT\n\
                   );\n\
                   CREATE INDEX request_log_project ON request_log (project_id, at, id);\n\
                   CREATE INDEX request_log_at ON request_log (at, id);",
        min_reader: BASELINE_MIN_READER,
    },
    // 18: a project token's name and optional expiry (the cabinet's External API access).
    // Expand: nullable columns; a build of schema 17 never reads them (it would accept an
    // expired token: upgrade every node before relying on expiry).
    Migration {
        name: "token name and expiry",
        sqlite: "ALTER TABLE tokens ADD COLUMN name TEXT;\n\
                 ALTER TABLE tokens ADD COLUMN expires_at INTEGER;",
        postgres: "ALTER TABLE tokens ADD COLUMN name TEXT;\n\
                   ALTER TABLE tokens ADD COLUMN expires_at BIGINT;",
        min_reader: BASELINE_MIN_READER,
    },
    // 19: the events list filtered by `delivery_state` (the merchant API's and the cabinet's
    // deliveries page) through an index instead of a read of every event of the project.
    // Expand: a new index only; a build of schema 18 never names it.
    Migration {
        name: "events by delivery state",
        sqlite: EVENT_STATE_DDL,
        postgres: EVENT_STATE_DDL,
        min_reader: BASELINE_MIN_READER,
    },
    // 20: the list's `metadata[key]=value` filter through an index: each key and value of a
    // payment's metadata is a row of `payment_metadata`, written by a trigger in the insert's
    // own transaction (so also by a node of the previous build during a rolling upgrade), and
    // the payments already written are filled in by the migration itself. Expand: a new table
    // and a trigger; a build of schema 19 never reads the table. Metadata and the creation
    // time never change after the insert, and payments are never deleted, so an insert
    // trigger keeps the table whole.
    Migration {
        name: "metadata index",
        sqlite: METADATA_SQLITE,
        postgres: METADATA_POSTGRES,
        min_reader: BASELINE_MIN_READER,
    },
    // 21: each payment's status history (`GET /api/v1/payments/{id}/history`): one row per
    // change of its status or amount, written by `commit_change` in the change's own
    // transaction. Nothing is filled: the history of a payment changed before it (or by a node
    // of the previous build during a rolling upgrade) ends in an entry of cause `unrecorded`.
    // Expand: a new table only; a build of schema 20 never reads it.
    Migration {
        name: "payment status history",
        sqlite: HISTORY_DDL,
        postgres: HISTORY_DDL,
        min_reader: BASELINE_MIN_READER,
    },
    // 22: payment appeals and their receipts (`payments_core::appeal`; the statements are
    // `crate::appeals`). A partial unique index keeps at most one active appeal per payment,
    // whichever node inserts it. Expand: new tables only; a build of schema 21 never reads
    // them.
    Migration {
        name: "payment appeals",
        sqlite: APPEALS_SQLITE,
        postgres: APPEALS_POSTGRES,
        min_reader: BASELINE_MIN_READER,
    },
    // 23: the list's `amount` filter as one value of an index: `amount_key`, the amount's
    // shortest text, written with every amount (`record::payment_values`), filled in for the
    // payments already written, and indexed with the project and time in place of the amount
    // as written. Expand: a nullable column, an index dropped that only the older build's
    // amount filter used (which still finds the same payments, by the project's time index);
    // on PostgreSQL a trigger keys the payments a node of the previous build writes during a
    // rolling upgrade (SQLite has one process and no rolling upgrade).
    Migration {
        name: "amount key",
        sqlite: AMOUNT_KEY_SQLITE,
        postgres: AMOUNT_KEY_POSTGRES,
        min_reader: BASELINE_MIN_READER,
    },
    // 24: the request log keeps the API's `message` of an error answer (the cabinet's
    // Requests tab shows it). Expand: a nullable column; a build of schema 23 names its
    // columns, never reads it and writes its rows without it (they show no message).
    Migration {
        name: "request log message",
        sqlite: REQUEST_LOG_MESSAGE_DDL,
        postgres: REQUEST_LOG_MESSAGE_DDL,
        min_reader: BASELINE_MIN_READER,
    },
    // 25: the cabinet's search by what people type. `merchant_payment_id_key`, the id's
    // letters in lower case (`payments_core::payment::merchant_payment_id_key`), written with
    // every payment write (`record::payment_values`), filled in for the payments already
    // written and indexed with the project, so `ord-1001` finds `ORD-1001` and the ids that
    // start with it; and an index of `payment_metadata` by value across keys, so a text is
    // also found as any key's value; and `requisite_digest`, the keyed digest of the
    // requisite's digits under the sealing key (`RequisiteSealing::digest_requisite`), so a
    // card number pasted whole finds that card's payments only, written from now on (the
    // database never holds the key: payments without a digest are found by their last four
    // digits). Expand: two nullable columns and two indexes; on PostgreSQL
    // a trigger keys what a node of the previous build inserts during a rolling upgrade (the
    // id never changes after the insert; SQLite has one process and no rolling upgrade).
    Migration {
        name: "search keys",
        sqlite: SEARCH_KEYS_SQLITE,
        postgres: SEARCH_KEYS_POSTGRES,
        min_reader: BASELINE_MIN_READER,
    },
    // 26: a merchant's team: each merchant user's role in it and the projects it works on
    // (`payments_cabinet::store::TeamRole`), and each user's time zone. Expand: a defaulted and
    // two nullable columns; every user before it could do everything, so each is an owner of
    // every project, and a build of schema 25 names its columns and writes its users as such
    // (in UTC until they choose a zone).
    Migration {
        name: "cabinet team roles",
        sqlite: TEAM_ROLES_DDL,
        postgres: TEAM_ROLES_DDL,
        min_reader: BASELINE_MIN_READER,
    },
    // 27: the newest match of a broad merchant payment id prefix, read from the id key's index
    // alone (`crate::listing::PrefixPlan`): the index gains the creation time. Expand: an index
    // replaced by a wider one of the same name; no statement names it.
    Migration {
        name: "newest prefix match",
        sqlite: "DROP INDEX payments_project_mpid_key;\n\
                 CREATE INDEX payments_project_mpid_key ON payments \
                 (project_id, merchant_payment_id_key, created_at);",
        postgres: "DROP INDEX payments_project_mpid_key;\n\
                   CREATE INDEX payments_project_mpid_key ON payments \
                   (project_id, merchant_payment_id_key COLLATE \"C\", created_at);",
        min_reader: BASELINE_MIN_READER,
    },
    // 28: the request log keeps one row per project per write (`crate::request_log`): the
    // requests of a write as one JSON array instead of a row each, so that a logged request
    // costs the single writer no row and no index entry of its own. The rows of
    // `request_log` become writes (of at most `ROW_ENTRIES` requests each, in time order) and
    // `request_log` is emptied. Expand: a new table; a build of schema 27 keeps reading and
    // writing `request_log`, which this build no longer reads (its requests of a rolling
    // upgrade are not shown by the new nodes), and a later contract migration drops it.
    Migration {
        name: "request log writes",
        sqlite: request_log_writes!(
            "INTEGER",
            "INTEGER",
            "json_group_array(json(entry) ORDER BY at, id)",
            "json_array"
        ),
        postgres: request_log_writes!(
            "BIGSERIAL",
            "BIGINT",
            "json_agg(entry ORDER BY at, id)::text",
            "json_build_array"
        ),
        min_reader: BASELINE_MIN_READER,
    },
];

/// Migration 26, the same text on both engines.
const TEAM_ROLES_DDL: &str = "ALTER TABLE cabinet_users ADD COLUMN team_role TEXT NOT NULL \
                              DEFAULT 'owner';\n\
                              ALTER TABLE cabinet_users ADD COLUMN projects TEXT;\n\
                              ALTER TABLE cabinet_users ADD COLUMN time_zone TEXT;";

/// Migration 25's key of `$id`, [`merchant_payment_id_key`](payments_core::payment::merchant_payment_id_key):
/// the ASCII letters in lower case, the rest as it is (an id holds no other letters). SQLite's
/// `lower` changes ASCII letters only; PostgreSQL's follows the database's locale, so there the
/// 26 letters are translated one by one.
macro_rules! merchant_payment_id_key {
    (sqlite, $id:literal) => {
        concat!("lower(", $id, ")")
    };
    (postgres, $id:literal) => {
        concat!(
            "translate(",
            $id,
            ", 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
        )
    };
}

/// Migration 25's fill on SQLite (`sqlite`) or PostgreSQL (`postgres`): the key of every
/// payment without one. Idempotent: a keyed payment is left alone.
macro_rules! merchant_payment_id_key_fill {
    ($engine:ident) => {
        concat!(
            "UPDATE payments SET merchant_payment_id_key = ",
            merchant_payment_id_key!($engine, "merchant_payment_id"),
            " WHERE merchant_payment_id_key IS NULL;\n"
        )
    };
}

/// Migration 25's fill on SQLite, also for a test that writes payments without their key.
pub const MERCHANT_PAYMENT_ID_KEY_FILL_SQLITE: &str = merchant_payment_id_key_fill!(sqlite);

/// Migration 25's fill on PostgreSQL, also for a test that writes payments without their key.
pub const MERCHANT_PAYMENT_ID_KEY_FILL_POSTGRES: &str = merchant_payment_id_key_fill!(postgres);

/// Migration 25's indexes: the id key's with the project (`$collate`: PostgreSQL's byte
/// order, as the prefix reads it) and `payment_metadata`'s by value across keys: a project's
/// payments with one value under any key, newest first, the key last (a payment with the value
/// under two keys is read once, through its row of the smallest key: `crate::listing`).
macro_rules! search_keys_indexes {
    ($collate:literal) => {
        concat!(
            "CREATE INDEX payments_project_mpid_key ON payments \
             (project_id, merchant_payment_id_key",
            $collate,
            ");\n\
             CREATE INDEX payment_metadata_value ON payment_metadata \
             (project_id, meta_value, payment_created_at, payment_id, meta_key);\n"
        )
    };
}

/// Migration 25's column of the requisite's keyed digest, the same text on both engines:
/// written from now on with each payment (`record::payment_values`), never filled (the digest
/// needs the sealing key, which the database never holds; a payment without one is found by
/// its last four digits, as before).
macro_rules! requisite_digest_column {
    () => {
        "ALTER TABLE payments ADD COLUMN requisite_digest TEXT;\n"
    };
}

/// Migration 25 on SQLite: the columns, the id key's fill and the indexes.
const SEARCH_KEYS_SQLITE: &str = concat!(
    "ALTER TABLE payments ADD COLUMN merchant_payment_id_key TEXT;\n",
    requisite_digest_column!(),
    merchant_payment_id_key_fill!(sqlite),
    search_keys_indexes!("")
);

/// Migration 25 on PostgreSQL: the columns, the trigger that keys a payment inserted without
/// a key (created before the fill: its lock waits for the inserts under way), the fill and
/// the indexes.
const SEARCH_KEYS_POSTGRES: &str = concat!(
    requisite_digest_column!(),
    "ALTER TABLE payments ADD COLUMN merchant_payment_id_key TEXT;\n\
     CREATE FUNCTION payments_merchant_payment_id_key() RETURNS trigger LANGUAGE plpgsql AS $$\n\
     BEGIN\n\
         NEW.merchant_payment_id_key := ",
    merchant_payment_id_key!(postgres, "NEW.merchant_payment_id"),
    ";\n\
         RETURN NEW;\n\
     END;\n\
     $$;\n\
     CREATE TRIGGER payments_merchant_payment_id_key BEFORE INSERT ON payments \
     FOR EACH ROW WHEN (NEW.merchant_payment_id_key IS NULL) \
     EXECUTE FUNCTION payments_merchant_payment_id_key();\n",
    merchant_payment_id_key_fill!(postgres),
    search_keys_indexes!(" COLLATE \"C\"")
);

/// Migration 24, the same text on both engines.
const REQUEST_LOG_MESSAGE_DDL: &str = "ALTER TABLE request_log ADD COLUMN message TEXT;";

/// Migration 23's fill on SQLite (`sqlite`) or PostgreSQL (`postgres`): the key of every
/// payment without one, `payments_core::amount::Amount::normalized` of its amount. On SQLite
/// the amount's text without trailing zeros after the dot, nor the dot itself (`100.50` ->
/// `100.5`, `100.000` -> `100`; an amount is written as its decimal's text, so it has no
/// leading zeros); on PostgreSQL its numeric value without trailing zeros (`trim_scale`), as
/// text. Idempotent: a keyed payment is left alone.
macro_rules! amount_key_fill {
    (sqlite) => {
        "UPDATE payments SET amount_key = \
         CASE WHEN instr(amount, '.') > 0 THEN rtrim(rtrim(amount, '0'), '.') ELSE amount END \
         WHERE amount_key IS NULL;\n"
    };
    (postgres) => {
        "UPDATE payments SET amount_key = trim_scale(amount::numeric)::text \
         WHERE amount_key IS NULL;\n"
    };
}

/// Migration 23's fill on SQLite, also for a test that writes payments without their key.
pub const AMOUNT_KEY_FILL_SQLITE: &str = amount_key_fill!(sqlite);

/// Migration 23's fill on PostgreSQL, also for a test or benchmark that writes payments in
/// SQL without their key.
pub const AMOUNT_KEY_FILL_POSTGRES: &str = amount_key_fill!(postgres);

/// Migration 23's index, the same text on both engines, replacing migration 16's
/// `payments_project_amount`.
macro_rules! amount_key_index {
    () => {
        "DROP INDEX IF EXISTS payments_project_amount;\n\
         CREATE INDEX payments_project_amount_key ON payments \
         (project_id, amount_key, created_at, id);"
    };
}

/// Migration 23 on SQLite: the column, its fill and its index.
const AMOUNT_KEY_SQLITE: &str = concat!(
    "ALTER TABLE payments ADD COLUMN amount_key TEXT;\n",
    amount_key_fill!(sqlite),
    amount_key_index!()
);

/// Migration 23 on PostgreSQL: the column, the trigger that keys a payment written without
/// a key, or whose amount a write changed without changing its key (a node of the previous
/// build names neither), created before the fill (its lock waits for the writes under way),
/// the fill and the index.
const AMOUNT_KEY_POSTGRES: &str = concat!(
    "ALTER TABLE payments ADD COLUMN amount_key TEXT;\n\
     CREATE FUNCTION payments_amount_key() RETURNS trigger LANGUAGE plpgsql AS $$\n\
     BEGIN\n\
         NEW.amount_key := trim_scale(NEW.amount::numeric)::text;\n\
         RETURN NEW;\n\
     END;\n\
     $$;\n\
     CREATE TRIGGER payments_amount_key_insert BEFORE INSERT ON payments \
     FOR EACH ROW WHEN (NEW.amount_key IS NULL) EXECUTE FUNCTION payments_amount_key();\n\
     CREATE TRIGGER payments_amount_key_update BEFORE UPDATE OF amount ON payments \
     FOR EACH ROW WHEN (NEW.amount IS DISTINCT FROM OLD.amount \
     AND NEW.amount_key IS NOT DISTINCT FROM OLD.amount_key) \
     EXECUTE FUNCTION payments_amount_key();\n",
    amount_key_fill!(postgres),
    amount_key_index!()
);

/// Migration 22's tables and indexes on both engines (SQLite reads `BIGINT` as `INTEGER`),
/// the receipts' content of type `$bytes`. An appeal's receipt infos are a JSON list in
/// `appeals.receipts`; each receipt's bytes, sealed where requisites are, a row of
/// `appeal_receipts` (a table with a rowid on SQLite: its rows are large). The active states
/// (`open`, `under_review`) are spelled out in the partial indexes.
macro_rules! appeals_ddl {
    ($bytes:literal) => {
        concat!(
            "CREATE TABLE appeals (\n\
             id              TEXT   NOT NULL PRIMARY KEY,\n\
             project_id      TEXT   NOT NULL,\n\
             payment_id      TEXT   NOT NULL,\n\
             source          TEXT   NOT NULL,\n\
             idempotency_key TEXT,\n\
             fingerprint     TEXT   NOT NULL,\n\
             reason          TEXT   NOT NULL,\n\
             claimed_amount  TEXT,\n\
             paid_at         BIGINT,\n\
             payer_bank      TEXT,\n\
             receipts        TEXT   NOT NULL,\n\
             state           TEXT   NOT NULL,\n\
             deadline        BIGINT NOT NULL,\n\
             provider        TEXT,\n\
             resolved_amount TEXT,\n\
             decided_by      TEXT,\n\
             note            TEXT,\n\
             created_at      BIGINT NOT NULL,\n\
             updated_at      BIGINT NOT NULL,\n\
             version         BIGINT NOT NULL\n\
             );\n\
             CREATE UNIQUE INDEX appeals_project_key ON appeals (project_id, idempotency_key);\n\
             CREATE UNIQUE INDEX appeals_active_payment ON appeals (payment_id) \
             WHERE state IN ('open', 'under_review');\n\
             CREATE INDEX appeals_project_created ON appeals (project_id, created_at, id);\n\
             CREATE INDEX appeals_state_created ON appeals (state, created_at, id);\n\
             CREATE INDEX appeals_payment ON appeals (payment_id);\n\
             CREATE INDEX appeals_deadline ON appeals (deadline, id) \
             WHERE state IN ('open', 'under_review');\n\
             CREATE TABLE appeal_receipts (\n\
             appeal_id TEXT    NOT NULL,\n\
             idx       INTEGER NOT NULL,\n\
             kind      TEXT    NOT NULL,\n\
             content   ",
            $bytes,
            " NOT NULL,\n\
             PRIMARY KEY (appeal_id, idx)\n\
             );"
        )
    };
}

/// Migration 22 on SQLite.
const APPEALS_SQLITE: &str = appeals_ddl!("BLOB");

/// Migration 22 on PostgreSQL.
const APPEALS_POSTGRES: &str = appeals_ddl!("BYTEA");

/// Migration 21's table, the same text on both engines (SQLite reads `BIGINT` as `INTEGER`):
/// a payment's changes in version order.
const HISTORY_DDL: &str = "CREATE TABLE payment_history (\n\
    payment_id  TEXT NOT NULL,\n\
    version     BIGINT NOT NULL,\n\
    from_status TEXT,\n\
    to_status   TEXT NOT NULL,\n\
    amount      TEXT NOT NULL,\n\
    at          BIGINT NOT NULL,\n\
    cause       TEXT NOT NULL,\n\
    source      TEXT,\n\
    PRIMARY KEY (payment_id, version)\n\
);";

/// Migration 20's table on both engines: one row per key of a payment's metadata, in the
/// order the list reads it (a project's payments with one key and value, newest first).
macro_rules! metadata_table {
    ($time:literal, $without_rowid:literal) => {
        concat!(
            "CREATE TABLE payment_metadata (\n\
             project_id         TEXT NOT NULL,\n\
             meta_key           TEXT NOT NULL,\n\
             meta_value         TEXT NOT NULL,\n\
             payment_created_at ",
            $time,
            " NOT NULL,\n\
             payment_id         TEXT NOT NULL,\n\
             PRIMARY KEY (project_id, meta_key, meta_value, payment_created_at, payment_id)\n\
             )",
            $without_rowid,
            ";\n"
        )
    };
}

/// Migration 20's fill: every key and value of the payments' metadata, read by `each` (the
/// engine's function over a JSON object's members, `key` and `value` as text).
macro_rules! metadata_fill {
    ($each:literal) => {
        concat!(
            "INSERT INTO payment_metadata \
             (project_id, meta_key, meta_value, payment_created_at, payment_id) \
             SELECT p.project_id, j.key, j.value, p.created_at, p.id FROM payments p, ",
            $each,
            " j WHERE p.metadata IS NOT NULL;"
        )
    };
}

/// Migration 20 on SQLite: the table, the trigger (`json_each` over the stored JSON object)
/// and the payments already written.
const METADATA_SQLITE: &str = concat!(
    metadata_table!("INTEGER", " WITHOUT ROWID"),
    "CREATE TRIGGER payments_metadata_insert AFTER INSERT ON payments \
     WHEN NEW.metadata IS NOT NULL BEGIN \
     INSERT INTO payment_metadata \
     (project_id, meta_key, meta_value, payment_created_at, payment_id) \
     SELECT NEW.project_id, key, value, NEW.created_at, NEW.id FROM json_each(NEW.metadata); \
     END;\n",
    metadata_fill!("json_each(p.metadata)")
);

/// Migration 20 on PostgreSQL: the table, the trigger (`jsonb_each_text` over the stored JSON
/// object; created before the fill, its lock waits for the inserts under way, so each payment
/// is written by exactly one of the two) and the payments already written.
const METADATA_POSTGRES: &str = concat!(
    metadata_table!("BIGINT", ""),
    "CREATE FUNCTION payments_metadata_insert() RETURNS trigger LANGUAGE plpgsql AS $$\n\
     BEGIN\n\
         INSERT INTO payment_metadata \
         (project_id, meta_key, meta_value, payment_created_at, payment_id) \
         SELECT NEW.project_id, j.key, j.value, NEW.created_at, NEW.id \
         FROM jsonb_each_text(NEW.metadata::jsonb) j;\n\
         RETURN NULL;\n\
     END;\n\
     $$;\n\
     CREATE TRIGGER payments_metadata_insert AFTER INSERT ON payments \
     FOR EACH ROW WHEN (NEW.metadata IS NOT NULL) \
     EXECUTE FUNCTION payments_metadata_insert();\n",
    metadata_fill!("jsonb_each_text(p.metadata::jsonb)")
);

/// Migration 20's fill on PostgreSQL (a row of `payment_metadata` for each key of each
/// payment's metadata), also for a test or benchmark that wrote payments with the triggers off
/// (`session_replication_role = replica`). Run once: the rows are keys.
pub const METADATA_FILL_POSTGRES: &str = metadata_fill!("jsonb_each_text(p.metadata::jsonb)");

/// Migration 19's index, the same text on both engines: a project's events in one delivery
/// state, newest first, in the order of the events list (`created_at DESC, event_id DESC`).
const EVENT_STATE_DDL: &str = "CREATE INDEX outbox_events_project_state ON outbox_events \
(project_id, state, created_at, event_id);";

/// Migration 16's columns and indexes, the same text on both engines (its amount index is
/// replaced by migration 23's).
const SEARCH_DDL: &str = "ALTER TABLE payments ADD COLUMN requisite_last4 TEXT;\n\
ALTER TABLE projects ADD COLUMN return_url TEXT;\n\
CREATE INDEX payments_project_last4 ON payments (project_id, requisite_last4, created_at, id) \
WHERE requisite_last4 IS NOT NULL;\n\
CREATE INDEX payments_project_amount ON payments (project_id, amount, created_at, id);";

/// Migration 14's tables, the same text on both engines (SQLite reads `BIGINT` as `INTEGER`).
const LEDGER_DDL: &str = "CREATE TABLE ledger_balances (\n\
    project_id TEXT NOT NULL PRIMARY KEY,\n\
    entries BIGINT NOT NULL,\n\
    balance BIGINT NOT NULL,\n\
    credits BIGINT NOT NULL,\n\
    reversals BIGINT NOT NULL,\n\
    recheck_adjustments BIGINT NOT NULL,\n\
    operator_adjustments BIGINT NOT NULL,\n\
    payouts BIGINT NOT NULL,\n\
    updated_at BIGINT\n\
);\n\
CREATE TABLE ledger_entries (\n\
    project_id TEXT NOT NULL,\n\
    seq BIGINT NOT NULL,\n\
    id TEXT NOT NULL UNIQUE,\n\
    kind TEXT NOT NULL,\n\
    amount BIGINT NOT NULL,\n\
    balance_after BIGINT NOT NULL,\n\
    created_at BIGINT NOT NULL,\n\
    payment_id TEXT,\n\
    payment_version BIGINT,\n\
    destination TEXT,\n\
    reference TEXT,\n\
    reason TEXT,\n\
    actor TEXT,\n\
    PRIMARY KEY (project_id, seq)\n\
);\n\
CREATE UNIQUE INDEX ledger_entries_payment_version ON ledger_entries \
(payment_id, payment_version) WHERE payment_id IS NOT NULL;\n\
CREATE UNIQUE INDEX ledger_entries_reference ON ledger_entries \
(project_id, reference) WHERE reference IS NOT NULL;\n\
CREATE INDEX ledger_entries_time ON ledger_entries (project_id, created_at, seq);";

/// The schema version this build writes, on either engine.
pub const SCHEMA_VERSION: u32 = BASELINE + MIGRATIONS.len() as u32;

// Every early version of either engine (SQLite's ended at 9, PostgreSQL's at 5) is below the
// baseline, so versions only grow.
const _: () = assert!(9 < BASELINE && 5 < BASELINE);

/// The oldest version a build must know to work on a database at the baseline: every build
/// that knows any version does (the baseline step changes no table).
pub const BASELINE_MIN_READER: u32 = 1;

/// Why a database's schema does not suit this build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A newer build wrote the database, and this build cannot work on it.
    #[error(
        "the database has schema version {found}, newer than the version {supported} this \
         build supports; run a newer build (or restore a backup made by this one)"
    )]
    NewerSchema {
        /// The version recorded in the database.
        found: u32,
        /// The newest version this build knows.
        supported: u32,
    },
    /// The database is older than this build, and the open was told not to migrate (every
    /// `payments-server` command but `serve` and `migrate`).
    #[error(
        "the database has schema version {found}; this build needs version {supported}: run \
         `payments-server migrate` (or start `payments-server serve`, which migrates) first"
    )]
    NeedsMigration {
        /// The version recorded in the database (0: an empty database).
        found: u32,
        /// This build's version.
        supported: u32,
    },
}

/// Whether a database at `found` needs this build's migrations: `true` when it is older;
/// `false` when it is current, or newer but still readable by this build (its `min_reader`, where
/// the engine records one, is at most [`SCHEMA_VERSION`]); [`SchemaError::NewerSchema`] when a
/// newer build wrote it and this one cannot work on it. An engine that records no `min_reader`
/// (SQLite: one process, no rolling upgrade) passes `None`, and any newer version is refused.
pub fn behind(found: u32, min_reader: Option<u32>) -> Result<bool, SchemaError> {
    let readable = min_reader.is_some_and(|m| m <= SCHEMA_VERSION);
    if found > SCHEMA_VERSION && !readable {
        return Err(SchemaError::NewerSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(found < SCHEMA_VERSION)
}

/// [`behind`] for an open that must not migrate: an older database is
/// [`SchemaError::NeedsMigration`].
pub fn require_migrated(found: u32, min_reader: Option<u32>) -> Result<(), SchemaError> {
    if behind(found, min_reader)? {
        return Err(SchemaError::NeedsMigration {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// The migrations of [`MIGRATIONS`] a database at `found` lacks, each with the version it
/// brings the schema to. A database below the baseline first takes its engine's early steps
/// and the baseline, then all of them.
pub fn after(found: u32) -> impl Iterator<Item = (u32, &'static Migration)> {
    let done = usize::try_from(found.saturating_sub(BASELINE)).unwrap_or(usize::MAX);
    MIGRATIONS
        .iter()
        .enumerate()
        .skip(done)
        .map(|(i, m)| (BASELINE + u32::try_from(i).unwrap_or(u32::MAX) + 1, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_is_behind_current_is_not_newer_is_refused_unless_readable() {
        assert_eq!(behind(0, None), Ok(true));
        assert_eq!(behind(9, None), Ok(true), "SQLite's last early version");
        assert_eq!(
            behind(5, Some(1)),
            Ok(true),
            "PostgreSQL's last early version"
        );
        assert_eq!(behind(SCHEMA_VERSION, None), Ok(false));
        let newer = SCHEMA_VERSION + 1;
        assert_eq!(
            behind(newer, None),
            Err(SchemaError::NewerSchema {
                found: newer,
                supported: SCHEMA_VERSION
            })
        );
        assert_eq!(behind(newer, Some(BASELINE_MIN_READER)), Ok(false));
        assert_eq!(
            behind(newer, Some(SCHEMA_VERSION)),
            Ok(false),
            "a newer schema whose readers need exactly this version"
        );
        assert!(behind(newer, Some(newer)).is_err());
        assert_eq!(
            require_migrated(3, Some(1)),
            Err(SchemaError::NeedsMigration {
                found: 3,
                supported: SCHEMA_VERSION
            })
        );
        assert_eq!(require_migrated(SCHEMA_VERSION, None), Ok(()));
    }

    #[test]
    fn a_database_lacks_exactly_the_migrations_after_its_version() {
        assert_eq!(after(0).count(), MIGRATIONS.len());
        assert_eq!(after(BASELINE).count(), MIGRATIONS.len());
        assert_eq!(after(SCHEMA_VERSION).count(), 0);
        assert_eq!(after(SCHEMA_VERSION + 3).count(), 0);
        if let Some((version, _)) = after(0).next() {
            assert_eq!(version, BASELINE + 1);
        }
    }
}
