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
use crate::stage::Severity;
use serde::{Deserialize, Serialize};

/// Where a volume's spool is, in the case directory.
pub const DIR: &str = "walk-spools";

/// The spool of volume `slot`.
pub fn path(slot: u32) -> String {
    format!("{DIR}/{slot}.jsonl")
}

/// An [`Event`] as a spool line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
enum Line {
    File(Box<File>),
    Problem {
        severity: Severity,
        sectors: Option<(u64, u64)>,
        message: String,
    },
    VolumeFs {
        fs_type: String,
        fs_label: Option<String>,
        parsed: bool,
    },
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
    size: u64,
    allocated: bool,
    recovery: String,
    recoverable: bool,
    attributes: i64,
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
    Encoded {
        encoding: String,
        runs: String,
    },
}

/// One event as a line (without its newline).
pub fn encode(event: &Event) -> Result<String, serde_json::Error> {
    let line = match event {
        Event::File(f) => Line::File(Box::new(File {
            meta_addr: f.meta_addr.clone(),
            path: f.path.clone(),
            name: f.name.clone(),
            raw_name: f.raw_name.clone(),
            short_name: f.short_name.clone(),
            kind: f.kind.to_string(),
            size: f.size,
            allocated: f.allocated,
            recovery: f.recovery.to_string(),
            recoverable: f.recoverable,
            attributes: f.attributes,
            times: f.times,
            fn_times: f.fn_times,
            content: match &f.content {
                StoredContent::None => Content::None,
                StoredContent::Resident(b) => Content::Resident(b.clone()),
                StoredContent::Runs(r) => Content::Runs(r.encode()),
                StoredContent::Compressed {
                    runs,
                    unit,
                    size,
                    initialized,
                } => Content::Compressed {
                    runs: runs.encode(),
                    unit: *unit,
                    size: *size,
                    initialized: *initialized,
                },
                StoredContent::Encoded { encoding, runs } => Content::Encoded {
                    encoding: encoding.clone(),
                    runs: runs.encode(),
                },
            },
            slack: f.slack.as_ref().map(Extents::encode),
            errors: f.errors.clone(),
        })),
        Event::Problem {
            severity,
            sectors,
            message,
        } => Line::Problem {
            severity: *severity,
            sectors: *sectors,
            message: message.clone(),
        },
        Event::VolumeFs {
            fs_type,
            fs_label,
            parsed,
        } => Line::VolumeFs {
            fs_type: fs_type.clone(),
            fs_label: fs_label.clone(),
            parsed: *parsed,
        },
    };
    serde_json::to_string(&line)
}

/// A line back as the event of volume row `volume_id`, or what is wrong
/// with it.
pub fn decode(text: &str, volume_id: i64) -> Result<Event, String> {
    let line: Line = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(match line {
        Line::File(f) => {
            let runs = |t: &str| Extents::decode(t).map_err(|e| e.to_string());
            let content = match f.content {
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
                Content::Encoded { encoding, runs: r } => StoredContent::Encoded {
                    encoding,
                    runs: runs(&r)?,
                },
            };
            Event::File(Box::new(NewFile {
                volume_id,
                meta_addr: f.meta_addr,
                path: f.path,
                name: f.name,
                raw_name: f.raw_name,
                short_name: f.short_name,
                kind: named(&f.kind, &super::KINDS)?,
                size: f.size,
                allocated: f.allocated,
                recovery: named(&f.recovery, &super::RECOVERIES)?,
                recoverable: f.recoverable,
                attributes: f.attributes,
                times: f.times,
                fn_times: f.fn_times,
                content,
                slack: f.slack.as_deref().map(runs).transpose()?,
                errors: f.errors,
            }))
        }
        Line::Problem {
            severity,
            sectors,
            message,
        } => Event::Problem {
            severity,
            sectors,
            message,
        },
        Line::VolumeFs {
            fs_type,
            fs_label,
            parsed,
        } => Event::VolumeFs {
            fs_type,
            fs_label,
            parsed,
        },
    })
}

/// The stored name among `names` that `text` is.
fn named(text: &str, names: &[&'static str]) -> Result<&'static str, String> {
    names
        .iter()
        .find(|n| **n == text)
        .copied()
        .ok_or_else(|| format!("`{text}` is not a value this caseload stores"))
}
