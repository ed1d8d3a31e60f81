//! The single database writer: a thread that owns the read-write connection
//! and applies queued [`Write`]s in batched transactions, on either engine.
//!
//! A failed write never loses the others of its batch. SQLite undoes only
//! the failed statement; PostgreSQL aborts the whole transaction, so there
//! the writer keeps the batch's writes until it commits and, after a
//! failure, rolls back and applies the others again.
//!
//! Under `caseload worker` the writer holds one transaction per work unit
//! ([`DbWriter::begin_unit`] .. [`DbWriter::end_unit`]): what would be
//! commits become savepoints, so a failed write still loses only itself
//! and memory holds one batch, and the unit's rows are committed in the
//! same transaction as the statement marking the unit done. A worker that
//! dies mid-unit leaves nothing of it behind.

use super::DbError;
use super::conn::Conn;
use super::write::{Reply, Write};
use crossbeam_channel::{Receiver, Sender, bounded};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

type Ack = Sender<Result<(), String>>;

type ReplyTx = Sender<Result<Reply, DbError>>;

enum Msg {
    Write(Write, Option<ReplyTx>),
    Flush(Ack),
    Close(Ack),
    BeginUnit(Ack),
    /// Apply the closing write (if any) and commit, or roll back.
    EndUnit(Option<Write>, bool, ReplyTx),
}

/// The savepoint a unit's transaction rolls back to after a failed write.
const UNIT_SAVEPOINT: &str = "caseload_unit_batch";

/// What the writer did: writes applied (each a row inserted or updated,
/// or one set-wide statement) and transactions committed, and the time
/// it took: the writer is one thread, so its busy time is the length of
/// the stage's database lane, and the time the stage's threads waited
/// for it says how much of that lane showed in the stage's wall time
/// (`caseload predict` needs both; docs/predict.md). A stage's share is
/// the difference of two readings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DbWork {
    /// Writes applied.
    pub writes: u64,
    /// Transactions committed.
    pub transactions: u64,
    /// Rows inserted, updated or deleted (caseload's and a profile's).
    #[serde(default)]
    pub rows: u64,
    /// Nanoseconds the writer thread spent applying writes and
    /// committing (not waiting for work).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub busy_ns: u64,
    /// Of those, nanoseconds in COMMIT: the commit chain (each commit
    /// waits for the log's sync before the next transaction starts).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub commit_ns: u64,
    /// Nanoseconds other threads spent waiting for the writer: on a full
    /// queue, for a call's reply, for a flush (the stage's last one
    /// included), summed over threads.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub waited_ns: u64,
    /// Of `waited_ns`, the stage's last flush: the writer's backlog when
    /// the stage's own work was done (set by the run, not the writer).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drain_ns: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl DbWork {
    /// The sum of two readings' work.
    pub fn plus(&self, other: &DbWork) -> DbWork {
        DbWork {
            writes: self.writes + other.writes,
            transactions: self.transactions + other.transactions,
            rows: self.rows + other.rows,
            busy_ns: self.busy_ns + other.busy_ns,
            commit_ns: self.commit_ns + other.commit_ns,
            waited_ns: self.waited_ns + other.waited_ns,
            drain_ns: self.drain_ns + other.drain_ns,
        }
    }

    /// The work done between `earlier` and `self`.
    pub fn since(&self, earlier: &DbWork) -> DbWork {
        DbWork {
            writes: self.writes.saturating_sub(earlier.writes),
            transactions: self.transactions.saturating_sub(earlier.transactions),
            rows: self.rows.saturating_sub(earlier.rows),
            busy_ns: self.busy_ns.saturating_sub(earlier.busy_ns),
            commit_ns: self.commit_ns.saturating_sub(earlier.commit_ns),
            waited_ns: self.waited_ns.saturating_sub(earlier.waited_ns),
            drain_ns: self.drain_ns.saturating_sub(earlier.drain_ns),
        }
    }
}

#[derive(Debug, Default)]
struct WorkCounters {
    writes: AtomicU64,
    transactions: AtomicU64,
    rows: AtomicU64,
    busy_ns: AtomicU64,
    commit_ns: AtomicU64,
    waited_ns: AtomicU64,
}

impl WorkCounters {
    /// Add the time since `since` to `counter`.
    fn add_since(counter: &AtomicU64, since: Instant) {
        let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        counter.fetch_add(ns, Ordering::Relaxed);
    }
}

/// Handle to the writer thread. Shareable between stage threads.
pub struct DbWriter {
    sender: Sender<Msg>,
    handle: Mutex<Option<JoinHandle<()>>>,
    name: String,
    work: Arc<WorkCounters>,
}

impl std::fmt::Debug for DbWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbWriter")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Queued writes at most: beyond this, senders wait for the database.
const QUEUE_DEPTH: usize = 4096;

impl DbWriter {
    /// Start the writer on `conn`; `name` says which database in errors.
    pub(super) fn spawn(
        conn: Conn,
        name: String,
        batch_size: usize,
        profile: super::Profile,
    ) -> Result<Self, DbError> {
        let (tx, rx) = bounded(QUEUE_DEPTH);
        let work = Arc::new(WorkCounters::default());
        let counters = Arc::clone(&work);
        let handle = std::thread::Builder::new()
            .name("caseload-db-writer".into())
            .spawn(move || run(conn, rx, batch_size.max(1), &counters, profile))
            .map_err(|e| DbError::Writer(format!("starting the writer thread: {e}")))?;
        Ok(DbWriter {
            sender: tx,
            handle: Mutex::new(Some(handle)),
            name,
            work,
        })
    }

    /// Writes applied and transactions committed so far.
    pub fn work(&self) -> DbWork {
        DbWork {
            writes: self.work.writes.load(Ordering::Relaxed),
            transactions: self.work.transactions.load(Ordering::Relaxed),
            rows: self.work.rows.load(Ordering::Relaxed),
            busy_ns: self.work.busy_ns.load(Ordering::Relaxed),
            commit_ns: self.work.commit_ns.load(Ordering::Relaxed),
            waited_ns: self.work.waited_ns.load(Ordering::Relaxed),
            drain_ns: 0,
        }
    }

    fn gone(&self) -> DbError {
        DbError::Writer(format!("the writer for {} has stopped", self.name))
    }

    /// Queue a write. Its error, if any, surfaces at the next
    /// [`flush`](Self::flush).
    pub fn exec(&self, write: Write) -> Result<(), DbError> {
        // Only a full queue makes a sender wait: try first, time the rest.
        match self.sender.try_send(Msg::Write(write, None)) {
            Ok(()) => Ok(()),
            Err(crossbeam_channel::TrySendError::Full(msg)) => {
                let waited = Instant::now();
                let sent = self.sender.send(msg).map_err(|_| self.gone());
                WorkCounters::add_since(&self.work.waited_ns, waited);
                sent
            }
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => Err(self.gone()),
        }
    }

    /// Apply `write` after everything queued before it, commit, and return
    /// its reply (the new row's id, counts).
    pub fn call(&self, write: Write) -> Result<Reply, DbError> {
        self.ask(|tx| Msg::Write(write, Some(tx)))?
    }

    /// Send the message `make` builds around a reply channel and wait for
    /// the answer; the wait is counted as time waited for the writer.
    fn ask<A>(&self, make: impl FnOnce(Sender<A>) -> Msg) -> Result<A, DbError> {
        let waited = Instant::now();
        let (tx, rx) = bounded(1);
        let answer = self
            .sender
            .send(make(tx))
            .map_err(|_| self.gone())
            .and_then(|()| rx.recv().map_err(|_| self.gone()));
        WorkCounters::add_since(&self.work.waited_ns, waited);
        answer
    }

    fn round_trip(&self, make: fn(Ack) -> Msg) -> Result<(), DbError> {
        self.ask(make)?.map_err(DbError::Writer)
    }

    /// Commit what is queued and wait; returns the first error any queued
    /// write or commit met since the last flush.
    pub fn flush(&self) -> Result<(), DbError> {
        self.round_trip(Msg::Flush)
    }

    /// Hold everything written from now on in one transaction, until
    /// [`end_unit`](Self::end_unit): a work unit's. What is queued before
    /// is committed first.
    pub fn begin_unit(&self) -> Result<(), DbError> {
        self.round_trip(Msg::BeginUnit)
    }

    /// End the unit's transaction: with `done` (the write marking the unit
    /// done, which must succeed) commit it, without it roll it back. A
    /// write of the unit that failed since the last
    /// [`flush`](Self::flush) rolls it back too, and is the error.
    pub fn end_unit(&self, done: Option<Write>) -> Result<Reply, DbError> {
        let commit = done.is_some();
        self.ask(|tx| Msg::EndUnit(done, commit, tx))?
    }

    /// Commit, close the connection and stop the thread. Later writes fail.
    pub fn close(&self) -> Result<(), DbError> {
        let result = self.round_trip(Msg::Close);
        self.join();
        result
    }

    fn join(&self) {
        let handle = self
            .handle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Drop for DbWriter {
    fn drop(&mut self) {
        let (ack, _) = bounded(1);
        if self.sender.send(Msg::Close(ack)).is_ok() {
            self.join();
        }
    }
}

/// The writer thread's state.
struct State<'a> {
    conn: Conn,
    work: &'a WorkCounters,
    profile: super::Profile,
    in_transaction: bool,
    /// Holding a work unit's transaction: batches end in savepoints.
    unit: bool,
    /// Writes applied in the open transaction (PostgreSQL only: replayed
    /// after a failure aborted it).
    applied: Vec<Write>,
    first_error: Option<String>,
}

impl State<'_> {
    fn note(&mut self, e: impl std::fmt::Display) {
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }

    fn begin(&mut self) -> Result<(), DbError> {
        if !self.in_transaction {
            if self.unit {
                self.conn
                    .batch(&format!("BEGIN; SAVEPOINT {UNIT_SAVEPOINT}"))?;
            } else {
                self.conn.batch("BEGIN")?;
            }
            self.in_transaction = true;
        }
        Ok(())
    }

    /// The end of a batch: a commit, or in a unit a new savepoint (the
    /// batch's writes are then safe from a later failed write).
    fn commit(&mut self) -> Result<(), DbError> {
        if self.unit {
            if self.in_transaction {
                self.conn.batch(&format!(
                    "RELEASE SAVEPOINT {UNIT_SAVEPOINT}; SAVEPOINT {UNIT_SAVEPOINT}"
                ))?;
                self.applied.clear();
            }
            return Ok(());
        }
        self.commit_now()
    }

    fn commit_now(&mut self) -> Result<(), DbError> {
        if !self.in_transaction {
            return Ok(());
        }
        self.in_transaction = false;
        self.applied.clear();
        self.work.transactions.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let committed = self.conn.batch("COMMIT");
        WorkCounters::add_since(&self.work.commit_ns, started);
        if let Err(e) = committed {
            // A failed COMMIT (disk full) can leave the transaction open:
            // roll it back so later batches can still try.
            let _ = self.conn.batch("ROLLBACK");
            return Err(DbError::Writer(format!("commit failed: {e}")));
        }
        Ok(())
    }

    fn apply(&mut self, write: Write) -> Result<Reply, DbError> {
        self.begin()?;
        let rows_before = self.conn.rows_changed();
        let applied = write.apply(&mut self.conn).and_then(|reply| {
            self.profile
                .after(&write, &reply, &mut self.conn)
                .map(|()| reply)
        });
        // Counted before a failure's replay, which counts its own.
        let rows = self.conn.rows_changed().saturating_sub(rows_before);
        self.work.rows.fetch_add(rows, Ordering::Relaxed);
        match applied {
            Ok(reply) => {
                self.work.writes.fetch_add(1, Ordering::Relaxed);
                if self.conn.error_aborts_transaction() {
                    self.applied.push(write);
                }
                Ok(reply)
            }
            Err(e) => {
                if self.conn.error_aborts_transaction() {
                    self.restart_after_failure(&e);
                }
                Err(e)
            }
        }
    }

    /// End a unit's transaction (see [`DbWriter::end_unit`]).
    fn end_unit(&mut self, done: Option<Write>, commit: bool) -> Result<Reply, DbError> {
        let result = match (done, self.first_error.take()) {
            (_, Some(e)) => Err(DbError::Writer(e)),
            (Some(done), None) if commit => self.apply(done),
            _ => Err(DbError::Writer("the unit was abandoned".into())),
        };
        self.unit = false;
        match result {
            Ok(reply) => {
                self.commit_now()?;
                Ok(reply)
            }
            Err(e) => {
                if self.in_transaction {
                    let _ = self.conn.batch("ROLLBACK");
                    self.in_transaction = false;
                }
                self.applied.clear();
                Err(e)
            }
        }
    }

    /// PostgreSQL aborted the transaction: start a new one and apply again
    /// what had succeeded in it (unless the server is gone).
    fn restart_after_failure(&mut self, e: &DbError) {
        let lost = matches!(e, DbError::Query { lost: true, .. });
        if self.unit && !lost {
            // Back to the batch's start, still inside the unit.
            let _ = self
                .conn
                .batch(&format!("ROLLBACK TO SAVEPOINT {UNIT_SAVEPOINT}"));
        } else {
            let _ = self.conn.batch("ROLLBACK");
            self.in_transaction = false;
        }
        if lost && self.unit {
            self.note(
                "the connection was lost in the middle of a work unit: none of it was committed",
            );
        }
        let earlier = std::mem::take(&mut self.applied);
        if lost {
            if !earlier.is_empty() {
                self.note(format!(
                    "{} writes of the open transaction were lost with the connection",
                    earlier.len()
                ));
            }
            return;
        }
        for w in earlier {
            if let Err(again) = self.apply(w) {
                self.note(again);
            }
        }
    }
}

fn run(
    conn: Conn,
    rx: Receiver<Msg>,
    batch_size: usize,
    work: &WorkCounters,
    profile: super::Profile,
) {
    let mut state = State {
        conn,
        work,
        profile,
        in_transaction: false,
        unit: false,
        applied: Vec::new(),
        first_error: None,
    };
    let mut in_batch = 0usize;
    for msg in rx {
        // Busy from here until the message is answered; the time is added
        // before the answer goes out, so a stage that flushed sees it (a
        // Close ends the thread: its time is no stage's).
        let busy = Instant::now();
        let done = || WorkCounters::add_since(&work.busy_ns, busy);
        match msg {
            Msg::Write(write, reply) => {
                let commits = reply.is_some() || write.commits();
                let result = state.apply(write);
                in_batch += 1;
                let committed = if commits || in_batch >= batch_size {
                    in_batch = 0;
                    state.commit()
                } else {
                    Ok(())
                };
                done();
                match reply {
                    Some(tx) => {
                        let _ = tx.send(result.and_then(|r| committed.map(|()| r)));
                    }
                    None => {
                        if let Err(e) = result {
                            state.note(e);
                        }
                        if let Err(e) = committed {
                            state.note(e);
                        }
                    }
                }
            }
            Msg::Flush(ack) => {
                if let Err(e) = state.commit() {
                    state.note(e);
                }
                state.conn.publish_stats();
                in_batch = 0;
                done();
                let _ = ack.send(state.first_error.take().map_or(Ok(()), Err));
            }
            Msg::BeginUnit(ack) => {
                let committed = state.commit();
                in_batch = 0;
                state.unit = true;
                let error = committed.err().map(|e| e.to_string());
                done();
                let _ = ack.send(error.or(state.first_error.take()).map_or(Ok(()), Err));
            }
            Msg::EndUnit(done_write, commit, reply) => {
                in_batch = 0;
                let result = state.end_unit(done_write, commit);
                done();
                let _ = reply.send(result);
            }
            Msg::Close(ack) => {
                if let Err(e) = state.commit() {
                    state.note(e);
                }
                state.conn.publish_stats();
                drop(state.conn);
                let _ = ack.send(state.first_error.take().map_or(Ok(()), Err));
                return;
            }
        }
    }
    let _ = state.commit();
}
