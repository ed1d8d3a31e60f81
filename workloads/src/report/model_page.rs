//! `model.html`: what `caseload model` predicts, as one self-contained
//! page (inline CSS and SVG): per stage its knee and bottleneck, the
//! predicted seconds per worker count, and throughput against workers
//! with its bound.

use super::chart;
use super::html::esc;
use crate::model::ModelReport;
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:60em}\
table{border-collapse:collapse}td,th{padding:.2em .6em;text-align:right}\
th:first-child,td:first-child{text-align:left}tr:nth-child(even){background:#f4f4f4}";

/// Render the page; an error only when the chart cannot be drawn.
pub fn render_model_html(m: &ModelReport) -> Result<String, String> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>caseload model</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>caseload model</h1>\n"
    );
    let _ = writeln!(
        h,
        "<p>Exact Mean Value Analysis per stage of one recorded run: {:.2} GB of evidence, {}. Schema {} v{}; the model is in docs/model.md.</p>",
        m.evidence_bytes as f64 / 1e9,
        m.setting
            .link_bytes_per_s
            .map_or("no link station".to_string(), |r| format!(
                "a link of {:.0} MB/s",
                r / 1e6
            )),
        esc(m.schema),
        m.schema_version
    );
    h.push_str(&chart::model_throughput(m)?);
    h.push_str("<h2>Stages</h2>\n<table>\n<tr><th>stage</th><th>recorded s</th><th>own time s</th><th>bottleneck</th><th>knee N*</th>");
    for n in &m.workers {
        let _ = write!(h, "<th>{n} s</th>");
    }
    h.push_str("</tr>\n");
    for s in &m.stages {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{:.1}</td>",
            esc(&s.name),
            s.recorded_s,
            s.network.think_s,
            esc(s.bounds.bottleneck.as_deref().unwrap_or("-")),
            s.bounds.knee
        );
        for t in &s.predicted_s {
            let _ = write!(h, "<td>{t:.2}</td>");
        }
        h.push_str("</tr>\n");
    }
    for (name, row) in [
        ("total s", &m.total_s),
        ("bound s", &m.total_bound_s),
        ("MB/s", &m.throughput_mb_s),
    ] {
        let _ = write!(h, "<tr><th>{name}</th><td></td><td></td><td></td><td></td>");
        for v in row {
            let _ = write!(h, "<td>{v:.2}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n</body>\n</html>\n");
    Ok(h)
}
