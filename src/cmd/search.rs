//! `caseload search`: query a case's full-text index.

use caseload_engine::search::{SearchOptions, search};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `caseload search`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The case directory (where run.json and index/ are).
    #[arg(long)]
    pub case: PathBuf,
    /// Terms, "quoted phrases", prefix*, AND/OR/NOT (or +/-) and
    /// parentheses; with --regex, a regular expression over the extracted
    /// text.
    pub query: String,
    /// Treat the query as a regular expression (e-mail addresses, phone
    /// numbers, card-like numbers...). Needs an index that keeps the text
    /// (profiles native and autopsy; ftk4's, as dtSearch's, keeps none).
    #[arg(long)]
    pub regex: bool,
    /// List at most this many items (those with the most hits).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print JSON instead of tab-separated lines.
    #[arg(long)]
    pub json: bool,
}

/// Run the search and print one line per item: hits, kind, id, label (and
/// with --regex the distinct matches).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = SearchOptions {
        regex: args.regex,
        limit: args.limit,
    };
    let hits = search(&args.case, &args.query, &options)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        serde_json::to_writer_pretty(&mut out, &hits)?;
        writeln!(out)?;
    } else {
        for h in &hits {
            write!(out, "{}\t{}\t{}\t{}", h.hits, h.kind, h.id, h.label)?;
            if args.regex {
                write!(out, "\t{}", h.matches.join(" | "))?;
            }
            writeln!(out)?;
        }
    }
    out.flush()?;
    let total: u64 = hits.iter().map(|h| h.hits).sum();
    eprintln!("{} items, {total} hits", hits.len());
    Ok(ExitCode::SUCCESS)
}
