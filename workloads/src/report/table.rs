//! The terminal table: per configuration the total, then per stage and
//! configuration the median wall time with its range, the ratio against the
//! baseline, throughput, CPU, the binding channel and blocked time per
//! channel; then every run that did not complete.

use super::{CompareReport, Stat};
use caseload_engine::channel::ChannelKind;

/// Left- or right-aligned cells padded to the widest in each column.
pub(crate) fn layout_columns(rows: &[Vec<String>], left: &[usize]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; cols];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            if left.contains(&i) {
                line.push_str(&format!("{cell:<w$}"));
            } else {
                line.push_str(&format!("{cell:>w$}"));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Seconds with a precision that suits their size.
pub(crate) fn secs(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 0.01 {
        format!("{v:.2}")
    } else if v == 0.0 {
        "0".into()
    } else {
        format!("{v:.4}")
    }
}

/// `×1.23`, or `-` when there is no ratio.
pub(crate) fn ratio_text(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}"))
}

fn range(s: &Stat) -> String {
    format!("{}-{}", secs(s.min), secs(s.max))
}

/// The table printed at the end of `caseload compare` (also `table.txt`).
pub fn render_table(report: &CompareReport) -> String {
    let mut out = String::new();
    let workload = match &report.workload.name {
        Some(n) => format!("workload {n} ({})", report.workload.stages.join(", ")),
        None => format!("stages {}", report.workload.stages.join(", ")),
    };
    out.push_str(&format!(
        "caseload compare: {} configuration(s) x {} repeat(s), {}, {} instance(s) per run, cache {}; status {}\n",
        report.configurations.len(),
        report.repeat,
        workload,
        report.instances,
        report.cache,
        report.status
    ));
    out.push_str(&format!(
        "baseline: #{} {}; ratios are medians over the baseline's medians\n\n",
        report.baseline + 1,
        report.label(report.baseline)
    ));
    let mark = |i: usize| {
        if i == report.baseline {
            format!("{}*", i + 1)
        } else {
            format!("{}", i + 1)
        }
    };

    let mut rows = vec![vec![
        "#".to_string(),
        "configuration".into(),
        "runs ok".into(),
        "total s".into(),
        "min-max".into(),
        "ratio".into(),
    ]];
    for s in &report.summary {
        rows.push(vec![
            mark(s.configuration),
            report.label(s.configuration),
            format!("{}/{}", s.runs_completed, s.runs),
            s.total_seconds.map_or("-".into(), |t| secs(t.median)),
            s.total_seconds.as_ref().map_or("-".into(), range),
            ratio_text(s.total_ratio),
        ]);
    }
    out.push_str(&layout_columns(&rows, &[0, 1]));
    out.push('\n');

    let mut rows = vec![vec![
        "stage".to_string(),
        "#".into(),
        "configuration".into(),
        "n".into(),
        "wall s".into(),
        "min-max".into(),
        "ratio".into(),
        "MB/s".into(),
        "cpu usr+sys s".into(),
        "bound by".into(),
        "blocked s ev/db/case/temp".into(),
        "db fsyncs".into(),
    ]];
    for stage in &report.workload.stages {
        for s in &report.summary {
            let Some(st) = s.stages.iter().find(|x| &x.name == stage) else {
                rows.push(vec![
                    stage.clone(),
                    mark(s.configuration),
                    report.label(s.configuration),
                    "0".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ]);
                continue;
            };
            let blocked = ChannelKind::ALL
                .iter()
                .map(|k| {
                    st.channels
                        .get(k)
                        .map_or("-".into(), |c| secs(c.blocked_seconds.median))
                })
                .collect::<Vec<_>>()
                .join("/");
            rows.push(vec![
                stage.clone(),
                mark(s.configuration),
                report.label(s.configuration),
                st.runs.to_string(),
                secs(st.wall_seconds.median),
                range(&st.wall_seconds),
                ratio_text(st.wall_ratio),
                format!("{:.1}", st.mb_per_s.median),
                format!(
                    "{}+{}",
                    secs(st.cpu_user_seconds.median),
                    secs(st.cpu_system_seconds.median)
                ),
                match (st.bound_by, st.bound_share) {
                    (Some(k), Some(share)) => format!("{k} {:.0}%", share * 100.0),
                    (Some(k), None) => k.to_string(),
                    _ => "cpu".into(),
                },
                blocked,
                st.channels
                    .get(&ChannelKind::Database)
                    .map_or("-".into(), |c| format!("{:.0}", c.fsyncs.median)),
            ]);
        }
    }
    out.push_str(&layout_columns(&rows, &[0, 1, 2, 9]));

    let problems: Vec<String> = report
        .runs
        .iter()
        .filter(|r| r.status != "completed")
        .map(|r| {
            let failed_stages: Vec<String> = r
                .stages
                .iter()
                .filter(|s| s.status != "completed")
                .map(|s| {
                    format!(
                        "{} {}{}",
                        s.name,
                        s.status,
                        s.error
                            .as_deref()
                            .map_or(String::new(), |e| format!(": {e}"))
                    )
                })
                .collect();
            let mut line = format!(
                "  run {} ({} r{}): {}",
                r.sequence,
                report.label(r.configuration),
                r.repeat,
                r.status
            );
            if let Some(e) = &r.error {
                line.push_str(&format!(": {e}"));
            }
            for f in failed_stages {
                line.push_str(&format!("\n      stage {f}"));
            }
            line
        })
        .collect();
    if !problems.is_empty() {
        out.push_str(&format!(
            "\nruns that did not complete ({}):\n",
            problems.len()
        ));
        for p in problems {
            out.push_str(&p);
            out.push('\n');
        }
    }
    out
}
