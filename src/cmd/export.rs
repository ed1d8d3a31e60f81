//! `caseload export`: file listings from a case, as bodyfile, DFXML or CSV;
//! a traced run's channel operations as fio iologs.

use anyhow::Context;
use caseload_engine::export::{ExportFormat, export};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `caseload export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The case directory (where run.json is).
    #[arg(long)]
    pub case: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: FormatArg,
    /// Write to this file instead of stdout (fio-iolog: the directory for
    /// the iologs and replay.fio, required).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// fio-iolog: where the replay's files go (default: OUT/files). Never
    /// the case's own directories.
    #[arg(long)]
    pub replay_dir: Option<PathBuf>,
    /// The PostgreSQL server of a case run with --db-url (run.json keeps
    /// the URL without its password).
    #[arg(long, value_name = "URL")]
    pub db_url: Option<String>,
}

/// `--format`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    /// The Sleuth Kit bodyfile (mactime input), MD5 first.
    Bodyfile,
    /// Digital Forensics XML in fiwalk's shape.
    Dfxml,
    /// CSV with a header row.
    Csv,
    /// fio iologs (version 3) of a run made with --trace, one per channel,
    /// and a job file that replays them (docs/trace.md).
    FioIolog,
}

/// Open the case database that a case directory's run.json names
/// (starting a private PostgreSQL cluster again for as long as the
/// returned case lives).
pub fn open_case(
    case: &std::path::Path,
    db_url: Option<&str>,
) -> anyhow::Result<caseload_engine::casedb::OpenCase> {
    let report = caseload_engine::run::load_run_json(case)
        .with_context(|| format!("`{}` does not hold a caseload case", case.display()))?;
    Ok(caseload_engine::casedb::open_case(
        &report.database,
        db_url,
    )?)
}

/// Export it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let format = match args.format {
        FormatArg::Bodyfile => ExportFormat::Bodyfile,
        FormatArg::Dfxml => ExportFormat::Dfxml,
        FormatArg::Csv => ExportFormat::Csv,
        FormatArg::FioIolog => return super::iolog::export(&args),
    };
    anyhow::ensure!(
        args.replay_dir.is_none(),
        "--replay-dir is for --format fio-iolog"
    );
    let mut case = open_case(&args.case, args.db_url.as_deref())?;
    match &args.out {
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            export(case.reader(), format, &mut out)?;
            out.flush()?;
        }
        Some(path) => {
            // A partial export never sits under the final name.
            let tmp = path.with_extension("partial");
            let file = std::fs::File::create(&tmp)
                .with_context(|| format!("creating `{}`", tmp.display()))?;
            let mut out = std::io::BufWriter::new(file);
            let result = export(case.reader(), format, &mut out)
                .map_err(anyhow::Error::from)
                .and_then(|_| out.flush().map_err(anyhow::Error::from));
            if let Err(e) = result {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
            drop(out);
            std::fs::rename(&tmp, path)
                .with_context(|| format!("renaming to `{}`", path.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
