//! The FTK 4 study's final tables (`study ftk4 --tiers`) and its step-3
//! memory findings (`study ftk4 --memory`), reproduced on the lab: each
//! configuration a lab (drives and processor), an image format (DD or
//! E01) and a workstation RAM, run as a comparison of its own; the totals
//! scaled to the study's 240 GB image and set beside the study's figures.
//!
//! The study's final tables (minutes, 240 GB raw image, 60 GB as E01):
//!
//! | tier | DD: RAM | DD min | E01: RAM | E01 min |
//! |---|---|---|---|---|
//! | economy | 32 GB | 1078 | 16 GB | 545 |
//! | mid-range | 64 GB | 734 | 32 GB | 464 |
//! | high-end | 64 GB | 438 | 32 GB | 323 |
//!
//! Its step 3 on memory: 16 to 32 GB "a large performance improvement";
//! DD gains from 64 GB; E01 loses slightly above 32 GB.

use crate::report::{CompareReport, Stat};
use serde::{Deserialize, Serialize};

/// The size of the study's image: a 240 GB disk (as drives are labelled).
pub const MODELLED_IMAGE_BYTES: u64 = 240_000_000_000;

/// `tiers.json`'s schema identifier.
pub const TIERS_SCHEMA: &str = "caseload-study-tables";
/// Its version.
pub const TIERS_SCHEMA_VERSION: u32 = 1;

/// An image's format as the study varied it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageKind {
    /// A raw image.
    Dd,
    /// An EWF (E01) image.
    E01,
}

impl ImageKind {
    /// As the study writes it.
    pub fn label(self) -> &'static str {
        match self {
            ImageKind::Dd => "DD",
            ImageKind::E01 => "E01",
        }
    }
}

/// One configuration of a study table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableConfig {
    /// The row (a tier, or a RAM size).
    pub row: &'static str,
    /// The image format.
    pub kind: ImageKind,
    /// The built-in lab (drives and processor).
    pub lab: &'static str,
    /// The workstation's RAM, GiB.
    pub ram_gib: u64,
    /// The study's minutes, where it published them.
    pub study_minutes: Option<f64>,
}

/// The final tables' six configurations, economy first.
pub const FTK4_TIERS: &[TableConfig] = &[
    TableConfig {
        row: "economy",
        kind: ImageKind::Dd,
        lab: "ftk4-tier-economy",
        ram_gib: 32,
        study_minutes: Some(1078.0),
    },
    TableConfig {
        row: "economy",
        kind: ImageKind::E01,
        lab: "ftk4-tier-economy",
        ram_gib: 16,
        study_minutes: Some(545.0),
    },
    TableConfig {
        row: "mid-range",
        kind: ImageKind::Dd,
        lab: "ftk4-tier-mid-dd",
        ram_gib: 64,
        study_minutes: Some(734.0),
    },
    TableConfig {
        row: "mid-range",
        kind: ImageKind::E01,
        lab: "ftk4-tier-mid-e01",
        ram_gib: 32,
        study_minutes: Some(464.0),
    },
    TableConfig {
        row: "high-end",
        kind: ImageKind::Dd,
        lab: "ftk4-tier-high-end",
        ram_gib: 64,
        study_minutes: Some(438.0),
    },
    TableConfig {
        row: "high-end",
        kind: ImageKind::E01,
        lab: "ftk4-tier-high-end",
        ram_gib: 32,
        study_minutes: Some(323.0),
    },
];

/// Step 3's memory matrix: 16, 32 and 64 GB on the base configuration.
pub const FTK4_MEMORY: &[TableConfig] = &[
    memory(16, ImageKind::Dd),
    memory(32, ImageKind::Dd),
    memory(64, ImageKind::Dd),
    memory(16, ImageKind::E01),
    memory(32, ImageKind::E01),
    memory(64, ImageKind::E01),
];

const fn memory(ram_gib: u64, kind: ImageKind) -> TableConfig {
    TableConfig {
        row: match ram_gib {
            16 => "16 GB",
            32 => "32 GB",
            _ => "64 GB",
        },
        kind,
        lab: "ftk4-tier-base",
        ram_gib,
        study_minutes: None,
    }
}

/// What the study found on memory, for the matrix's report.
pub const STUDY_MEMORY_FINDINGS: &[&str] = &[
    "16 GB to 32 GB: \"an increase from 16GB to 32GB of memory improves performance\", \"a large performance improvement\" (DD and E01)",
    "DD gains from 64 GB",
    "E01: slightly detrimental above 32 GB",
];

/// One configuration's comparison, as run.
#[derive(Debug, Clone)]
pub struct TablePart {
    /// The configuration.
    pub config: TableConfig,
    /// Where its comparison was written, relative to the study's directory.
    pub dir: String,
    /// Its comparison (one evidence file, one lab).
    pub report: CompareReport,
}

/// One configuration's row of the report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableRow {
    /// The row (tier or RAM).
    pub row: String,
    /// Image format.
    pub kind: ImageKind,
    /// The lab.
    pub lab: String,
    /// The workstation's RAM, bytes.
    pub ram_bytes: u64,
    /// Its comparison's directory.
    pub dir: String,
    /// Runs made and completed.
    pub runs: usize,
    /// Of those, completed.
    pub runs_completed: usize,
    /// Seconds in stages over the completed runs.
    pub total_seconds: Option<Stat>,
    /// The median scaled to the study's image, minutes.
    pub modelled_minutes: Option<f64>,
    /// Median over the first row's of the same format (tiers: economy;
    /// memory: 16 GB).
    pub ratio: Option<f64>,
    /// The study's minutes, where published.
    pub study_minutes: Option<f64>,
    /// The study's ratio, where published.
    pub study_ratio: Option<f64>,
    /// |ratio / study ratio - 1|, where both are known.
    pub ratio_error: Option<f64>,
    /// Median seconds per stage.
    pub stages: Vec<(String, f64)>,
}

/// E01 against DD in one row of the table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FormatRatio {
    /// The row.
    pub row: String,
    /// caseload's E01 median over its DD median.
    pub ratio: Option<f64>,
    /// The study's.
    pub study_ratio: Option<f64>,
    /// |ratio / study ratio - 1|.
    pub ratio_error: Option<f64>,
}

/// `tiers.json` / `memory.json`: a study table reproduced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableReport {
    /// Always [`TIERS_SCHEMA`].
    pub schema: String,
    /// [`TIERS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `tiers` or `memory`.
    pub table: String,
    /// The study's image, bytes.
    pub modelled_image_bytes: u64,
    /// The run's evidence (media size), bytes.
    pub evidence_bytes: u64,
    /// Configurations in the study's order.
    pub rows: Vec<TableRow>,
    /// E01 over DD per row.
    pub e01_over_dd: Vec<FormatRatio>,
    /// How the figures were made, for a reader.
    pub method: String,
    /// The study's findings this table is read against.
    pub findings: Vec<String>,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn error(got: Option<f64>, want: Option<f64>) -> Option<f64> {
    ratio(got, want).map(|r| (r - 1.0).abs())
}

/// The table from its configurations' comparisons (`table`: `tiers` or
/// `memory`), on evidence of `evidence_bytes`.
pub fn table_report(table: &str, parts: &[TablePart], evidence_bytes: u64) -> TableReport {
    let scale = MODELLED_IMAGE_BYTES as f64 / evidence_bytes.max(1) as f64;
    let mut rows: Vec<TableRow> = parts
        .iter()
        .map(|p| {
            let s = p.report.summary.first();
            let total = s.and_then(|s| s.total_seconds);
            TableRow {
                row: p.config.row.to_string(),
                kind: p.config.kind,
                lab: p.config.lab.to_string(),
                ram_bytes: p.config.ram_gib << 30,
                dir: p.dir.clone(),
                runs: s.map_or(0, |s| s.runs),
                runs_completed: s.map_or(0, |s| s.runs_completed),
                total_seconds: total,
                modelled_minutes: total.map(|t| t.median * scale / 60.0),
                ratio: None,
                study_minutes: p.config.study_minutes,
                study_ratio: None,
                ratio_error: None,
                stages: s.map_or_else(Vec::new, |s| {
                    s.stages
                        .iter()
                        .map(|st| (st.name.clone(), st.wall_seconds.median))
                        .collect()
                }),
            }
        })
        .collect();
    for kind in [ImageKind::Dd, ImageKind::E01] {
        let base = rows
            .iter()
            .find(|r| r.kind == kind)
            .map(|r| (r.total_seconds.map(|t| t.median), r.study_minutes));
        let Some((base, study_base)) = base else {
            continue;
        };
        for r in rows.iter_mut().filter(|r| r.kind == kind) {
            r.ratio = ratio(r.total_seconds.map(|t| t.median), base);
            r.study_ratio = ratio(r.study_minutes, study_base);
            r.ratio_error = error(r.ratio, r.study_ratio);
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for r in &rows {
        if !names.contains(&r.row.as_str()) {
            names.push(&r.row);
        }
    }
    let e01_over_dd = names
        .iter()
        .map(|name| {
            let of = |k| rows.iter().find(|r| r.row == *name && r.kind == k);
            let (dd, e01) = (of(ImageKind::Dd), of(ImageKind::E01));
            let got = ratio(
                e01.and_then(|r| r.total_seconds.map(|t| t.median)),
                dd.and_then(|r| r.total_seconds.map(|t| t.median)),
            );
            let want = ratio(
                e01.and_then(|r| r.study_minutes),
                dd.and_then(|r| r.study_minutes),
            );
            FormatRatio {
                row: name.to_string(),
                ratio: got,
                study_ratio: want,
                ratio_error: error(got, want),
            }
        })
        .collect();
    TableReport {
        schema: TIERS_SCHEMA.into(),
        schema_version: TIERS_SCHEMA_VERSION,
        table: table.to_string(),
        modelled_image_bytes: MODELLED_IMAGE_BYTES,
        evidence_bytes,
        rows,
        e01_over_dd,
        method: format!(
            "each configuration a comparison of its own on its lab (drives and processor, docs/lab.md), the workstation's RAM given with --scale-from {MODELLED_IMAGE_BYTES} (the study's 240 GB image); totals are the median seconds in stages, scaled to the study's image by {scale:.1} (its size over the evidence's media size); ratios within each format against the first row"
        ),
        findings: if table == "memory" {
            STUDY_MEMORY_FINDINGS
                .iter()
                .map(|s| s.to_string())
                .collect()
        } else {
            vec![
                "the study's final tables: DD 1078, 734, 438 minutes; E01 545, 464, 323 minutes (economy, mid-range, high-end)".into(),
            ]
        },
    }
}

fn cell(v: Option<f64>, precision: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.precision$}"))
}

/// The table for a terminal.
pub fn render_table_text(t: &TableReport) -> String {
    let mut out = format!(
        "{:<10} {:<4} {:>6} {:<20} {:>9} {:>9} {:>7} {:>9} {:>7} {:>6}\n",
        "row", "fmt", "RAM", "lab", "median s", "minutes", "ratio", "study min", "study", "error"
    );
    for r in &t.rows {
        out.push_str(&format!(
            "{:<10} {:<4} {:>6} {:<20} {:>9} {:>9} {:>7} {:>9} {:>7} {:>6}\n",
            r.row,
            r.kind.label(),
            format!("{}GB", r.ram_bytes >> 30),
            r.lab,
            cell(r.total_seconds.map(|t| t.median), 2),
            cell(r.modelled_minutes, 0),
            cell(r.ratio, 2),
            cell(r.study_minutes, 0),
            cell(r.study_ratio, 2),
            r.ratio_error
                .map_or("-".into(), |e| format!("{:.0}%", e * 100.0)),
        ));
    }
    for f in &t.e01_over_dd {
        out.push_str(&format!(
            "E01/DD {:<10} caseload {} study {} error {}\n",
            f.row,
            cell(f.ratio, 2),
            cell(f.study_ratio, 2),
            f.ratio_error
                .map_or("-".into(), |e| format!("{:.0}%", e * 100.0)),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(config: TableConfig, seconds: f64) -> TablePart {
        let text = include_str!("../tests/data/compare-two-evidence.json");
        let mut report: CompareReport = serde_json::from_str(text).unwrap();
        for s in &mut report.summary {
            s.total_seconds = Some(Stat {
                median: seconds,
                min: seconds,
                max: seconds,
            });
        }
        TablePart {
            config,
            dir: format!("tables/{}", config.lab),
            report,
        }
    }

    #[test]
    fn totals_become_minutes_and_ratios_beside_the_studys() {
        // Seconds proportional to the study's minutes: every ratio matches.
        let parts: Vec<TablePart> = FTK4_TIERS
            .iter()
            .map(|c| part(*c, c.study_minutes.unwrap() / 10.0))
            .collect();
        let t = table_report("tiers", &parts, 2 << 30);
        assert_eq!(t.rows.len(), 6);
        let economy = &t.rows[0];
        assert_eq!(economy.ratio, Some(1.0));
        let scale = MODELLED_IMAGE_BYTES as f64 / (2u64 << 30) as f64;
        let minutes = economy.modelled_minutes.unwrap();
        assert!((minutes - 107.8 * scale / 60.0).abs() < 1e-6, "{minutes}");
        let high = &t.rows[4];
        assert!((high.study_ratio.unwrap() - 438.0 / 1078.0).abs() < 1e-12);
        assert!(high.ratio_error.unwrap() < 1e-9);
        assert_eq!(t.e01_over_dd.len(), 3);
        let e = &t.e01_over_dd[0];
        assert!((e.study_ratio.unwrap() - 545.0 / 1078.0).abs() < 1e-12);
        assert!(e.ratio_error.unwrap() < 1e-9);
        let text = render_table_text(&t);
        assert!(text.contains("high-end"), "{text}");
        // Twice as slow as the study says: a 100% error.
        let mut parts = parts;
        parts[4] = part(FTK4_TIERS[4], 2.0 * 43.8);
        let t = table_report("tiers", &parts, 2 << 30);
        assert!((t.rows[4].ratio_error.unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_memory_matrix_has_no_published_minutes() {
        let parts: Vec<TablePart> = FTK4_MEMORY.iter().map(|c| part(*c, 10.0)).collect();
        let t = table_report("memory", &parts, 1 << 30);
        assert!(t.rows.iter().all(|r| r.study_ratio.is_none()));
        assert_eq!(t.rows[1].ratio, Some(1.0));
        assert_eq!(t.findings.len(), 3);
    }
}
