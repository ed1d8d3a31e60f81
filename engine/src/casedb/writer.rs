//! The single database writer: a thread that owns the read-write connection
//! and applies queued operations in batched transactions.

use super::DbError;
use crossbeam_channel::{Receiver, Sender, bounded};
use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::Mutex;
use std::thread::JoinHandle;

/// One database operation, run on the writer thread inside a transaction.
pub type DbOp = Box<dyn FnOnce(&Connection) -> rusqlite::Result<()> + Send>;

enum Msg {
    Op(DbOp),
    Flush(Sender<Result<(), String>>),
    Close(Sender<Result<(), String>>),
}

/// Handle to the writer thread. Shareable between stage threads.
pub struct DbWriter {
    sender: Sender<Msg>,
    handle: Mutex<Option<JoinHandle<()>>>,
    path: PathBuf,
}

/// Queued operations at most: beyond this, senders wait for the database.
const QUEUE_DEPTH: usize = 4096;

impl DbWriter {
    pub(super) fn spawn(conn: Connection, path: PathBuf, batch_size: usize) -> Self {
        let (tx, rx) = bounded(QUEUE_DEPTH);
        let handle = std::thread::Builder::new()
            .name("caseload-db-writer".into())
            .spawn(move || run(conn, rx, batch_size.max(1)))
            .ok();
        DbWriter {
            sender: tx,
            handle: Mutex::new(handle),
            path,
        }
    }

    fn gone(&self) -> DbError {
        DbError::Writer(format!(
            "the writer for `{}` has stopped",
            self.path.display()
        ))
    }

    /// Queue an operation. Errors surface at the next [`flush`](Self::flush).
    pub fn exec<F>(&self, op: F) -> Result<(), DbError>
    where
        F: FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
    {
        self.sender
            .send(Msg::Op(Box::new(op)))
            .map_err(|_| self.gone())
    }

    /// Run `op` on the writer's connection after everything queued before
    /// it, commit, and return its result (for inserts whose row id is needed).
    pub fn call<T, F>(&self, op: F) -> Result<T, DbError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let (tx, rx) = bounded(1);
        self.exec(move |c| {
            let value = op(c)?;
            let _ = tx.send(value);
            Ok(())
        })?;
        self.flush()?;
        rx.recv()
            .map_err(|_| DbError::Writer("the operation failed; see the earlier error".into()))
    }

    fn round_trip(&self, make: fn(Sender<Result<(), String>>) -> Msg) -> Result<(), DbError> {
        let (ack_tx, ack_rx) = bounded(1);
        self.sender.send(make(ack_tx)).map_err(|_| self.gone())?;
        match ack_rx.recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(message)) => Err(DbError::Writer(message)),
            Err(_) => Err(self.gone()),
        }
    }

    /// Commit what is queued and wait; returns the first error any queued
    /// operation or commit met since the last flush.
    pub fn flush(&self) -> Result<(), DbError> {
        self.round_trip(Msg::Flush)
    }

    /// Commit, close the connection and stop the thread. Later operations
    /// fail with an error.
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

fn run(conn: Connection, rx: Receiver<Msg>, batch_size: usize) {
    let mut in_transaction = false;
    let mut ops_in_batch = 0usize;
    let mut first_error: Option<String> = None;
    let note = |e: String, first_error: &mut Option<String>| {
        if first_error.is_none() {
            *first_error = Some(e);
        }
    };
    let commit =
        |conn: &Connection, in_transaction: &mut bool, first_error: &mut Option<String>| {
            if *in_transaction {
                *in_transaction = false;
                if let Err(e) = conn.execute_batch("COMMIT") {
                    // A failed COMMIT (disk full) leaves the transaction open:
                    // roll it back so later batches can still try.
                    let _ = conn.execute_batch("ROLLBACK");
                    if first_error.is_none() {
                        *first_error = Some(format!("commit failed: {e}"));
                    }
                }
            }
        };
    for msg in rx {
        match msg {
            Msg::Op(op) => {
                if !in_transaction {
                    match conn.execute_batch("BEGIN") {
                        Ok(()) => in_transaction = true,
                        Err(e) => note(format!("begin failed: {e}"), &mut first_error),
                    }
                }
                if let Err(e) = op(&conn) {
                    note(e.to_string(), &mut first_error);
                }
                ops_in_batch += 1;
                if ops_in_batch >= batch_size {
                    commit(&conn, &mut in_transaction, &mut first_error);
                    ops_in_batch = 0;
                }
            }
            Msg::Flush(ack) => {
                commit(&conn, &mut in_transaction, &mut first_error);
                ops_in_batch = 0;
                let _ = ack.send(first_error.take().map_or(Ok(()), Err));
            }
            Msg::Close(ack) => {
                commit(&conn, &mut in_transaction, &mut first_error);
                if let Err((_, e)) = conn.close() {
                    note(format!("close failed: {e}"), &mut first_error);
                }
                let _ = ack.send(first_error.take().map_or(Ok(()), Err));
                return;
            }
        }
    }
    commit(&conn, &mut in_transaction, &mut first_error);
}
