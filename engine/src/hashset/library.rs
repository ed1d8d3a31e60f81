//! The hash library: a SQLite database of named hash sets, shared by cases,
//! on the database channel. Layout in `docs/schema.md` ("Hash library").

use super::formats::{self, Format, Sink};
use super::sort::{self, Merged, Rec, Sorter};
use super::{Category, HashKind, HashSetError, sort::pos};
use crate::casedb;
use crate::channel::Channel;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The library's default file name in the database channel directory.
pub const LIBRARY_FILE_NAME: &str = "kff.sqlite";

/// The library layout version stored in `kff_meta` (`schema_version`).
pub const LIBRARY_SCHEMA_VERSION: u32 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kff_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kff_sets (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL,
    category     TEXT NOT NULL CHECK (category IN ('known', 'notable')),
    status       TEXT NOT NULL CHECK (status IN ('importing', 'complete', 'removing')),
    started_at   TEXT NOT NULL,
    completed_at TEXT,
    records      INTEGER NOT NULL DEFAULT 0,
    md5          INTEGER NOT NULL DEFAULT 0,
    sha1         INTEGER NOT NULL DEFAULT 0,
    sha256       INTEGER NOT NULL DEFAULT 0,
    duplicates   INTEGER NOT NULL DEFAULT 0,
    malformed    INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS kff_sets_complete_name ON kff_sets(name) WHERE status = 'complete';
CREATE TABLE IF NOT EXISTS kff_sources (
    set_id    INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    path      TEXT NOT NULL,
    format    TEXT NOT NULL,
    bytes     INTEGER NOT NULL,
    modified  INTEGER,
    records   INTEGER NOT NULL,
    malformed INTEGER NOT NULL,
    PRIMARY KEY (set_id, seq)
);
CREATE TABLE IF NOT EXISTS kff_issues (
    set_id  INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    line    INTEGER NOT NULL,
    kind    TEXT NOT NULL CHECK (kind IN ('malformed', 'duplicate')),
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS kff_issues_by_set ON kff_issues(set_id, seq, line);
CREATE TABLE IF NOT EXISTS kff_md5 (
    hash   BLOB NOT NULL,
    set_id INTEGER NOT NULL,
    PRIMARY KEY (hash, set_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kff_sha1 (
    hash   BLOB NOT NULL,
    set_id INTEGER NOT NULL,
    PRIMARY KEY (hash, set_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS kff_sha256 (
    hash   BLOB NOT NULL,
    set_id INTEGER NOT NULL,
    PRIMARY KEY (hash, set_id)
) WITHOUT ROWID;
";

/// Malformed lines recorded individually per set (all are counted).
const MAX_MALFORMED_RECORDED: u64 = 10_000;
/// Duplicate entries recorded individually per set (all are counted; NSRL
/// files repeat hashes across products by the million).
const MAX_DUPLICATES_RECORDED: u64 = 100;
/// Rows per transaction while filling the tables: bounds the journal.
const ROWS_PER_TRANSACTION: u64 = 2_000_000;
/// Rows per INSERT statement (fewer statement executions per row).
const ROWS_PER_STATEMENT: usize = 128;
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Where a set stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SetStatus {
    /// Being imported (or an import died: never used for lookups).
    Importing,
    /// Imported whole; the only status lookups use.
    Complete,
    /// Replaced or removed; its entries are being deleted.
    Removing,
}

impl SetStatus {
    fn parse(text: &str) -> SetStatus {
        match text {
            "complete" => SetStatus::Complete,
            "removing" => SetStatus::Removing,
            _ => SetStatus::Importing,
        }
    }

    /// The stored value.
    pub fn as_str(self) -> &'static str {
        match self {
            SetStatus::Importing => "importing",
            SetStatus::Complete => "complete",
            SetStatus::Removing => "removing",
        }
    }
}

/// What a lookup handle is made of (`Library::lookup` in `lookup.rs`).
pub(super) struct LookupParts {
    /// The library file.
    pub(super) path: PathBuf,
    /// Its own read-only connection.
    pub(super) conn: Connection,
    /// The chosen sets, by id.
    pub(super) sets: HashMap<i64, SetInfo>,
    /// Which digest kinds they hold.
    pub(super) has: [bool; 3],
}

/// A set in the library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetInfo {
    /// Row id (never reused).
    pub id: i64,
    /// Name.
    pub name: String,
    /// Known or notable.
    pub category: Category,
    /// Whether it may be used.
    pub status: SetStatus,
    /// Import start, ISO 8601 UTC.
    pub started_at: String,
    /// Import end, when complete.
    pub completed_at: Option<String>,
    /// Entries (lines or rows) read with at least one valid hash.
    pub records: u64,
    /// Distinct MD5s.
    pub md5: u64,
    /// Distinct SHA-1s.
    pub sha1: u64,
    /// Distinct SHA-256s.
    pub sha256: u64,
    /// Hashes seen more than once (merged).
    pub duplicates: u64,
    /// Malformed lines skipped.
    pub malformed: u64,
}

impl SetInfo {
    /// Distinct hashes of one kind.
    pub fn entries(&self, kind: HashKind) -> u64 {
        match kind {
            HashKind::Md5 => self.md5,
            HashKind::Sha1 => self.sha1,
            HashKind::Sha256 => self.sha256,
        }
    }
}

/// Kind of an import issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IssueKind {
    /// The line was skipped.
    Malformed,
    /// The hash was already in the set (merged).
    Duplicate,
}

/// A problem with one line of a source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    /// The source file.
    pub source: PathBuf,
    /// 1-based line (row for SQLite sources).
    pub line: u64,
    /// What kind.
    pub kind: IssueKind,
    /// What is wrong.
    pub message: String,
}

/// What to import.
#[derive(Debug, Clone)]
pub struct ImportRequest {
    /// Set name.
    pub name: String,
    /// Known or notable.
    pub category: Category,
    /// Source files, read in order into one set.
    pub sources: Vec<PathBuf>,
    /// Their format; `None` detects it per file.
    pub format: Option<Format>,
    /// Stop at the first malformed line (nothing is imported).
    pub strict: bool,
    /// Replace a complete set of the same name (atomically, at the end).
    pub replace: bool,
    /// Hash kinds to import; empty means every kind a source has.
    pub kinds: Vec<HashKind>,
    /// Memory for sorting, in bytes (runs beyond it spill to the temp
    /// channel).
    pub memory: usize,
}

/// One source's figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceReport {
    /// The file.
    pub path: PathBuf,
    /// Its format.
    pub format: String,
    /// Its size.
    pub bytes: u64,
    /// Entries with at least one valid hash.
    pub records: u64,
    /// Malformed lines skipped.
    pub malformed: u64,
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportReport {
    /// The set as now stored (status `complete`).
    pub set: SetInfo,
    /// Per source.
    pub sources: Vec<SourceReport>,
    /// The first issues (at most 20), for display; all recorded ones are in
    /// `kff_issues`.
    pub issues: Vec<Issue>,
    /// A set of the same name was replaced.
    pub replaced: bool,
    /// Wall time.
    pub seconds: f64,
}

/// Progress of an import.
pub trait ImportProgress: Sync {
    /// A new phase (`reading NAME`, `writing md5`), with its total in bytes
    /// or items when known.
    fn phase(&self, what: &str, total: Option<u64>, bytes: bool);
    /// Work done in the current phase.
    fn position(&self, done: u64);
}

/// An [`ImportProgress`] that shows nothing.
#[derive(Debug, Default)]
pub struct NoImportProgress;

impl ImportProgress for NoImportProgress {
    fn phase(&self, _: &str, _: Option<u64>, _: bool) {}
    fn position(&self, _: u64) {}
}

/// An open hash library.
pub struct Library {
    path: PathBuf,
    vfs: Option<String>,
    conn: Connection,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn table(kind: HashKind) -> &'static str {
    match kind {
        HashKind::Md5 => "kff_md5",
        HashKind::Sha1 => "kff_sha1",
        HashKind::Sha256 => "kff_sha256",
    }
}

fn open_conn(path: &Path, vfs: Option<&str>, flags: OpenFlags) -> rusqlite::Result<Connection> {
    let conn = match vfs {
        Some(v) => Connection::open_with_flags_and_vfs(path, flags, v)?,
        None => Connection::open_with_flags(path, flags)?,
    };
    // mmap would bypass the counting VFS's xRead.
    conn.execute_batch("PRAGMA mmap_size = 0;")?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

const SET_COLUMNS: &str = "id, name, category, status, started_at, completed_at, records, md5, sha1, sha256, duplicates, malformed";

fn set_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SetInfo> {
    let category: String = r.get(2)?;
    let status: String = r.get(3)?;
    let n =
        |i: usize| -> rusqlite::Result<u64> { Ok(u64::try_from(r.get::<_, i64>(i)?).unwrap_or(0)) };
    Ok(SetInfo {
        id: r.get(0)?,
        name: r.get(1)?,
        category: Category::parse(&category).unwrap_or(Category::Known),
        status: SetStatus::parse(&status),
        started_at: r.get(4)?,
        completed_at: r.get(5)?,
        records: n(6)?,
        md5: n(7)?,
        sha1: n(8)?,
        sha256: n(9)?,
        duplicates: n(10)?,
        malformed: n(11)?,
    })
}

impl Library {
    fn sql(&self) -> impl Fn(rusqlite::Error) -> HashSetError + '_ {
        move |source| HashSetError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Open a library for importing and maintenance, creating it if absent.
    /// With `vfs` (a counting VFS from [`casedb::counting_vfs`] or
    /// [`casedb::CaseDb::vfs_name`]) its I/O is charged to that database
    /// channel.
    pub fn open_or_create(path: &Path, vfs: Option<&str>) -> Result<Library, HashSetError> {
        let sql = |source| HashSetError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let conn = open_conn(
            path,
            vfs,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| not_a_library(path, e))?;
        let lib = Library {
            path: path.to_path_buf(),
            vfs: vfs.map(str::to_string),
            conn,
        };
        let fresh: i64 = lib
            .conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| not_a_library(path, e))?;
        if fresh == 0 {
            // WAL: cases keep reading the library while another imports.
            lib.conn
                .execute_batch("PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;")
                .map_err(sql)?;
            lib.conn
                .execute_batch(&format!(
                    "BEGIN IMMEDIATE; {SCHEMA}
                     INSERT OR IGNORE INTO kff_meta (key, value) VALUES
                        ('schema', 'caseload-kff'), ('schema_version', '{LIBRARY_SCHEMA_VERSION}'),
                        ('created_by', 'caseload {}');
                     COMMIT;",
                    env!("CARGO_PKG_VERSION")
                ))
                .map_err(sql)?;
        }
        lib.check_version()?;
        lib.conn
            .execute_batch("PRAGMA synchronous = NORMAL; PRAGMA cache_size = -65536;")
            .map_err(sql)?;
        lib.purge_removed()?;
        Ok(lib)
    }

    /// Open an existing library read-only (for lookups and listing).
    pub fn open_read_only(path: &Path, vfs: Option<&str>) -> Result<Library, HashSetError> {
        if !path.is_file() {
            return Err(HashSetError::NotALibrary {
                path: path.to_path_buf(),
                reason: "no such file; import a set first (caseload hashset import)".into(),
            });
        }
        let conn = open_conn(
            path,
            vfs,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| not_a_library(path, e))?;
        let lib = Library {
            path: path.to_path_buf(),
            vfs: vfs.map(str::to_string),
            conn,
        };
        lib.check_version()?;
        Ok(lib)
    }

    fn check_version(&self) -> Result<(), HashSetError> {
        let version: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM kff_meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| not_a_library(&self.path, e))?;
        match version {
            Some(v) if v == LIBRARY_SCHEMA_VERSION.to_string() => Ok(()),
            Some(v) => Err(HashSetError::NotALibrary {
                path: self.path.clone(),
                reason: format!("it has version {v}"),
            }),
            None => Err(HashSetError::NotALibrary {
                path: self.path.clone(),
                reason: "no schema version".into(),
            }),
        }
    }

    /// The library file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every set, whatever its status, by name then id.
    pub fn sets(&self) -> Result<Vec<SetInfo>, HashSetError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {SET_COLUMNS} FROM kff_sets ORDER BY name, id"
            ))
            .map_err(self.sql())?;
        let rows = stmt.query_map([], set_from_row).map_err(self.sql())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.sql())
    }

    /// The complete set of that name, if any.
    pub fn complete_set(&self, name: &str) -> Result<Option<SetInfo>, HashSetError> {
        self.conn
            .query_row(
                &format!(
                    "SELECT {SET_COLUMNS} FROM kff_sets WHERE name = ?1 AND status = 'complete'"
                ),
                [name],
                set_from_row,
            )
            .optional()
            .map_err(self.sql())
    }

    /// The sources a set was imported from.
    pub fn sources(&self, set_id: i64) -> Result<Vec<(SourceReport, Option<i64>)>, HashSetError> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, format, bytes, records, malformed, modified FROM kff_sources WHERE set_id = ?1 ORDER BY seq")
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([set_id], |r| {
                Ok((
                    SourceReport {
                        path: PathBuf::from(r.get::<_, String>(0)?),
                        format: r.get(1)?,
                        bytes: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                        records: u64::try_from(r.get::<_, i64>(3)?).unwrap_or(0),
                        malformed: u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
                    },
                    r.get(5)?,
                ))
            })
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.sql())
    }

    /// Recorded issues of a set, in source and line order (at most `limit`).
    pub fn issues(&self, set_id: i64, limit: usize) -> Result<Vec<Issue>, HashSetError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT s.path, i.line, i.kind, i.message FROM kff_issues i
                 JOIN kff_sources s ON s.set_id = i.set_id AND s.seq = i.seq
                 WHERE i.set_id = ?1 ORDER BY i.seq, i.line, i.kind LIMIT ?2",
            )
            .map_err(self.sql())?;
        let rows = stmt
            .query_map(rusqlite::params![set_id, limit as i64], |r| {
                let kind: String = r.get(2)?;
                Ok(Issue {
                    source: PathBuf::from(r.get::<_, String>(0)?),
                    line: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                    kind: if kind == "duplicate" {
                        IssueKind::Duplicate
                    } else {
                        IssueKind::Malformed
                    },
                    message: r.get(3)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
            .map_err(self.sql())
    }

    /// Remove a set (complete or not) by name. Returns how many sets went.
    pub fn remove(&self, name: &str) -> Result<usize, HashSetError> {
        let n = self
            .conn
            .execute(
                "UPDATE kff_sets SET status = 'removing' WHERE name = ?1",
                [name],
            )
            .map_err(self.sql())?;
        self.purge_removed()?;
        Ok(n)
    }

    /// Delete the entries and rows of sets marked `removing` (replaced or
    /// removed, possibly by a process that died before finishing).
    fn purge_removed(&self) -> Result<(), HashSetError> {
        let ids: Vec<i64> = {
            let mut stmt = self
                .conn
                .prepare("SELECT id FROM kff_sets WHERE status = 'removing'")
                .map_err(self.sql())?;
            stmt.query_map([], |r| r.get(0))
                .map_err(self.sql())?
                .collect::<rusqlite::Result<_>>()
                .map_err(self.sql())?
        };
        for id in ids {
            self.delete_set_rows(id)?;
        }
        Ok(())
    }

    /// Remove everything of one set, in one transaction.
    fn delete_set_rows(&self, id: i64) -> Result<(), HashSetError> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(self.sql())?;
        let result = (|| -> rusqlite::Result<()> {
            for kind in HashKind::ALL {
                self.conn.execute(
                    &format!("DELETE FROM {} WHERE set_id = ?1", table(kind)),
                    [id],
                )?;
            }
            self.conn
                .execute("DELETE FROM kff_issues WHERE set_id = ?1", [id])?;
            self.conn
                .execute("DELETE FROM kff_sources WHERE set_id = ?1", [id])?;
            self.conn
                .execute("DELETE FROM kff_sets WHERE id = ?1", [id])?;
            Ok(())
        })();
        match result {
            Ok(()) => self.conn.execute_batch("COMMIT").map_err(self.sql()),
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(self.sql()(e))
            }
        }
    }

    /// What a lookup handle needs (`Library::lookup`, in `lookup.rs`): its
    /// own read-only connection, the complete sets chosen by name (`None`:
    /// every complete set) and which digest kinds they hold.
    pub(super) fn lookup_parts(
        &self,
        sets: Option<&[String]>,
    ) -> Result<LookupParts, HashSetError> {
        let conn = open_conn(
            &self.path,
            self.vfs.as_deref(),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(self.sql())?;
        // A modest page cache per connection: lookups are meant to reach
        // the database drive, and memory stays bounded per thread.
        conn.execute_batch("PRAGMA cache_size = -8192; PRAGMA query_only = 1;")
            .map_err(self.sql())?;
        let mut chosen = HashMap::new();
        match sets {
            None => {
                for s in self.sets()? {
                    if s.status == SetStatus::Complete {
                        chosen.insert(s.id, s);
                    }
                }
            }
            Some(names) => {
                for name in names {
                    let s = self
                        .complete_set(name)?
                        .ok_or_else(|| HashSetError::NoSuchSet(name.clone()))?;
                    chosen.insert(s.id, s);
                }
            }
        }
        let mut has = [false; 3];
        for s in chosen.values() {
            for kind in HashKind::ALL {
                has[kind.index()] |= s.entries(kind) > 0;
            }
        }
        Ok(LookupParts {
            path: self.path.clone(),
            conn,
            sets: chosen,
            has,
        })
    }

    /// Every entry of `kind`, sets complete or not, in key order (hash,
    /// then set id), handed to `f` (binary digest, set id) until it says
    /// stop: what a bulk copy of the library elsewhere (the case database
    /// of the ftk4 profile) reads, choosing its sets itself.
    pub fn for_each_entry(
        &self,
        kind: HashKind,
        f: &mut dyn FnMut(&[u8], i64) -> std::ops::ControlFlow<()>,
    ) -> Result<(), HashSetError> {
        let sql = match kind {
            HashKind::Md5 => "SELECT hash, set_id FROM kff_md5 ORDER BY hash, set_id",
            HashKind::Sha1 => "SELECT hash, set_id FROM kff_sha1 ORDER BY hash, set_id",
            HashKind::Sha256 => "SELECT hash, set_id FROM kff_sha256 ORDER BY hash, set_id",
        };
        let mut st = self.conn.prepare(sql).map_err(self.sql())?;
        let mut rows = st.query([]).map_err(self.sql())?;
        while let Some(r) = rows.next().map_err(self.sql())? {
            let id: i64 = r.get(1).map_err(self.sql())?;
            let rusqlite::types::ValueRef::Blob(hash) = r.get_ref(0).map_err(self.sql())? else {
                return Err(HashSetError::NotALibrary {
                    path: self.path.clone(),
                    reason: format!("a {} entry that is not a blob", kind.label()),
                });
            };
            if f(hash, id).is_break() {
                break;
            }
        }
        Ok(())
    }

    /// Import a set. The set is visible to lookups only once this returns
    /// `Ok`; on any error nothing of it remains in use.
    pub fn import(
        &self,
        req: &ImportRequest,
        temp: &Channel,
        progress: &dyn ImportProgress,
        cancel: &AtomicBool,
    ) -> Result<ImportReport, HashSetError> {
        let clock = Instant::now();
        check_name(&req.name)?;
        if req.sources.is_empty() {
            return Err(HashSetError::Invalid("no source file given".into()));
        }
        // Everything that can be refused cheaply is refused before the
        // library is touched.
        let mut formats = Vec::with_capacity(req.sources.len());
        for path in &req.sources {
            let meta = std::fs::metadata(path).map_err(|source| HashSetError::Io {
                path: path.clone(),
                source,
            })?;
            if meta.len() == 0 {
                return Err(HashSetError::Empty(path.clone()));
            }
            formats.push(match req.format {
                Some(f) => f,
                None => formats::detect_format(path)?,
            });
        }
        let old = self.complete_set(&req.name)?;
        if old.is_some() && !req.replace {
            return Err(HashSetError::SetExists(req.name.clone()));
        }
        let started = casedb::now_utc();
        self.conn
            .execute(
                "INSERT INTO kff_sets (name, category, status, started_at) VALUES (?1, ?2, 'importing', ?3)",
                rusqlite::params![req.name, req.category.as_str(), started],
            )
            .map_err(self.sql())?;
        let set_id = self.conn.last_insert_rowid();
        let result = self.fill(req, &formats, set_id, old.as_ref(), temp, progress, cancel);
        match result {
            Ok(mut report) => {
                report.seconds = clock.elapsed().as_secs_f64();
                Ok(report)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                let _ = self.conn.execute(
                    "UPDATE kff_sets SET status = 'removing' WHERE id = ?1",
                    [set_id],
                );
                let _ = self.delete_set_rows(set_id);
                Err(e)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn fill(
        &self,
        req: &ImportRequest,
        formats: &[Format],
        set_id: i64,
        old: Option<&SetInfo>,
        temp: &Channel,
        progress: &dyn ImportProgress,
        cancel: &AtomicBool,
    ) -> Result<ImportReport, HashSetError> {
        let tag = format!(
            "kff-import-{}-{set_id}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let budget = req.memory.max(1 << 20);
        let mut sink = ImportSink {
            md5: Sorter::new(budget, temp, &format!("{tag}-md5")),
            sha1: Sorter::new(budget, temp, &format!("{tag}-sha1")),
            sha256: Sorter::new(budget, temp, &format!("{tag}-sha256")),
            budget,
            wanted: if req.kinds.is_empty() {
                [true; 3]
            } else {
                let mut w = [false; 3];
                for k in &req.kinds {
                    w[k.index()] = true;
                }
                w
            },
            found: [false; 3],
            source: 0,
            path: PathBuf::new(),
            strict: req.strict,
            records: 0,
            malformed: 0,
            issues: Vec::new(),
            malformed_total: 0,
            progress,
            cancel,
        };
        let mut sources = Vec::with_capacity(req.sources.len());
        let mut modified = Vec::with_capacity(req.sources.len());
        for (i, (path, format)) in req.sources.iter().zip(formats).enumerate() {
            let meta = std::fs::metadata(path).map_err(|source| HashSetError::Io {
                path: path.clone(),
                source,
            })?;
            let total = match format {
                Format::NsrlRds3 => formats::rds3_row_estimate(path),
                _ => Some(meta.len()),
            };
            progress.phase(
                &format!("reading {}", display_name(path)),
                total,
                *format != Format::NsrlRds3,
            );
            sink.source = i;
            sink.path = path.clone();
            sink.records = 0;
            sink.malformed = 0;
            sink.found = [false; 3];
            formats::read_source(path, *format, &mut sink)?;
            if sink.records == 0 {
                let reason = if sink.found.iter().any(|&f| f) {
                    let has: Vec<&str> = HashKind::ALL
                        .iter()
                        .filter(|k| sink.found[k.index()])
                        .map(|k| k.label())
                        .collect();
                    let want: Vec<&str> = req.kinds.iter().map(|k| k.label()).collect();
                    format!(
                        "it has no {} hashes, only {}",
                        want.join("/"),
                        has.join("/")
                    )
                } else if sink.malformed > 0 {
                    format!("all {} data lines are malformed", sink.malformed)
                } else {
                    "only headers, comments or blank lines".into()
                };
                return Err(HashSetError::NoEntries {
                    path: path.clone(),
                    reason,
                });
            }
            sources.push(SourceReport {
                // Stored canonical, so `run --hashset` can tell a set made
                // from the same file whatever path named it.
                path: std::fs::canonicalize(path).unwrap_or_else(|_| path.clone()),
                format: format.as_str().to_string(),
                bytes: meta.len(),
                records: sink.records,
                malformed: sink.malformed,
            });
            modified.push(
                meta.modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_secs() as i64),
            );
        }
        let records: u64 = sources.iter().map(|s| s.records).sum();
        let ImportSink {
            md5,
            sha1,
            sha256,
            mut issues,
            malformed_total,
            ..
        } = sink;

        // Fill the tables in key order, merging duplicates.
        let mut counts = [0u64; 3];
        let mut duplicates = 0u64;
        let mut writer = Writer {
            conn: &self.conn,
            path: &self.path,
            set_id,
            in_tx: 0,
            cancel,
        };
        let mut shared = WriteShared {
            progress,
            issues: &mut issues,
            dup_recorded: 0,
            req,
        };
        let (n, d) = writer.write(HashKind::Md5, md5.into_merged()?, &mut shared)?;
        counts[0] = n;
        duplicates += d;
        let (n, d) = writer.write(HashKind::Sha1, sha1.into_merged()?, &mut shared)?;
        counts[1] = n;
        duplicates += d;
        let (n, d) = writer.write(HashKind::Sha256, sha256.into_merged()?, &mut shared)?;
        counts[2] = n;
        duplicates += d;
        writer.commit()?;
        if cancel.load(Ordering::Relaxed) {
            return Err(HashSetError::Interrupted);
        }

        // The one moment the set becomes usable, replacing any old one.
        progress.phase("finishing", None, false);
        let completed = casedb::now_utc();
        let tx = (|| -> rusqlite::Result<()> {
            self.conn.execute_batch("BEGIN IMMEDIATE")?;
            for (seq, (s, m)) in sources.iter().zip(&modified).enumerate() {
                self.conn.execute(
                    "INSERT INTO kff_sources (set_id, seq, path, format, bytes, modified, records, malformed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    rusqlite::params![set_id, seq as i64, s.path.to_string_lossy(), s.format, s.bytes as i64, m, s.records as i64, s.malformed as i64],
                )?;
            }
            {
                let mut st = self.conn.prepare(
                    "INSERT INTO kff_issues (set_id, seq, line, kind, message) VALUES (?1, ?2, ?3, ?4, ?5)",
                )?;
                for (seq, line, kind, message) in &issues {
                    st.execute(rusqlite::params![
                        set_id,
                        *seq as i64,
                        *line as i64,
                        match kind {
                            IssueKind::Malformed => "malformed",
                            IssueKind::Duplicate => "duplicate",
                        },
                        message
                    ])?;
                }
            }
            if let Some(o) = old {
                self.conn.execute(
                    "UPDATE kff_sets SET status = 'removing' WHERE id = ?1",
                    [o.id],
                )?;
            }
            self.conn.execute(
                "UPDATE kff_sets SET status = 'complete', completed_at = ?2, records = ?3, md5 = ?4, sha1 = ?5, sha256 = ?6, duplicates = ?7, malformed = ?8 WHERE id = ?1",
                rusqlite::params![set_id, completed, records as i64, counts[0] as i64, counts[1] as i64, counts[2] as i64, duplicates as i64, malformed_total as i64],
            )?;
            self.conn.execute_batch("COMMIT")
        })();
        tx.map_err(self.sql())?;
        // The old set's entries are deleted after the switch; a crash here
        // leaves it `removing`, purged at the next open.
        if old.is_some() {
            progress.phase("removing the replaced set", None, false);
            self.purge_removed()?;
        }
        let set = self
            .complete_set(&req.name)?
            .ok_or_else(|| HashSetError::NoSuchSet(req.name.clone()))?;
        issues.sort_by_key(|i| (i.0, i.1));
        let shown = issues
            .iter()
            .take(20)
            .map(|(seq, line, kind, message)| Issue {
                source: req.sources.get(*seq).cloned().unwrap_or_default(),
                line: *line,
                kind: *kind,
                message: message.clone(),
            })
            .collect();
        Ok(ImportReport {
            set,
            sources,
            issues: shown,
            replaced: old.is_some(),
            seconds: 0.0,
        })
    }
}

fn display_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn not_a_library(path: &Path, e: rusqlite::Error) -> HashSetError {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
            ) =>
        {
            HashSetError::NotALibrary {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }
        }
        rusqlite::Error::SqliteFailure(_, Some(m)) if m.contains("no such table") => {
            HashSetError::NotALibrary {
                path: path.to_path_buf(),
                reason: "no kff_meta table".into(),
            }
        }
        _ => HashSetError::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

fn check_name(name: &str) -> Result<(), HashSetError> {
    let count = name.chars().count();
    if count == 0 || count > 200 || name.chars().any(char::is_control) || name.trim() != name {
        return Err(HashSetError::BadName(name.to_string()));
    }
    Ok(())
}

/// (source index, line, kind, message), sorted for display at the end.
type PendingIssue = (usize, u64, IssueKind, String);

struct ImportSink<'a> {
    md5: Sorter<16>,
    sha1: Sorter<20>,
    sha256: Sorter<32>,
    budget: usize,
    wanted: [bool; 3],
    /// Kinds seen in the sources (wanted or not), for messages.
    found: [bool; 3],
    source: usize,
    path: PathBuf,
    strict: bool,
    records: u64,
    malformed: u64,
    malformed_total: u64,
    issues: Vec<PendingIssue>,
    progress: &'a dyn ImportProgress,
    cancel: &'a AtomicBool,
}

impl Sink for ImportSink<'_> {
    fn entry(&mut self, line: u64, hashes: &[(HashKind, &[u8])]) -> Result<(), HashSetError> {
        let p = pos(self.source, line);
        let mut taken = false;
        for &(kind, hash) in hashes {
            self.found[kind.index()] = true;
            if !self.wanted[kind.index()] {
                continue;
            }
            taken = true;
            match kind {
                HashKind::Md5 => self.md5.push(hash, p),
                HashKind::Sha1 => self.sha1.push(hash, p),
                HashKind::Sha256 => self.sha256.push(hash, p),
            }
        }
        if taken {
            self.records += 1;
        }
        if self.md5.memory() + self.sha1.memory() + self.sha256.memory() >= self.budget
            || self.md5.full()
            || self.sha1.full()
            || self.sha256.full()
        {
            self.md5.spill()?;
            self.sha1.spill()?;
            self.sha256.spill()?;
        }
        Ok(())
    }

    fn malformed(&mut self, line: u64, message: String) -> Result<(), HashSetError> {
        if self.strict {
            return Err(HashSetError::Strict {
                path: self.path.clone(),
                line,
                message,
            });
        }
        self.malformed += 1;
        self.malformed_total += 1;
        if self.malformed_total <= MAX_MALFORMED_RECORDED {
            self.issues
                .push((self.source, line, IssueKind::Malformed, message));
        }
        Ok(())
    }

    fn progress(&mut self, done: u64) {
        self.progress.position(done);
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// What the writes of all kinds share.
struct WriteShared<'a> {
    progress: &'a dyn ImportProgress,
    issues: &'a mut Vec<PendingIssue>,
    dup_recorded: u64,
    req: &'a ImportRequest,
}

/// Appends sorted records to the library tables in batched transactions.
struct Writer<'a> {
    conn: &'a Connection,
    path: &'a Path,
    set_id: i64,
    in_tx: u64,
    cancel: &'a AtomicBool,
}

impl Writer<'_> {
    fn sql(&self) -> impl Fn(rusqlite::Error) -> HashSetError + '_ {
        move |source| HashSetError::Sqlite {
            path: self.path.to_path_buf(),
            source,
        }
    }

    fn commit(&mut self) -> Result<(), HashSetError> {
        if self.in_tx > 0 {
            self.conn.execute_batch("COMMIT").map_err(self.sql())?;
            self.in_tx = 0;
        }
        Ok(())
    }

    /// Write one kind's merged records; returns (distinct, duplicates).
    fn write<const N: usize>(
        &mut self,
        kind: HashKind,
        mut merged: Merged<N>,
        shared: &mut WriteShared<'_>,
    ) -> Result<(u64, u64), HashSetError> {
        let (progress, req) = (shared.progress, shared.req);
        if merged.is_empty() {
            return Ok((0, 0));
        }
        progress.phase(
            &format!("writing {}", kind.as_str()),
            Some(merged.len()),
            false,
        );
        let t = table(kind);
        let many = format!(
            "INSERT INTO {t} (hash, set_id) VALUES {}",
            vec!["(?, ?)"; ROWS_PER_STATEMENT].join(", ")
        );
        let one = format!("INSERT INTO {t} (hash, set_id) VALUES (?, ?)");
        let mut batch: Vec<[u8; N]> = Vec::with_capacity(ROWS_PER_STATEMENT);
        let mut prev: Option<Rec<N>> = None;
        let (mut distinct, mut dups, mut seen) = (0u64, 0u64, 0u64);
        while let Some(rec) = merged.next()? {
            seen += 1;
            if seen.is_multiple_of(65_536) {
                progress.position(seen);
                if self.cancel.load(Ordering::Relaxed) {
                    return Err(HashSetError::Interrupted);
                }
            }
            if let Some(p) = &prev
                && p.hash == rec.hash
            {
                dups += 1;
                if shared.dup_recorded < MAX_DUPLICATES_RECORDED {
                    shared.dup_recorded += 1;
                    let (first_src, first_line) = sort::unpos(p.pos);
                    let (src, line) = sort::unpos(rec.pos);
                    let where_first = if first_src == src {
                        format!("line {first_line}")
                    } else {
                        format!(
                            "`{}` line {first_line}",
                            req.sources
                                .get(first_src)
                                .map(|p| display_name(p))
                                .unwrap_or_default()
                        )
                    };
                    shared.issues.push((
                        src,
                        line,
                        IssueKind::Duplicate,
                        format!(
                            "duplicate {} {} (first on {where_first}); merged",
                            kind.label(),
                            crate::source::hex(&rec.hash)
                        ),
                    ));
                }
                continue;
            }
            batch.push(rec.hash);
            prev = Some(rec);
            distinct += 1;
            if batch.len() == ROWS_PER_STATEMENT {
                self.flush(&many, &one, &mut batch)?;
            }
        }
        self.flush(&many, &one, &mut batch)?;
        progress.position(seen);
        Ok((distinct, dups))
    }

    fn flush<const N: usize>(
        &mut self,
        many: &str,
        one: &str,
        batch: &mut Vec<[u8; N]>,
    ) -> Result<(), HashSetError> {
        if batch.is_empty() {
            return Ok(());
        }
        if self.in_tx == 0 {
            self.conn
                .execute_batch("BEGIN IMMEDIATE")
                .map_err(self.sql())?;
        }
        let sql = |source| HashSetError::Sqlite {
            path: self.path.to_path_buf(),
            source,
        };
        if batch.len() == ROWS_PER_STATEMENT {
            let mut st = self.conn.prepare_cached(many).map_err(&sql)?;
            for (i, h) in batch.iter().enumerate() {
                st.raw_bind_parameter(2 * i + 1, &h[..]).map_err(&sql)?;
                st.raw_bind_parameter(2 * i + 2, self.set_id)
                    .map_err(&sql)?;
            }
            st.raw_execute().map_err(&sql)?;
        } else {
            let mut st = self.conn.prepare_cached(one).map_err(&sql)?;
            for h in batch.iter() {
                st.execute(rusqlite::params![&h[..], self.set_id])
                    .map_err(&sql)?;
            }
        }
        self.in_tx += batch.len() as u64;
        batch.clear();
        if self.in_tx >= ROWS_PER_TRANSACTION {
            self.commit()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ChannelKind;
    use std::io::Write;

    fn request(name: &str, category: Category, sources: Vec<PathBuf>) -> ImportRequest {
        ImportRequest {
            name: name.into(),
            category,
            sources,
            format: None,
            strict: false,
            replace: false,
            kinds: Vec::new(),
            memory: 64 << 20,
        }
    }

    fn md5_of(i: u32) -> String {
        format!("{i:08x}{:024x}", i.wrapping_mul(2_654_435_761))
    }

    #[test]
    fn import_lookup_replace_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let temp = Channel::new(ChannelKind::Temp, dir.path(), Vec::new());
        let db = Channel::new(ChannelKind::Database, dir.path(), Vec::new());
        let vfs = casedb::counting_vfs(&db).unwrap();
        let lib_path = dir.path().join(LIBRARY_FILE_NAME);
        let lib = Library::open_or_create(&lib_path, Some(&vfs)).unwrap();
        // 20 000 lines with a duplicate and a malformed line; a budget of
        // 1 MiB makes the sort spill.
        let src = dir.path().join("bad.md5");
        let mut f = std::fs::File::create(&src).unwrap();
        for i in 0..20_000u32 {
            writeln!(f, "{}  file{i}", md5_of(i)).unwrap();
        }
        writeln!(f, "{}  again", md5_of(5)).unwrap();
        writeln!(f, "xyz  broken").unwrap();
        drop(f);
        let mut req = request("bad", Category::Notable, vec![src.clone()]);
        req.memory = 1 << 20;
        let cancel = AtomicBool::new(false);
        let before = db.snapshot();
        let r = lib.import(&req, &temp, &NoImportProgress, &cancel).unwrap();
        assert!(db.snapshot().since(&before).bytes_written > 20_000 * 16);
        assert_eq!(r.set.md5, 20_000);
        assert_eq!(r.set.records, 20_001);
        assert_eq!(r.set.duplicates, 1);
        assert_eq!(r.set.malformed, 1);
        assert_eq!(r.set.status, SetStatus::Complete);
        assert_eq!(r.issues.len(), 2);
        assert_eq!(r.issues[0].line, 20_001);
        assert_eq!(r.issues[0].kind, IssueKind::Duplicate);
        assert!(
            r.issues[0].message.contains("first on line 6"),
            "{:?}",
            r.issues
        );
        assert_eq!(r.issues[1].line, 20_002);
        assert_eq!(lib.issues(r.set.id, 10).unwrap(), r.issues);
        // No spill file is left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".run"))
            .collect();
        assert!(left.is_empty());

        let look = lib.lookup(None).unwrap();
        let mut out = Vec::new();
        assert!(
            look.find_hex(HashKind::Md5, &md5_of(19_999).to_uppercase(), &mut out)
                .unwrap()
        );
        assert_eq!(out, vec![r.set.id]);
        out.clear();
        look.find_hex(HashKind::Md5, &md5_of(20_000), &mut out)
            .unwrap();
        assert!(out.is_empty());
        assert!(!look.has(HashKind::Sha1));

        // Same name again: refused, then replaced atomically.
        assert!(matches!(
            lib.import(&req, &temp, &NoImportProgress, &cancel),
            Err(HashSetError::SetExists(_))
        ));
        let small = dir.path().join("small.md5");
        std::fs::write(&small, format!("{}  x\n", md5_of(20_000))).unwrap();
        let mut again = request("bad", Category::Known, vec![small]);
        again.replace = true;
        let r2 = lib
            .import(&again, &temp, &NoImportProgress, &cancel)
            .unwrap();
        assert!(r2.replaced);
        let sets = lib.sets().unwrap();
        assert_eq!(sets.len(), 1, "{sets:?}");
        assert_eq!(sets[0].category, Category::Known);
        let n: i64 = lib
            .conn
            .query_row("SELECT count(*) FROM kff_md5", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "the replaced set's entries are gone");
        assert_eq!(lib.remove("bad").unwrap(), 1);
        assert!(lib.sets().unwrap().is_empty());
    }

    #[test]
    fn failed_and_interrupted_imports_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let temp = Channel::new(ChannelKind::Temp, dir.path(), Vec::new());
        let lib = Library::open_or_create(&dir.path().join("kff.sqlite"), None).unwrap();
        let cancel = AtomicBool::new(false);
        let src = dir.path().join("list.sha1");
        std::fs::write(
            &src,
            "da39a3ee5e6b4b0d3255bfef95601890afd80709  a\nda39a3ee5e6b4b0d3255bfef95601890afd8070  b\n",
        )
        .unwrap();
        let mut req = request("s", Category::Known, vec![src.clone()]);
        req.strict = true;
        let e = lib
            .import(&req, &temp, &NoImportProgress, &cancel)
            .unwrap_err();
        assert!(matches!(e, HashSetError::Strict { line: 2, .. }), "{e}");
        assert!(lib.sets().unwrap().is_empty());
        // Only the malformed line: no entries.
        let bad = dir.path().join("bad.sha1");
        std::fs::write(&bad, "da39a3ee5e6b4b0d3255bfef95601890afd8070  b\n").unwrap();
        // Too broken to even tell the format...
        let e = lib
            .import(
                &request("t", Category::Known, vec![bad.clone()]),
                &temp,
                &NoImportProgress,
                &cancel,
            )
            .unwrap_err();
        assert!(matches!(e, HashSetError::UnknownFormat { .. }), "{e}");
        // ...and, named, no valid entry.
        let mut named = request("t", Category::Known, vec![bad]);
        named.format = Some(Format::Sha1sum);
        let e = lib
            .import(&named, &temp, &NoImportProgress, &cancel)
            .unwrap_err();
        assert!(matches!(e, HashSetError::NoEntries { .. }), "{e}");
        // Asking for a kind the file lacks.
        let mut want = request("u", Category::Known, vec![src.clone()]);
        want.kinds = vec![HashKind::Md5];
        let e = lib
            .import(&want, &temp, &NoImportProgress, &cancel)
            .unwrap_err();
        assert!(e.to_string().contains("no MD5 hashes"), "{e}");
        // Interrupted.
        cancel.store(true, Ordering::Relaxed);
        let e = lib
            .import(
                &request("v", Category::Known, vec![src]),
                &temp,
                &NoImportProgress,
                &cancel,
            )
            .unwrap_err();
        assert!(matches!(e, HashSetError::Interrupted), "{e}");
        assert!(lib.sets().unwrap().is_empty());
        let n: i64 = lib
            .conn
            .query_row("SELECT count(*) FROM kff_sha1", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn a_dead_import_is_never_used_and_other_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kff.sqlite");
        let lib = Library::open_or_create(&path, None).unwrap();
        // What a crashed importer leaves: a set row still `importing`, with
        // entries.
        lib.conn
            .execute_batch(
                "INSERT INTO kff_sets (id, name, category, status, started_at, md5) VALUES (7, 'x', 'known', 'importing', 'now', 1);
                 INSERT INTO kff_md5 VALUES (x'00112233445566778899aabbccddeeff', 7);",
            )
            .unwrap();
        let look = lib.lookup(None).unwrap();
        let mut out = Vec::new();
        look.find_hex(HashKind::Md5, "00112233445566778899aabbccddeeff", &mut out)
            .unwrap();
        assert!(out.is_empty());
        assert!(matches!(
            lib.lookup(Some(&["x".to_string()])),
            Err(HashSetError::NoSuchSet(_))
        ));
        // A case database or a random file is not a library.
        let other = dir.path().join("other.sqlite");
        rusqlite::Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE files (x);")
            .unwrap();
        assert!(matches!(
            Library::open_or_create(&other, None),
            Err(HashSetError::NotALibrary { .. })
        ));
        let junk = dir.path().join("junk.sqlite");
        std::fs::write(&junk, vec![0x55u8; 8192]).unwrap();
        assert!(matches!(
            Library::open_read_only(&junk, None),
            Err(HashSetError::NotALibrary { .. })
        ));
        assert!(matches!(
            Library::open_read_only(&dir.path().join("none.sqlite"), None),
            Err(HashSetError::NotALibrary { .. })
        ));
    }
}
