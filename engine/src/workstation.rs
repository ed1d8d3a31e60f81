//! The modelled workstation's memory (`--ram`, `--scale-from`): how much
//! of it the operating system, the suite's own processes and the database
//! server's buffers take, what is left for the page cache, and the
//! database server's memory settings that follow from it. Pure arithmetic
//! with its sources; [`crate::cache::model`] puts the cache budget into
//! effect and [`crate::run`] records the plan in run.json.
//!
//! A workstation of RAM `R` running a suite with `T` worker threads:
//!
//! | part | bytes | source |
//! |---|---|---|
//! | operating system | 2 GiB | Windows 7 x64 (the FTK study's workstations): Microsoft's requirement for 64-bit, "2 GB RAM (64-bit)" |
//! | the suite's processes (ftk4) | 2 GiB + 1 GiB per hardware thread | AccessData's FTK System Specifications Guide (Feb 2011): "a minimum of 8GB for a Quad core CPU, a minimum of 12 GB for an i7" (4 and 8 hardware threads): with the operating system's 2 GiB, 2 GiB for FTK's interface and services and 1 GiB per processing thread fits both |
//! | the suite's processes (native, autopsy) | 128 MiB + 64 MiB per worker thread | caseload's own peak resident memory (`benches/scripts/scale.sh`: 211 MiB at 2 threads, 937 MiB at 16 threads on 16 GiB) |
//! | database buffers (PostgreSQL) | 25% of what is left | PostgreSQL's documentation (`shared_buffers`): "a reasonable starting value for shared_buffers is 25% of the memory in your system", for a dedicated server; on a workstation the server's share is what the system and the suite leave |
//! | page cache | the rest | |
//!
//! With `--scale-from S` (the size of the evidence being modelled, e.g.
//! the study's 240 GB disk) every part is multiplied by evidence size / S:
//! a 2 GiB corpus stands in for a 240 GB disk on a machine smaller in the
//! same proportion, so the share of the evidence, the database and the
//! index that fits in memory is the modelled machine's.
//!
//! PostgreSQL's settings follow (FTK 4's own PostgreSQL configuration is
//! not published; AccessData's guides give only RAM totals): `shared_buffers`
//! as above; `effective_cache_size` the page cache plus `shared_buffers`
//! (the documentation's "effective size of the disk cache that is
//! available to a single query"); `work_mem` and `maintenance_work_mem`
//! PostgreSQL's defaults (4 MB, 64 MB), scaled with the machine so that a
//! sort that spills on the modelled case spills on the corpus (at least
//! PostgreSQL's minimums, 64 kB and 1 MB). A `--pg-setting` of one of
//! them wins over the model, and run.json says so.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The operating system's part of RAM.
pub const OPERATING_SYSTEM: u64 = 2 << 30;
/// FTK's interface and services.
const FTK_BASE: u64 = 2 << 30;
/// FTK's processing engine, per hardware thread.
const FTK_PER_THREAD: u64 = 1 << 30;
/// caseload's own base resident memory.
const CASELOAD_BASE: u64 = 128 << 20;
/// caseload's own resident memory per worker thread.
const CASELOAD_PER_THREAD: u64 = 64 << 20;
/// What the database server and the page cache must at least get.
const MIN_LEFT: u64 = 1 << 30;
/// PostgreSQL's minimum `work_mem` (64 kB) and `maintenance_work_mem` (1 MB).
const PG_MIN_WORK_MEM: u64 = 64 << 10;
const PG_MIN_MAINTENANCE_WORK_MEM: u64 = 1 << 20;
/// PostgreSQL's defaults.
const PG_WORK_MEM: u64 = 4 << 20;
const PG_MAINTENANCE_WORK_MEM: u64 = 64 << 20;
/// The smallest shared_buffers PostgreSQL starts with (16 buffers of 8 KiB
/// would do; 1 MiB keeps a little room for its own work).
const PG_MIN_SHARED_BUFFERS: u64 = 1 << 20;
/// The memory settings a workstation plan sets.
pub const PG_MEMORY_SETTINGS: &[&str] = &[
    "shared_buffers",
    "effective_cache_size",
    "work_mem",
    "maintenance_work_mem",
];

/// The sources of the figures above, for run.json.
pub const SOURCES: &[&str] = &[
    "operating system: Windows 7 x64 system requirements (Microsoft): 2 GB RAM (64-bit)",
    "FTK: AccessData Forensic Toolkit System Specifications Guide (February 2011): a minimum of 8 GB for a quad-core CPU, 12 GB for an i7",
    "caseload: peak resident memory measured by benches/scripts/scale.sh (211 MiB at 2 threads, 937 MiB at 16 threads)",
    "PostgreSQL documentation, shared_buffers: 25% of the memory of a dedicated server as a starting value; effective_cache_size: the disk cache available to a query; work_mem 4 MB and maintenance_work_mem 64 MB by default",
];

/// What the user asked the workstation to be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkstationSpec {
    /// The workstation's RAM, bytes.
    pub ram: u64,
    /// The size of the evidence being modelled, bytes (`--scale-from`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_from: Option<u64>,
    /// Hardware threads of the modelled processor, when it is named (a
    /// lab's processor); else the run's worker threads stand for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processor_threads: Option<usize>,
}

/// Whose processes the suite's part of RAM is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// FTK 4's interface, services and processing engine.
    Ftk,
    /// caseload itself.
    Caseload,
}

/// How the modelled evidence relates to the run's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scale {
    /// The evidence being modelled, bytes.
    pub modelled_evidence_bytes: u64,
    /// The run's evidence (its media size), bytes.
    pub evidence_bytes: u64,
    /// evidence / modelled.
    pub factor: f64,
}

/// The workstation's memory, part by part, at its own size and as
/// modelled on this run (scaled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryPlan {
    /// The workstation's RAM.
    pub ram_bytes: u64,
    /// The scale, with `--scale-from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<Scale>,
    /// The operating system's part.
    pub operating_system_bytes: u64,
    /// Whose the suite's part is.
    pub suite: Suite,
    /// The threads it was counted for.
    pub suite_threads: usize,
    /// The suite's processes' part.
    pub suite_bytes: u64,
    /// The database server's buffers (PostgreSQL `shared_buffers`; 0 for
    /// SQLite, whose cache is in caseload's own part).
    pub database_buffers_bytes: u64,
    /// What is left for the page cache.
    pub cache_bytes: u64,
    /// The page cache as modelled on this run (scaled): the model's budget.
    pub cache_budget_bytes: u64,
    /// The database buffers as modelled on this run (scaled).
    pub modelled_database_buffers_bytes: u64,
    /// The database server's memory settings that follow (PostgreSQL).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub database_settings: BTreeMap<String, String>,
    /// Where a setting came from otherwise (a `--pg-setting` that wins).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The figures' sources.
    pub sources: Vec<String>,
}

/// A workstation that cannot be modelled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkstationError {
    /// RAM below what the system and the suite take.
    #[error(
        "--ram {ram} is below what this workstation needs: {breakdown}; give at least {minimum}"
    )]
    TooLittleRam {
        /// The RAM given, for people.
        ram: String,
        /// What takes it.
        breakdown: String,
        /// The least RAM that works, for people.
        minimum: String,
    },
    /// The modelled evidence is smaller than the run's.
    #[error(
        "--scale-from {modelled} is smaller than the evidence ({evidence}): a run models a larger disk on a proportionally smaller machine, not a smaller one"
    )]
    ScaleBelowEvidence {
        /// The modelled size, for people.
        modelled: String,
        /// The evidence's size, for people.
        evidence: String,
    },
    /// The case database is on a server of its own (`--db-url`).
    #[error(
        "--ram models the workstation's memory, its database server's included; an external server (--db-url) has memory of its own: use a private cluster (no --db-url)"
    )]
    ExternalServer,
    /// A `--pg-setting` asks for more buffers than the workstation has.
    #[error(
        "--pg-setting shared_buffers={value} is more than the modelled workstation has for its database and cache ({left})"
    )]
    BuffersTooLarge {
        /// The setting.
        value: String,
        /// What is left, for people.
        left: String,
    },
}

/// A size for people, binary units.
pub fn human(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if bytes >= size {
            let v = bytes as f64 / size as f64;
            return if v >= 100.0 || (v - v.round()).abs() < 0.05 {
                format!("{v:.0} {unit}")
            } else {
                format!("{v:.1} {unit}")
            };
        }
    }
    format!("{bytes} B")
}

/// A minimum for people: GiB with one decimal, rounded up (a user given
/// the figure must meet it).
fn human_up(bytes: u64) -> String {
    let tenths = (bytes * 10).div_ceil(1 << 30);
    format!("{}.{} GiB", tenths / 10, tenths % 10)
}

/// A memory size as people write it: `32GB` is 32 GiB, as memory is sold
/// (JEDEC), whatever the unit's case; other sizes as [`crate::units`].
pub fn parse_memory_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let fixed = ["kB", "KB", "MB", "GB", "TB"].iter().find_map(|u| {
        t.strip_suffix(u)
            .map(|n| format!("{n}{}", &u[..1].to_uppercase()))
    });
    crate::units::parse_size(fixed.as_deref().unwrap_or(t))
}

/// A PostgreSQL memory setting's value in bytes (`128MB`, `4GB`, `64kB`,
/// a bare number of 8 KiB blocks for `shared_buffers` and
/// `effective_cache_size`, of kB for the others).
fn pg_bytes(name: &str, value: &str) -> Option<u64> {
    let v = value.trim();
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let n: u64 = v[..digits].parse().ok()?;
    let unit = match v[digits..].trim() {
        "" if matches!(name, "shared_buffers" | "effective_cache_size") => 8 << 10,
        "" | "kB" => 1 << 10,
        "B" => 1,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        _ => return None,
    };
    n.checked_mul(unit)
}

/// A byte count as a PostgreSQL setting (in kB, which every memory
/// setting takes).
fn pg_value(bytes: u64) -> String {
    format!("{}kB", (bytes >> 10).max(1))
}

impl WorkstationSpec {
    /// The plan for a run on evidence of `evidence_bytes` with `threads`
    /// worker threads, the suite `suite`, the case database on PostgreSQL
    /// when `postgres`, and the server settings the user gave (`given`:
    /// they win over the model's).
    pub fn plan(
        &self,
        evidence_bytes: u64,
        threads: usize,
        suite: Suite,
        postgres: bool,
        given: &BTreeMap<String, String>,
    ) -> Result<MemoryPlan, WorkstationError> {
        let scale = match self.scale_from {
            Some(from) if from < evidence_bytes => {
                return Err(WorkstationError::ScaleBelowEvidence {
                    modelled: human(from),
                    evidence: human(evidence_bytes),
                });
            }
            Some(from) => Some(Scale {
                modelled_evidence_bytes: from,
                evidence_bytes,
                factor: evidence_bytes as f64 / from as f64,
            }),
            None => None,
        };
        let factor = scale.map_or(1.0, |s| s.factor);
        let scaled = |b: u64| (b as f64 * factor) as u64;
        let suite_threads = self.processor_threads.unwrap_or(threads).max(1);
        let t = suite_threads as u64;
        let (suite_bytes, suite_words) = match suite {
            Suite::Ftk => (
                FTK_BASE + FTK_PER_THREAD * t,
                format!(
                    "{} for FTK's interface and services and {} for its processing engine ({} per thread, {suite_threads} threads)",
                    human(FTK_BASE),
                    human(FTK_PER_THREAD * t),
                    human(FTK_PER_THREAD)
                ),
            ),
            Suite::Caseload => (
                CASELOAD_BASE + CASELOAD_PER_THREAD * t,
                format!(
                    "{} for caseload ({} and {} per thread, {suite_threads} threads)",
                    human(CASELOAD_BASE + CASELOAD_PER_THREAD * t),
                    human(CASELOAD_BASE),
                    human(CASELOAD_PER_THREAD)
                ),
            ),
        };
        let taken = OPERATING_SYSTEM + suite_bytes;
        if self.ram < taken + MIN_LEFT {
            return Err(WorkstationError::TooLittleRam {
                ram: human(self.ram),
                breakdown: format!(
                    "{} for the operating system, {suite_words}, and at least {} for the database server and the page cache",
                    human(OPERATING_SYSTEM),
                    human(MIN_LEFT)
                ),
                minimum: human_up(taken + MIN_LEFT),
            });
        }
        let left = self.ram - taken;
        let mut notes = Vec::new();
        let mut settings = BTreeMap::new();
        let buffers = if postgres {
            let model = (left / 4).max(PG_MIN_SHARED_BUFFERS);
            match given.get("shared_buffers") {
                Some(v) => {
                    let b = pg_bytes("shared_buffers", v).unwrap_or(model);
                    // The user's value is for this run's server: compare
                    // it with the scaled share.
                    if b >= scaled(left) {
                        return Err(WorkstationError::BuffersTooLarge {
                            value: v.clone(),
                            left: human(scaled(left)),
                        });
                    }
                    notes.push(format!(
                        "shared_buffers: --pg-setting {v} wins over the modelled {}",
                        pg_value(scaled(model).max(PG_MIN_SHARED_BUFFERS))
                    ));
                    // Back at the workstation's own size.
                    (b as f64 / factor) as u64
                }
                None => model,
            }
        } else {
            0
        };
        let cache = left - buffers;
        let modelled_buffers = if postgres {
            scaled(buffers).max(PG_MIN_SHARED_BUFFERS)
        } else {
            0
        };
        let budget = scaled(cache).max(super::cache::model::PAGE);
        if postgres {
            let model: [(&str, u64); 4] = [
                ("shared_buffers", modelled_buffers),
                ("effective_cache_size", budget + modelled_buffers),
                ("work_mem", scaled(PG_WORK_MEM).max(PG_MIN_WORK_MEM)),
                (
                    "maintenance_work_mem",
                    scaled(PG_MAINTENANCE_WORK_MEM).max(PG_MIN_MAINTENANCE_WORK_MEM),
                ),
            ];
            for (name, bytes) in model {
                match given.get(name) {
                    Some(v) if name != "shared_buffers" => notes.push(format!(
                        "{name}: --pg-setting {v} wins over the modelled {}",
                        pg_value(bytes)
                    )),
                    Some(_) => {}
                    None => {
                        settings.insert(name.to_string(), pg_value(bytes));
                    }
                }
            }
        }
        Ok(MemoryPlan {
            ram_bytes: self.ram,
            scale,
            operating_system_bytes: OPERATING_SYSTEM,
            suite,
            suite_threads,
            suite_bytes,
            database_buffers_bytes: buffers,
            cache_bytes: cache,
            cache_budget_bytes: budget,
            modelled_database_buffers_bytes: modelled_buffers,
            database_settings: settings,
            notes,
            sources: SOURCES.iter().map(|s| s.to_string()).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn ram_is_parsed_as_memory_is_sold() {
        assert_eq!(parse_memory_size("32GB"), Ok(32 * GIB));
        assert_eq!(parse_memory_size("32GiB"), Ok(32 * GIB));
        assert_eq!(parse_memory_size("512MB"), Ok(512 << 20));
        assert!(parse_memory_size("lots").is_err());
    }

    #[test]
    fn a_study_workstation_is_split_and_scaled() {
        let spec = WorkstationSpec {
            ram: 32 * GIB,
            scale_from: Some(240_000_000_000),
            processor_threads: Some(8),
        };
        let p = spec
            .plan(2 * GIB, 2, Suite::Ftk, true, &BTreeMap::new())
            .unwrap();
        // 2 GiB system + 2 GiB + 8 x 1 GiB FTK = 12 GiB; 20 GiB left.
        assert_eq!(p.suite_bytes, 10 * GIB);
        assert_eq!(p.database_buffers_bytes, 5 * GIB);
        assert_eq!(p.cache_bytes, 15 * GIB);
        let f = 2.0 * GIB as f64 / 240e9;
        assert!((p.scale.unwrap().factor - f).abs() < 1e-12);
        assert_eq!(p.cache_budget_bytes, (15.0 * GIB as f64 * f) as u64);
        assert_eq!(
            p.database_settings["shared_buffers"],
            pg_value((5.0 * GIB as f64 * f) as u64)
        );
        assert_eq!(p.database_settings["work_mem"], "64kB");
        assert!(p.notes.is_empty());
    }

    #[test]
    fn bad_workstations_are_refused_with_the_minimum() {
        let spec = |ram, from| WorkstationSpec {
            ram,
            scale_from: from,
            processor_threads: Some(8),
        };
        let e = spec(8 * GIB, None)
            .plan(GIB, 2, Suite::Ftk, true, &BTreeMap::new())
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("give at least 13.0 GiB"), "{text}");
        assert!(text.contains("8 threads"), "{text}");
        let e = spec(64 * GIB, Some(GIB))
            .plan(2 * GIB, 2, Suite::Ftk, true, &BTreeMap::new())
            .unwrap_err();
        assert!(
            matches!(e, WorkstationError::ScaleBelowEvidence { .. }),
            "{e}"
        );
        // caseload itself needs far less.
        let p = spec(4 * GIB, None)
            .plan(GIB, 2, Suite::Caseload, false, &BTreeMap::new())
            .unwrap();
        assert_eq!(p.database_buffers_bytes, 0);
        assert!(p.database_settings.is_empty());
    }

    #[test]
    fn a_pg_setting_wins_and_is_said_to() {
        let spec = WorkstationSpec {
            ram: 64 * GIB,
            scale_from: None,
            processor_threads: None,
        };
        let given: BTreeMap<String, String> = [
            ("shared_buffers".to_string(), "2GB".to_string()),
            ("work_mem".to_string(), "16MB".to_string()),
        ]
        .into();
        let p = spec.plan(GIB, 4, Suite::Ftk, true, &given).unwrap();
        assert!(!p.database_settings.contains_key("shared_buffers"));
        assert!(!p.database_settings.contains_key("work_mem"));
        assert_eq!(p.database_buffers_bytes, 2 * GIB);
        assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
        assert!(p.notes[0].contains("wins"));
        let huge: BTreeMap<String, String> =
            [("shared_buffers".to_string(), "60GB".to_string())].into();
        assert!(matches!(
            spec.plan(GIB, 4, Suite::Ftk, true, &huge),
            Err(WorkstationError::BuffersTooLarge { .. })
        ));
    }
}
