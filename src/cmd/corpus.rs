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
    /// Profile: workstation (default), suspect (much deleted, wiped),
    /// usb-stick (photos, documents, archives; exFAT by default),
    /// mac-laptop (a Mac user's home with Mail and Safari; APFS by default)
    /// or linux-server (home, mail, web root, logs, package cache; ext4 by
    /// default).
    #[arg(long, default_value = "workstation")]
    profile: String,
    /// Worker threads for content generation (default: all cores); never
    /// changes the output.
    #[arg(long)]
    threads: Option<usize>,
    /// Output formats, comma-separated: `dd` (image.dd) and/or `e01`
    /// (image.E01, ..., written from the same byte stream).
    #[arg(long, default_value = "dd", value_delimiter = ',')]
    format: Vec<String>,
    /// E01 chunk compression: none, fast or best (as `caseload convert`).
    #[arg(long, default_value = "fast", value_parser = ["none", "fast", "best"])]
    e01_compression: String,
    /// Largest E01 segment file.
    #[arg(long, default_value = "1500MiB", value_parser = parse_size)]
    segment_size: u64,
    /// Partition table: mbr or gpt (default: mbr, gpt above 2 TiB).
    #[arg(long, value_parser = ["mbr", "gpt"])]
    partition_table: Option<String>,
    /// File system: fat, ntfs, exfat, apfs or ext4. NTFS is written
    /// natively (MFT with resident and fragmented files, B-tree directory
    /// indexes, deleted records as Windows leaves them), exFAT as
    /// mkfs.exfat lays it out (32 MiB at least), APFS as mkapfs lays out a
    /// container with one volume, in a GPT partition of Apple's type unless
    /// --partition-table mbr (8 MiB at least; deleted files keep no name,
    /// only their blocks), ext4 as mkfs.ext4 makes it (journal, extents,
    /// hashed directories, metadata checksums; 32 MiB at least); see
    /// docs/manifest.md. Default: ntfs for the workstation profile (fat
    /// below 68 MiB, too small for NTFS, as Windows formats a small stick),
    /// exfat for usb-stick (fat below its minimum), apfs for mac-laptop,
    /// ext4 for linux-server, fat for suspect.
    #[arg(long, value_parser = ["fat", "ntfs", "exfat", "apfs", "ext4"])]
    fs: Option<String>,
    /// FAT variant: auto, fat12, fat16 or fat32 (auto: FAT32 unless the
    /// disk is too small for it). Only with --fs fat.
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
    /// profile), 0..1.
    #[arg(long)]
    incompressible_share: Option<f64>,
    /// Share of the volume holding file content, live, deleted or residue
    /// (overrides the profile), 0.05..0.95; the rest is free space, mostly
    /// zeroed. Switches the profile's E01 ratio target off.
    #[arg(long, conflicts_with = "target_e01_ratio")]
    fill: Option<f64>,
    /// Wanted E01 compression ratio, raw size over stored size (workstation:
    /// 4, as the FTK study's disk): the used share is chosen to give it.
    /// Refused, with the reachable range, when the other knobs rule it out.
    #[arg(long)]
    target_e01_ratio: Option<f64>,
    /// Factor on every file kind's size range (default 1: the built-in
    /// ranges, about 4,700 to 5,000 live files per GiB used on NTFS).
    #[arg(long, conflicts_with = "files_per_gib_used")]
    size_scale: Option<f64>,
    /// Wanted live files per GiB of used space (Windows system volumes:
    /// about 2,000 to 6,000); the size scale is chosen to give it.
    #[arg(long)]
    files_per_gib_used: Option<f64>,
    /// Share of new user files that are mail stores (mbox, eml), 0..0.9:
    /// their messages and attachments are most of a suite's compound
    /// items (default: about 0.066).
    #[arg(long)]
    mail_share: Option<f64>,
    /// Digests of the whole image, comma-separated: md5 (always), sha1,
    /// sha256. Every file's MD5, SHA-1 and SHA-256 are computed whatever
    /// this says; the image's are what bounds generation speed on few
    /// cores (docs/manifest.md).
    #[arg(long, default_value = "md5,sha1", value_delimiter = ',')]
    digests: Vec<String>,
    /// Write no image bytes (compute hashes and manifest only): for memory
    /// checks at sizes the disk cannot hold.
    #[arg(long, hide = true)]
    discard_image: bool,
}

/// Header times of corpus E01s: 2024-01-01T00:00:00Z, fixed so that the
/// same seed always gives the same bytes.
const CORPUS_ACQUIRED: u32 = 1_704_067_200;

/// Hands the corpus byte stream to the E01 writer.
struct EwfTee<'a>(&'a mut caseload_ewf_writer::EwfWriter);

impl std::io::Write for EwfTee<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_media(buf).map_err(std::io::Error::other)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
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
    let (mut dd, mut e01) = (false, false);
    for f in &args.format {
        match f.as_str() {
            "dd" => dd = true,
            "e01" => e01 = true,
            other => bail!("unknown output format `{other}` (expected dd, e01)"),
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
    if let Some(v) = share("fill", args.fill)? {
        anyhow::ensure!(
            (0.05..=0.95).contains(&v),
            "--fill must be between 0.05 and 0.95, got {v}"
        );
        profile.fill = v;
        profile.target_e01_ratio = None;
    }
    if let Some(r) = args.target_e01_ratio {
        anyhow::ensure!(
            r.is_finite() && r >= 1.0,
            "--target-e01-ratio must be at least 1 (raw size over stored size), got {r}"
        );
        profile.target_e01_ratio = Some(r);
    }
    if let Some(x) = args.size_scale {
        let (lo, hi) = caseload_corpus::profile::SIZE_SCALE_RANGE;
        anyhow::ensure!(
            (lo..=hi).contains(&x),
            "--size-scale must be between {lo} and {hi}, got {x}"
        );
        profile.size_scale = x;
    }
    if let Some(f) = args.files_per_gib_used {
        anyhow::ensure!(
            f.is_finite() && f > 0.0,
            "--files-per-gib-used must be a positive number, got {f}"
        );
        profile.files_per_gib_used = Some(f);
    }
    if let Some(m) = args.mail_share {
        anyhow::ensure!(
            (0.0..0.9).contains(&m),
            "--mail-share must be at least 0 and below 0.9, got {m}"
        );
        profile.mail_share = Some(m);
    }
    let ntfs = match args.fs.as_deref() {
        Some(fs) => fs == "ntfs",
        // Windows disks are NTFS; one too small for NTFS is FAT (what it
        // holds is the profile's either way).
        None => profile.name == "workstation" && args.size >= caseload_corpus::ntfs::MIN_DISK,
    };
    // A USB stick is exFAT as a camera or Windows formats one; one below
    // exFAT's minimum here is FAT.
    let exfat = match args.fs.as_deref() {
        Some(fs) => fs == "exfat",
        None => profile.name == "usb-stick" && args.size >= caseload_corpus::geometry::MIN_DISK,
    };
    // A Mac's disk is APFS (the writer refuses a size under APFS's
    // minimum here, naming it).
    let apfs = match args.fs.as_deref() {
        Some(fs) => fs == "apfs",
        None => profile.name == "mac-laptop",
    };
    // A Linux server is ext4, as its installer formats it.
    let ext4 = match args.fs.as_deref() {
        Some(fs) => fs == "ext4",
        None => profile.name == "linux-server",
    };
    let fs_name = if ntfs {
        "NTFS"
    } else if apfs {
        "APFS"
    } else if ext4 {
        "ext4"
    } else {
        "exFAT"
    };
    anyhow::ensure!(
        !((ntfs || exfat || apfs || ext4) && args.fat != "auto"),
        "a FAT type (--fat) cannot be chosen for an {fs_name} volume: give --fs fat with it (the {} profile defaults to {fs_name})",
        profile.name,
    );
    let mut image_digests = caseload_corpus::ImageDigests {
        sha1: false,
        sha256: false,
    };
    for d in &args.digests {
        match d.as_str() {
            "md5" => {}
            "sha1" => image_digests.sha1 = true,
            "sha256" => image_digests.sha256 = true,
            other => bail!("unknown digest `{other}` (expected md5, sha1, sha256)"),
        }
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
        ntfs,
        decoys: args.decoys,
        discard_image: args.discard_image || !dd,
        image_digests,
    };
    // The E01 is written from the same byte stream as image.dd (never by
    // reading the image back), so both come from one pass.
    let mut writer = if e01 {
        let geometry = if ext4 {
            caseload_corpus::geometry::Geometry::plan_ext4(
                opts.size,
                opts.partition_table,
                caseload_corpus::ext4::Ids::default(),
            )?
        } else if exfat {
            caseload_corpus::geometry::Geometry::plan_exfat(opts.size, opts.partition_table)?
        } else if apfs {
            caseload_corpus::geometry::Geometry::plan_apfs(opts.size, opts.partition_table)?
        } else if opts.ntfs {
            caseload_corpus::geometry::Geometry::plan_ntfs(opts.size, opts.partition_table)?
        } else {
            caseload_corpus::geometry::Geometry::plan(opts.size, opts.partition_table, opts.fat)?
        };
        let options = caseload_ewf_writer::WriterOptions {
            compression: match args.e01_compression.as_str() {
                "none" => caseload_ewf_writer::Compression::None,
                "best" => caseload_ewf_writer::Compression::Best,
                _ => caseload_ewf_writer::Compression::Fast,
            },
            segment_size: args.segment_size,
            threads,
            metadata: caseload_ewf_writer::Metadata {
                case_number: format!("corpus-seed-{}", args.seed),
                evidence_number: "1".into(),
                examiner: "caseload corpus".into(),
                description: format!(
                    "caseload synthetic corpus, profile {}, seed {}",
                    args.profile, args.seed
                ),
                notes: String::new(),
            },
            // A fixed acquisition time keeps the E01 byte-identical per seed.
            acquired: CORPUS_ACQUIRED,
            ..Default::default()
        };
        std::fs::create_dir_all(&args.out)
            .with_context(|| format!("creating {}", args.out.display()))?;
        Some(
            caseload_ewf_writer::EwfWriter::create(
                args.out.join("image"),
                geometry.disk_bytes,
                options,
            )
            .context("starting the E01 writer")?,
        )
    } else {
        None
    };
    let bar = Bar(byte_progress(args.size, "corpus"));
    let report = match writer.as_mut() {
        Some(w) => {
            let mut tee = EwfTee(w);
            if ext4 {
                caseload_corpus::generate_ext4(&opts, &bar, Some(&mut tee))
            } else if exfat {
                caseload_corpus::generate_exfat(&opts, &bar, Some(&mut tee))
            } else if apfs {
                caseload_corpus::generate_apfs(&opts, &bar, Some(&mut tee))
            } else {
                caseload_corpus::generate_with_tee(&opts, &bar, Some(&mut tee))
            }
        }
        None if ext4 => caseload_corpus::generate_ext4(&opts, &bar, None),
        None if exfat => caseload_corpus::generate_exfat(&opts, &bar, None),
        None if apfs => caseload_corpus::generate_apfs(&opts, &bar, None),
        None => caseload_corpus::generate(&opts, &bar),
    };
    bar.0.finish_and_clear();
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            if let Some(w) = writer {
                w.abort();
            }
            return Err(e)
                .with_context(|| format!("generating the corpus in {}", args.out.display()));
        }
    };
    if let Some(w) = writer {
        let summary = w.finish().context("finishing the E01")?;
        anyhow::ensure!(
            summary.md5_hex() == report.md5,
            "the E01's MD5 {} differs from the image's {}",
            summary.md5_hex(),
            report.md5
        );
        println!(
            "wrote {} ({} segment(s), {} compression, md5 {})",
            args.out.join("image.E01").display(),
            summary.segments.len(),
            args.e01_compression,
            summary.md5_hex()
        );
    }
    let s = &report.summary;
    println!(
        "wrote {} ({} bytes, {:?} {}, md5 {})",
        report
            .image
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "no image (discarded)".into()),
        report.size,
        report.table,
        report.fs_type.name(),
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
    if s.dropped_files > 0 {
        eprintln!(
            "note: {} planned files did not fit their groups' clusters and were left out \
             (summary.dropped_files): the fill is high for this file system's cluster size",
            s.dropped_files
        );
    }
    println!("manifest: {}", report.manifest.display());
    Ok(ExitCode::SUCCESS)
}
