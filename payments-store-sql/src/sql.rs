//! Statement text shared by both engines, and the seam where it differs.
//!
//! A shared statement is written once in PostgreSQL's form, placeholders `$1`, `$2`, ... (both
//! engines accept `ON CONFLICT ... DO UPDATE SET x = excluded.x` and `RETURNING`), and
//! [`Dialect::translate`] turns it into SQLite's `?1`, `?2`, ... (SQLite would read `$1` as a
//! *named* parameter, numbered by first appearance, which breaks a statement that names `$2`
//! before `$1`). Statements whose SQL really differs (row locking, `SKIP LOCKED`, SQLite's
//! `rowid`) stay in their backend.

use std::sync::OnceLock;

/// The SQL engine a statement is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// SQLite: `?n` placeholders.
    Sqlite,
    /// PostgreSQL: `$n` placeholders.
    Postgres,
}

impl Dialect {
    /// `sql`, written with `$n` placeholders, for this engine. The text must not hold a `$`
    /// followed by a digit anywhere but in a placeholder (no such string literals).
    pub fn translate(self, sql: &str) -> String {
        match self {
            Dialect::Postgres => sql.to_string(),
            Dialect::Sqlite => {
                let mut out = String::with_capacity(sql.len());
                let mut chars = sql.chars().peekable();
                while let Some(c) = chars.next() {
                    if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
                        out.push('?');
                    } else {
                        out.push(c);
                    }
                }
                out
            }
        }
    }

    /// The column that orders a table's rows as they were inserted, for tables without a
    /// `seq` column of their own in SQLite (its `rowid`; PostgreSQL's tables have `seq`).
    pub fn insertion_order(self) -> &'static str {
        match self {
            Dialect::Sqlite => "rowid",
            Dialect::Postgres => "seq",
        }
    }

    /// The smaller of two values: SQLite's two-argument `min`, PostgreSQL's `LEAST`.
    pub fn least(self) -> &'static str {
        match self {
            Dialect::Sqlite => "min",
            Dialect::Postgres => "LEAST",
        }
    }

    /// The larger of two values: SQLite's two-argument `max`, PostgreSQL's `GREATEST`.
    pub fn greatest(self) -> &'static str {
        match self {
            Dialect::Sqlite => "max",
            Dialect::Postgres => "GREATEST",
        }
    }

    /// The negation of [`Dialect::is_same`]: SQLite's `IS NOT`, PostgreSQL's
    /// `IS DISTINCT FROM`.
    pub fn is_not_same(self) -> &'static str {
        match self {
            Dialect::Sqlite => "IS NOT",
            Dialect::Postgres => "IS DISTINCT FROM",
        }
    }

    /// The comparison that treats two `NULL`s as equal: SQLite's `IS`, PostgreSQL's
    /// `IS NOT DISTINCT FROM`.
    pub fn is_same(self) -> &'static str {
        match self {
            Dialect::Sqlite => "IS",
            Dialect::Postgres => "IS NOT DISTINCT FROM",
        }
    }

    /// What a sub-select that picks rows to delete or change adds so that concurrent
    /// statements take disjoint rows: nothing in SQLite (one writer), `FOR UPDATE SKIP LOCKED`
    /// in PostgreSQL.
    pub fn skip_locked(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// What a read of a row that the same transaction then changes adds so that no other
    /// transaction changes it in between: nothing in SQLite (the one writer runs it), `FOR
    /// UPDATE` in PostgreSQL.
    pub fn for_update(self) -> &'static str {
        match self {
            Dialect::Sqlite => "",
            Dialect::Postgres => " FOR UPDATE",
        }
    }
}

/// A statement built once per engine, on first use, from a function that writes it with `$n`
/// placeholders (it may format the column lists of [`crate::record`] into it, and ask the
/// [`Dialect`] for the few words that differ). Both stores cache prepared statements by their
/// text, so the text is built once per process.
pub struct Sql {
    build: fn(Dialect) -> String,
    texts: [OnceLock<String>; 2],
}

impl std::fmt::Debug for Sql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Sql")
            .field(&self.text(Dialect::Postgres))
            .finish()
    }
}

impl Sql {
    /// The statement `build` writes.
    pub const fn new(build: fn(Dialect) -> String) -> Sql {
        Sql {
            build,
            texts: [OnceLock::new(), OnceLock::new()],
        }
    }

    /// The statement for `dialect`.
    pub fn text(&self, dialect: Dialect) -> &str {
        let slot = match dialect {
            Dialect::Sqlite => &self.texts[0],
            Dialect::Postgres => &self.texts[1],
        };
        slot.get_or_init(|| dialect.translate(&(self.build)(dialect)))
    }
}

/// Column names as a select or insert list: `a, b, c`.
pub fn list(columns: &[&str]) -> String {
    columns.join(", ")
}

/// Column names qualified and aliased for a join: `t.a AS t_a, t.b AS t_b`.
pub fn aliased(alias: &str, columns: &[&str]) -> String {
    columns
        .iter()
        .map(|n| format!("{alias}.{n} AS {alias}_{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Placeholders `$first, ..., $(first + n - 1)`.
pub fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `INSERT INTO table (columns) VALUES ($1, ...)`.
pub fn insert(table: &str, columns: &[&str]) -> String {
    format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        list(columns),
        placeholders(1, columns.len())
    )
}

/// [`insert`] that replaces the row whose `key` column is taken: every other column is set
/// from the new row.
pub fn upsert(table: &str, columns: &[&str], key: &str) -> String {
    let set = columns
        .iter()
        .filter(|c| **c != key)
        .map(|c| format!("{c} = excluded.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "{} ON CONFLICT ({key}) DO UPDATE SET {set}",
        insert(table, columns)
    )
}

/// `SELECT columns FROM table` followed by `rest` (a `WHERE`, `ORDER BY` or `LIMIT`).
pub fn select(columns: &[&str], table: &str, rest: &str) -> String {
    let mut s = format!("SELECT {} FROM {table}", list(columns));
    if !rest.is_empty() {
        s.push(' ');
        s.push_str(rest);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_placeholders_are_numbered_as_written() {
        let sql = "UPDATE t SET a = $2 WHERE b = $1 AND c = $10";
        assert_eq!(
            Dialect::Sqlite.translate(sql),
            "UPDATE t SET a = ?2 WHERE b = ?1 AND c = ?10"
        );
        assert_eq!(Dialect::Postgres.translate(sql), sql);
    }

    #[test]
    fn a_dollar_without_a_digit_is_kept() {
        assert_eq!(Dialect::Sqlite.translate("SELECT '$x'"), "SELECT '$x'");
    }

    #[test]
    fn upsert_sets_every_column_but_the_key() {
        assert_eq!(
            upsert("m", &["id", "name", "paused"], "id"),
            "INSERT INTO m (id, name, paused) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE \
             SET name = excluded.name, paused = excluded.paused"
        );
    }

    #[test]
    fn a_statement_is_built_per_dialect() {
        static S: Sql = Sql::new(|d| {
            select(
                &["a", "b"],
                "t",
                &format!("WHERE a = $1 ORDER BY {}", d.insertion_order()),
            )
        });
        assert_eq!(
            S.text(Dialect::Sqlite),
            "SELECT a, b FROM t WHERE a = ?1 ORDER BY rowid"
        );
        assert_eq!(
            S.text(Dialect::Postgres),
            "SELECT a, b FROM t WHERE a = $1 ORDER BY seq"
        );
    }
}
