//! The stage interface. Every stage implements [`Stage`] and is listed once
//! in [`crate::stages::REGISTRY`]; a stage knows nothing of the others. It
//! reads the evidence (always from the source, as a suite does, never from
//! bytes another stage holds), may read the case database, and writes only
//! through the context's database writer and channels.

use crate::casedb::{CaseDb, DbError, ItemKind, ProcessingError, Write};
use crate::channel::{Channel, ChannelError};
use crate::source::{EvidenceSource, SourceError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Errors that stop a stage. Problems with one item are not errors: they
/// are recorded with [`StageContext::record`] and the stage carries on.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// Options in a workload or on the command line are wrong.
    #[error("stage `{stage}`: {message}")]
    Config {
        /// The stage.
        stage: String,
        /// What is wrong.
        message: String,
    },
    /// The case database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// A channel failed (full disk, permissions).
    #[error(transparent)]
    Channel(#[from] ChannelError),
    /// The evidence could not be read at all.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The run was interrupted.
    #[error("interrupted")]
    Interrupted,
    /// Anything else that prevents the stage from finishing.
    #[error("{0}")]
    Other(String),
}

/// Options of one stage, as a TOML table (from a workload file or flags).
pub type StageOptions = toml::Table;

/// How much a stage has done, for progress display.
pub trait Progress: Send + Sync {
    /// Set the total amount of work, in `unit`s.
    fn set_total(&self, total: u64, unit: ProgressUnit);
    /// Add to the work done.
    fn advance(&self, amount: u64);
    /// Show a short note.
    fn message(&self, text: &str);
}

/// Unit of a progress total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressUnit {
    /// Bytes.
    Bytes,
    /// Items (files, records).
    Items,
}

/// A progress sink that shows nothing.
#[derive(Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn set_total(&self, _: u64, _: ProgressUnit) {}
    fn advance(&self, _: u64) {}
    fn message(&self, _: &str) {}
}

/// Severity of a recorded processing error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// An item could not be processed (fully).
    Error,
    /// Something odd that did not stop processing.
    Warning,
    /// A result the examiner must see (hash mismatch, notable file).
    Finding,
}

impl Severity {
    /// The value stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Finding => "finding",
        }
    }
}

/// One processing error or finding, before it is stored.
#[derive(Debug, Clone, Default)]
pub struct Problem {
    /// What it points at.
    pub item_kind: Option<ItemKind>,
    /// Item id in its table.
    pub item_id: Option<i64>,
    /// A path or name to show.
    pub path: Option<String>,
    /// Damaged sector range.
    pub sectors: Option<(u64, u64)>,
    /// What happened.
    pub message: String,
}

/// What a stage reports when it finishes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StageSummary {
    /// Items processed (files, chunks, entries...).
    pub items: u64,
    /// Bytes of evidence content processed (logical).
    pub bytes: u64,
    /// Stage-specific results for the report (hashes, counts...).
    pub details: BTreeMap<String, serde_json::Value>,
}

/// Everything a stage may use.
pub struct StageContext<'a> {
    /// The evidence.
    pub evidence: &'a Arc<dyn EvidenceSource>,
    /// Its row in the `evidence` table.
    pub evidence_id: i64,
    /// This run's row in `runs`.
    pub run_id: i64,
    /// The case database.
    pub db: &'a CaseDb,
    /// The case channel (carved files, index, report).
    pub case: &'a Channel,
    /// The temp channel, pointing at a directory private to this run.
    pub temp: &'a Channel,
    /// Worker threads the stage may use.
    pub threads: usize,
    /// Progress display.
    pub progress: &'a dyn Progress,
    /// Set when the run is interrupted; long loops check it.
    pub cancel: &'a AtomicBool,
    /// The stage's name (for recorded errors).
    pub stage: &'static str,
    /// Counts of what was recorded, by severity.
    pub recorded: &'a RecordCounts,
    /// What part of the stage's work to do: all of it in a run, one work
    /// unit of it under `caseload worker`.
    pub scope: Scope,
}

/// The part of a stage's work a [`StageContext`] asks for. A stage whose
/// [`crate::stages::StageSpec::units`] is [`Units::Whole`] only ever sees
/// [`Scope::Whole`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Scope {
    /// Everything (a single-machine run, or a stage split no further).
    #[default]
    Whole,
    /// The files whose `files.id` lies in `first..=last`, without the
    /// stage's case-wide finish (duplicate groups): one batch of a split
    /// stage.
    Files {
        /// First file id.
        first: i64,
        /// Last file id.
        last: i64,
    },
    /// One part of a stage that cuts itself into parts of the evidence
    /// ([`Stage::split`]: carving's runs of regions, the walk's volumes),
    /// without the stage's case-wide finish.
    Part {
        /// The part, from 0 in evidence order.
        part: u32,
        /// How many byte ranges of the evidence it holds.
        ranges: u64,
        /// How many bytes they hold.
        bytes: u64,
    },
    /// Only the case-wide work after every batch is done.
    Finish,
}

impl Scope {
    /// Whether the stage's per-file work is to be done.
    pub fn has_files(self) -> bool {
        !matches!(self, Scope::Finish)
    }

    /// Whether the stage's case-wide finish is to be done.
    pub fn has_finish(self) -> bool {
        matches!(self, Scope::Whole | Scope::Finish)
    }

    /// The file ids to work on, when limited.
    pub fn file_range(self) -> Option<(i64, i64)> {
        match self {
            Scope::Files { first, last } => Some((first, last)),
            _ => None,
        }
    }
}

/// How a stage can be divided into work units for several workers
/// (`caseload plan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    /// One unit per evidence: the stage runs whole.
    Whole,
    /// Batches of files ([`Scope::Files`]), then one [`Scope::Finish`].
    FileBatches,
    /// Parts the stage cuts itself ([`Stage::split`], [`Scope::Part`]),
    /// then one [`Scope::Finish`].
    Parts,
}

/// Counts of recorded problems.
#[derive(Debug, Default)]
pub struct RecordCounts {
    /// Errors.
    pub errors: AtomicU64,
    /// Warnings.
    pub warnings: AtomicU64,
    /// Findings.
    pub findings: AtomicU64,
}

impl StageContext<'_> {
    /// Record a processing error, warning or finding in the case database.
    pub fn record(&self, severity: Severity, problem: Problem) -> Result<(), StageError> {
        let counter = match severity {
            Severity::Error => &self.recorded.errors,
            Severity::Warning => &self.recorded.warnings,
            Severity::Finding => &self.recorded.findings,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.db.writer().exec(Write::Problem(ProcessingError {
            run_id: self.run_id,
            stage: self.stage.to_string(),
            severity: severity.as_str(),
            item: problem.item_kind.map(|k| (k, problem.item_id)),
            path: problem.path,
            sectors: problem.sectors,
            message: problem.message,
        }))?;
        Ok(())
    }

    /// Record an evidence read error, with its sector range when known.
    pub fn record_source_error(&self, error: &SourceError) -> Result<(), StageError> {
        self.record(
            Severity::Error,
            Problem {
                item_kind: Some(ItemKind::Evidence),
                item_id: Some(self.evidence_id),
                sectors: error.sector_range(),
                message: error.to_string(),
                ..Problem::default()
            },
        )
    }

    /// Fail with [`StageError::Interrupted`] once the run is interrupted.
    pub fn check_cancel(&self) -> Result<(), StageError> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(StageError::Interrupted)
        } else {
            Ok(())
        }
    }
}

/// A unit of forensic work.
pub trait Stage: Send + Sync {
    /// The stage's stable name (`image-hash`, `filesystem`, ...).
    fn name(&self) -> &'static str;

    /// Work the suite does before processing starts, outside the stage's
    /// time (FTK 4 keeps its KFF library in its database, loaded ahead of
    /// any case): called for every stage, in stage order, once the case
    /// database exists and before the first stage runs. What it did goes
    /// into run.json's `preparation`. Most stages have none.
    fn prepare(&self, _ctx: &StageContext<'_>) -> Result<Option<Preparation>, StageError> {
        Ok(None)
    }

    /// Do the work.
    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError>;

    /// Cut the stage into parts for a planned case's workers (a stage
    /// whose units are [`Units::Parts`]): store what each part needs
    /// through `ctx.db` and return the parts' scopes, in order. Problems
    /// found while cutting are recorded here, once, not by each part.
    /// A stage that cuts by bytes keeps a part within `max_bytes`
    /// (`caseload plan --batch-bytes`) unless one range alone is larger.
    fn split(&self, _ctx: &StageContext<'_>, _max_bytes: u64) -> Result<Vec<Scope>, StageError> {
        Err(StageError::Other(format!(
            "stage `{}` is not split into parts",
            self.name()
        )))
    }

    /// Work for after a planned case's unit has committed: removing what
    /// its parts left for it (a finish redone after a lost lease would
    /// still need them). Not called in a run. A failure here loses
    /// nothing: the worker reports it and goes on.
    fn committed(&self, _ctx: &StageContext<'_>) -> Result<(), StageError> {
        Ok(())
    }
}

/// What a stage's [`Stage::prepare`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preparation {
    /// In a few words.
    pub what: String,
    /// Figures, stage-specific.
    #[serde(default)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

/// Parse a stage's options table into its typed options, refusing unknown
/// keys (so a typo in a workload is an error, not a silent default).
pub fn parse_options<T: serde::de::DeserializeOwned>(
    stage: &str,
    options: &StageOptions,
) -> Result<T, StageError> {
    let value = toml::Value::Table(options.clone());
    value
        .try_into()
        .map_err(|e: toml::de::Error| StageError::Config {
            stage: stage.to_string(),
            message: e.to_string().trim_end().to_string(),
        })
}

/// Apply a `STAGE.KEY=VALUE` option (VALUE in TOML syntax, or a bare
/// string) to a stage list. An option for a stage that is not in the list
/// is an error: it would silently do nothing.
pub fn apply_option(stages: &mut [(String, StageOptions)], option: &str) -> Result<(), StageError> {
    let bad = |why: &str| StageError::Config {
        stage: option.split('.').next().unwrap_or_default().to_string(),
        message: format!("--stage-option `{option}`: {why}"),
    };
    let (target, value) = option
        .split_once('=')
        .ok_or_else(|| bad("expected STAGE.KEY=VALUE"))?;
    let (stage, key) = target
        .split_once('.')
        .ok_or_else(|| bad("expected STAGE.KEY=VALUE"))?;
    let entry = stages
        .iter_mut()
        .find(|(name, _)| name == stage)
        .ok_or_else(|| bad(&format!("stage `{stage}` is not being run")))?;
    entry.1.insert(key.to_string(), option_value(value));
    Ok(())
}

/// A TOML value (`true`, `3`, `["md5"]`, `"x"`), or the text as a string.
fn option_value(text: &str) -> toml::Value {
    let wrapped = format!("v = {text}");
    match wrapped.parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(text.to_string())),
        Err(_) => toml::Value::String(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_options_parse_as_toml_or_strings() {
        let mut stages = vec![
            ("image-hash".to_string(), StageOptions::new()),
            ("carve".to_string(), StageOptions::new()),
        ];
        for o in [
            "image-hash.algorithms=[\"md5\",\"sha256\"]",
            "carve.signatures=/etc/scalpel/scalpel.conf",
            "carve.aligned=false",
        ] {
            apply_option(&mut stages, o).unwrap();
        }
        assert_eq!(stages[0].1["algorithms"].as_array().unwrap().len(), 2);
        assert_eq!(
            stages[1].1["signatures"].as_str(),
            Some("/etc/scalpel/scalpel.conf")
        );
        assert_eq!(stages[1].1["aligned"].as_bool(), Some(false));
        assert!(apply_option(&mut stages, "kff.x=1").is_err());
        assert!(apply_option(&mut stages, "nodot=1").is_err());
    }
}
