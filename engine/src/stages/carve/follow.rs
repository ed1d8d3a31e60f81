//! Following broken items along the file system's own map.
//!
//! A data item whose contiguous carve ended broken (invalid or cut short)
//! may be a fragmented file. When its header is the first byte of a file
//! whose clusters the filesystem stage mapped exactly (a live file, or a
//! deleted NTFS file whose record still lists its runs) and that file has
//! more than one run, the item is carved again along that map: the
//! format's delimiter walks the joined bytes to find where the item ends,
//! and its verifier checks them, so the item is stored valid only when the
//! joined bytes pass every check the format allows. This recovers
//! fragmented files in allocated space and alternate data streams when the
//! scope is the partition or the image (DFTT #8's JPEG in an ADS).
//!
//! Deleted FAT files are not followed: their cluster chain is gone and the
//! filesystem stage's contiguous guess is exactly what the carve already
//! tried. Reassembly from content alone (trying which sector continues a
//! broken JPEG) is not attempted: JPEG's Huffman codes resynchronise on
//! other JPEG data and decode zeroed or flat data as valid codes, so on
//! DFTT #8 syntactic checks and block-edge continuity both ranked wrong
//! continuations above the true one.

use super::formats::{Cut, Step, Validation, Verdict};
use super::ids::{Ids, rank};
use super::sink::{Piece, Sink, Start, from_extents, read_pieces};
use crate::casedb::CaseReader;
use crate::stage::{StageContext, StageError};
use std::collections::HashSet;
use std::sync::atomic::Ordering;

/// Bytes read per delimiter feed.
const CHUNK: usize = 256 << 10;

/// A file the filesystem stage mapped exactly, starting at an offset.
struct Mapped {
    path: String,
    pieces: Vec<Piece>,
}

/// Where the fragmented, exactly mapped files of the evidence start: the
/// broken items worth following (the set is as large as the file
/// system's count of such files, never the image's item count).
pub fn fragmented_starts(
    reader: &mut CaseReader,
    evidence_id: i64,
) -> Result<HashSet<u64>, StageError> {
    Ok(reader.fragmented_file_starts(evidence_id)?)
}

/// Fragmented, exactly mapped files whose content starts at `offset`.
fn mapped_at(
    reader: &mut CaseReader,
    evidence_id: i64,
    offset: u64,
) -> Result<Vec<Mapped>, StageError> {
    Ok(reader
        .mapped_files_at(evidence_id, offset)?
        .into_iter()
        .map(|(path, extents)| Mapped {
            path,
            pieces: from_extents(&extents),
        })
        .collect())
}

/// The first `len` bytes of `pieces`.
fn cut(pieces: &[Piece], mut len: u64) -> Vec<Piece> {
    let mut out = Vec::new();
    for p in pieces {
        if len == 0 {
            break;
        }
        let take = p.len().min(len);
        out.push(match *p {
            Piece::At(o, _) => Piece::At(o, take),
            Piece::Zeros(_) => Piece::Zeros(take),
        });
        len -= take;
    }
    out
}

/// Where an item ends, as its format's delimiter says.
struct End {
    len: u64,
    verdict: Verdict,
    final_type: Option<(&'static str, &'static str)>,
}

/// Where the item of `b`'s format starting the mapped file ends, or
/// `None` if the file's bytes do not hold a complete item.
fn item_end(
    ctx: &StageContext<'_>,
    b: &Start,
    pieces: &[Piece],
) -> Result<Option<End>, StageError> {
    let Some(format) = b.builtin else {
        return Ok(None);
    };
    let whole: u64 = pieces.iter().map(Piece::len).sum();
    let total = whole.min(b.max_size);
    let mut delimiter = format.delimiter();
    let mut buf = vec![0u8; CHUNK.min(usize::try_from(total).unwrap_or(CHUNK))];
    let mut fed = 0u64;
    let mut step = Step::More;
    while fed < total && step == Step::More {
        ctx.check_cancel()?;
        let n = usize::try_from((total - fed).min(buf.len() as u64)).unwrap_or(buf.len());
        if read_pieces(ctx, pieces, fed, &mut buf[..n]).is_err() {
            return Ok(None);
        }
        step = delimiter.feed(&buf[..n]);
        fed += n as u64;
    }
    if step == Step::More {
        let cut = if whole > total {
            Cut::MaxSize
        } else {
            Cut::RangeEnd
        };
        step = delimiter.finish(cut, fed);
    }
    Ok(match step {
        Step::End { len, verdict } if len > 0 && verdict.validation != Validation::Truncated => {
            Some(End {
                len,
                verdict,
                final_type: delimiter.final_type(),
            })
        }
        _ => None,
    })
}

/// What following did.
#[derive(Debug, Default)]
pub struct Followed {
    /// Items stored.
    pub stored: u64,
    /// Every item numbered, stored or dropped, as `(header offset, id)`.
    pub numbered: Vec<(u64, i64)>,
}

/// Follow the broken items the sink collected along the maps of the files
/// they start, storing those found as new rows after the scan's (in header
/// order, so ids do not depend on the thread count). Ids are `ids`, or in
/// a single run from one past the table's highest. The scan's rows must
/// have been flushed.
pub fn broken_items(
    ctx: &StageContext<'_>,
    sink: &Sink<'_>,
    ids: Option<Ids>,
) -> Result<Followed, StageError> {
    let Some((_, list)) = &sink.broken else {
        return Ok(Followed::default());
    };
    let mut broken = std::mem::take(
        &mut *list
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    if broken.is_empty() {
        return Ok(Followed::default());
    }
    broken.sort_by_key(|b| (b.offset, rank(b.id)));
    let mut reader = ctx.db.reader()?;
    let ids = match ids {
        Some(ids) => ids,
        None => Ids::From(reader.next_carved_id()?),
    };
    let stored_before = sink.items.load(Ordering::Relaxed);
    let mut numbered = Vec::new();
    for b in &broken {
        for m in mapped_at(&mut reader, ctx.evidence_id, b.offset)? {
            let Some(end) = item_end(ctx, b, &m.pieces)? else {
                continue;
            };
            let pieces = cut(&m.pieces, end.len);
            if pieces.len() < 2 {
                // The item ends inside the first run: the contiguous carve
                // saw the same bytes.
                continue;
            }
            let id = ids.at(numbered.len() as u64).ok_or_else(|| {
                StageError::Other("more followed items than one part may number".into())
            })?;
            sink.followed(id, b, &pieces, &m.path, end.verdict, end.final_type);
            numbered.push((b.offset, id));
            break;
        }
        sink.take_fatal()?;
    }
    ctx.db.writer().flush()?;
    Ok(Followed {
        stored: sink.items.load(Ordering::Relaxed) - stored_before,
        numbered,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_cut_to_a_length() {
        let p = vec![
            Piece::At(1024, 512),
            Piece::Zeros(100),
            Piece::At(4096, 1000),
        ];
        let c = cut(&p, 700);
        assert_eq!(c.len(), 3);
        assert_eq!(c.iter().map(Piece::len).sum::<u64>(), 700);
        assert!(matches!(c[2], Piece::At(4096, 88)));
    }
}
