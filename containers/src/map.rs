//! What each format's parser answers, and the one read loop over it: a
//! format maps a media offset to a run of bytes that are zeros, plain file
//! data, or part of a compressed unit; [`read`] turns runs into bytes.

use crate::error::ContainerError;
use crate::io::Files;
use std::sync::{Arc, Mutex};

/// How a compressed unit is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    /// RFC 1950 zlib stream (VMDK stream-optimized grains).
    Zlib,
    /// RFC 1951 raw deflate (QCOW2 compressed clusters).
    RawDeflate,
}

/// A compressed grain or cluster.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Compressed {
    pub(crate) file: usize,
    /// Where the compressed bytes start in the file.
    pub(crate) offset: u64,
    /// At most this many compressed bytes (clipped to the file's end).
    pub(crate) stored: u64,
    pub(crate) codec: Codec,
    /// Bytes the unit inflates to.
    pub(crate) out_len: u64,
    /// Where the mapped run starts inside the inflated unit.
    pub(crate) skip: u64,
}

/// Where a run of media bytes comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Piece {
    /// Not stored: reads as zeros.
    Zero,
    /// Stored as is at `offset` of `file`.
    Data { file: usize, offset: u64 },
    /// Inside a compressed unit.
    Compressed(Compressed),
}

/// A run of media bytes with one source, starting at the offset asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mapping {
    /// Bytes in the run (at least 1).
    pub(crate) len: u64,
    pub(crate) piece: Piece,
    /// The media range of the unit (grain, cluster, block) the run lies in,
    /// named by errors reading it.
    pub(crate) unit: (u64, u64),
}

/// What a format's parser hands back.
pub(crate) struct Opened {
    /// The format's name of its variant.
    pub(crate) variant: String,
    /// Media size in bytes.
    pub(crate) size: u64,
    /// The damage unit.
    pub(crate) unit: u64,
    pub(crate) layout: Box<dyn Layout>,
}

/// A format's view of its media.
pub(crate) trait Layout: Send + Sync {
    /// The run of media bytes starting at `offset` (< media size).
    fn map(&self, files: &Files, offset: u64) -> Result<Mapping, ContainerError>;
}

/// Inflated units kept for the next read of the same grain or cluster.
pub(crate) struct UnitCache {
    entries: Mutex<Vec<Unit>>,
}

/// An inflated unit: its file, its offset there, its bytes.
type Unit = (usize, u64, Arc<Vec<u8>>);

/// Inflated units kept at most (a few grains; a QCOW2 cluster is at most
/// 2 MiB, a VMDK grain at most 16 MiB).
const UNITS: usize = 4;

impl UnitCache {
    pub(crate) fn new() -> UnitCache {
        UnitCache {
            entries: Mutex::new(Vec::new()),
        }
    }

    fn get(&self, file: usize, offset: u64) -> Option<Arc<Vec<u8>>> {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let at = e.iter().position(|(f, o, _)| *f == file && *o == offset)?;
        // Most recent last.
        let hit = e.remove(at);
        let data = Arc::clone(&hit.2);
        e.push(hit);
        Some(data)
    }

    fn put(&self, file: usize, offset: u64, data: Arc<Vec<u8>>) {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if e.len() >= UNITS {
            e.remove(0);
        }
        e.push((file, offset, data));
    }
}

/// Reads media bytes `offset..offset + buf.len()` (the caller clips to the
/// media size).
pub(crate) fn read(
    layout: &dyn Layout,
    files: &Files,
    units: &UnitCache,
    damage_unit: u64,
    buf: &mut [u8],
    offset: u64,
) -> Result<(), ContainerError> {
    let mut done = 0usize;
    while done < buf.len() {
        let pos = offset + done as u64;
        let m = layout.map(files, pos).map_err(|e| {
            let start = pos - pos % damage_unit.max(1);
            e.at_media(start, start.saturating_add(damage_unit.max(1)))
        })?;
        let want = buf.len() - done;
        let n = usize::try_from(m.len).map_or(want, |l| l.min(want));
        if n == 0 {
            return Err(ContainerError::Corrupt {
                start: m.unit.0,
                end: m.unit.1,
                path: files.path(0).to_path_buf(),
                offset: 0,
                what: "a table maps an empty run".into(),
            });
        }
        let out = &mut buf[done..done + n];
        match m.piece {
            Piece::Zero => out.fill(0),
            Piece::Data { file, offset: at } => {
                files
                    .read_exact(file, at, out, "data")
                    .map_err(|e| e.at_media(m.unit.0, m.unit.1))?;
            }
            // A whole unit asked for (a sequential reader's usual case):
            // inflated straight into the caller's buffer, with no copy and
            // no cache entry that no later read would use.
            Piece::Compressed(c) if c.skip == 0 && n as u64 == c.out_len => {
                inflate_into(files, &c, out).map_err(|e| e.at_media(m.unit.0, m.unit.1))?;
            }
            Piece::Compressed(c) => {
                let data = match units.get(c.file, c.offset) {
                    Some(d) => d,
                    None => {
                        let d = Arc::new(
                            inflate(files, &c).map_err(|e| e.at_media(m.unit.0, m.unit.1))?,
                        );
                        units.put(c.file, c.offset, Arc::clone(&d));
                        d
                    }
                };
                let skip = usize::try_from(c.skip).unwrap_or(usize::MAX);
                let have = data.get(skip..).unwrap_or(&[]);
                let k = have.len().min(n);
                out[..k].copy_from_slice(&have[..k]);
                out[k..].fill(0);
            }
        }
        done += n;
    }
    Ok(())
}

/// Inflates one compressed unit. A unit that inflates to fewer bytes than
/// `out_len` with a proper stream end is kept (the rest reads as zeros: the
/// last grain of a disk may be written short); a bad stream is an error.
fn inflate(files: &Files, c: &Compressed) -> Result<Vec<u8>, ContainerError> {
    let out_len = usize::try_from(c.out_len).map_err(|_| {
        crate::error::format(files.path(c.file), c.offset, "compressed unit too large")
    })?;
    let mut out = vec![0u8; out_len];
    inflate_into(files, c, &mut out)?;
    Ok(out)
}

/// Inflates one compressed unit into `out` (its inflated length).
fn inflate_into(files: &Files, c: &Compressed, out: &mut [u8]) -> Result<(), ContainerError> {
    let path = files.path(c.file);
    let available = files.len(c.file).saturating_sub(c.offset);
    if available == 0 {
        return Err(crate::error::format(
            path,
            c.offset,
            format!(
                "compressed data lies past the end of the file (size {})",
                files.len(c.file)
            ),
        ));
    }
    // Never more than the unit could take compressed, however the table
    // claims.
    let cap = c.out_len.saturating_mul(2).saturating_add(4096);
    let stored = c.stored.min(available).min(cap);
    let stored = usize::try_from(stored).unwrap_or(0);
    INPUT.with_borrow_mut(|input| {
        // The thread's buffer, grown as needed and never zeroed again: the
        // read fills what the inflater looks at.
        if input.len() < stored {
            input.resize(stored, 0);
        }
        let got = files.read_some(c.file, c.offset, &mut input[..stored])?;
        inflate_stored(&files.inflater, c, path, &input[..got], out)
    })
}

thread_local! {
    /// Compressed bytes of the unit being inflated, per reading thread.
    static INPUT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Inflates `input`, the stored bytes of `c`, into `out`.
fn inflate_stored(
    inflater: &caseload_inflate::Inflater,
    c: &Compressed,
    path: &std::path::Path,
    input: &[u8],
    out: &mut [u8],
) -> Result<(), ContainerError> {
    let out_len = out.len();
    let format = match c.codec {
        Codec::Zlib => caseload_inflate::Format::Zlib,
        Codec::RawDeflate => caseload_inflate::Format::Deflate,
    };
    let done = inflater.inflate(format, input, out).map_err(|e| {
        crate::error::format(
            path,
            c.offset,
            format!("compressed data does not inflate: {e}"),
        )
    })?;
    let produced = done.produced;
    if !done.stream_end && produced != out_len {
        return Err(crate::error::format(
            path,
            c.offset,
            format!(
                "compressed data ends early: {produced} of {out_len} bytes inflated from {} stored",
                input.len()
            ),
        ));
    }
    out[produced..].fill(0);
    Ok(())
}
