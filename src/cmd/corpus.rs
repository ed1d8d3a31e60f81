//! `caseload corpus`: generate a synthetic evidence corpus.

use super::util::{byte_progress, parse_size};
use anyhow::{Context, bail};
use caseload_corpus::{FatType, Options, Profile, Progress, TableKind};
use indicatif::ProgressBar;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `caseload corpus`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output directory (created if missing): image.dd, manifest.json and
    /// the hash sets are written there.
    #[arg(long)]
    out: PathBuf,
    /// Disk size, e.g. 64MiB, 4GiB, 2TB (32 MiB to 8 TiB).
    #[arg(long, value_parser = parse_size)]
    size: u64,
    /// Seed: the same seed and options give byte-identical output.
    #[arg(long)]
    seed: u64,
    /// Profile: workstation (default) or suspect (much deleted, wiped).
    #[arg(long, default_value = "workstation")]
    profile: String,
    /// Worker threads for content generation (default: all cores); never
    /// changes the output.
    #[arg(long)]
    threads: Option<usize>,
    /// Output formats, comma-separated (only `dd` for now).
    #[arg(long, default_value = "dd", value_delimiter = ',')]
    format: Vec<String>,
    /// Partition table: mbr or gpt (default: mbr, gpt above 2 TiB).
    #[arg(long, value_parser = ["mbr", "gpt"])]
    partition_table: Option<String>,
    /// File system: auto, fat12, fat16 or fat32 (auto: FAT32 unless the
    /// disk is too small for it).
    #[arg(long, default_value = "auto", value_parser = ["auto", "fat12", "fat16", "fat32"])]
    fat: String,
    /// Decoy entries in each hash set (0 to 100 million).
    #[arg(long, default_value_t = 1_000_000)]
    decoys: u64,
    /// Share of files stored fragmented (overrides the profile), 0..1.
    #[arg(long)]
    fragmented_share: Option<f64>,
    /// Share of files deleted (overrides the profile), 0..1.
    #[arg(long)]
    deleted_share: Option<f64>,
    /// Target share of incompressible content bytes (overrides the
    /// profile), 0..1; sets the E01 compression ratio.
    #[arg(long)]
    incompressible_share: Option<f64>,
    /// Write no image bytes (compute hashes and manifest only): for memory
    /// checks at sizes the disk cannot hold.
    #[arg(long, hide = true)]
    discard_image: bool,
}

struct Bar(ProgressBar);

impl Progress for Bar {
    fn start(&self, total: u64) {
        self.0.set_length(total);
        self.0.set_position(0);
    }
    fn advance(&self, bytes: u64) {
        self.0.inc(bytes);
    }
    fn phase(&self, what: &str) {
        self.0.set_message(what.to_string());
    }
}

fn share(name: &str, v: Option<f64>) -> anyhow::Result<Option<f64>> {
    match v {
        Some(x) if !(0.0..=1.0).contains(&x) || x.is_nan() => {
            bail!("--{name} must be between 0 and 1, got {x}")
        }
        other => Ok(other),
    }
}

/// Generate the corpus.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    for f in &args.format {
        match f.as_str() {
            "dd" => {}
            "e01" => bail!("--format e01 is not available yet; use --format dd"),
            other => bail!("unknown output format `{other}` (expected dd)"),
        }
    }
    let mut profile = Profile::by_name(&args.profile).with_context(|| {
        format!(
            "unknown profile `{}` (expected one of: {})",
            args.profile,
            Profile::NAMES.join(", ")
        )
    })?;
    if let Some(v) = share("fragmented-share", args.fragmented_share)? {
        profile.fragmented_share = v;
    }
    if let Some(v) = share("deleted-share", args.deleted_share)? {
        profile.deleted_share = v;
    }
    if let Some(v) = share("incompressible-share", args.incompressible_share)? {
        profile.incompressible_share = v;
    }
    let threads = match args.threads {
        Some(0) => bail!("--threads must be at least 1"),
        Some(n) => n,
        None => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    };
    let opts = Options {
        out_dir: args.out.clone(),
        size: args.size,
        seed: args.seed,
        profile,
        threads,
        partition_table: match args.partition_table.as_deref() {
            Some("gpt") => Some(TableKind::Gpt),
            Some(_) => Some(TableKind::Mbr),
            None => None,
        },
        fat: match args.fat.as_str() {
            "fat12" => Some(FatType::Fat12),
            "fat16" => Some(FatType::Fat16),
            "fat32" => Some(FatType::Fat32),
            _ => None,
        },
        decoys: args.decoys,
        discard_image: args.discard_image,
    };
    let bar = Bar(byte_progress(args.size, "corpus"));
    let report = caseload_corpus::generate(&opts, &bar);
    bar.0.finish_and_clear();
    let report =
        report.with_context(|| format!("generating the corpus in {}", args.out.display()))?;
    let s = &report.summary;
    println!(
        "wrote {} ({} bytes, {:?} {:?}, md5 {})",
        report
            .image
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "no image (discarded)".into()),
        report.size,
        report.table,
        report.fat,
        report.md5
    );
    println!(
        "{} files, {} deleted ({} intact), {} fragmented, {} directories ({} deleted), {} carvable items, {} keywords",
        s.files,
        s.deleted_files,
        s.deleted_intact,
        s.fragmented_files,
        s.directories,
        s.deleted_directories,
        s.carvable_items,
        s.keywords
    );
    println!("manifest: {}", report.manifest.display());
    Ok(ExitCode::SUCCESS)
}
