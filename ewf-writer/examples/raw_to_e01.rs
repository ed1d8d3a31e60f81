//! Convert a raw image with the library alone (no `caseload` binary), for
//! profiling the writer: `raw_to_e01 IMAGE PREFIX [none|fast|best] [THREADS]`.

use caseload_ewf_writer::{Compression, RawImage, WriterOptions, convert};
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(image), Some(prefix)) = (args.next(), args.next()) else {
        return Err("usage: raw_to_e01 IMAGE PREFIX [none|fast|best] [THREADS]".into());
    };
    let compression = match args.next().as_deref() {
        Some("none") => Compression::None,
        Some("best") => Compression::Best,
        _ => Compression::Fast,
    };
    let threads = args.next().map(|t| t.parse()).transpose()?.unwrap_or(0);
    let raw = RawImage::open(&PathBuf::from(image))?;
    let options = WriterOptions {
        compression,
        threads,
        overwrite: true,
        ..WriterOptions::default()
    };
    let started = std::time::Instant::now();
    let s = convert(
        raw.reader()?,
        raw.size,
        &PathBuf::from(prefix),
        &options,
        &mut |_| {},
    )?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{} bytes -> {} bytes in {} segment(s), {:.2} s ({:.1} MB/s), {} of {} chunks compressed, md5 {}",
        s.source_size,
        s.stored_bytes,
        s.segments.len(),
        secs,
        s.source_size as f64 / secs / 1e6,
        s.compressed_chunks,
        s.chunks,
        s.md5_hex()
    );
    Ok(())
}
