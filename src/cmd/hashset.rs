//! `caseload hashset`: import hash sets into the KFF hash library, list,
//! look up and remove them; and the on-the-fly imports of `caseload run
//! --hashset`.

use super::util;
use anyhow::{Context, bail};
use caseload_engine::casedb;
use caseload_engine::channel::{Channel, ChannelKind};
use caseload_engine::hashset::{
    self, Category, Format, HashKind, ImportProgress, ImportReport, ImportRequest,
    LIBRARY_FILE_NAME, Library, Prepared, SetStatus,
};
use caseload_engine::layout::Layout;
use caseload_engine::stage::StageOptions;
use indicatif::ProgressBar;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

/// Arguments of `caseload hashset`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Import hash-set files (NSRL RDS v3 SQLite, NSRL RDS 2.x NSRLFile.txt,
    /// hashdeep, md5sum/sha1sum/sha256sum lists; detected per file) into
    /// one named set of the hash library.
    Import(ImportArgs),
    /// List the library's sets.
    List(ListArgs),
    /// Look hashes up, one per line (like `hfind -f`): prints
    /// `HASH<TAB>set:category,...` or `HASH<TAB>-`.
    Lookup(LookupArgs),
    /// Remove a set from the library.
    Remove(RemoveArgs),
}

/// Which library: a file, a directory holding `kff.sqlite`, or a layout's
/// database directory.
#[derive(Debug, clap::Args)]
struct LibraryArgs {
    /// The hash library: a file, or a directory (its `kff.sqlite`), e.g.
    /// the database channel directory.
    #[arg(long, value_name = "PATH")]
    library: Option<PathBuf>,
    /// Use `kff.sqlite` in this layout's database channel directory.
    #[arg(long, value_name = "LAYOUT.toml", conflicts_with = "library")]
    layout: Option<PathBuf>,
}

impl LibraryArgs {
    fn path(&self) -> anyhow::Result<PathBuf> {
        if let Some(p) = &self.library {
            return Ok(if p.is_dir() {
                p.join(LIBRARY_FILE_NAME)
            } else {
                p.clone()
            });
        }
        if let Some(l) = &self.layout {
            let layout = Layout::load(l)?;
            return Ok(layout.dir(ChannelKind::Database)?.join(LIBRARY_FILE_NAME));
        }
        bail!(
            "name the hash library with --library PATH (a file, or a directory for its kff.sqlite) or --layout LAYOUT.toml"
        )
    }
}

#[derive(Debug, clap::Args)]
struct ImportArgs {
    #[command(flatten)]
    library: LibraryArgs,
    /// Name of the set.
    #[arg(long)]
    name: String,
    /// `known` (ignorable, e.g. NSRL) or `notable` (alert).
    #[arg(long, value_parser = parse_category)]
    category: Category,
    /// Source files, imported together into the one set.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Source format, instead of detecting it per file: nsrl-rds3,
    /// nsrl-rds2, hashdeep, md5sum, sha1sum or sha256sum.
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// Stop at the first malformed line (nothing is imported).
    #[arg(long)]
    strict: bool,
    /// Replace a set of the same name (atomically, once the new one is
    /// complete).
    #[arg(long)]
    replace: bool,
    /// Hash kinds to import, e.g. `md5,sha1` (default: every kind the
    /// files hold).
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    hashes: Vec<HashKind>,
    /// Memory for sorting; beyond it, sorted runs spill to --temp.
    #[arg(long, default_value = "256MiB", value_parser = util::parse_size)]
    memory: u64,
    /// Directory for sort spills (default: the library's directory).
    #[arg(long, value_name = "DIR")]
    temp: Option<PathBuf>,
    /// Print the import report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    #[command(flatten)]
    library: LibraryArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct LookupArgs {
    #[command(flatten)]
    library: LibraryArgs,
    /// Use only these sets (repeatable; default: every complete set).
    #[arg(long = "set", value_name = "NAME")]
    sets: Vec<String>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// File of hashes, one per line (`-` or absent: standard input).
    file: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct RemoveArgs {
    #[command(flatten)]
    library: LibraryArgs,
    /// Name of the set.
    name: String,
}

fn parse_category(text: &str) -> Result<Category, String> {
    Category::parse(text).ok_or_else(|| format!("`{text}`: expected known or notable"))
}

fn parse_format(text: &str) -> Result<Format, String> {
    Format::parse(text).ok_or_else(|| {
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.as_str()).collect();
        format!("`{text}`: expected one of {}", names.join(", "))
    })
}

fn parse_kind(text: &str) -> Result<HashKind, String> {
    HashKind::parse(text).ok_or_else(|| format!("`{text}`: expected md5, sha1 or sha256"))
}

/// Run it.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Import(a) => import(a),
        Sub::List(a) => list(a),
        Sub::Lookup(a) => lookup(a),
        Sub::Remove(a) => remove(a),
    }
}

/// Progress bars for an import, one per phase.
struct Bars(Mutex<Option<ProgressBar>>);

impl ImportProgress for Bars {
    fn phase(&self, what: &str, total: Option<u64>, bytes: bool) {
        let mut bar = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(b) = bar.take() {
            b.finish_and_clear();
        }
        let b = util::byte_progress(total.unwrap_or(0), what);
        if !bytes {
            b.set_style(util::count_style());
        }
        if total.is_none() {
            b.unset_length();
        }
        *bar = Some(b);
    }
    fn position(&self, done: u64) {
        if let Some(b) = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            b.set_position(done);
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        if let Ok(mut bar) = self.0.lock()
            && let Some(b) = bar.take()
        {
            b.finish_and_clear();
        }
    }
}

/// Open (creating) a library with its I/O counted on a database channel
/// for its directory.
fn open_library(path: &Path) -> anyhow::Result<(Library, Channel)> {
    Ok(hashset::open_counted(path)?)
}

fn import_one(
    lib: &Library,
    request: &ImportRequest,
    temp_dir: &Path,
    cancel: &AtomicBool,
) -> anyhow::Result<ImportReport> {
    let temp = Channel::new(ChannelKind::Temp, temp_dir, Vec::new());
    let bars = Bars(Mutex::new(None));
    let report = lib.import(request, &temp, &bars, cancel);
    drop(bars);
    Ok(report?)
}

fn import(a: ImportArgs) -> anyhow::Result<ExitCode> {
    let path = a.library.path()?;
    let (lib, channel) = open_library(&path)?;
    let request = ImportRequest {
        name: a.name.clone(),
        category: a.category,
        sources: a.files.clone(),
        format: a.format,
        strict: a.strict,
        replace: a.replace,
        kinds: a.hashes.clone(),
        memory: usize::try_from(a.memory).unwrap_or(usize::MAX),
    };
    let temp_dir = a
        .temp
        .clone()
        .unwrap_or_else(|| channel.dir().to_path_buf());
    let cancel = super::util::interrupt_flag();
    let report = import_one(&lib, &request, &temp_dir, &cancel)
        .with_context(|| format!("importing set `{}` into `{}`", a.name, path.display()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, lib.path());
        let io = channel.snapshot();
        println!(
            "library I/O: {:.1} MB written in {} writes, {:.1} MB read, {} fsyncs",
            io.bytes_written as f64 / 1e6,
            io.write_ops,
            io.bytes_read as f64 / 1e6,
            io.fsyncs
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(r: &ImportReport, library: &Path) {
    let s = &r.set;
    println!(
        "set `{}` ({}) {} in {}: {} records from {} file(s) in {:.1} s",
        s.name,
        s.category,
        if r.replaced { "replaced" } else { "imported" },
        library.display(),
        s.records,
        r.sources.len(),
        r.seconds
    );
    println!(
        "  distinct hashes: md5 {}, sha1 {}, sha256 {}; {} duplicates merged; {} malformed lines skipped",
        s.md5, s.sha1, s.sha256, s.duplicates, s.malformed
    );
    for src in &r.sources {
        println!(
            "  {}: {}, {} bytes, {} records, {} malformed",
            src.path.display(),
            src.format,
            src.bytes,
            src.records,
            src.malformed
        );
    }
    for i in &r.issues {
        println!(
            "  {} line {}: {}",
            i.source.file_name().map_or_else(
                || i.source.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            ),
            i.line,
            i.message
        );
    }
    let shown = r.issues.len() as u64;
    if s.malformed + s.duplicates > shown {
        println!(
            "  (more in the library's kff_issues table: up to 10000 malformed lines and 100 duplicates are recorded per set)"
        );
    }
}

fn list(a: ListArgs) -> anyhow::Result<ExitCode> {
    let path = a.library.path()?;
    let lib = Library::open_read_only(&path, None)?;
    let sets = lib.sets()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&sets)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("library {}", path.display());
    println!(
        "{:<24} {:<8} {:<10} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
        "set", "category", "status", "records", "md5", "sha1", "sha256", "dups", "malformed"
    );
    for s in &sets {
        let status = match s.status {
            SetStatus::Importing => "importing?",
            other => other.as_str(),
        };
        println!(
            "{:<24} {:<8} {:<10} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
            s.name,
            s.category,
            status,
            s.records,
            s.md5,
            s.sha1,
            s.sha256,
            s.duplicates,
            s.malformed
        );
    }
    if sets.iter().any(|s| s.status == SetStatus::Importing) {
        println!(
            "`importing?`: being imported now, or an import that died; never used for lookups (remove it with `caseload hashset remove`)."
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn lookup(a: LookupArgs) -> anyhow::Result<ExitCode> {
    let path = a.library.path()?;
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let channel = Channel::new(ChannelKind::Database, &dir, Vec::new());
    let vfs = casedb::counting_vfs(&channel)?;
    let lib = Library::open_read_only(&path, Some(&vfs))?;
    let sets = (!a.sets.is_empty()).then_some(a.sets.as_slice());
    let threads = a
        .threads
        .unwrap_or_else(super::util::default_threads)
        .max(1);
    let mut input: Box<dyn std::io::BufRead> = match &a.file {
        Some(p) if p.as_os_str() != "-" => Box::new(std::io::BufReader::with_capacity(
            1 << 20,
            std::fs::File::open(p).with_context(|| format!("opening `{}`", p.display()))?,
        )),
        _ => Box::new(std::io::stdin().lock()),
    };
    let stdout = std::io::stdout();
    let mut output = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    let clock = std::time::Instant::now();
    let stats =
        caseload_engine::hashset::lookup_stream(&lib, sets, threads, &mut *input, &mut output)?;
    let secs = clock.elapsed().as_secs_f64();
    let io = channel.snapshot();
    eprintln!(
        "{} hashes looked up, {} found, {} invalid lines, in {:.2} s ({:.0} lookups/s, {} threads); library reads: {} ops, {:.1} MB",
        stats.looked_up,
        stats.found,
        stats.invalid,
        secs,
        stats.looked_up as f64 / secs.max(1e-9),
        threads,
        io.read_ops,
        io.bytes_read as f64 / 1e6
    );
    Ok(ExitCode::SUCCESS)
}

fn remove(a: RemoveArgs) -> anyhow::Result<ExitCode> {
    let path = a.library.path()?;
    let (lib, _) = open_library(&path)?;
    match lib.remove(&a.name)? {
        0 => bail!(
            "the library `{}` holds no set named `{}`",
            path.display(),
            a.name
        ),
        n => println!("removed {n} set(s) named `{}`", a.name),
    }
    Ok(ExitCode::SUCCESS)
}

/// `caseload run --hashset CATEGORY=FILE ... --kff-library PATH`: import
/// the named files into the library unless a complete set was made from the
/// same files (the engine's `hashset::prepare_sets`), print what was done,
/// and return the `--stage-option`s that point the `kff` stage at the
/// library and those sets (as options, so that `--instances` children get
/// them too and share the one library).
pub fn prepare_run(
    hashsets: &[String],
    kff_library: Option<&Path>,
    layout: &Layout,
    stages: &[(String, StageOptions)],
) -> anyhow::Result<Vec<String>> {
    if hashsets.is_empty() && kff_library.is_none() {
        return Ok(Vec::new());
    }
    if !stages.iter().any(|(n, _)| n == "kff") {
        bail!(
            "--hashset and --kff-library are for the kff stage, which is not being run (add it to --stages)"
        );
    }
    let path = hashset::library_path(kff_library, layout.dir(ChannelKind::Database)?);
    let mut options = vec![format!(
        "kff.library={}",
        toml::Value::String(path.to_string_lossy().into_owned())
    )];
    if hashsets.is_empty() {
        return Ok(options);
    }
    let wanted = hashset::wanted_sets(hashsets)?;
    let temp_dir = match layout.dir(ChannelKind::Temp) {
        Ok(d) => d.to_path_buf(),
        Err(_) => path.parent().unwrap_or(Path::new(".")).to_path_buf(),
    };
    let cancel = super::util::interrupt_flag();
    let bars = Bars(Mutex::new(None));
    let prepared = hashset::prepare_sets(&path, &wanted, &temp_dir, &bars, &cancel)
        .context("--hashset: importing into the hash library")?;
    drop(bars);
    for p in &prepared {
        match p {
            Prepared::Reused(name, category) => eprintln!(
                "hash set `{name}` ({category}): already in {} from the same file(s), reused",
                path.display()
            ),
            Prepared::Imported(r) => eprintln!(
                "hash set `{}` ({}): {} records (md5 {}, sha1 {}, sha256 {}), {} duplicates merged, {} malformed lines skipped, {:.1} s",
                r.set.name,
                r.set.category,
                r.set.records,
                r.set.md5,
                r.set.sha1,
                r.set.sha256,
                r.set.duplicates,
                r.set.malformed,
                r.seconds
            ),
        }
    }
    options.push(format!(
        "kff.sets={}",
        toml::Value::Array(
            wanted
                .iter()
                .map(|w| toml::Value::String(w.name.clone()))
                .collect(),
        )
    ));
    Ok(options)
}
