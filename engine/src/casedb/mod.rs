//! The case database: SQLite on the database channel.
//!
//! All writes go through one writer thread ([`DbWriter`]) that applies them in
//! transactions of a configurable number of operations, as a suite's database
//! layer does; stages hand it operations through a bounded queue, so a slow
//! database slows the stages down instead of growing memory. Reads use
//! separate read-only connections. Every connection goes through the
//! counting VFS, so all database file I/O is charged to the database channel.
//! The schema is in `schema.sql` and documented in `docs/schema.md`.

mod vfs;
mod writer;

pub use vfs::VfsError;
pub use writer::{DbOp, DbWriter};

use crate::channel::Channel;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The schema version stored in `meta` (`schema_version`).
pub const SCHEMA_VERSION: u32 = 1;

/// The case database file name inside the database channel directory.
pub const DB_FILE_NAME: &str = "case.sqlite";

const SCHEMA: &str = include_str!("schema.sql");

/// Errors from the case database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite reported an error.
    #[error("case database `{}`: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// The counting VFS could not be set up.
    #[error(transparent)]
    Vfs(#[from] VfsError),
    /// The writer thread stopped (after an earlier error) or failed.
    #[error("case database writer: {0}")]
    Writer(String),
    /// The file is not a caseload case database of a known version.
    #[error("`{}` is not a caseload case database of schema version {SCHEMA_VERSION} ({reason})", path.display())]
    NotACase {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// SQLite journal modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum JournalMode {
    /// Rollback journal deleted after each transaction (SQLite's default).
    Delete,
    /// Rollback journal truncated.
    Truncate,
    /// Rollback journal header zeroed.
    Persist,
    /// Write-ahead log.
    #[default]
    Wal,
    /// Journal in memory.
    Memory,
    /// No journal.
    Off,
}

impl JournalMode {
    /// The pragma value.
    pub fn as_str(self) -> &'static str {
        match self {
            JournalMode::Delete => "delete",
            JournalMode::Truncate => "truncate",
            JournalMode::Persist => "persist",
            JournalMode::Wal => "wal",
            JournalMode::Memory => "memory",
            JournalMode::Off => "off",
        }
    }
}

/// SQLite synchronous levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    /// Never fsync.
    Off,
    /// fsync at critical moments (with WAL: at checkpoints).
    #[default]
    Normal,
    /// fsync at every commit.
    Full,
    /// Full plus the directory.
    Extra,
}

impl Synchronous {
    /// The pragma value.
    pub fn as_str(self) -> &'static str {
        match self {
            Synchronous::Off => "off",
            Synchronous::Normal => "normal",
            Synchronous::Full => "full",
            Synchronous::Extra => "extra",
        }
    }
}

/// How the case database is run. Recorded in every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbOptions {
    /// Journal mode.
    pub journal_mode: JournalMode,
    /// Synchronous level.
    pub synchronous: Synchronous,
    /// Operations per transaction.
    pub batch_size: usize,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            journal_mode: JournalMode::Wal,
            synchronous: Synchronous::Normal,
            batch_size: 1000,
        }
    }
}

/// An open case database with its writer.
pub struct CaseDb {
    path: PathBuf,
    vfs: String,
    writer: DbWriter,
    options: DbOptions,
}

impl std::fmt::Debug for CaseDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaseDb")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn sqlite(path: &Path) -> impl Fn(rusqlite::Error) -> DbError + '_ {
    move |source| DbError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

impl CaseDb {
    /// Create a new case database in the database channel's directory
    /// (replacing none: the caller checks for an existing case first).
    pub fn create(channel: &Channel, options: DbOptions) -> Result<Self, DbError> {
        let path = channel.root().join(DB_FILE_NAME);
        let vfs = vfs::register(std::sync::Arc::clone(channel.counters()))?;
        let conn = Connection::open_with_flags_and_vfs(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            vfs.as_str(),
        )
        .map_err(sqlite(&path))?;
        configure(&conn, &options).map_err(sqlite(&path))?;
        conn.execute_batch(SCHEMA).map_err(sqlite(&path))?;
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?1), ('created_by', ?2)",
            rusqlite::params![
                SCHEMA_VERSION.to_string(),
                concat!("caseload ", env!("CARGO_PKG_VERSION"))
            ],
        )
        .map_err(sqlite(&path))?;
        let writer = DbWriter::spawn(conn, path.clone(), options.batch_size);
        Ok(CaseDb {
            path,
            vfs,
            writer,
            options,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options it runs with.
    pub fn options(&self) -> DbOptions {
        self.options
    }

    /// The name of this case's counting VFS: open other SQLite files with it
    /// (the KFF hash library) to charge their I/O to the same database
    /// channel.
    pub fn vfs_name(&self) -> &str {
        &self.vfs
    }

    /// The writer, to send operations to.
    pub fn writer(&self) -> &DbWriter {
        &self.writer
    }

    /// A read-only connection, counted on the database channel. Call
    /// [`DbWriter::flush`] first to see everything written so far.
    pub fn reader(&self) -> Result<Connection, DbError> {
        let conn = Connection::open_with_flags_and_vfs(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            self.vfs.as_str(),
        )
        .map_err(sqlite(&self.path))?;
        conn.execute_batch("PRAGMA mmap_size = 0; PRAGMA query_only = 1;")
            .map_err(sqlite(&self.path))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sqlite(&self.path))?;
        Ok(conn)
    }

    /// Commit everything and stop the writer.
    pub fn close(self) -> Result<(), DbError> {
        self.writer.close()
    }
}

/// Register a counting VFS on `channel` for SQLite files opened outside a
/// run's case database (a hash library being imported); returns the VFS
/// name to open connections with. Each call registers a new VFS that lives
/// for the rest of the process, so call it once per channel.
pub fn counting_vfs(channel: &Channel) -> Result<String, DbError> {
    Ok(vfs::register(std::sync::Arc::clone(channel.counters()))?)
}

/// How long a connection waits for another's lock before failing.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

fn configure(conn: &Connection, options: &DbOptions) -> rusqlite::Result<()> {
    // mmap would bypass the counting VFS's xRead.
    conn.execute_batch("PRAGMA mmap_size = 0; PRAGMA foreign_keys = ON;")?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let _mode: String = conn.query_row(
        &format!("PRAGMA journal_mode = {}", options.journal_mode.as_str()),
        [],
        |row| row.get(0),
    )?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}",
        options.synchronous.as_str()
    ))?;
    Ok(())
}

/// Open an existing case database read-only, outside any run (export,
/// search). Its I/O is not charged to a channel.
pub fn open_read_only(path: &Path) -> Result<Connection, DbError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite(path))?;
    let version: Result<String, _> = conn.query_row(
        "SELECT value FROM meta WHERE key = 'schema_version'",
        [],
        |r| r.get(0),
    );
    match version {
        Ok(v) if v == SCHEMA_VERSION.to_string() => Ok(conn),
        Ok(v) => Err(DbError::NotACase {
            path: path.to_path_buf(),
            reason: format!("it has schema version {v}"),
        }),
        Err(e) => Err(DbError::NotACase {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}

/// The current time as ISO 8601 UTC with milliseconds.
pub fn now_utc() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format_utc(now.as_secs() as i64, now.subsec_millis())
}

/// Format Unix seconds as ISO 8601 UTC.
pub fn format_utc(secs: i64, millis: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ChannelKind;

    #[test]
    fn utc_formatting_matches_known_dates() {
        assert_eq!(format_utc(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(format_utc(1_700_000_000, 0), "2023-11-14T22:13:20.000Z");
    }

    #[test]
    fn database_io_is_charged_to_the_channel_and_adds_up() {
        for journal in [JournalMode::Wal, JournalMode::Delete] {
            let dir = tempfile::tempdir().unwrap();
            let ch = Channel::new(ChannelKind::Database, dir.path(), Vec::new());
            let options = DbOptions {
                journal_mode: journal,
                synchronous: Synchronous::Full,
                batch_size: 100,
            };
            let db = CaseDb::create(&ch, options).unwrap();
            for i in 0..2000i64 {
                db.writer()
                    .exec(move |c| {
                        c.prepare_cached("INSERT INTO meta (key, value) VALUES (?1, ?2)")?
                            .execute(rusqlite::params![format!("k{i}"), "x".repeat(200)])?;
                        Ok(())
                    })
                    .unwrap();
            }
            db.writer().flush().unwrap();
            let reader = db.reader().unwrap();
            let n: i64 = reader
                .query_row("SELECT count(*) FROM meta", [], |r| r.get(0))
                .unwrap();
            assert_eq!(n, 2002);
            drop(reader);
            db.close().unwrap();
            let figures = ch.snapshot();
            let on_disk: u64 = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().metadata().unwrap().len())
                .sum();
            let db_len = std::fs::metadata(dir.path().join(DB_FILE_NAME))
                .unwrap()
                .len();
            // Everything on disk was written through the VFS, and the VFS
            // saw at least the final database, plus journal traffic.
            assert!(
                figures.bytes_written >= db_len,
                "{journal:?}: {figures:?} < {db_len}"
            );
            assert!(
                figures.bytes_written >= on_disk,
                "{journal:?}: {figures:?} < {on_disk}"
            );
            // 20 transactions at synchronous=full: at least one fsync each.
            assert!(figures.fsyncs >= 20, "{journal:?}: {figures:?}");
            assert!(figures.bytes_read > 0, "the reader's queries are counted");
            // Writes are page-sized; nothing near 100x the data was written.
            assert!(
                figures.bytes_written < 100 * db_len,
                "{journal:?}: {figures:?}"
            );
        }
    }
}
