//! What every source format is read into before it becomes a trace: one
//! [`RawEvent`] per operation the source recorded, in the source's own
//! terms (its paths, processes and threads, its result), so the format
//! readers know nothing of channels, mappings or replay, and the importer
//! (`import`) knows nothing of formats.

/// One operation as a source recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawEvent {
    /// When it started, in nanoseconds on the source's clock (any origin;
    /// the importer makes the first event 0).
    pub t_ns: u64,
    /// How long it took, in nanoseconds (0 when the source does not say).
    pub dur_ns: u64,
    /// The process's name (`FTK.exe`, `tsk_loaddb`).
    pub process: String,
    /// The process id.
    pub pid: u32,
    /// The thread id (the pid where the source has no threads).
    pub tid: u32,
    /// What it did.
    pub op: RawOp,
    /// The path it did it on, as the source wrote it (`C:\case\x.db`,
    /// `\\server\share\f`, `/mnt/evidence/a.E01`); empty when none.
    pub path: String,
    /// Whether it succeeded (Process Monitor's `SUCCESS`, a non-negative
    /// system call return).
    pub ok: bool,
    /// The result as the source wrote it, for reports (`SUCCESS`, `NAME
    /// NOT FOUND`, `-1 ENOENT`).
    pub result: String,
    /// Non-cached (direct) I/O.
    pub direct: bool,
    /// The cache manager's or memory manager's paging I/O (Process
    /// Monitor's `Paging I/O`), not the application's own call.
    pub paging: bool,
    /// The source's calls this event ends: itself and the thread's calls
    /// since its previous event that made no event (strace's `lseek`,
    /// signals, ...). A tracer stops the thread on each, so the gap before
    /// this event holds that many times the tracer's cost per call.
    pub calls: u32,
}

/// The operations a source records, as far as a replay cares.
#[derive(Debug, Clone, PartialEq)]
pub enum RawOp {
    /// A file or directory opened; `created` when the call made it (or
    /// truncated it: a write).
    Open {
        /// The call created, superseded or overwrote the file.
        created: bool,
        /// It is a directory.
        directory: bool,
    },
    /// A handle closed.
    Close,
    /// `len` bytes read at `offset` (for a failed read: asked).
    Read {
        /// Byte offset.
        offset: u64,
        /// Bytes read.
        len: u64,
    },
    /// `len` bytes written at `offset`.
    Write {
        /// Byte offset.
        offset: u64,
        /// Bytes written.
        len: u64,
    },
    /// The file's data flushed to the device (FlushBuffersFile, fsync).
    Sync,
    /// Writeback of `len` bytes from `offset` (0: to the end) started,
    /// and waited for when `wait` (`sync_file_range`): no device cache
    /// flush, no metadata.
    Writeback {
        /// Byte offset.
        offset: u64,
        /// Bytes (0: to the end of the file).
        len: u64,
        /// The call waited for the writeback (`SYNC_FILE_RANGE_WAIT_AFTER`).
        wait: bool,
    },
    /// A directory's entries flushed (fsync of a directory).
    DirSync,
    /// The file's size set (SetEndOfFile, ftruncate, fallocate).
    Truncate {
        /// The new size.
        size: u64,
    },
    /// Renamed to `to` (the source path is the event's).
    Rename {
        /// The new path, as the source wrote it (empty when unknown).
        to: String,
    },
    /// Removed (deleted on close, unlink, rmdir).
    Remove,
    /// A directory made.
    Mkdir,
    /// Metadata read: a query, a stat, a listing, an open that failed to
    /// find the name.
    Stat,
    /// A memory mapping of the file: the I/O through it is not seen.
    Map,
    /// A file-system operation a replay does not reproduce (locks,
    /// device and file-system controls, security): named for the report.
    Other(String),
    /// Not a file-system event at all (registry, process, network):
    /// named by its class for the report.
    NotFile(String),
    /// `len` bytes sent into a stream between threads or processes: one
    /// direction of a connected socket, or a pipe. `stream` names it the
    /// same at both ends (`unix:SENDER>RECEIVER` by socket inodes,
    /// `tcp:FROM>TO` by addresses, `pipe:INODE`).
    Send {
        /// The stream.
        stream: String,
        /// Bytes sent.
        len: u64,
    },
    /// A timer ran out: the thread waited `dur_ns` from `t_ns` in calls
    /// that timed out, then went on by itself (see [`crate::format::Op::Timer`]).
    Timer,
    /// `len` bytes received from a stream (see [`RawOp::Send`]); its
    /// start is when the thread began waiting for them (a `poll` or
    /// `epoll_wait` that found them ready, when one came first).
    Recv {
        /// The stream.
        stream: String,
        /// Bytes received.
        len: u64,
    },
    /// A wake-up sent to threads waiting on `key`: a futex woken
    /// (`futex:ADDRESS`, per process for private futexes), a thread or
    /// process ended (`exit:TID`).
    Wake {
        /// What it wakes.
        key: String,
    },
    /// A wait on `key` that ended woken (see [`RawOp::Wake`]): a futex
    /// wait that returned 0, a thread joined, a child reaped.
    Woken {
        /// What it waited on.
        key: String,
    },
}
