//! `caseload advise`'s report: the terminal table and `advise.html` (a
//! chart of predicted time against price with the Pareto front, and every
//! configuration).

use super::chart;
use super::html::esc;
use super::table::layout_columns;
use crate::advise::{Advice, label};
use std::fmt::Write;

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:64em}\
table{border-collapse:collapse}td,th{padding:.2em .6em;text-align:right}\
th:nth-child(2),td:nth-child(2){text-align:left}tr:nth-child(even){background:#f4f4f4}\
tr.front{font-weight:bold}";

/// The terminal table: every configuration, fastest first, at most `rows`
/// of them (the front is always shown).
pub fn render_advice_table(a: &Advice, rows: usize) -> String {
    let mut out = format!(
        "advice for {} (recorded on {}), candidates {}{}:\n",
        a.run,
        a.from,
        a.candidates,
        a.budget
            .map_or(String::new(), |b| format!(", budget {b} {}", a.currency))
    );
    let mut table: Vec<Vec<String>> = vec![vec![
        "rank".into(),
        "configuration".into(),
        format!("price ({})", a.currency),
        "predicted s".into(),
        format!("±{:.0}%", a.total_error * 100.0),
        "saved s".into(),
        "saved".into(),
        "s per 100".into(),
        "front".into(),
    ]];
    let shown = a
        .configurations
        .iter()
        .enumerate()
        .filter(|(i, c)| *i < rows || c.pareto);
    for (_, c) in shown {
        table.push(vec![
            c.rank.to_string(),
            label(c),
            format!("{:.0}", c.price),
            format!("{:.2}", c.predicted_total_s),
            format!("{:.1}-{:.1}", c.low_s, c.high_s),
            format!("{:.2}", c.saved_s),
            format!("{:.1}%", c.saved_fraction * 100.0),
            c.saved_s_per_price
                .map_or("-".into(), |v| format!("{:.3}", v * 100.0)),
            [
                c.pareto.then_some("*"),
                (a.best_value == Some(c.rank)).then_some("best value"),
                (c.within_error && !c.options.is_empty()).then_some("(within error)"),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" "),
        ]);
    }
    let hidden = a.configurations.len() + 1 - table.len();
    out.push_str(&layout_columns(&table, &[1, 8]));
    if hidden > 0 {
        out.push_str(&format!(
            "... {hidden} more configurations in advise.json (--rows N shows more)\n"
        ));
    }
    out.push_str(&format!(
        "* on the Pareto front: nothing at its price or less is predicted faster. \"within error\": the saving is under the model's stated error ({:.0}% of the total), not a confident buy.\n",
        a.total_error * 100.0
    ));
    out
}

/// `advise.html`: the method, the chart, the options and every
/// configuration; an error only when the chart cannot be drawn.
pub fn render_advice_html(a: &Advice) -> Result<String, String> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>caseload advise</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>Which upgrade buys the most time</h1>\n<p>Run <code>{}</code>, recorded on <code>{}</code>; candidates <code>{}</code>{}.</p>\n<p>{}</p>\n",
        esc(&a.run),
        esc(&a.from),
        esc(&a.candidates),
        a.budget.map_or(String::new(), |b| format!(
            "; budget {b} {}",
            esc(&a.currency)
        )),
        esc(&a.method)
    );
    if let Some(best) = a
        .best_value
        .and_then(|r| a.configurations.iter().find(|c| c.rank == r))
    {
        let _ = writeln!(
            h,
            "<p>Best value: <b>{}</b>, {:.2} s saved for {:.0} {} ({:.3} s per 100).</p>",
            esc(&label(best)),
            best.saved_s,
            best.price,
            esc(&a.currency),
            best.saved_s_per_price.unwrap_or(0.0) * 100.0
        );
    }
    let points: Vec<(f64, f64, bool, String)> = a
        .configurations
        .iter()
        .map(|c| (c.price, c.predicted_total_s, c.pareto, label(c)))
        .collect();
    h.push_str("<h2>Predicted time against price</h2>\n");
    h.push_str(&chart::price_time(&points, &a.currency, a.total_error)?);
    h.push_str("<h2>Options</h2>\n<table>\n<tr><th>price</th><th>option</th><th>buys</th></tr>\n");
    for o in &a.options {
        let _ = writeln!(
            h,
            "<tr><td>{:.0}</td><td>{}</td><td>{}</td></tr>",
            o.price,
            esc(&o.name),
            esc(&o.buys)
        );
    }
    let _ = writeln!(
        h,
        "</table>\n<h2>Configurations</h2>\n<table>\n<tr><th>rank</th><th>configuration</th><th>price ({})</th><th>predicted s</th><th>range s</th><th>saved s</th><th>saved</th><th>s per 100</th><th>front</th></tr>",
        esc(&a.currency)
    );
    for c in &a.configurations {
        let _ = writeln!(
            h,
            "<tr{}><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.2}</td><td>{:.1}-{:.1}</td><td>{:.2}</td><td>{:.1}%</td><td>{}</td><td>{}</td></tr>",
            if c.pareto { " class=\"front\"" } else { "" },
            c.rank,
            esc(&label(c)),
            c.price,
            c.predicted_total_s,
            c.low_s,
            c.high_s,
            c.saved_s,
            c.saved_fraction * 100.0,
            c.saved_s_per_price
                .map_or("-".into(), |v| format!("{:.3}", v * 100.0)),
            match (c.pareto, c.within_error && !c.options.is_empty()) {
                (true, true) => "front (within error)",
                (true, false) => "front",
                (false, true) => "within error",
                (false, false) => "",
            }
        );
    }
    h.push_str("</table>\n</body>\n</html>\n");
    Ok(h)
}
