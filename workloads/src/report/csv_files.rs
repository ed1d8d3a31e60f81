//! CSV files for spreadsheets and scripts: `compare.csv`, one row per
//! configuration and stage (plus a `total` row per configuration), and
//! `runs.csv`, one row per run and stage. Figures are plain numbers (seconds,
//! bytes, MB/s with MB = 10^6); an empty cell means "not measured".

use super::CompareReport;
use caseload_engine::channel::ChannelKind;

fn num(v: f64) -> String {
    if v.is_finite() {
        // Enough digits for sub-millisecond times, no exponent notation.
        let s = format!("{v:.6}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        if s.is_empty() || s == "-" {
            "0".into()
        } else {
            s.to_string()
        }
    } else {
        String::new()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), num)
}

fn config_cells(report: &CompareReport, index: usize) -> Vec<String> {
    let config = report.configurations.get(index);
    let evidence = config
        .and_then(|c| report.evidence.get(c.evidence))
        .map_or(String::new(), |e| e.label.clone());
    let layout = config
        .and_then(|c| report.layouts.get(c.layout))
        .map_or(String::new(), |l| l.label.clone());
    vec![
        index.to_string(),
        report.label(index),
        (index == report.baseline).to_string(),
        evidence,
        layout,
    ]
}

/// `compare.csv`.
pub fn summary_csv(report: &CompareReport) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = [
        "configuration",
        "label",
        "baseline",
        "evidence",
        "layout",
        "stage",
        "runs",
        "wall_s_median",
        "wall_s_min",
        "wall_s_max",
        "wall_ratio",
        "cpu_user_s_median",
        "cpu_system_s_median",
        "peak_rss_bytes_median",
        "mb_per_s_median",
        "bound_by",
        "bound_share",
        "machine_user_pct",
        "machine_system_pct",
        "machine_iowait_pct",
        "machine_load1_max",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for k in ChannelKind::ALL {
        for f in [
            "read_mb_per_s",
            "write_mb_per_s",
            "read_iops",
            "write_iops",
            "fsyncs",
            "blocked_s",
            "blocked_ratio",
        ] {
            header.push(format!("{k}_{f}"));
        }
    }
    w.write_record(&header)?;
    for s in &report.summary {
        let base = config_cells(report, s.configuration);
        let mut total = base.clone();
        total.push("total".into());
        total.push(s.runs_completed.to_string());
        total.push(opt(s.total_seconds.map(|t| t.median)));
        total.push(opt(s.total_seconds.map(|t| t.min)));
        total.push(opt(s.total_seconds.map(|t| t.max)));
        total.push(opt(s.total_ratio));
        total.resize(header.len(), String::new());
        w.write_record(&total)?;
        for st in &s.stages {
            let mut row = base.clone();
            row.extend([
                st.name.clone(),
                st.runs.to_string(),
                num(st.wall_seconds.median),
                num(st.wall_seconds.min),
                num(st.wall_seconds.max),
                opt(st.wall_ratio),
                num(st.cpu_user_seconds.median),
                num(st.cpu_system_seconds.median),
                opt(st.peak_rss_bytes.map(|r| r.median)),
                num(st.mb_per_s.median),
                st.bound_by.map_or(String::new(), |k| k.to_string()),
                opt(st.bound_share),
                num(st.machine.user_pct.median),
                num(st.machine.system_pct.median),
                num(st.machine.iowait_pct.median),
                num(st.machine.load1_max.median),
            ]);
            for k in ChannelKind::ALL {
                match st.channels.get(&k) {
                    Some(c) => row.extend([
                        num(c.read_mb_per_s.median),
                        num(c.write_mb_per_s.median),
                        num(c.read_iops.median),
                        num(c.write_iops.median),
                        num(c.fsyncs.median),
                        num(c.blocked_seconds.median),
                        opt(c.blocked_ratio),
                    ]),
                    None => row.extend(std::iter::repeat_n(String::new(), 7)),
                }
            }
            w.write_record(&row)?;
        }
    }
    w.into_inner().map_err(|e| csv::Error::from(e.into_error()))
}

/// `runs.csv`.
pub fn runs_csv(report: &CompareReport) -> Result<Vec<u8>, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = [
        "sequence",
        "configuration",
        "label",
        "baseline",
        "evidence",
        "layout",
        "repeat",
        "run_status",
        "run_error",
        "stage",
        "stage_status",
        "stage_error",
        "wall_s",
        "cpu_user_s",
        "cpu_system_s",
        "peak_rss_bytes",
        "items",
        "bytes",
        "mb_per_s",
        "bound_by",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for k in ChannelKind::ALL {
        for f in [
            "bytes_read",
            "bytes_written",
            "read_ops",
            "write_ops",
            "fsyncs",
            "blocked_s",
            "sync_blocked_s",
            "read_mb_per_s",
            "write_mb_per_s",
            "read_iops",
            "write_iops",
        ] {
            header.push(format!("{k}_{f}"));
        }
    }
    w.write_record(&header)?;
    for r in &report.runs {
        let mut base = vec![r.sequence.to_string()];
        base.extend(config_cells(report, r.configuration));
        base.extend([
            r.repeat.to_string(),
            r.status.clone(),
            r.error.clone().unwrap_or_default(),
        ]);
        if r.stages.is_empty() {
            let mut row = base.clone();
            row.resize(header.len(), String::new());
            w.write_record(&row)?;
        }
        for s in &r.stages {
            let mut row = base.clone();
            row.extend([
                s.name.clone(),
                s.status.clone(),
                s.error.clone().unwrap_or_default(),
                num(s.wall_seconds),
                num(s.cpu_user_seconds),
                num(s.cpu_system_seconds),
                s.peak_rss_bytes.map_or(String::new(), |b| b.to_string()),
                s.items.to_string(),
                s.bytes.to_string(),
                num(s.mb_per_s),
                s.bound_by.map_or(String::new(), |k| k.to_string()),
            ]);
            for k in ChannelKind::ALL {
                match s.channels.get(&k) {
                    Some(c) => row.extend([
                        c.counters.bytes_read.to_string(),
                        c.counters.bytes_written.to_string(),
                        c.counters.read_ops.to_string(),
                        c.counters.write_ops.to_string(),
                        c.counters.fsyncs.to_string(),
                        num(c.blocked_seconds),
                        num(c.counters.sync_blocked_ns as f64 / 1e9),
                        num(c.read_mb_per_s),
                        num(c.write_mb_per_s),
                        num(c.read_iops),
                        num(c.write_iops),
                    ]),
                    None => row.extend(std::iter::repeat_n(String::new(), 11)),
                }
            }
            w.write_record(&row)?;
        }
    }
    w.into_inner().map_err(|e| csv::Error::from(e.into_error()))
}

#[cfg(test)]
mod tests {
    use super::num;

    #[test]
    fn numbers_are_plain() {
        assert_eq!(num(1.5), "1.5");
        assert_eq!(num(2.0), "2");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(0.0000004), "0");
        assert_eq!(num(1234567.25), "1234567.25");
        assert_eq!(num(f64::NAN), "");
    }
}
