//! `caseload bench-storage`'s report: the terminal table and
//! `bench-storage.html` (the bonnie++-like and PostMark-like figures, and
//! an iozone-like heat map per test: file size down, record size across,
//! each cell coloured by its MB/s on a log scale shared by all tests).

use super::html::esc;
use super::table::layout_columns;
use crate::bench_storage::BenchReport;
use crate::bench_storage::iozone::{IozoneResult, TESTS};
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:80em}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{padding:.2em .5em;text-align:right;border:1px solid #ddd}\
th{background:#f2f2f2}td.l,th.l{text-align:left}.muted{color:#777}";

fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{}M", bytes >> 20)
    } else {
        format!("{}K", bytes >> 10)
    }
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The rows of the bonnie++-like and PostMark-like figures: (test,
/// figure, unit).
fn summary_rows(r: &BenchReport) -> Vec<(String, f64, &'static str)> {
    let mut rows = Vec::new();
    if let Some(b) = &r.bonnie {
        rows.extend([
            (
                "bonnie sequential output".to_string(),
                b.seq_write_mb_s,
                "MB/s",
            ),
            ("bonnie rewrite".into(), b.rewrite_mb_s, "MB/s"),
            ("bonnie sequential input".into(), b.seq_read_mb_s, "MB/s"),
            ("bonnie random seeks".into(), b.seeks_per_s, "/s"),
            ("bonnie sequential create".into(), b.create_per_s, "/s"),
            ("bonnie stat".into(), b.stat_per_s, "/s"),
            ("bonnie delete".into(), b.delete_per_s, "/s"),
        ]);
    }
    if let Some(p) = &r.postmark {
        rows.extend([
            (
                "postmark transactions".to_string(),
                p.transactions_per_s,
                "/s",
            ),
            ("postmark files created".into(), p.created_per_s, "/s"),
            ("postmark files read".into(), p.read_per_s, "/s"),
            ("postmark appends".into(), p.appended_per_s, "/s"),
            ("postmark files deleted".into(), p.deleted_per_s, "/s"),
            ("postmark data read".into(), p.read_mb_s, "MB/s"),
            ("postmark data written".into(), p.written_mb_s, "MB/s"),
            ("postmark total".into(), p.seconds, "s"),
        ]);
    }
    rows
}

/// The terminal table.
pub fn render_storage_table(r: &BenchReport) -> String {
    let mut out = format!(
        "bench-storage on {}{} ({}{}), seed {}, {:.1} s\n",
        r.target.dir,
        r.target
            .lab
            .as_ref()
            .map_or(String::new(), |l| format!(" (lab {l})")),
        r.target.channel,
        r.target
            .fs
            .as_ref()
            .map_or(String::new(), |f| format!(", {f}")),
        r.seed,
        r.seconds
    );
    let mut rows = vec![vec!["test".to_string(), "figure".into(), "unit".into()]];
    for (test, v, unit) in summary_rows(r) {
        rows.push(vec![test, num(v), unit.into()]);
    }
    if rows.len() > 1 {
        out.push_str(&layout_columns(&rows, &[0, 2]));
    }
    if let Some(m) = &r.iozone {
        for test in TESTS {
            out.push_str(&format!(
                "\niozone {test}, MB/s (file down, record across):\n"
            ));
            out.push_str(&layout_columns(&matrix_rows(m, test), &[0]));
        }
    }
    for n in &r.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

fn records_and_files(m: &IozoneResult) -> (Vec<u64>, Vec<u64>) {
    let mut records: Vec<u64> = m.cells.iter().map(|c| c.record).collect();
    records.sort_unstable();
    records.dedup();
    let mut files: Vec<u64> = m.cells.iter().map(|c| c.file_size).collect();
    files.sort_unstable();
    files.dedup();
    (records, files)
}

fn matrix_rows(m: &IozoneResult, test: &str) -> Vec<Vec<String>> {
    let (records, files) = records_and_files(m);
    let mut rows = vec![
        std::iter::once("file".to_string())
            .chain(records.iter().map(|&r| size(r)))
            .collect::<Vec<_>>(),
    ];
    for &f in &files {
        let mut row = vec![size(f)];
        for &r in &records {
            row.push(m.figure(f, r, test).map_or("-".into(), num));
        }
        rows.push(row);
    }
    rows
}

/// A colour from blue (slow) to red (fast) for `v` on a log scale
/// between `lo` and `hi`.
fn heat(v: f64, lo: f64, hi: f64) -> String {
    let x = if hi > lo {
        ((v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln())).clamp(0.0, 1.0)
    } else {
        0.5
    };
    // Hue 240 (blue) to 0 (red).
    format!("hsl({:.0},70%,{:.0}%)", 240.0 * (1.0 - x), 85.0 - 25.0 * x)
}

/// The page.
pub fn render_storage_html(r: &BenchReport) -> String {
    let mut h = String::new();
    let title = format!("caseload bench-storage: {}", r.target.dir);
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body><h1>{}</h1>",
        esc(&title),
        esc(&title)
    );
    let _ = write!(
        h,
        "<p>channel <b>{}</b>{}{}, seed {}, {:.1} s in all; schema {} v{}.</p>",
        esc(&r.target.channel),
        r.target
            .lab
            .as_ref()
            .map_or(String::new(), |l| format!(", lab <b>{}</b>", esc(l))),
        r.target
            .fs
            .as_ref()
            .map_or(String::new(), |f| format!(", file system {}", esc(f))),
        r.seed,
        r.seconds,
        r.schema,
        r.schema_version
    );
    let rows = summary_rows(r);
    if !rows.is_empty() {
        h.push_str("<h2>bonnie++-like and PostMark-like</h2><table><tr><th class=l>test</th><th>figure</th><th class=l>unit</th></tr>");
        for (t, v, u) in rows {
            let _ = write!(
                h,
                "<tr><td class=l>{}</td><td>{}</td><td class=l>{u}</td></tr>",
                esc(&t),
                num(v)
            );
        }
        h.push_str("</table>");
    }
    if let Some(m) = &r.iozone {
        let all: Vec<f64> = m
            .cells
            .iter()
            .flat_map(|c| TESTS.iter().filter_map(|t| c.figure(t)))
            .filter(|v| *v > 0.0)
            .collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(0.0, f64::max);
        let _ = write!(
            h,
            "<h2>iozone-like matrix</h2><p class=muted>MB/s; file size down, record size across; colour on a log scale from {} (blue) to {} MB/s (red), the same for every test.</p>",
            num(lo.min(hi)),
            num(hi)
        );
        let (records, files) = records_and_files(m);
        for test in TESTS {
            let _ = write!(h, "<h3>{}</h3><table><tr><th>file</th>", esc(test));
            for &rec in &records {
                let _ = write!(h, "<th>{}</th>", size(rec));
            }
            h.push_str("</tr>");
            for &f in &files {
                let _ = write!(h, "<tr><th>{}</th>", size(f));
                for &rec in &records {
                    match m.figure(f, rec, test) {
                        Some(v) => {
                            let _ = write!(
                                h,
                                "<td style=\"background:{}\">{}</td>",
                                heat(v, lo, hi),
                                num(v)
                            );
                        }
                        None => h.push_str("<td class=muted>-</td>"),
                    }
                }
                h.push_str("</tr>");
            }
            h.push_str("</table>");
        }
    }
    if !r.notes.is_empty() {
        h.push_str("<h2>Notes</h2><ul>");
        for n in &r.notes {
            let _ = write!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul>");
    }
    h.push_str("</body></html>\n");
    h
}
