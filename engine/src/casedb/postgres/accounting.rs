//! The database channel's figures when the case is in PostgreSQL.
//!
//! A private cluster's I/O is the server processes' own: for the postmaster
//! and every process it forked (backends, checkpointer, background and WAL
//! writers, autovacuum), `/proc/PID/io` gives the bytes passed to read and
//! write system calls (`rchar`, `wchar`) and their counts (`syscr`,
//! `syscw`): the same system-call level the counting SQLite VFS measures.
//! Socket traffic with caseload is not in them (PostgreSQL receives and
//! sends with recv/send, which these counters leave out). Processes are
//! sampled every 100 ms and at every stage boundary, so a process that
//! exits between samples (an autovacuum worker) loses at most its last
//! 100 ms; caseload's own connections live for the whole run.
//!
//! Blocked time and fsyncs come from the server's statistics (track_io_timing
//! and track_wal_io_timing are on): reads = `pg_stat_database.blk_read_time`;
//! writes = `blk_write_time` + `pg_stat_wal.wal_write_time`; syncs =
//! `pg_stat_wal.wal_sync_time` + `pg_stat_bgwriter.checkpoint_sync_time`.
//! fsyncs = `pg_stat_wal.wal_sync` + `buffers_backend_fsync` + the files
//! each checkpoint synced (its `sync files=N` log line). The checkpointer's
//! spread writes are in the bytes and operations but not in blocked time,
//! which PostgreSQL reports only as the elapsed time of the whole write
//! phase, deliberate pauses included. Statistics reach the views within a
//! second of a transaction's end, so a stage's last second may be charged
//! to the next one.
//!
//! The server's temporary files (sorts and hashes larger than `work_mem`,
//! index builds larger than `maintenance_work_mem`) go to the temp channel
//! when the profile puts them there (ftk4's dbTemp: a tablespace in the
//! temp channel directory named in `temp_tablespaces`). The process
//! counters cannot tell those files from the data files, so the bytes
//! PostgreSQL reports writing to temporary files (`pg_stat_database.
//! temp_bytes`) are moved from the database channel to the temp channel,
//! counted as written once and read back once (a spill is) in 8 KiB
//! operations (BufFile's block). Temporary files are reported when a
//! session publishes its statistics (after the query), so process I/O is
//! charged at stage boundaries and split then; a spill published after
//! the boundary of the interval holding its I/O comes off the next one.
//!
//! An external server (`--db-url`) runs elsewhere: only its statistics are
//! known, server-wide (other sessions' work included): bytes read = blocks
//! read from the operating system x block size, bytes written = WAL bytes
//! + buffers written x block size; system-call counts are unavailable.

use crate::casedb::DbError;
use crate::casedb::conn::pg_error;
use crate::channel::{Channel, ChannelSnapshot};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the figures are obtained, for run.json.
pub const PRIVATE_ACCOUNTING: &str = "private PostgreSQL cluster: bytes and operations are the server processes' own read/write system calls (/proc/PID/io rchar/wchar/syscr/syscw of the postmaster and its children, sampled every 100 ms and at stage boundaries); blocked time from pg_stat_database blk_read_time/blk_write_time, pg_stat_wal wal_write_time/wal_sync_time and pg_stat_bgwriter checkpoint_sync_time; fsyncs from pg_stat_wal wal_sync, buffers_backend_fsync and checkpoint log lines (sync files=N); process I/O charged at stage boundaries; with a profile that keeps the server's temporary files on the temp channel (ftk4's dbTemp), pg_stat_database temp_bytes is moved from the database channel to the temp channel (written once, read back once, 8 KiB operations); the KFF hash library through the counting VFS when it is read as a SQLite file, through the server when the profile keeps it in the case database (ftk4)";
/// The same for an external server.
pub const EXTERNAL_ACCOUNTING: &str = "external PostgreSQL server: only its statistics views are known, server-wide (other sessions' work included): bytes read = pg_stat_database blks_read x block_size (read_ops = blks_read), bytes written = pg_stat_wal wal_bytes + (buffers_checkpoint + buffers_clean + buffers_backend) x block_size (write_ops = wal_write + those buffers), fsyncs = wal_sync + buffers_backend_fsync, blocked time as for a private cluster; system-call counts, the checkpointer's synced files and the server's own file I/O are unavailable";

#[derive(Debug, Clone, Copy, Default)]
struct ProcIo {
    rchar: u64,
    wchar: u64,
    syscr: u64,
    syscw: u64,
    /// Bytes the process caused to be fetched from storage: its reads
    /// that missed the page cache.
    read_bytes: u64,
}

fn read_proc_io(pid: i32) -> Option<ProcIo> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let mut io = ProcIo::default();
    for line in text.lines() {
        let (k, v) = line.split_once(':')?;
        let v: u64 = v.trim().parse().ok()?;
        match k {
            "rchar" => io.rchar = v,
            "wchar" => io.wchar = v,
            "syscr" => io.syscr = v,
            "syscw" => io.syscw = v,
            "read_bytes" => io.read_bytes = v,
            _ => {}
        }
    }
    Some(io)
}

/// Parent pid and start time (clock ticks since boot) of a process.
fn stat(pid: i32) -> Option<(i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// Statistics counters, cumulative since the server started.
#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    read_ms: f64,
    write_ms: f64,
    sync_ms: f64,
    fsyncs: u64,
    // External servers only:
    blocks_read: u64,
    buffers_written: u64,
    wal_bytes: u64,
    wal_writes: u64,
    temp_bytes: u64,
}

fn query_stats(client: &mut postgres::Client) -> Result<Stats, DbError> {
    let sql = "SELECT
        (SELECT coalesce(sum(blk_read_time), 0)::float8 FROM pg_stat_database),
        (SELECT coalesce(sum(blk_write_time), 0)::float8 FROM pg_stat_database),
        (SELECT coalesce(sum(blks_read), 0)::int8 FROM pg_stat_database),
        w.wal_write_time::float8, w.wal_sync_time::float8, w.wal_sync::int8, w.wal_bytes::int8, w.wal_write::int8,
        b.checkpoint_sync_time::float8, b.buffers_backend_fsync::int8,
        (b.buffers_checkpoint + b.buffers_clean + b.buffers_backend)::int8,
        (SELECT coalesce(sum(temp_bytes), 0)::int8 FROM pg_stat_database)
        FROM pg_stat_wal w, pg_stat_bgwriter b";
    let r = client.query_one(sql, &[]).map_err(|e| pg_error(&e, sql))?;
    let get_f = |i: usize| r.try_get::<_, f64>(i).unwrap_or(0.0);
    let get_i = |i: usize| u64::try_from(r.try_get::<_, i64>(i).unwrap_or(0)).unwrap_or(0);
    Ok(Stats {
        read_ms: get_f(0),
        write_ms: get_f(1) + get_f(3),
        sync_ms: get_f(4) + get_f(8),
        fsyncs: get_i(5) + get_i(9),
        blocks_read: get_i(2),
        buffers_written: get_i(10),
        wal_bytes: get_i(6),
        wal_writes: get_i(7),
        temp_bytes: get_i(11),
    })
}

fn ms_to_ns(ms: f64) -> u64 {
    if ms > 0.0 { (ms * 1e6) as u64 } else { 0 }
}

/// What the sampler knows between samples.
struct State {
    /// Per process (pid, start time): counters at the last sample.
    procs: HashMap<(i32, u64), ProcIo>,
    stats: Option<Stats>,
    stats_client: Option<postgres::Client>,
    log_offset: u64,
    block_size: u64,
    /// The first statistics error, reported once in run.json.
    note: Option<String>,
    /// Process I/O sampled but not yet charged (charged at stage
    /// boundaries, once the temporary files of the interval are known).
    pending: ChannelSnapshot,
    /// Where the server's temporary files go, when not the database
    /// channel.
    temp: Option<Channel>,
    /// Temporary-file bytes moved to it so far.
    temp_bytes: u64,
    /// Temporary-file bytes charged to the temp channel but not yet taken
    /// off the database channel (written, read): a session can publish its
    /// spill after the interval whose process I/O holds it.
    temp_owed: (u64, u64),
}

/// PostgreSQL's temporary-file block (BufFile), the size of its reads and
/// writes of a spill.
const TEMP_BLOCK: u64 = 8192;

/// Charges a PostgreSQL server's I/O to the database channel.
pub struct ServerIo {
    channel: Channel,
    /// The postmaster of a private cluster (None: an external server).
    postmaster: Option<i32>,
    log: Option<PathBuf>,
    state: Mutex<State>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for ServerIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerIo")
            .field("postmaster", &self.postmaster)
            .finish_non_exhaustive()
    }
}

impl ServerIo {
    /// Account for a private cluster's postmaster `pid` (its log at `log`)
    /// or, with `None`, an external server; `stats_client` is a connection
    /// kept for the statistics views.
    pub fn start(
        channel: Channel,
        postmaster: Option<u32>,
        log: Option<PathBuf>,
        mut stats_client: postgres::Client,
    ) -> Arc<ServerIo> {
        let block_size = stats_client
            .query_one("SELECT current_setting('block_size')::int8", &[])
            .ok()
            .and_then(|r| r.try_get::<_, i64>(0).ok())
            .and_then(|b| u64::try_from(b).ok())
            .unwrap_or(8192);
        let log_offset = log
            .as_ref()
            .and_then(|l| std::fs::metadata(l).ok())
            .map_or(0, |m| m.len());
        let io = Arc::new(ServerIo {
            channel,
            postmaster: postmaster.and_then(|p| i32::try_from(p).ok()),
            log,
            state: Mutex::new(State {
                procs: HashMap::new(),
                stats: None,
                stats_client: Some(stats_client),
                log_offset,
                block_size,
                note: None,
                pending: ChannelSnapshot::default(),
                temp: None,
                temp_bytes: 0,
                temp_owed: (0, 0),
            }),
            stop: Arc::new(AtomicBool::new(false)),
            thread: Mutex::new(None),
        });
        // The starting point: nothing before now is charged.
        io.sample_with(true, false);
        if io.postmaster.is_some() {
            let weak = Arc::downgrade(&io);
            let stop = Arc::clone(&io.stop);
            let handle = std::thread::Builder::new()
                .name("caseload-pg-io".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(100));
                        match weak.upgrade() {
                            Some(io) => io.sample_with(false, true),
                            None => return,
                        }
                    }
                })
                .ok();
            *io.thread.lock().unwrap_or_else(|e| e.into_inner()) = handle;
        }
        io
    }

    /// Bring the channel's counters up to date (at a stage boundary).
    pub fn sample(&self) {
        self.sample_with(true, true);
    }

    /// Charge the server's temporary files to `temp` from now on (they are
    /// in a tablespace in its directory).
    pub fn charge_temp_to(&self, temp: Channel) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).temp = Some(temp);
    }

    /// Temporary-file bytes charged to the temp channel so far.
    pub fn temp_bytes(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .temp_bytes
    }

    /// The first problem reading the statistics, if any.
    pub fn note(&self) -> Option<String> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .note
            .clone()
    }

    /// Write every dirty buffer now (`CHECKPOINT`), so that what the
    /// server writes at shutdown, after the last sample, is next to nothing.
    /// Returns whether it succeeded.
    pub fn checkpoint(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = state.stats_client.as_mut() else {
            return false;
        };
        match c.batch_execute("CHECKPOINT") {
            Ok(()) => true,
            Err(e) => {
                let e = pg_error(&e, "CHECKPOINT");
                if state.note.is_none() {
                    state.note = Some(format!("the final checkpoint failed: {e}"));
                }
                false
            }
        }
    }

    /// Stop sampling after a last sample, and close the statistics
    /// connection (before the server stops).
    pub fn finish(&self) {
        // The sampling thread first: a sample it took after the last one
        // would stay pending, never charged.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
        self.sample();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.stats_client = None;
    }

    /// Sample the processes (private cluster) and, with `stats`, the
    /// statistics views; `charge` adds the differences to the channel
    /// (process I/O waits in `pending` until a sample with `stats`).
    fn sample_with(&self, stats: bool, charge: bool) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut delta = std::mem::take(&mut state.pending);
        if let Some(pm) = self.postmaster {
            for (key, io) in self.processes(pm) {
                let before = state.procs.insert(key, io);
                // A process first seen now started after the last sample:
                // all its I/O is new.
                let b = before.unwrap_or_default();
                delta.bytes_read += io.rchar.saturating_sub(b.rchar);
                delta.bytes_written += io.wchar.saturating_sub(b.wchar);
                delta.read_ops += io.syscr.saturating_sub(b.syscr);
                delta.write_ops += io.syscw.saturating_sub(b.syscw);
                // With a modelled page cache, the server's reads that the
                // kernel served from memory are its hits, the rest misses.
                if self.channel.counters().page_cache().is_some() {
                    let read = io.rchar.saturating_sub(b.rchar);
                    let miss = io.read_bytes.saturating_sub(b.read_bytes).min(read);
                    delta.cache_miss_bytes += miss;
                    delta.cache_hit_bytes += read - miss;
                }
            }
        }
        if !stats {
            if charge {
                state.pending = delta;
            }
            return;
        }
        let mut temp_delta = ChannelSnapshot::default();
        {
            let now = state
                .stats_client
                .as_mut()
                .map(query_stats)
                .transpose()
                .unwrap_or_else(|e| {
                    if state.note.is_none() {
                        state.note = Some(format!("server statistics unavailable: {e}"));
                    }
                    None
                });
            if let Some(now) = now {
                if let Some(before) = state.stats {
                    delta.read_blocked_ns += ms_to_ns(now.read_ms - before.read_ms);
                    delta.write_blocked_ns += ms_to_ns(now.write_ms - before.write_ms);
                    delta.sync_blocked_ns += ms_to_ns(now.sync_ms - before.sync_ms);
                    delta.fsyncs += now.fsyncs.saturating_sub(before.fsyncs);
                    let spilled = now.temp_bytes.saturating_sub(before.temp_bytes);
                    if spilled > 0 && state.temp.is_some() && self.postmaster.is_some() {
                        let ops = spilled.div_ceil(TEMP_BLOCK);
                        temp_delta.bytes_written = spilled;
                        temp_delta.bytes_read = spilled;
                        temp_delta.write_ops = ops;
                        temp_delta.read_ops = ops;
                        state.temp_bytes += spilled;
                        state.temp_owed.0 += spilled;
                        state.temp_owed.1 += spilled;
                    }
                    if self.postmaster.is_none() {
                        let bs = state.block_size;
                        let blocks = now.blocks_read.saturating_sub(before.blocks_read);
                        let buffers = now.buffers_written.saturating_sub(before.buffers_written);
                        delta.bytes_read += blocks * bs;
                        delta.read_ops += blocks;
                        delta.bytes_written +=
                            now.wal_bytes.saturating_sub(before.wal_bytes) + buffers * bs;
                        delta.write_ops +=
                            now.wal_writes.saturating_sub(before.wal_writes) + buffers;
                    }
                }
                state.stats = Some(now);
            }
            delta.fsyncs += self.checkpoint_syncs(&mut state);
            // Take the spill off the database channel's process I/O, as
            // far as this interval holds it; the rest comes off the next.
            let (w, r) = state.temp_owed;
            let (tw, tr) = (w.min(delta.bytes_written), r.min(delta.bytes_read));
            delta.bytes_written -= tw;
            delta.bytes_read -= tr;
            delta.write_ops = delta.write_ops.saturating_sub(tw.div_ceil(TEMP_BLOCK));
            delta.read_ops = delta.read_ops.saturating_sub(tr.div_ceil(TEMP_BLOCK));
            state.temp_owed = (w - tw, r - tr);
        }
        if charge {
            self.channel.charge_foreign(&delta);
            if let Some(t) = &state.temp {
                t.charge_foreign(&temp_delta);
            }
        }
    }

    /// The postmaster and its children, with their counters now.
    fn processes(&self, pm: i32) -> Vec<((i32, u64), ProcIo)> {
        let mut out = Vec::new();
        if let (Some((_, start)), Some(io)) = (stat(pm), read_proc_io(pm)) {
            out.push(((pm, start), io));
        } else {
            return out;
        }
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if let Some((ppid, start)) = stat(pid)
                && ppid == pm
                && let Some(io) = read_proc_io(pid)
            {
                out.push(((pid, start), io));
            }
        }
        out
    }

    /// Files synced by checkpoints completed since the last look at the log.
    fn checkpoint_syncs(&self, state: &mut State) -> u64 {
        let Some(log) = &self.log else { return 0 };
        let Ok(mut f) = std::fs::File::open(log) else {
            return 0;
        };
        if f.seek(SeekFrom::Start(state.log_offset)).is_err() {
            return 0;
        }
        let mut text = String::new();
        if f.read_to_string(&mut text).is_err() {
            return 0;
        }
        // Only whole lines: a line being written is read next time.
        let complete = text.rfind('\n').map_or(0, |i| i + 1);
        state.log_offset += complete as u64;
        text[..complete]
            .lines()
            .filter(|l| l.contains("checkpoint complete"))
            .filter_map(|l| {
                let rest = &l[l.find("sync files=")? + "sync files=".len()..];
                let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
                n.parse::<u64>().ok()
            })
            .sum()
    }
}

impl Drop for ServerIo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
