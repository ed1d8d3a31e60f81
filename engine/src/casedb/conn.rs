//! One connection to the case database, whichever engine holds it.
//!
//! Every query of the case-database layer is written once, in the SQL the
//! two engines share, with `?N` parameters; this module runs it on SQLite
//! (rusqlite, through the counting VFS) or on PostgreSQL (the `postgres`
//! client, `?N` rewritten to `$N`, statements prepared once per
//! connection). Results come back as [`Row`]s of [`Value`]s. What the two
//! engines do not share (identity columns, byte and real types, a JSON
//! accessor) is spelled per [`Dialect`] in the schema and in the few
//! queries that need it.

use super::DbError;
use super::value::{Row, Value, from_postgres};
use std::collections::HashMap;

/// Which SQL dialect a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite 3.35 or later (RETURNING, UPDATE ... FROM, IS DISTINCT FROM).
    Sqlite,
    /// PostgreSQL 12 or later.
    Postgres,
}

/// A PostgreSQL client and its prepared statements.
pub(crate) struct PgConn {
    pub(crate) client: postgres::Client,
    statements: HashMap<String, postgres::Statement>,
    /// Whether the server has `pg_stat_force_next_flush()` (15 and later).
    force_flush: Option<bool>,
    /// Rows the statements run through `execute` changed.
    rows_changed: u64,
}

impl PgConn {
    pub(crate) fn new(client: postgres::Client) -> Self {
        PgConn {
            client,
            statements: HashMap::new(),
            force_flush: None,
            rows_changed: 0,
        }
    }

    /// Make this session's pending statistics visible to other sessions
    /// now. PostgreSQL publishes a session's I/O statistics at most once a
    /// second, and an idle session's only after ten, which would charge a
    /// stage's WAL syncs to a later one. `pg_stat_force_next_flush()`
    /// makes the next report flush; the report runs when the session goes
    /// idle after that statement, so the second round trip returns only
    /// once it has happened.
    pub(crate) fn publish_stats(&mut self) {
        let supported = *self.force_flush.get_or_insert_with(|| {
            self.client
                .query_one(
                    "SELECT current_setting('server_version_num')::int4 >= 150000",
                    &[],
                )
                .ok()
                .and_then(|r| r.try_get::<_, bool>(0).ok())
                .unwrap_or(false)
        });
        if supported {
            let _ = self
                .client
                .batch_execute("SELECT pg_stat_force_next_flush()");
            let _ = self.client.batch_execute("SELECT 1");
        }
    }

    fn statement(&mut self, sql: &str) -> Result<postgres::Statement, DbError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let stmt = self
            .client
            .prepare(&to_postgres(sql))
            .map_err(|e| pg_error(&e, sql))?;
        self.statements.insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }
}

/// A connection.
pub(crate) enum Conn {
    /// SQLite.
    Sqlite(rusqlite::Connection),
    /// PostgreSQL.
    Postgres(Box<PgConn>),
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Conn::Sqlite(_) => "Conn::Sqlite",
            Conn::Postgres(_) => "Conn::Postgres",
        })
    }
}

fn sqlite_error(e: rusqlite::Error, sql: &str) -> DbError {
    DbError::Query {
        engine: "SQLite",
        message: e.to_string(),
        statement: first_words(sql),
        lost: false,
    }
}

/// A PostgreSQL error with the server's own message, and whether the
/// connection is gone (server stopped or killed).
pub(crate) fn pg_error(e: &postgres::Error, sql: &str) -> DbError {
    let message = match e.as_db_error() {
        Some(db) => {
            let mut m = format!("{}: {}", db.severity(), db.message());
            if let Some(d) = db.detail() {
                m.push_str(&format!(" ({d})"));
            }
            m
        }
        None => {
            let mut m = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                m.push_str(&format!(": {c}"));
                cause = c.source();
            }
            m
        }
    };
    DbError::Query {
        engine: "PostgreSQL",
        message,
        statement: first_words(sql),
        lost: e.is_closed() || e.as_db_error().is_none(),
    }
}

/// The start of a statement, to say which one failed.
fn first_words(sql: &str) -> String {
    let flat: String = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

/// `?N` parameters as PostgreSQL's `$N` (outside string literals).
pub(crate) fn to_postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quoted = false;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted && chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            _ => out.push(c),
        }
    }
    out
}

fn pg_params(params: &[Value]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    params
        .iter()
        .map(|v| v as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

impl Conn {
    /// The dialect it speaks.
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Run a statement; rows changed.
    pub(crate) fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, DbError> {
        match self {
            Conn::Sqlite(c) => c
                .prepare_cached(sql)
                .and_then(|mut s| s.execute(rusqlite::params_from_iter(params.iter())))
                .map(|n| n as u64)
                .map_err(|e| sqlite_error(e, sql)),
            Conn::Postgres(pg) => {
                let stmt = pg.statement(sql)?;
                let n = pg
                    .client
                    .execute(&stmt, &pg_params(params))
                    .map_err(|e| pg_error(&e, sql))?;
                pg.rows_changed += n;
                Ok(n)
            }
        }
    }

    /// Rows inserted, updated or deleted on this connection so far (SQLite:
    /// every statement's; PostgreSQL: those run through `execute`).
    pub(crate) fn rows_changed(&self) -> u64 {
        match self {
            Conn::Sqlite(c) => c.total_changes(),
            Conn::Postgres(pg) => pg.rows_changed,
        }
    }

    /// Count a row inserted by a query (`INSERT ... RETURNING`), which
    /// PostgreSQL's `execute` count does not see (SQLite counts it itself).
    pub(crate) fn count_inserted_row(&mut self) {
        if let Conn::Postgres(pg) = self {
            pg.rows_changed += 1;
        }
    }

    /// The id of the last row inserted on this connection: SQLite's row
    /// id; PostgreSQL's last identity value this session drew.
    pub(crate) fn last_insert_id(&mut self) -> Result<i64, DbError> {
        match self {
            Conn::Sqlite(c) => Ok(c.last_insert_rowid()),
            Conn::Postgres(_) => self.query_one("SELECT lastval()", &[])?.get(0),
        }
    }

    /// Run a query and collect its rows.
    pub(crate) fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, DbError> {
        let mut rows = Vec::new();
        self.for_each(sql, params, &mut |r| {
            rows.push(r);
            Ok(())
        })?;
        Ok(rows)
    }

    /// Run a query that yields exactly one row.
    pub(crate) fn query_one(&mut self, sql: &str, params: &[Value]) -> Result<Row, DbError> {
        self.query(sql, params)?
            .into_iter()
            .next()
            .ok_or_else(|| DbError::Query {
                engine: match self.dialect() {
                    Dialect::Sqlite => "SQLite",
                    Dialect::Postgres => "PostgreSQL",
                },
                message: "the query returned no row".into(),
                statement: first_words(sql),
                lost: false,
            })
    }

    /// Run a query and hand each row to `f` as it arrives, so memory does
    /// not grow with the result.
    pub(crate) fn for_each(
        &mut self,
        sql: &str,
        params: &[Value],
        f: &mut dyn FnMut(Row) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        match self {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql).map_err(|e| sqlite_error(e, sql))?;
                let n = stmt.column_count();
                let mut rows = stmt
                    .query(rusqlite::params_from_iter(params.iter()))
                    .map_err(|e| sqlite_error(e, sql))?;
                while let Some(r) = rows.next().map_err(|e| sqlite_error(e, sql))? {
                    let mut values = Vec::with_capacity(n);
                    for i in 0..n {
                        values.push(Value::from_sqlite(
                            r.get_ref(i).map_err(|e| sqlite_error(e, sql))?,
                        ));
                    }
                    f(Row(values))?;
                }
                Ok(())
            }
            Conn::Postgres(pg) => {
                use postgres::fallible_iterator::FallibleIterator;
                let stmt = pg.statement(sql)?;
                let mut rows = pg
                    .client
                    .query_raw(&stmt, pg_params(params))
                    .map_err(|e| pg_error(&e, sql))?;
                while let Some(r) = rows.next().map_err(|e| pg_error(&e, sql))? {
                    let mut values = Vec::with_capacity(r.len());
                    for i in 0..r.len() {
                        values.push(from_postgres(&r, i).map_err(|message| DbError::Query {
                            engine: "PostgreSQL",
                            message,
                            statement: first_words(sql),
                            lost: false,
                        })?);
                    }
                    f(Row(values))?;
                }
                Ok(())
            }
        }
    }

    /// Run statements without parameters (DDL, transaction control).
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        match self {
            Conn::Sqlite(c) => c.execute_batch(sql).map_err(|e| sqlite_error(e, sql)),
            Conn::Postgres(pg) => pg.client.batch_execute(sql).map_err(|e| pg_error(&e, sql)),
        }
    }

    /// PostgreSQL: publish the session's statistics now (see
    /// [`PgConn::publish_stats`]); SQLite has none.
    pub(crate) fn publish_stats(&mut self) {
        if let Conn::Postgres(pg) = self {
            pg.publish_stats();
        }
    }

    /// Whether a statement error leaves the open transaction unusable
    /// (PostgreSQL aborts the whole transaction; SQLite only the statement).
    pub(crate) fn error_aborts_transaction(&self) -> bool {
        self.dialect() == Dialect::Postgres
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_rewritten_outside_literals() {
        assert_eq!(
            to_postgres("SELECT ?1, '?2', x FROM t WHERE a = ?12 AND b = '?'"),
            "SELECT $1, '?2', x FROM t WHERE a = $12 AND b = '?'"
        );
    }

    #[test]
    fn statements_are_named_by_their_first_words() {
        let long = format!("SELECT {} FROM t", "a, ".repeat(40));
        assert!(first_words(&long).ends_with("..."));
        assert_eq!(first_words("SELECT\n  1"), "SELECT 1");
    }
}
