//! `caseload bench-storage`: the seeds' storage micro-benchmarks
//! (bonnie++-like, PostMark-like, an iozone-like matrix) through the
//! channel door, on a directory, a layout's channel or a lab's device.

use super::job_args::LayoutArgs;
use super::util::parse_size;
use caseload_engine::channel::{Channel, ChannelKind};
use caseload_workloads::bench_storage::{
    self, BenchOptions, Target, bonnie::BonnieOptions, iozone::IozoneOptions,
    postmark::PostmarkOptions,
};
use caseload_workloads::report::{render_storage_html, render_storage_table};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `caseload bench-storage`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A directory to measure (as the channel `--channel` names).
    #[arg(long, conflicts_with_all = ["layout", "lab"])]
    pub dir: Option<PathBuf>,
    /// Or a layout or lab, and its channel directories.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// The channel measured: database, case or temp (the evidence channel
    /// is never written).
    #[arg(long, default_value = "case")]
    pub channel: String,
    /// Benchmarks, comma-separated: bonnie, postmark, iozone.
    #[arg(long, default_value = "bonnie,postmark,iozone", value_delimiter = ',')]
    pub tests: Vec<String>,
    /// bonnie: the test file's size.
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    pub size: u64,
    /// bonnie: files created, stat'ed and deleted.
    #[arg(long, default_value_t = 16 * 1024)]
    pub bonnie_files: u32,
    /// bonnie: random seeks in all (by three seekers).
    #[arg(long, default_value_t = 8000)]
    pub bonnie_seeks: u32,
    /// postmark: files in the initial pool.
    #[arg(long, default_value_t = 5_000)]
    pub postmark_files: u32,
    /// postmark: transactions.
    #[arg(long, default_value_t = 20_000)]
    pub postmark_transactions: u32,
    /// iozone: the smallest file of the matrix (a power of two).
    #[arg(long, default_value = "64KiB", value_parser = parse_size)]
    pub iozone_min_file: u64,
    /// iozone: the largest file.
    #[arg(long, default_value = "512MiB", value_parser = parse_size)]
    pub iozone_max_file: u64,
    /// iozone: the smallest record.
    #[arg(long, default_value = "4KiB", value_parser = parse_size)]
    pub iozone_min_record: u64,
    /// iozone: the largest record.
    #[arg(long, default_value = "16MiB", value_parser = parse_size)]
    pub iozone_max_record: u64,
    /// Seed of the random offsets, sizes and choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write bench-storage.json, bench-storage.txt and
    /// bench-storage.html (the heat map) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(lab) = args.layout.lab.clone()
        && let Some(code) = super::lab::enter(&lab)?
    {
        return Ok(code);
    }
    let kind = ChannelKind::parse(&args.channel).ok_or_else(|| {
        anyhow::anyhow!("--channel `{}`: one of database, case, temp", args.channel)
    })?;
    anyhow::ensure!(
        kind != ChannelKind::Evidence,
        "--channel evidence: the evidence channel is never written; measure the directory the evidence lives on as --dir with --channel case"
    );
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            let layout = args.layout.layout()?;
            layout
                .dir(kind)
                .map_err(|e| anyhow::anyhow!("{e} (give --dir, --layout or --lab)"))?
                .to_path_buf()
        }
    };
    anyhow::ensure!(dir.is_dir(), "{} is not a directory", dir.display());
    let mut options = BenchOptions {
        seed: args.seed,
        ..BenchOptions::default()
    };
    for t in &args.tests {
        match t.as_str() {
            "bonnie" => {
                options.bonnie = Some(BonnieOptions {
                    file_size: args.size,
                    files: args.bonnie_files,
                    seeks: args.bonnie_seeks,
                    ..BonnieOptions::default()
                })
            }
            "postmark" => {
                options.postmark = Some(PostmarkOptions {
                    files: args.postmark_files,
                    transactions: args.postmark_transactions,
                    ..PostmarkOptions::default()
                })
            }
            "iozone" => {
                options.iozone = Some(IozoneOptions {
                    min_file: args.iozone_min_file,
                    max_file: args.iozone_max_file,
                    min_record: args.iozone_min_record,
                    max_record: args.iozone_max_record,
                })
            }
            other => anyhow::bail!("--tests: `{other}`; one of bonnie, postmark, iozone"),
        }
    }
    let placement = caseload_engine::system::placement(&dir);
    let target = Target {
        dir: dir.display().to_string(),
        lab: args.layout.lab.clone(),
        channel: kind.to_string(),
        fs: Some(placement.fs_type).filter(|f| !f.is_empty()),
    };
    let channel = Channel::new(kind, dir, Vec::new());
    let quiet = args.json;
    let report = bench_storage::run(&channel, target, &options, &mut |phase| {
        if !quiet {
            eprintln!("{phase}");
        }
    })?;
    let table = render_storage_table(&report);
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        std::fs::write(out.join("bench-storage.json"), format!("{json}\n"))?;
        std::fs::write(out.join("bench-storage.txt"), &table)?;
        std::fs::write(out.join("bench-storage.html"), render_storage_html(&report))?;
    }
    if args.json {
        println!("{json}");
    } else {
        print!("{table}");
    }
    Ok(ExitCode::SUCCESS)
}
