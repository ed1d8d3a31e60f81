//! `tiers.html` / `memory.html`: a study table reproduced on the lab, as
//! one self-contained page: caseload's ratios beside the study's in a
//! chart and a table, and each configuration's stage times.

use super::chart;
use super::html::esc;
use crate::study_tables::TableReport;
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:64em}\
table{border-collapse:collapse}td,th{padding:.2em .6em;text-align:right}\
th:first-child,td:first-child{text-align:left}tr:nth-child(even){background:#f4f4f4}";

fn num(v: Option<f64>, precision: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.precision$}"))
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0}%", v * 100.0))
}

/// Render the page; an error only when a chart cannot be drawn.
pub fn render_tables_html(t: &TableReport) -> Result<String, String> {
    let title = if t.table == "memory" {
        "FTK 4 study, step 3: memory"
    } else {
        "FTK 4 study, final tables"
    };
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}, on caseload's lab</h1>\n<p>{}</p>\n<ul>",
        esc(&t.method)
    );
    for f in &t.findings {
        let _ = write!(h, "<li>{}</li>", esc(f));
    }
    h.push_str("</ul>\n<h2>Time against the first row, per format</h2>\n");
    let groups: Vec<(String, Option<f64>, Option<f64>)> = t
        .rows
        .iter()
        .map(|r| {
            (
                format!("{} {}", r.row, r.kind.label()),
                r.study_ratio,
                r.ratio,
            )
        })
        .collect();
    h.push_str(&chart::paired_bars(&groups, "time / first row")?);
    if t.e01_over_dd
        .iter()
        .any(|f| f.study_ratio.is_some() || f.ratio.is_some())
    {
        h.push_str("<h2>E01 against DD</h2>\n");
        let groups: Vec<(String, Option<f64>, Option<f64>)> = t
            .e01_over_dd
            .iter()
            .map(|f| (f.row.clone(), f.study_ratio, f.ratio))
            .collect();
        h.push_str(&chart::paired_bars(&groups, "E01 time / DD time")?);
    }
    h.push_str("<h2>Configurations</h2>\n<table>\n<tr><th>row</th><th>format</th><th>RAM</th><th>lab</th><th>runs</th><th>median s</th><th>range s</th><th>minutes (240 GB)</th><th>ratio</th><th>study minutes</th><th>study ratio</th><th>error</th><th>comparison</th></tr>\n");
    for r in &t.rows {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{} GB</td><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><a href=\"{}/report.html\">report</a></td></tr>",
            esc(&r.row),
            r.kind.label(),
            r.ram_bytes >> 30,
            esc(&r.lab),
            r.runs_completed,
            r.runs,
            num(r.total_seconds.map(|s| s.median), 2),
            r.total_seconds
                .map_or("-".into(), |s| format!("{:.2}-{:.2}", s.min, s.max)),
            num(r.modelled_minutes, 0),
            num(r.ratio, 2),
            num(r.study_minutes, 0),
            num(r.study_ratio, 2),
            pct(r.ratio_error),
            esc(&r.dir)
        );
    }
    h.push_str("</table>\n<h2>E01 / DD</h2>\n<table>\n<tr><th>row</th><th>caseload</th><th>study</th><th>error</th></tr>\n");
    for f in &t.e01_over_dd {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&f.row),
            num(f.ratio, 2),
            num(f.study_ratio, 2),
            pct(f.ratio_error)
        );
    }
    h.push_str("</table>\n<h2>Stages (median seconds)</h2>\n<table>\n<tr><th>configuration</th>");
    let names: Vec<&str> = t
        .rows
        .first()
        .map(|r| r.stages.iter().map(|(n, _)| n.as_str()).collect())
        .unwrap_or_default();
    for n in &names {
        let _ = write!(h, "<th>{}</th>", esc(n));
    }
    h.push_str("</tr>\n");
    for r in &t.rows {
        let _ = write!(h, "<tr><td>{} {}</td>", esc(&r.row), r.kind.label());
        for n in &names {
            let v = r.stages.iter().find(|(s, _)| s == n).map(|(_, v)| *v);
            let _ = write!(h, "<td>{}</td>", num(v, 2));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n</body>\n</html>\n");
    Ok(h)
}
