//! The carve stage's parsers of evidence bytes, driven one item at a time
//! as the scan drives them, for the fuzz targets (`caseload-fuzzing`).
//!
//! The scan reaches a delimiter only after a header matched, and feeds it
//! the following bytes in blocks whose boundaries fall anywhere; these
//! functions do the same with the fuzzer's bytes, so a panic found here is
//! a panic a crafted image could cause in a run.

use super::conf;
use super::formats::{Cut, Format, Step};
use super::meta::{self, FatSectorParser, Report};
use super::signatures;
use std::path::Path;

/// Feed `item` to `delimiter` in blocks of `block` bytes until it ends,
/// then end it at the range's end: the scan's calls, in its order.
fn delimit(delimiter: &mut dyn super::formats::Delimiter, item: &[u8], block: usize) -> u64 {
    let mut fed = 0u64;
    for piece in item.chunks(block.max(1)) {
        match delimiter.feed(piece) {
            Step::More => fed += piece.len() as u64,
            Step::End { len, .. } => return len,
            Step::Reject => return 0,
        }
    }
    let _ = delimiter.accepted();
    let _ = delimiter.outlasts_probation();
    let _ = delimiter.mark();
    let _ = delimiter.final_type();
    match delimiter.finish(Cut::RangeEnd, fed) {
        Step::End { len, .. } => len,
        Step::More | Step::Reject => 0,
    }
}

/// One built-in format's delimiter and verifier over an item: the first
/// byte of `data` picks the format, the second the block size; the item
/// is the format's first header followed by the rest.
pub fn builtin_item(data: &[u8]) {
    let (Some(&pick), Some(&block)) = (data.first(), data.get(1)) else {
        return;
    };
    let formats = Format::all();
    let format = formats[usize::from(pick) % formats.len()];
    let header = format.headers().first().map_or(&[][..], |h| h.bytes);
    let mut item = header.to_vec();
    item.extend_from_slice(&data[2..]);
    let block = 1 + usize::from(block) * 61;
    let len = delimit(format.delimiter().as_mut(), &item, block);
    if let Some(mut verifier) = format.verifier() {
        for piece in item.chunks(block) {
            verifier.update(piece);
        }
        let _ = verifier.finish(len.min(item.len() as u64));
    }
}

/// A scalpel/foremost signature file (the bytes before the first NUL),
/// then, if it parses, every signature's delimiter over the bytes after.
pub fn signature_file(data: &[u8]) {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let path = Path::new("fuzz.conf");
    let Ok(parsed) = conf::parse(&data[..split], path) else {
        return;
    };
    let item = data.get(split + 1..).unwrap_or_default();
    for sig in signatures::user(parsed, path).iter().take(64) {
        let _ = sig.ends_at_own_header();
        delimit(sig.delimiter().as_mut(), item, 509);
    }
}

/// Meta carving over sectors: FAT directory entries (with long names
/// carried across sectors) and NTFS `FILE` records with their fixups,
/// attributes and runs, where the bytes look like them.
pub fn meta_records(data: &[u8]) {
    let mut fat = FatSectorParser::default();
    for (i, sector) in data.chunks(512).enumerate() {
        let at = i as u64 * 512;
        if meta::is_dir_sector(sector, None) {
            fat.sector(sector, at, None, Report::All, &mut |_| {});
        }
        if meta::is_file_record_start(sector) {
            let size = meta::declared_record_size(sector).unwrap_or(1024);
            let start = i * 512;
            let end = start.saturating_add(usize::try_from(size).unwrap_or(1024));
            if let Some(rec) = data.get(start..end) {
                let _ = meta::parse_file_record(rec.to_vec(), at, None);
            }
        }
    }
    if let Some((geometry, _mft)) = meta::ntfs_boot(0, data) {
        for (i, chunk) in data.chunks(1024).enumerate().skip(1).take(64) {
            let _ = meta::parse_file_record(chunk.to_vec(), i as u64 * 1024, Some(&geometry));
        }
    }
}
