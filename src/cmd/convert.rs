//! `caseload convert`: make an E01 image from raw evidence.

use super::util::{byte_progress, parse_size};
use anyhow::{Context, bail};
use caseload_ewf_writer::{Compression, GuidChoice, Metadata, RawImage, WriterOptions, convert};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Arguments of `caseload convert`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Raw image to convert: one file, or the first part (`.001`) of a
    /// split image, whose following parts are taken in order.
    image: PathBuf,
    /// Output format (only `e01`).
    #[arg(long, value_parser = ["e01"])]
    to: String,
    /// Output path without extension: segments are written as PREFIX.E01,
    /// PREFIX.E02, ... (a trailing `.E01` given here is dropped).
    #[arg(long)]
    out: PathBuf,
    /// Chunk compression: none, fast (deflate level 1) or best (libdeflate
    /// level 6, smaller than zlib level 9 as libewf uses for best).
    #[arg(long, default_value = "fast", value_parser = ["none", "fast", "best"])]
    compression: String,
    /// Largest size of one segment file, e.g. 1500MiB, 4GiB.
    #[arg(long, default_value = "1500MiB", value_parser = parse_size)]
    segment_size: u64,
    /// Sectors of 512 bytes per chunk: a power of two from 1 to 8192.
    #[arg(long, default_value_t = 64)]
    chunk_sectors: u32,
    /// Case number recorded in the image.
    #[arg(long, default_value = "")]
    case_number: String,
    /// Evidence number recorded in the image.
    #[arg(long, default_value = "")]
    evidence_number: String,
    /// Examiner name recorded in the image.
    #[arg(long, default_value = "")]
    examiner: String,
    /// Description recorded in the image (default: the image's file name).
    #[arg(long)]
    description: Option<String>,
    /// Notes recorded in the image.
    #[arg(long, default_value = "")]
    notes: String,
    /// Compression threads (default: all cores); never changes the output.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Acquisition time recorded in the headers: `mtime` (the source's
    /// modification time, the default, so repeated runs give identical
    /// files), `now`, or POSIX seconds.
    #[arg(long, default_value = "mtime")]
    acquired_time: String,
    /// Use a random segment set GUID instead of one derived from the media
    /// and options (output then differs from run to run).
    #[arg(long)]
    random_guid: bool,
    /// Replace existing segment files with this prefix.
    #[arg(long)]
    force: bool,
}

fn compression(name: &str) -> Compression {
    match name {
        "none" => Compression::None,
        "best" => Compression::Best,
        _ => Compression::Fast,
    }
}

/// POSIX seconds as the 32-bit value EWF headers hold.
fn posix_seconds(t: SystemTime) -> u32 {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    u32::try_from(secs).unwrap_or(u32::MAX)
}

fn acquired_time(spec: &str, image: &Path) -> anyhow::Result<u32> {
    match spec {
        "mtime" => {
            let modified = std::fs::metadata(image)
                .and_then(|m| m.modified())
                .with_context(|| format!("reading the modification time of {}", image.display()))?;
            Ok(posix_seconds(modified))
        }
        "now" => Ok(posix_seconds(SystemTime::now())),
        other => other.parse::<u32>().with_context(|| {
            format!("--acquired-time `{other}` is not `mtime`, `now` or POSIX seconds")
        }),
    }
}

/// Drop a `.E01` the user typed as part of the prefix.
fn output_prefix(out: &Path) -> PathBuf {
    match out.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("e01") => out.with_extension(""),
        _ => out.to_path_buf(),
    }
}

/// Whether the source already is an EWF image (converting it as raw media
/// would wrap the container in another one).
fn looks_like_ewf(image: &RawImage) -> anyhow::Result<bool> {
    let mut magic = [0u8; 8];
    let mut reader = image.reader()?;
    let mut got = 0;
    while got < magic.len() {
        match reader.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("reading the start of the image"),
        }
    }
    let ewf1 = *b"EVF\x09\x0d\x0a\xff\x00";
    let ewf2 = *b"EVF2\x0d\x0a\x81\x00";
    Ok(got == magic.len() && (magic == ewf1 || magic == ewf2))
}

/// A source that fails its next read once Ctrl-C was pressed, so the writer
/// stops and removes its partial segments instead of leaving them behind.
struct Interruptible<R> {
    inner: R,
    flag: Arc<AtomicBool>,
}

impl<R: Read> Read for Interruptible<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.flag.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("interrupted"));
        }
        self.inner.read(buf)
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Convert the image.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let image = RawImage::open(&args.image)?;
    if looks_like_ewf(&image)? {
        bail!(
            "{} is already an EWF image; convert takes raw images (.dd, .raw, .001)",
            args.image.display()
        );
    }
    let description = args.description.unwrap_or_else(|| {
        args.image
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let options = WriterOptions {
        compression: compression(&args.compression),
        chunk_sectors: args.chunk_sectors,
        segment_size: args.segment_size,
        threads: args.threads,
        metadata: Metadata {
            case_number: args.case_number,
            evidence_number: args.evidence_number,
            examiner: args.examiner,
            description,
            notes: args.notes,
        },
        acquired: acquired_time(&args.acquired_time, &args.image)?,
        guid: if args.random_guid {
            GuidChoice::Random
        } else {
            GuidChoice::Derived
        },
        overwrite: args.force,
    };
    let prefix = output_prefix(&args.out);
    let interrupted = super::util::interrupt_flag();
    let reader = Interruptible {
        inner: image.reader()?,
        flag: Arc::clone(&interrupted),
    };
    let bar = byte_progress(image.size, "convert");
    let started = Instant::now();
    let summary = convert(reader, image.size, &prefix, &options, &mut |done| {
        bar.set_position(done)
    });
    bar.finish_and_clear();
    if interrupted.load(Ordering::Relaxed) {
        bail!("interrupted; the segments written so far were removed");
    }
    let summary = summary?;
    let seconds = started.elapsed().as_secs_f64();

    let parts = if image.parts.len() > 1 {
        format!(" ({} parts)", image.parts.len())
    } else {
        String::new()
    };
    println!(
        "converted {}{parts}: {:.1} MiB in {:.2} s ({:.1} MiB/s)",
        args.image.display(),
        mib(summary.source_size),
        seconds,
        mib(summary.source_size) / seconds.max(1e-9)
    );
    let first = summary
        .segments
        .first()
        .map(|s| s.path.display().to_string());
    println!(
        "wrote {} segment(s) from {}: {:.1} MiB, {:.1} % of the media ({} compression, {} of {} chunks compressed)",
        summary.segments.len(),
        first.unwrap_or_default(),
        mib(summary.stored_bytes),
        100.0 * summary.stored_bytes as f64 / summary.media_size as f64,
        summary.compression.name(),
        summary.compressed_chunks,
        summary.chunks
    );
    println!("MD5:  {}", summary.md5_hex());
    println!("SHA1: {}", summary.sha1_hex());
    println!("set identifier: {}", summary.guid_string());
    if summary.padded() {
        println!(
            "note: the source is {} bytes, not whole 512-byte sectors; the image holds it padded with {} zero bytes and its hashes cover the padded media",
            summary.source_size, summary.padding_bytes
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_e01_extension_is_dropped_from_the_prefix() {
        assert_eq!(
            output_prefix(Path::new("out/case.E01")),
            PathBuf::from("out/case")
        );
        assert_eq!(
            output_prefix(Path::new("out/case.e01")),
            PathBuf::from("out/case")
        );
        assert_eq!(
            output_prefix(Path::new("out/case.v2")),
            PathBuf::from("out/case.v2")
        );
        assert_eq!(
            output_prefix(Path::new("out/case")),
            PathBuf::from("out/case")
        );
    }

    #[test]
    fn acquired_time_accepts_seconds_and_rejects_words() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        assert_eq!(acquired_time("1700000000", &here).unwrap(), 1_700_000_000);
        assert!(acquired_time("yesterday", &here).is_err());
        assert!(acquired_time("mtime", &here).unwrap() > 1_600_000_000);
    }
}
