//! A run's operation trace as fio iologs (`caseload export --format
//! fio-iolog`): one iolog (version 3, fio ≥ 3.31) per channel, so that
//! `fio --read_iolog` replays what each device saw, in order and with the
//! run's timing (or as fast as it can with `--replay_no_stall`).
//!
//! Every traced file becomes a replay file `REPLAY_DIR/CHANNEL/fN` (N its
//! number in the trace): names without spaces whatever the original name,
//! and a replay never writes into the case it came from. Files the run
//! read must hold data where they were read; the export lists each file's
//! size to fill before a replay ([`ReplayFile::fill_bytes`]: the furthest
//! byte read). Evidence files are read in place when their recorded path
//! is absolute and has no whitespace (fio opens them read-only, as the run
//! did).
//!
//! What fio cannot replay is counted, not written: renames, removes,
//! directory creation and syncs, metadata reads, and zero-length reads.
//! fio's iolog has no directory operations.

use crate::channel::ChannelKind;
use crate::trace::TraceOp;
use caseload_traces::format::TraceReader;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// The first line of a fio iolog version 3.
pub const IOLOG_HEADER: &str = "fio version 3 iolog";

/// Errors converting a trace.
#[derive(Debug, thiserror::Error)]
pub enum IologError {
    /// The trace is not one, or a line does not parse.
    #[error(transparent)]
    Parse(#[from] caseload_traces::import::error::FormatError),
    /// An operation names a file the trace never introduced.
    #[error("trace line {line}: file {file} was never added")]
    UnknownFile {
        /// 1-based line.
        line: u64,
        /// The file number.
        file: u32,
    },
    /// The replay directory cannot appear in an iolog.
    #[error("replay directory `{}` has whitespace, which fio's iolog cannot hold", .0.display())]
    ReplayDir(PathBuf),
    /// Reading the trace or writing an iolog failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Cause.
        #[source]
        source: io::Error,
    },
}

/// A file a replay uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayFile {
    /// Its channel.
    pub channel: ChannelKind,
    /// Its number in the trace.
    pub id: u32,
    /// The path the run used.
    pub original: PathBuf,
    /// The path the iolog names.
    pub replay: PathBuf,
    /// Bytes the file must hold before the replay (the furthest byte the
    /// run read from it); 0 for files used in place.
    pub fill_bytes: u64,
    /// The replay reads the original file (evidence).
    pub in_place: bool,
}

/// What one channel's iolog holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelIolog {
    /// Reads written.
    pub reads: u64,
    /// Bytes of those reads.
    pub bytes_read: u64,
    /// Writes written.
    pub writes: u64,
    /// Bytes of those writes.
    pub bytes_written: u64,
    /// Syncs written.
    pub syncs: u64,
    /// Files added.
    pub files: u64,
}

/// The result of a conversion.
#[derive(Debug, Clone, Default)]
pub struct IologSummary {
    /// Per channel, what its iolog holds (channels with any operation).
    pub channels: BTreeMap<ChannelKind, ChannelIolog>,
    /// Every file the replay uses.
    pub files: Vec<ReplayFile>,
    /// Operations fio cannot replay, by kind.
    pub skipped: BTreeMap<&'static str, u64>,
    /// Trace records read.
    pub records: u64,
}

/// Where the iolog of a channel goes.
pub trait IologSink {
    /// The writer for `channel`'s iolog (created on first use).
    fn writer(&mut self, channel: ChannelKind) -> io::Result<&mut dyn Write>;
}

struct FileState {
    channel: ChannelKind,
    replay: PathBuf,
    original: PathBuf,
    in_place: bool,
    read_end: u64,
    open: bool,
}

/// Convert the trace read from `trace` into iologs written to `sink`,
/// naming replay files under `replay_dir`.
pub fn trace_to_iologs(
    trace: impl BufRead,
    sink: &mut dyn IologSink,
    replay_dir: &Path,
) -> Result<IologSummary, IologError> {
    if replay_dir
        .to_string_lossy()
        .chars()
        .any(char::is_whitespace)
    {
        return Err(IologError::ReplayDir(replay_dir.to_path_buf()));
    }
    let mut reader = TraceReader::new(trace)?;
    let mut summary = IologSummary::default();
    let mut files: HashMap<u32, FileState> = HashMap::new();
    let mut order: Vec<u32> = Vec::new();
    // fio needs timestamps that never go back; records from several
    // threads can be a few microseconds out of order.
    let mut last_us: BTreeMap<ChannelKind, u64> = BTreeMap::new();
    while let Some(r) = reader.next_record() {
        let r = r?;
        let line_no = reader.line();
        // Threads and phases are for a replay thread by thread; fio runs
        // one job per channel.
        let Some(channel) = r
            .channel
            .filter(|_| !matches!(r.op, TraceOp::Thread | TraceOp::Phase))
        else {
            continue;
        };
        summary.records += 1;
        let last = last_us.entry(channel).or_default();
        let t_us = (r.t_ns / 1000).max(*last);
        *last = t_us;
        let skipped = match r.op {
            TraceOp::Mkdir => Some("mkdir"),
            TraceOp::Rename => Some("rename"),
            TraceOp::Remove => Some("remove"),
            TraceOp::DirSync => Some("dirsync"),
            TraceOp::Stat => Some("stat"),
            TraceOp::Truncate => Some("truncate"),
            TraceOp::Read if r.len == 0 => Some("zero-length read"),
            TraceOp::Write if r.len == 0 => Some("zero-length write"),
            _ => None,
        };
        if let Some(name) = skipped {
            *summary.skipped.entry(name).or_default() += 1;
            continue;
        }
        match r.op {
            TraceOp::Add => {
                let original = crate::os::path_from_bytes(&r.path.unwrap_or_default());
                let in_place = channel == ChannelKind::Evidence
                    && original.is_absolute()
                    && !original.to_string_lossy().chars().any(char::is_whitespace);
                let replay = if in_place {
                    original.clone()
                } else {
                    replay_dir.join(channel.name()).join(format!("f{}", r.file))
                };
                emit(sink, channel, t_us, &replay, "add")?;
                summary.channels.entry(channel).or_default().files += 1;
                files.insert(
                    r.file,
                    FileState {
                        channel,
                        replay,
                        original,
                        in_place,
                        read_end: 0,
                        open: false,
                    },
                );
                order.push(r.file);
            }
            op => {
                let f = files.get_mut(&r.file).ok_or(IologError::UnknownFile {
                    line: line_no,
                    file: r.file,
                })?;
                let stats = summary.channels.entry(f.channel).or_default();
                let action = match op {
                    TraceOp::Open | TraceOp::Create => {
                        f.open = true;
                        "open".to_string()
                    }
                    TraceOp::Close => {
                        if !f.open {
                            continue;
                        }
                        f.open = false;
                        "close".to_string()
                    }
                    TraceOp::Read => {
                        stats.reads += 1;
                        stats.bytes_read += r.len;
                        f.read_end = f.read_end.max(r.offset.saturating_add(r.len));
                        format!("read {} {}", r.offset, r.len)
                    }
                    TraceOp::Write => {
                        stats.writes += 1;
                        stats.bytes_written += r.len;
                        format!("write {} {}", r.offset, r.len)
                    }
                    TraceOp::Sync => {
                        stats.syncs += 1;
                        "sync 0 0".to_string()
                    }
                    _ => continue,
                };
                emit(sink, f.channel, t_us, &f.replay, &action)?;
            }
        }
    }
    // Files still open at the end of the trace are closed at its end.
    for id in &order {
        if let Some(f) = files.get(id)
            && f.open
        {
            // The channel's last time: a file's add gave it one.
            let t = last_us.get(&f.channel).copied().unwrap_or_default();
            emit(sink, f.channel, t, &f.replay, "close")?;
        }
    }
    summary.files = order
        .into_iter()
        .filter_map(|id| {
            files.remove(&id).map(|f| ReplayFile {
                channel: f.channel,
                id,
                original: f.original,
                replay: f.replay,
                fill_bytes: if f.in_place { 0 } else { f.read_end },
                in_place: f.in_place,
            })
        })
        .collect();
    Ok(summary)
}

/// Write `TIMESTAMP FILE ACTION` to `channel`'s iolog.
fn emit(
    sink: &mut dyn IologSink,
    channel: ChannelKind,
    t_us: u64,
    file: &Path,
    action: &str,
) -> Result<(), IologError> {
    let err = |source| IologError::Io {
        what: format!("{channel} iolog"),
        source,
    };
    let w = sink.writer(channel).map_err(err)?;
    writeln!(w, "{t_us} {} {action}", file.display()).map_err(err)
}

/// A fio job file replaying each channel's iolog as one job, all at once
/// (the channels worked concurrently in the run). `iologs` maps each
/// channel to its iolog's path.
pub fn job_file(iologs: &BTreeMap<ChannelKind, PathBuf>) -> String {
    let mut s = String::from(
        "# Replays a caseload run's channel operations (caseload export --format fio-iolog).\n\
         # fio --output-format=json replay.fio   (add --replay_no_stall=1 to replay as fast as possible)\n\
         [global]\n\
         ioengine=psync\n\
         thread=1\n",
    );
    for (k, path) in iologs {
        // A job whose iolog only reads opens its files read-only (the
        // evidence channel's).
        s.push_str(&format!(
            "\n[{}]\nread_iolog={}\n",
            k.name(),
            path.display()
        ));
    }
    s
}

/// Header line of every iolog.
pub fn write_header(w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "{IOLOG_HEADER}")
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sink(BTreeMap<ChannelKind, Vec<u8>>);
    impl IologSink for Sink {
        fn writer(&mut self, channel: ChannelKind) -> io::Result<&mut dyn Write> {
            let w = self.0.entry(channel).or_insert_with(|| {
                let mut v = Vec::new();
                let _ = write_header(&mut v);
                v
            });
            Ok(w)
        }
    }

    #[test]
    fn a_trace_becomes_per_channel_iologs_with_safe_names() {
        let trace = "# caseload-trace 1\n\
            1000,evidence,1,add,0,0,/ev/image.dd\n\
            1000,evidence,1,open,0,0,\n\
            2000,evidence,1,read,0,4096,\n\
            2500,case,0,mkdir,0,0,/case/carved\n\
            3000,case,2,add,0,0,/case/a%20b.txt\n\
            3000,case,2,create,0,0,\n\
            4000,case,2,write,0,100,\n\
            3900,case,2,read,50,200,\n\
            5000,case,2,sync,0,0,\n\
            6000,case,2,read,0,0,\n\
            7000,case,2,close,0,0,\n";
        let mut sink = Sink(BTreeMap::new());
        let s = trace_to_iologs(trace.as_bytes(), &mut sink, Path::new("/r")).unwrap();
        let ev = String::from_utf8(sink.0[&ChannelKind::Evidence].clone()).unwrap();
        assert_eq!(
            ev,
            "fio version 3 iolog\n1 /ev/image.dd add\n1 /ev/image.dd open\n2 /ev/image.dd read 0 4096\n2 /ev/image.dd close\n"
        );
        let case = String::from_utf8(sink.0[&ChannelKind::Case].clone()).unwrap();
        assert_eq!(
            case,
            "fio version 3 iolog\n3 /r/case/f2 add\n3 /r/case/f2 open\n4 /r/case/f2 write 0 100\n4 /r/case/f2 read 50 200\n5 /r/case/f2 sync 0 0\n7 /r/case/f2 close\n"
        );
        let c = s.channels[&ChannelKind::Case];
        assert_eq!(
            (c.reads, c.bytes_read, c.writes, c.bytes_written, c.syncs),
            (1, 200, 1, 100, 1)
        );
        assert_eq!(s.skipped["mkdir"], 1);
        assert_eq!(s.skipped["zero-length read"], 1);
        assert_eq!(s.files.len(), 2);
        assert!(s.files[0].in_place);
        assert_eq!(s.files[1].fill_bytes, 250);
        assert_eq!(s.files[1].original, Path::new("/case/a b.txt"));
    }

    #[test]
    fn bad_traces_are_refused_with_the_line() {
        let mut sink = Sink(BTreeMap::new());
        assert!(matches!(
            trace_to_iologs(&b"hello\n"[..], &mut sink, Path::new("/r")),
            Err(IologError::Parse(_))
        ));
        let e = trace_to_iologs(
            &b"# caseload-trace 1\n1,case,9,read,0,1,\n"[..],
            &mut sink,
            Path::new("/r"),
        )
        .unwrap_err();
        assert!(
            matches!(e, IologError::UnknownFile { line: 2, file: 9 }),
            "{e}"
        );
        assert!(matches!(
            trace_to_iologs(&b"# caseload-trace 1\n"[..], &mut sink, Path::new("/a b")),
            Err(IologError::ReplayDir(_))
        ));
        let e = trace_to_iologs(
            &b"# caseload-trace 1\nx,case,9,read,0,1,\n"[..],
            &mut sink,
            Path::new("/r"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }
}
