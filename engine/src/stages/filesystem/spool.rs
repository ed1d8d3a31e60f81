//! A volume's walk, written down for the stage's finish.
//!
//! When a planned case walks each volume on its own worker, the walks'
//! rows must still reach the case database in a single run's order (file
//! ids come from the table's sequence, and every later stage, export and
//! mirror table refers to them). So a volume's walk writes what it found
//! to a spool in the shared case directory, `walk-spools/<slot>.jsonl`,
//! one JSON line per event, and the finish stores the spools in volume
//! order with the very writes a single run makes. The walk (small random
//! reads of the evidence) runs on every worker at once; the database work
//! stays one worker's, as a single run's is.

use super::Event;
use crate::casedb::{Extents, NewFile, StoredContent};
use serde::{Deserialize, Serialize};

/// Where a volume's spool is, in the case directory.
pub const DIR: &str = "walk-spools";

/// The spool of volume `slot`.
pub fn path(slot: u32) -> String {
    format!("{DIR}/{slot}.jsonl")
}

/// A [`NewFile`] as a spool line holds it.
#[derive(Debug, Serialize, Deserialize)]
struct File {
    meta_addr: String,
    path: String,
    name: String,
    raw_name: Vec<u8>,
    short_name: Option<String>,
    kind: String,
    fs_type: String,
    size: u64,
    allocated: bool,
    recovery: String,
    recoverable: bool,
    attributes: i64,
    #[serde(default)]
    owner: [i64; 3],
    times: [Option<i64>; 4],
    fn_times: [Option<i64>; 4],
    content: Content,
    slack: Option<String>,
    errors: Vec<(Option<u64>, String)>,
}

/// A [`StoredContent`], with runs in their stored text.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Content {
    None,
    Resident(Vec<u8>),
    Runs(String),
    Compressed {
        runs: String,
        unit: u64,
        size: u64,
        initialized: u64,
    },
    Decmpfs {
        runs: String,
        codec: String,
        size: u64,
    },
    Encoded {
        encoding: String,
        runs: String,
    },
}

impl File {
    fn of(f: NewFile) -> File {
        File {
            meta_addr: f.meta_addr,
            path: f.path,
            name: f.name,
            raw_name: f.raw_name,
            short_name: f.short_name,
            kind: f.kind.to_string(),
            fs_type: f.fs_type.name().to_string(),
            size: f.size,
            allocated: f.allocated,
            recovery: f.recovery.to_string(),
            recoverable: f.recoverable,
            attributes: f.attributes,
            owner: f.owner,
            times: f.times,
            fn_times: f.fn_times,
            content: match f.content {
                StoredContent::None => Content::None,
                StoredContent::Resident(b) => Content::Resident(b),
                StoredContent::Runs(r) => Content::Runs(r.encode()),
                StoredContent::Compressed {
                    runs,
                    unit,
                    size,
                    initialized,
                } => Content::Compressed {
                    runs: runs.encode(),
                    unit,
                    size,
                    initialized,
                },
                StoredContent::Decmpfs { runs, codec, size } => Content::Decmpfs {
                    runs: runs.encode(),
                    codec: codec.name().to_string(),
                    size,
                },
                StoredContent::Encoded { encoding, runs } => Content::Encoded {
                    encoding,
                    runs: runs.encode(),
                },
            },
            slack: f.slack.as_ref().map(Extents::encode),
            errors: f.errors,
        }
    }

    /// The record back; its volume row is the storer's to fill in.
    fn into_new_file(self) -> Result<NewFile, String> {
        let runs = |t: &str| Extents::decode(t).map_err(|e| e.to_string());
        let content = match self.content {
            Content::None => StoredContent::None,
            Content::Resident(b) => StoredContent::Resident(b),
            Content::Runs(r) => StoredContent::Runs(runs(&r)?),
            Content::Compressed {
                runs: r,
                unit,
                size,
                initialized,
            } => StoredContent::Compressed {
                runs: runs(&r)?,
                unit,
                size,
                initialized,
            },
            Content::Decmpfs {
                runs: r,
                codec,
                size,
            } => StoredContent::Decmpfs {
                runs: runs(&r)?,
                codec: caseload_fs::ForkCodec::from_name(&codec)
                    .ok_or_else(|| format!("unknown resource-fork codec {codec:?}"))?,
                size,
            },
            Content::Encoded { encoding, runs: r } => StoredContent::Encoded {
                encoding,
                runs: runs(&r)?,
            },
        };
        Ok(NewFile {
            volume_id: 0,
            meta_addr: self.meta_addr,
            path: self.path,
            name: self.name,
            raw_name: self.raw_name,
            short_name: self.short_name,
            kind: named(&self.kind, &super::KINDS)?,
            size: self.size,
            allocated: self.allocated,
            recovery: named(&self.recovery, &super::RECOVERIES)?,
            fs_type: caseload_fs::FsKind::parsed_by_name(&self.fs_type).ok_or_else(|| {
                format!(
                    "`{}` is not a file system this caseload parses",
                    self.fs_type
                )
            })?,
            recoverable: self.recoverable,
            attributes: self.attributes,
            owner: self.owner,
            times: self.times,
            fn_times: self.fn_times,
            content,
            slack: self.slack.as_deref().map(runs).transpose()?,
            errors: self.errors,
        })
    }
}

/// One event as a line (without its newline).
pub fn encode(event: Event) -> Result<String, serde_json::Error> {
    let line = event.map_file(|f| Ok::<_, std::convert::Infallible>(Box::new(File::of(*f))));
    let Ok(line) = line;
    serde_json::to_string(&line)
}

/// A line back as an event, or what is wrong with it. A file record's
/// volume row is left for the storer (`apply`) to fill in.
pub fn decode(text: &str) -> Result<Event, String> {
    let line: Event<Box<File>> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    line.map_file(|f| f.into_new_file().map(Box::new))
}

/// The stored name among `names` that `text` is.
fn named(text: &str, names: &[&'static str]) -> Result<&'static str, String> {
    names
        .iter()
        .find(|n| **n == text)
        .copied()
        .ok_or_else(|| format!("`{text}` is not a value this caseload stores"))
}
