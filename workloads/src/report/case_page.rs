//! `report.html` of a distributed case (`cluster`, `report`): per stage,
//! per worker, and the shared channels' throughput over time, as one
//! self-contained page (inline CSS and SVG).

use super::chart;
use super::html::esc;
use caseload_engine::channel::ChannelKind;
use caseload_engine::report::RunReport;
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:70em}\
table{border-collapse:collapse}td,th{padding:.2em .6em;text-align:right}\
th:first-child,td:first-child{text-align:left}tr:nth-child(even){background:#f4f4f4}";

/// Render the page; an error when the report is not a distributed case's
/// or the chart cannot be drawn.
pub fn render_case_html(r: &RunReport) -> Result<String, String> {
    let d = r
        .distributed
        .as_ref()
        .ok_or("not a distributed case's report (no `distributed`)")?;
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>caseload case</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>One case, {} workers</h1>\n",
        d.workers.len()
    );
    let _ = writeln!(
        h,
        "<p>Status <b>{}</b>; {} units, {} done, {} redone after a worker was lost, {} failed; {:.2} s from the first unit to the last; {} of evidence ({}); coordination {} statements, {:.3} s.</p>",
        esc(&r.status),
        d.units,
        d.units_done,
        d.units_redone,
        d.units_failed,
        r.totals.wall_seconds,
        esc(&format!("{:.2} GB", r.evidence.media_size as f64 / 1e9)),
        esc(&r
            .evidence
            .files
            .first()
            .map(|f| f.display().to_string())
            .unwrap_or_default()),
        d.coordination.statements,
        d.coordination.seconds
    );
    h.push_str("<h2>Shared channels over time</h2>\n");
    h.push_str(&chart::case_throughput(&d.throughput)?);
    let _ = writeln!(h, "<p>{}</p>", esc(&d.database_io));
    h.push_str("<h2>Stages</h2>\n<table>\n<tr><th>stage</th><th>status</th><th>units</th><th>span s</th><th>cpu s</th><th>evidence MB</th><th>db rows</th><th>db commits</th><th>db server R/W MB</th><th>case W MB</th><th>bound by</th></tr>\n");
    for s in &r.stages {
        let ch = |k: ChannelKind| s.channels.get(&k).map(|c| c.counters).unwrap_or_default();
        let (ev, db, case) = (
            ch(ChannelKind::Evidence),
            ch(ChannelKind::Database),
            ch(ChannelKind::Case),
        );
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{:.1}/{:.1}</td><td>{:.1}</td><td>{}</td></tr>",
            esc(&s.name),
            esc(&s.status),
            s.summary
                .details
                .get("work_units")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0),
            s.wall_seconds,
            s.cpu_user_seconds + s.cpu_system_seconds,
            ev.bytes_read as f64 / 1e6,
            s.database_work.rows,
            s.database_work.transactions,
            db.bytes_read as f64 / 1e6,
            db.bytes_written as f64 / 1e6,
            case.bytes_written as f64 / 1e6,
            esc(&s
                .bound_by
                .map(|k| k.name().to_string())
                .unwrap_or_else(|| "-".into()))
        );
    }
    h.push_str("</table>\n<h2>Workers</h2>\n<table>\n<tr><th>worker</th><th>host</th><th>state</th><th>units</th><th>busy s</th><th>cpu s</th><th>evidence MB</th><th>db rows</th><th>claims</th><th>empty claims</th><th>renewals</th><th>coordination s</th></tr>\n");
    for w in &d.workers {
        let ev = w
            .channels
            .get(&ChannelKind::Evidence)
            .copied()
            .unwrap_or_default();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3}</td></tr>",
            esc(&w.name),
            esc(&w.host),
            esc(&w.state),
            w.units,
            w.busy_seconds,
            w.cpu_seconds,
            ev.bytes_read as f64 / 1e6,
            w.database_work.rows,
            w.coordination.claims,
            w.coordination.empty_claims,
            w.coordination.renewals,
            w.coordination.seconds
        );
    }
    h.push_str("</table>\n<p>Throughput against workers, with its bounds: <code>caseload model --run run.json --workers 1,2,4,8 --out DIR</code> (docs/model.md).</p>\n</body>\n</html>\n");
    Ok(h)
}
