//! A run's progress record, and resuming a run that never finished
//! (`run --resume`).
//!
//! While a run goes on, `run.progress` in the case directory holds its
//! progress as JSON, replaced whole (written, synced, renamed) at every
//! stage boundary: the stages finished, with their full
//! reports, and the stage running, with what the case looked like when it
//! started: every case-database table's largest `rowid` and the case
//! directory's entries. A run killed at any point (SIGKILL, power loss of
//! the process) leaves that record and no `run.json`: the case is clearly
//! marked incomplete, and `run` refuses it without `--resume` or
//! `--force`.
//!
//! `run --resume`, given the same arguments, checks that they are the same
//! (evidence, stages, database engine), reopens the case database (SQLite
//! recovers its own last transaction), deletes every row whose `rowid` is
//! above the cut-short stage's watermarks, which removes exactly what that
//! stage (and a suite profile's rows mirroring it) wrote, removes the case
//! directory entries it created and the killed process's temporary
//! directory, and runs the pipeline again from that stage. Updates a
//! stage makes to earlier rows (file-hash's digests, kff's verdicts) are
//! made again with the same values, stages being deterministic. SQLite
//! only: PostgreSQL rows have no write order to cut at.

use crate::channel::{Channel, ChannelKind};
use crate::report::StageReport;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

/// The progress record in the case directory.
pub const PROGRESS_FILE: &str = "run.progress";
/// Its temporary name while it is replaced.
pub const PROGRESS_TMP: &str = "run.progress.tmp";
/// `schema` of a progress record.
pub const PROGRESS_SCHEMA: &str = "caseload-run-progress";
/// Its version.
pub const PROGRESS_VERSION: u32 = 1;
/// Prefix of a run's private temporary directory (`run`), followed by the
/// process id and a time.
pub const TEMP_PREFIX: &str = "caseload-tmp-";

/// A name for this process's private directory in the temp channel
/// ([`TEMP_PREFIX`], the process id, the time), so that runs and workers
/// sharing a temp directory never collide.
pub fn private_temp_name() -> String {
    format!(
        "{TEMP_PREFIX}{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    )
}

/// A run's progress, as recorded in its reserved report file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProgressRecord {
    /// [`PROGRESS_SCHEMA`].
    pub schema: String,
    /// [`PROGRESS_VERSION`].
    pub version: u32,
    /// The caseload that wrote it.
    pub caseload_version: String,
    /// When the run first started.
    pub started_at: String,
    /// The run's row in the case database.
    pub run_id: i64,
    /// The evidence's row.
    pub evidence_id: i64,
    /// The evidence (first file, canonical).
    pub evidence: PathBuf,
    /// Its media size.
    pub media_size: u64,
    /// The stages, in order.
    pub stages: Vec<String>,
    /// The case database's engine.
    pub db_engine: String,
    /// The database channel's directory (canonical).
    pub database: PathBuf,
    /// The case-database profile.
    pub profile: String,
    /// Stages that ran to their end, in order.
    pub finished: Vec<FinishedStage>,
    /// The stage running, if any.
    pub running: Option<StageStart>,
    /// How many times the run was resumed.
    pub resumed: u32,
}

/// A stage that ran to its end.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FinishedStage {
    /// Its position in the pipeline.
    pub seq: usize,
    /// When it started.
    pub started_at: String,
    /// Its report.
    pub report: StageReport,
}

/// The case when a stage started.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageStart {
    /// Its position in the pipeline.
    pub seq: usize,
    /// The stage.
    pub stage: String,
    /// Every case-database table's largest rowid (SQLite); `None` for an
    /// engine without one, whose stage cannot be undone.
    pub rowids: Option<BTreeMap<String, i64>>,
    /// The case directory's entries.
    pub case_entries: Vec<String>,
}

/// Why a run cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// No unfinished run in the case directory.
    #[error("`{}` holds no unfinished run to resume ({reason})", dir.display())]
    Nothing {
        /// The case directory.
        dir: PathBuf,
        /// What was found.
        reason: &'static str,
    },
    /// The progress record does not parse.
    #[error("the progress record `{}` is unreadable ({reason}); use --force to start the case again", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The arguments differ from the unfinished run's.
    #[error("the unfinished run in `{}` {what}; resume it with the same arguments, or use --force to start again", dir.display())]
    Different {
        /// The case directory.
        dir: PathBuf,
        /// What differs.
        what: String,
    },
    /// Reading or writing the record failed.
    #[error("progress record `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
}

impl ProgressRecord {
    /// Whether the arguments of a resuming run are the unfinished run's.
    // One parameter per thing the two runs must share, each checked and
    // named in the refusal.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &self,
        dir: &std::path::Path,
        evidence: &std::path::Path,
        media_size: u64,
        stages: &[&str],
        db_engine: &str,
        database: &std::path::Path,
        profile: &str,
    ) -> Result<(), ResumeError> {
        let differ = |what: String| {
            Err(ResumeError::Different {
                dir: dir.to_path_buf(),
                what,
            })
        };
        if self.schema != PROGRESS_SCHEMA || self.version != PROGRESS_VERSION {
            return differ(format!(
                "was recorded by another caseload ({} {})",
                self.schema, self.version
            ));
        }
        if self.evidence != evidence || self.media_size != media_size {
            return differ(format!(
                "processed `{}` ({} bytes), not `{}` ({media_size} bytes)",
                self.evidence.display(),
                self.media_size,
                evidence.display()
            ));
        }
        if self.stages != stages {
            return differ(format!(
                "ran the stages {}, not {}",
                self.stages.join(","),
                stages.join(",")
            ));
        }
        if self.db_engine != db_engine {
            return differ(format!(
                "kept its case in {}, not {db_engine}",
                self.db_engine
            ));
        }
        if self.database != database || self.profile != profile {
            return differ(format!(
                "kept its case database in `{}` with profile {}, not `{}` with {profile}",
                self.database.display(),
                self.profile,
                database.display()
            ));
        }
        if self.finished.len() > self.stages.len()
            || self.finished.iter().enumerate().any(|(i, f)| f.seq != i)
        {
            return differ("left a progress record that does not add up".into());
        }
        if let Some(r) = &self.running
            && r.rowids.is_none()
        {
            return differ(format!(
                "was cut short in stage {} on a {} case database, whose rows cannot be told apart by when they were written",
                r.stage, self.db_engine
            ));
        }
        Ok(())
    }
}

/// Where a run keeps its progress record: `run.progress` in the case
/// directory, replaced whole at every stage boundary.
#[derive(Debug)]
pub struct ProgressFile<'a> {
    case: &'a Channel,
}

impl<'a> ProgressFile<'a> {
    /// The record in `case`'s directory.
    pub fn new(case: &'a Channel) -> Self {
        ProgressFile { case }
    }

    fn path(&self) -> PathBuf {
        self.case.dir().join(PROGRESS_FILE)
    }

    /// The progress recorded, or `None` when there is none (a run killed
    /// before its first stage started).
    pub fn read(&self) -> Result<Option<ProgressRecord>, ResumeError> {
        let bytes = self
            .case
            .read_instrument(PROGRESS_FILE)
            .map_err(|e| ResumeError::Io {
                path: self.path(),
                source: io::Error::other(e),
            })?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ResumeError::Unreadable {
                path: self.path(),
                reason: e.to_string(),
            })
    }

    /// Record `progress`: the old record or the new one is there whenever
    /// the process dies.
    pub fn write(&self, progress: &ProgressRecord) -> Result<(), ResumeError> {
        let json = serde_json::to_vec(progress).map_err(|e| ResumeError::Io {
            path: self.path(),
            source: io::Error::other(e),
        })?;
        self.case
            .replace_instrument(PROGRESS_FILE, &json)
            .map_err(|e| ResumeError::Io {
                path: self.path(),
                source: io::Error::other(e),
            })
    }

    /// The run ended with its report: no record is needed any more.
    pub fn remove(&self) {
        let _ = self.case.remove_instrument(PROGRESS_FILE);
    }
}

/// Remove what a cut-short stage created in the case directory: the
/// entries a run owns (`owned`: carved files, the index, exports) that
/// were not there when it started. Nothing else is touched: a case
/// directory may be shared with other channels and other programs.
pub fn remove_new_case_entries(
    case: &Channel,
    before: &[String],
    owned: &[&str],
) -> Result<Vec<String>, crate::channel::ChannelError> {
    let mut removed = Vec::new();
    for name in owned {
        if before.iter().any(|b| b == name) || !case.exists(name) {
            continue;
        }
        case.remove_all(name)?;
        removed.push((*name).to_string());
    }
    Ok(removed)
}

/// Remove the private temporary directories of runs whose process is gone
/// (a killed run's; a live run's are left alone, whoever owns them).
pub fn remove_dead_temp_dirs(temp_root: &Channel) -> Vec<String> {
    debug_assert_eq!(temp_root.kind(), ChannelKind::Temp);
    let mut removed = Vec::new();
    for name in temp_root.list("").unwrap_or_default() {
        // Its private directory, or a layout check's probe file.
        let Some(pid) = name
            .strip_prefix(TEMP_PREFIX)
            .or_else(|| name.strip_prefix(".caseload-probe-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() as i32 || process_alive(pid) {
            continue;
        }
        if temp_root.remove_all(&name).is_ok() {
            removed.push(name);
        }
    }
    removed
}

fn process_alive(pid: i32) -> bool {
    u32::try_from(pid).is_ok_and(crate::os::process_alive)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress() -> ProgressRecord {
        ProgressRecord {
            schema: PROGRESS_SCHEMA.into(),
            version: PROGRESS_VERSION,
            caseload_version: "x".into(),
            started_at: "t".into(),
            run_id: 1,
            evidence_id: 1,
            evidence: PathBuf::from("/e/image.dd"),
            media_size: 100,
            stages: vec!["filesystem".into(), "carve".into()],
            db_engine: "sqlite".into(),
            database: PathBuf::from("/d"),
            profile: "native".into(),
            finished: Vec::new(),
            running: None,
            resumed: 0,
        }
    }

    #[test]
    fn records_replace_each_other_and_a_missing_one_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        let case = Channel::new(ChannelKind::Case, dir.path(), Vec::new());
        let f = ProgressFile::new(&case);
        assert_eq!(f.read().unwrap(), None);
        let mut p = progress();
        p.running = Some(StageStart {
            seq: 0,
            stage: "filesystem".into(),
            rowids: Some(BTreeMap::from([("files".to_string(), 12)])),
            case_entries: vec!["a".into(); 40],
        });
        f.write(&p).unwrap();
        assert_eq!(f.read().unwrap(), Some(p.clone()));
        p.running = None;
        f.write(&p).unwrap();
        assert_eq!(f.read().unwrap(), Some(p));
        assert!(!dir.path().join(PROGRESS_TMP).exists());
        f.remove();
        assert_eq!(f.read().unwrap(), None);
        assert_eq!(case.snapshot().creates, 0, "an instrument is not counted");
    }

    #[test]
    fn other_arguments_are_refused_and_say_what_differs() {
        use std::path::Path;
        let p = progress();
        let dir = std::path::Path::new("/c");
        let e = std::path::Path::new("/e/image.dd");
        assert!(
            p.check(
                dir,
                e,
                100,
                &["filesystem", "carve"],
                "sqlite",
                Path::new("/d"),
                "native"
            )
            .is_ok()
        );
        let msg = |r: Result<(), ResumeError>| r.unwrap_err().to_string();
        assert!(
            msg(p.check(
                dir,
                e,
                100,
                &["filesystem"],
                "sqlite",
                Path::new("/d"),
                "native"
            ))
            .contains("ran the stages")
        );
        assert!(
            msg(p.check(
                dir,
                std::path::Path::new("/x"),
                100,
                &["filesystem", "carve"],
                "sqlite",
                Path::new("/d"),
                "native"
            ))
            .contains("processed")
        );
        assert!(
            msg(p.check(
                dir,
                e,
                100,
                &["filesystem", "carve"],
                "postgres",
                Path::new("/d"),
                "native"
            ))
            .contains("kept its case")
        );
        assert!(
            msg(p.check(
                dir,
                e,
                100,
                &["filesystem", "carve"],
                "sqlite",
                Path::new("/other"),
                "native"
            ))
            .contains("kept its case database")
        );
    }
}
