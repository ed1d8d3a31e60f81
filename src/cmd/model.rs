//! `caseload model`: a recorded run's stage times and throughput on N
//! workstations sharing its evidence store and database
//! (`caseload_workloads::model`, model in docs/model.md).

use anyhow::Context;
use caseload_workloads::model::{ModelReport, Setting, model};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `caseload model`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The recorded run: its run.json (or a case directory holding one).
    #[arg(long)]
    pub run: PathBuf,
    /// Worker counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
    pub workers: Vec<u32>,
    /// Rate of the link between the workers and the shared evidence store
    /// (evidence and case directory) and database, in MB/s (1 Gbit/s Ethernet: about 117); without it,
    /// no link station.
    #[arg(long, value_name = "MB/s")]
    pub link_mb_s: Option<f64>,
    /// The workers share one machine with this many processors (as
    /// `run --instances` and the one-box cluster do): the processors
    /// become a shared station.
    #[arg(long, value_name = "N")]
    pub shared_cpus: Option<u32>,
    /// The workers share one temp device (one machine, as the one-box
    /// cluster and `run --instances` do): it becomes a shared station.
    #[arg(long)]
    pub shared_temp: bool,
    /// Print the model as JSON (schema `caseload-model`, version 1).
    #[arg(long)]
    pub json: bool,
    /// Also write `model.json` and `model.html` (with the throughput
    /// against workers and its bound) into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

fn print(m: &ModelReport) {
    println!(
        "{:<12} {:>10} {:>9} {:>11} {:>12}",
        "stage", "recorded s", "knee N*", "bottleneck", "own time s"
    );
    for s in &m.stages {
        println!(
            "{:<12} {:>10.2} {:>9.1} {:>11} {:>12.2}",
            s.name,
            s.recorded_s,
            s.bounds.knee,
            s.bounds.bottleneck.as_deref().unwrap_or("-"),
            s.network.think_s
        );
    }
    println!();
    print!("{:<12}", "workers");
    for n in &m.workers {
        print!(" {n:>9}");
    }
    println!();
    let row = |name: &str, v: &[f64]| {
        print!("{name:<12}");
        for x in v {
            print!(" {x:>9.2}");
        }
        println!();
    };
    for s in &m.stages {
        row(&s.name, &s.predicted_s);
    }
    row("total s", &m.total_s);
    row("bound s", &m.total_bound_s);
    row("MB/s", &m.throughput_mb_s);
}

/// Model.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = super::predict::load_report(&args.run)?;
    let setting = Setting {
        link_bytes_per_s: args.link_mb_s.map(|r| r * 1e6),
        shared_cpus: args.shared_cpus,
        shared_temp: args.shared_temp,
    };
    let m = model(&report, &args.workers, setting)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating `{}`", dir.display()))?;
        let html = caseload_workloads::report::render_model_html(&m)
            .map_err(|e| anyhow::anyhow!("drawing the throughput chart: {e}"))?;
        for (name, bytes) in [
            ("model.json", serde_json::to_vec_pretty(&m)?),
            ("model.html", html.into_bytes()),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, bytes)
                .with_context(|| format!("writing `{}`", path.display()))?;
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&m)?);
    } else {
        print(&m);
    }
    Ok(ExitCode::SUCCESS)
}
