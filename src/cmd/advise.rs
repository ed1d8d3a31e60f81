//! `caseload advise`: which upgrade buys the most time per unit of money,
//! from a recorded run and a candidates file (`caseload_workloads::advise`;
//! docs/advise.md).

use anyhow::Context;
use caseload_engine::channel::ChannelKind;
use caseload_workloads::advise::{self, Resolver};
use caseload_workloads::predict::DeviceFigures;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `caseload advise`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The recorded run: its run.json (or a case directory holding one).
    #[arg(long)]
    pub run: PathBuf,
    /// The candidate upgrades and their prices (TOML; docs/advise.md).
    #[arg(long, value_name = "CANDIDATES.toml")]
    pub candidates: PathBuf,
    /// The devices the run was recorded on: a lab (name or lab file) or a
    /// probe (`caseload probe --json`); default: the candidates file's
    /// `from`.
    #[arg(long = "from", value_name = "LAB-or-probe.json")]
    pub from: Option<String>,
    /// Only configurations whose options cost this much or less in all.
    #[arg(long)]
    pub budget: Option<f64>,
    /// Also write advise.json, advise.txt and advise.html here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print advise.json instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Configurations shown in the table (the Pareto front always is).
    #[arg(long, default_value_t = 20)]
    pub rows: usize,
}

/// A device model's figures, by name or file.
fn model(name: &str) -> Result<DeviceFigures, String> {
    caseload_workloads::devices::device(name).map(|m| DeviceFigures::from_model(&m))
}

/// A probe's figures: the first of `channels` it measured, else the first
/// channel it measured at all.
fn probe(path: &Path, channels: &[ChannelKind]) -> Result<DeviceFigures, String> {
    let devices = super::predict::probe_devices(path).map_err(|e| format!("{e:#}"))?;
    channels
        .iter()
        .find_map(|k| devices.get(k))
        .or_else(|| devices.values().next())
        .cloned()
        .ok_or_else(|| format!("`{}` holds no measured channel", path.display()))
}

fn run_report(path: &Path) -> Result<caseload_engine::report::RunReport, String> {
    super::predict::load_report(path).map_err(|e| format!("{e:#}"))
}

/// Advise.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(b) = args.budget {
        anyhow::ensure!(b.is_finite() && b >= 0.0, "--budget must be zero or more");
    }
    let report = super::predict::load_report(&args.run)?;
    let text = std::fs::read_to_string(&args.candidates)
        .with_context(|| format!("reading `{}`", args.candidates.display()))?;
    let resolver = Resolver {
        model: &model,
        probe: &probe,
        run: &run_report,
    };
    let candidates = advise::parse_candidates(&text, &args.candidates, &report, &resolver)?;
    let from = args
        .from
        .clone()
        .or_else(|| {
            // The file's `from` is taken against its directory when it
            // is a file there.
            candidates.from.as_ref().map(|f| {
                let local = args
                    .candidates
                    .parent()
                    .unwrap_or(Path::new("."))
                    .join(f);
                if local.is_file() {
                    local.display().to_string()
                } else {
                    f.clone()
                }
            })
        })
        .context(
            "which devices was the run recorded on? give --from LAB-or-probe.json or `from` in the candidates file",
        )?;
    let source = super::predict::devices(&from).context("--from")?;
    let run_shown = args.run.display().to_string();
    let candidates_shown = args.candidates.display().to_string();
    let advice = advise::advise(&advise::Request {
        run: &report,
        run_path: &run_shown,
        source: &source,
        from: &from,
        candidates: &candidates,
        candidates_path: &candidates_shown,
        budget: args.budget,
    })?;
    let table = caseload_workloads::report::render_advice_table(&advice, args.rows);
    let json = serde_json::to_string_pretty(&advice)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating `{}`", dir.display()))?;
        let html = caseload_workloads::report::render_advice_html(&advice)
            .map_err(|e| anyhow::anyhow!("drawing the chart: {e}"))?;
        let full = caseload_workloads::report::render_advice_table(&advice, usize::MAX);
        for (name, bytes) in [
            ("advise.json", json.as_bytes()),
            ("advise.txt", full.as_bytes()),
            ("advise.html", html.as_bytes()),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, bytes)
                .with_context(|| format!("writing `{}`", path.display()))?;
        }
    }
    if args.json {
        println!("{json}");
    } else {
        print!("{table}");
    }
    Ok(ExitCode::SUCCESS)
}
