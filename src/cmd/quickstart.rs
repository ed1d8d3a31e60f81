//! `caseload quickstart`: the whole product in one command. Generate a small
//! corpus with ground truth in a scratch directory, lay the four channels
//! out as sub-directories of it, run the default stages and print the
//! per-stage table.

use super::util::{
    CacheArg, TerminalObserver, default_threads, finish, interrupt_flag, parse_size,
};
use anyhow::Context;
use caseload_corpus::{NoProgress, Options, Profile};
use caseload_engine::casedb::DbOptions;
use caseload_engine::layout::Layout;
use caseload_engine::run::RunSpec;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `caseload quickstart`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scratch directory (default: a new directory under the system temp dir).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Corpus size.
    #[arg(long, default_value = "96MiB", value_parser = parse_size)]
    pub size: u64,
    /// Corpus seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Every column of the table; the default fits a 120-column terminal.
    #[arg(long)]
    pub wide: bool,
    /// Page cache before each stage.
    #[arg(long, value_enum, default_value = "cold")]
    pub cache: CacheArg,
    /// Delete the scratch directory afterwards.
    #[arg(long)]
    pub clean: bool,
}

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            std::env::temp_dir().join(format!(
                "caseload-quickstart-{stamp}-{}",
                std::process::id()
            ))
        }
    };
    let [evidence, database, case, temp] =
        ["evidence", "database", "case", "temp"].map(|d| dir.join(d));
    for d in [&evidence, &database, &case, &temp] {
        std::fs::create_dir_all(d).with_context(|| format!("creating `{}`", d.display()))?;
    }
    let threads = args.threads.unwrap_or_else(default_threads).max(1);
    eprintln!(
        "caseload quickstart: generating a {} byte corpus (seed {}) in {}",
        args.size,
        args.seed,
        evidence.display()
    );
    let corpus = caseload_corpus::generate(
        &Options {
            out_dir: evidence.clone(),
            size: args.size,
            seed: args.seed,
            profile: Profile::by_name("workstation")
                .context("the workstation profile is missing")?,
            threads,
            partition_table: None,
            fat: None,
            // As `caseload corpus` defaults: a Windows workstation's NTFS
            // unless the disk is too small for it.
            ntfs: args.size >= caseload_corpus::ntfs::MIN_DISK,
            decoys: 10_000,
            discard_image: false,
            image_digests: caseload_corpus::ImageDigests::default(),
        },
        &NoProgress,
    );
    let corpus = corpus.context("generating the quickstart corpus")?;
    let image = corpus.image.context("the corpus has no image")?;
    let layout = Layout::from_dirs(
        "quickstart",
        Some(evidence.clone()),
        database,
        case.clone(),
        temp,
    );
    // The KFF stage looks hashes up in the corpus's own hash sets (planted
    // known and notable files among decoys), imported into the library on
    // the database channel as `caseload run --hashset` does.
    let mut stages = caseload_engine::stages::default_list(&|_| true);
    let hashsets = [
        format!("known={}", evidence.join("NSRLFile.txt").display()),
        format!("notable={}", evidence.join("notable.md5").display()),
    ];
    let kff_options = super::hashset::prepare_run(&hashsets, None, &layout, &stages)?;
    for o in &kff_options {
        caseload_engine::stage::apply_option(&mut stages, o)?;
    }
    let spec = RunSpec {
        evidence: image,
        layout,
        stages,
        workload: None,
        threads,
        cache: args.cache.mode(),
        db: DbOptions::default(),
        force: true,
        instance: None,
        read_run: caseload_engine::source::DEFAULT_RUN_BYTES,
        trace: false,
        faults: Vec::new(),
        resume: false,
        workstation: None,
        helpers: Vec::new(),
    };
    let cancel = interrupt_flag();
    let report = caseload_engine::run::run(&spec, &TerminalObserver, &cancel)
        .context("running the quickstart stages")?;
    let code = finish(&report, false, args.wide)?;
    if args.clean {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing `{}`", dir.display()))?;
    } else {
        println!("ground truth: {}", corpus.manifest.display());
        println!(
            "try: caseload export --case {} --format bodyfile | head",
            case.display()
        );
    }
    Ok(code)
}
