//! A study: one comparison per lab (each lab is brought up, compared on,
//! and taken down before the next, so only one set of modelled devices
//! holds memory at a time), merged into one comparison report whose
//! configurations are every evidence file on every lab, with ratios to the
//! study's base lab. `caseload study ftk4` runs the FTK 4 study's
//! configurations this way.

use crate::report::{self, CompareReport, Configuration, RunRecord};

/// The FTK 4 study's configurations as built-in labs, base system first:
/// step 4's base, SSD database, PCIe database, RAID-5 evidence+case, SSD
/// O/S+temp and the high-end combination, then step 2's five channels
/// (compared with the consolidated three of the base).
pub const FTK4_LABS: &[&str] = &[
    "ftk4-base",
    "ftk4-ssd-db",
    "ftk4-pcie-db",
    "ftk4-raid5-data",
    "ftk4-ssd-system",
    "ftk4-high-end",
    "ftk4-five-channel",
];

/// The encryption study's configurations: the FTK 4 base system (three
/// channels, every drive a 7200 rpm disk), then each of its three devices
/// (database, evidence+case, O/S+temp) behind the LUKS-like layer, then
/// each a self-encrypting drive, then evidence+case on a 1 GbE NAS.
pub const ENCRYPTION_LABS: &[&str] = &[
    "ftk4-base",
    "enc-luks-database",
    "enc-luks-data",
    "enc-luks-system",
    "enc-sed-database",
    "enc-sed-data",
    "enc-sed-system",
    "enc-nas-data",
];

/// Errors merging comparisons.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// Nothing to merge.
    #[error("no lab's comparison to merge")]
    Empty,
    /// A comparison does not have the shape a study's part has.
    #[error("the comparison of lab `{lab}` {reason}")]
    Shape {
        /// The lab.
        lab: String,
        /// What is wrong.
        reason: String,
    },
}

/// One lab's comparison: the lab's name, where its comparison was written
/// (relative to the study's directory), and the report.
#[derive(Debug, Clone)]
pub struct LabPart {
    /// Lab name.
    pub lab: String,
    /// The comparison's directory, relative to the study's.
    pub dir: String,
    /// Its report.
    pub report: CompareReport,
}

/// Merge the labs' comparisons (each: the same evidence files, in the same
/// order, on one layout, the lab's) into one report: configuration
/// `EVIDENCE@LAB` for every evidence file and lab, evidence-major as
/// `compare` numbers them; every run with its report paths made relative
/// to the study's directory; ratios against `baseline_lab` with the first
/// evidence file (or the first lab when it is absent).
pub fn merge(
    parts: &[LabPart],
    baseline_lab: &str,
    command: Vec<String>,
) -> Result<CompareReport, StudyError> {
    let first = parts.first().ok_or(StudyError::Empty)?;
    let evidence_labels: Vec<&str> = first
        .report
        .evidence
        .iter()
        .map(|e| e.label.as_str())
        .collect();
    for p in parts {
        let shape = |reason: &str| StudyError::Shape {
            lab: p.lab.clone(),
            reason: reason.into(),
        };
        if p.report.layouts.len() != 1 {
            return Err(shape("is not on exactly one layout"));
        }
        let labels: Vec<&str> = p.report.evidence.iter().map(|e| e.label.as_str()).collect();
        if labels != evidence_labels {
            return Err(shape("has other evidence files than the first lab's"));
        }
        if p.report.workload.stages != first.report.workload.stages {
            return Err(shape("ran other stages than the first lab's"));
        }
    }
    let labs = parts.len();
    let mut configurations = Vec::new();
    for (e, ev) in evidence_labels.iter().enumerate() {
        for (l, p) in parts.iter().enumerate() {
            configurations.push(Configuration {
                index: e * labs + l,
                label: format!("{ev}@{}", p.lab),
                evidence: e,
                layout: l,
            });
        }
    }
    let mut runs: Vec<RunRecord> = Vec::new();
    for (l, p) in parts.iter().enumerate() {
        for r in &p.report.runs {
            let Some(c) = p.report.configurations.get(r.configuration) else {
                return Err(StudyError::Shape {
                    lab: p.lab.clone(),
                    reason: format!(
                        "has a run of configuration {}, which it lacks",
                        r.configuration
                    ),
                });
            };
            let mut run = r.clone();
            run.configuration = c.evidence * labs + l;
            run.sequence = runs.len() + 1;
            let rebase = |path: &Option<String>| path.as_ref().map(|f| format!("{}/{f}", p.dir));
            run.report = rebase(&r.report);
            run.stderr = rebase(&r.stderr);
            runs.push(run);
        }
    }
    let baseline = parts
        .iter()
        .position(|p| p.lab == baseline_lab)
        .unwrap_or(0);
    let layouts = parts
        .iter()
        .map(|p| {
            let mut l = p.report.layouts[0].clone();
            l.label = p.lab.clone();
            l
        })
        .collect();
    let status = if parts.iter().any(|p| p.report.status == "interrupted") {
        "interrupted"
    } else if parts.iter().all(|p| p.report.status == "completed") {
        "completed"
    } else {
        "completed-with-failures"
    };
    let stages = first.report.workload.stages.clone();
    let summary = report::summarize(&configurations, &runs, &stages, baseline);
    Ok(CompareReport {
        status: status.into(),
        finished_at: parts.last().and_then(|p| p.report.finished_at.clone()),
        command,
        baseline,
        layouts,
        configurations,
        runs,
        summary,
        ..first.report.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(lab: &str, seconds: &[f64]) -> LabPart {
        let text = include_str!("../tests/data/compare-two-evidence.json");
        let mut report: CompareReport = serde_json::from_str(text).unwrap();
        report.layouts.truncate(1);
        report.configurations = (0..report.evidence.len())
            .map(|e| Configuration {
                index: e,
                label: format!("{}@x", report.evidence[e].label),
                evidence: e,
                layout: 0,
            })
            .collect();
        report
            .runs
            .retain(|r| r.configuration < report.configurations.len());
        for (r, s) in report.runs.iter_mut().zip(seconds.iter().cycle()) {
            for st in &mut r.stages {
                st.wall_seconds = *s;
            }
        }
        LabPart {
            lab: lab.into(),
            dir: format!("labs/{lab}"),
            report,
        }
    }

    #[test]
    fn labs_become_configurations_with_ratios_to_the_base() {
        let parts = vec![part("slow", &[2.0]), part("base", &[4.0])];
        let m = merge(&parts, "base", vec!["caseload".into()]).unwrap();
        let n_ev = m.evidence.len();
        assert_eq!(m.configurations.len(), 2 * n_ev);
        assert_eq!(m.layouts[1].label, "base");
        assert_eq!(
            m.configurations[1].label,
            format!("{}@base", m.evidence[0].label)
        );
        assert_eq!(m.baseline, 1);
        let slow = &m.summary[0];
        let ratio = slow.total_ratio.unwrap();
        assert!((ratio - 0.5).abs() < 1e-9, "{ratio}");
        assert!(
            m.runs
                .iter()
                .all(|r| r.report.as_deref().is_none_or(|p| p.starts_with("labs/")))
        );
        let seqs: Vec<usize> = m.runs.iter().map(|r| r.sequence).collect();
        assert_eq!(seqs, (1..=m.runs.len()).collect::<Vec<_>>());
    }

    #[test]
    fn parts_that_do_not_fit_are_refused() {
        assert!(matches!(merge(&[], "base", vec![]), Err(StudyError::Empty)));
        let mut odd = part("odd", &[1.0]);
        odd.report.evidence.pop();
        let e = merge(&[part("base", &[1.0]), odd], "base", vec![]).unwrap_err();
        assert!(e.to_string().contains("odd"), "{e}");
    }
}
