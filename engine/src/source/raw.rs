//! Raw images: one file, or numbered parts (`image.001`, `image.002`, ...)
//! that concatenate to the media. Requests smaller than a run are served
//! from aligned runs read whole and shared between threads
//! ([`super::runs`]); larger ones are read as asked.

use super::runs::{FLOOR_BYTES, Fetch, HINT_GAP_BYTES, ReadOptions, Run, RunReader, Runs, reuse};
use super::{EvidenceSource, SECTOR_SIZE, SourceError, SourceFormat, SourceInfo, StoredHashes};
use crate::channel::{Channel, ChannelError, ChannelFile};
use std::path::{Path, PathBuf};

/// A raw image, single or split.
#[derive(Debug)]
pub struct RawSource {
    parts: Vec<Part>,
    size: u64,
    info: SourceInfo,
    run_bytes: u64,
    runs: Runs,
}

#[derive(Debug)]
struct Part {
    file: ChannelFile,
    start: u64,
    len: u64,
}

impl RawSource {
    /// Open `path`; if its extension is a number (`.001`), open the whole run
    /// of consecutively numbered parts.
    pub fn open(path: &Path, channel: &Channel, read: ReadOptions) -> Result<Self, SourceError> {
        let paths = split_parts(path)?;
        let mut parts = Vec::with_capacity(paths.len());
        let mut start = 0u64;
        for p in &paths {
            let file = channel
                .open_path_read_only(p)
                .map_err(|e| open_error(p, e))?;
            let len = file.len().map_err(|source| SourceError::Open {
                path: p.clone(),
                source,
            })?;
            parts.push(Part { file, start, len });
            start += len;
        }
        // Every part but the last has the same size when a tool split the
        // image; a short middle part means a truncated or wrong file.
        if parts.len() > 1 {
            let first_len = parts[0].len;
            for (i, part) in parts.iter().enumerate().take(parts.len() - 1) {
                if part.len != first_len {
                    return Err(SourceError::Inconsistent {
                        path: path.to_path_buf(),
                        reason: format!(
                            "part {} (`{}`) is {} bytes but part 1 is {} bytes; a middle part is truncated or foreign",
                            i + 1,
                            paths[i].display(),
                            part.len,
                            first_len
                        ),
                    });
                }
            }
        }
        let format = if parts.len() > 1 {
            SourceFormat::SplitRaw
        } else {
            SourceFormat::Raw
        };
        let info = SourceInfo {
            format,
            files: paths,
            container_bytes: start,
            media_size: start,
            chunk_size: None,
            stored_hashes: StoredHashes::default(),
            metadata: Vec::new(),
            notes: Vec::new(),
            read_run_bytes: Some(read.run_bytes),
        };
        // Whole sectors, so a run never splits one.
        let run_bytes = read.run_bytes.div_ceil(SECTOR_SIZE).max(1) * SECTOR_SIZE;
        Ok(RawSource {
            parts,
            size: start,
            info,
            run_bytes,
            runs: Runs::new(
                run_bytes,
                FLOOR_BYTES,
                HINT_GAP_BYTES,
                start,
                // Lone requests as asked; read-ahead for sequential ones
                // under the kernel's window (larger ones are large reads).
                (u64::MAX, FLOOR_BYTES),
                read.cache_runs,
            ),
        })
    }
}

fn open_error(path: &Path, e: ChannelError) -> SourceError {
    match e {
        ChannelError::Io { source, .. } => SourceError::Open {
            path: path.to_path_buf(),
            source,
        },
        other => SourceError::Channel(other),
    }
}

/// The numbered parts starting at `first`, or just `first`.
fn split_parts(first: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let ext = first.extension().and_then(|e| e.to_str()).unwrap_or("");
    let numbered = ext.len() >= 3 && ext.bytes().all(|b| b.is_ascii_digit());
    if !numbered {
        return Ok(vec![first.to_path_buf()]);
    }
    let width = ext.len();
    let Ok(start) = ext.parse::<u64>() else {
        return Ok(vec![first.to_path_buf()]);
    };
    if start > 1 {
        return Err(SourceError::Inconsistent {
            path: first.to_path_buf(),
            reason: format!(
                "split raw images start at part .{:0width$}; open the first part",
                1
            ),
        });
    }
    let mut parts = vec![first.to_path_buf()];
    let mut n = start + 1;
    loop {
        let next = first.with_extension(format!("{n:0width$}"));
        if !next.is_file() {
            break;
        }
        parts.push(next);
        n += 1;
    }
    // A later part after a gap means one is missing, not that the set ended.
    for gap in 1..=3 {
        let beyond = first.with_extension(format!("{:0width$}", n + gap));
        if beyond.is_file() {
            return Err(SourceError::Inconsistent {
                path: first.to_path_buf(),
                reason: format!(
                    "part `{}` is missing but `{}` exists",
                    first.with_extension(format!("{n:0width$}")).display(),
                    beyond.display()
                ),
            });
        }
    }
    Ok(parts)
}

impl RawSource {
    /// Read exactly what is asked, from the parts.
    fn read_direct(&self, buf: &mut [u8], offset: u64) -> Result<usize, SourceError> {
        let mut done = 0usize;
        while done < buf.len() {
            let pos = offset + done as u64;
            if pos >= self.size {
                break;
            }
            // Parts are few; a linear search is cheaper than a tree.
            let Some((index, part)) = self
                .parts
                .iter()
                .enumerate()
                .find(|(_, p)| pos >= p.start && pos < p.start + p.len)
            else {
                break;
            };
            let within = pos - part.start;
            let want = usize::try_from((part.len - within).min((buf.len() - done) as u64))
                .unwrap_or(buf.len() - done);
            let n = part
                .file
                .read_at(&mut buf[done..done + want], within)
                .map_err(|source| SourceError::Read {
                    path: self.info.files[index].clone(),
                    offset: within,
                    source,
                })?;
            if n < want {
                // The part shrank under us: the evidence is being changed or
                // was truncated after we opened it.
                return Err(SourceError::Corrupt {
                    first_sector: (pos + n as u64) / SECTOR_SIZE,
                    last_sector: (part.start + part.len)
                        .div_ceil(SECTOR_SIZE)
                        .saturating_sub(1),
                    reason: format!(
                        "`{}` ended early ({} of {} bytes); was the file truncated?",
                        self.info.files[index].display(),
                        within + n as u64,
                        part.len
                    ),
                });
            }
            done += n;
        }
        Ok(done)
    }
}

thread_local! {
    /// A reader thread's buffer for direct reads handed to a visitor.
    static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl RunReader for RawSource {
    fn stretch(&self, _start: u64, end: u64) -> u64 {
        end
    }

    fn fill(&self, start: u64, end: u64, mut bytes: Vec<u8>) -> Option<Run> {
        let len = usize::try_from(end.saturating_sub(start)).ok()?;
        reuse(
            &mut bytes,
            len,
            usize::try_from(self.run_bytes).unwrap_or(len),
        );
        let n = self.read_direct(&mut bytes, start).ok()?;
        bytes.truncate(n);
        Some(Run {
            units: (start, start + n as u64),
            file: 0,
            start,
            bytes,
        })
    }
}

impl EvidenceSource for RawSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize, SourceError> {
        // A request of half a run or more is a large read already: read it
        // as asked, straight into the caller's buffer (no copy through a
        // run), unless a run holds it.
        if buf.len() as u64 >= self.run_bytes
            || (buf.len() as u64 >= self.run_bytes / 2 && !self.runs.holds(offset))
        {
            self.runs
                .note_direct(offset, offset.saturating_add(buf.len() as u64));
            return self.read_direct(buf, offset);
        }
        let want_end = offset.saturating_add(buf.len() as u64).min(self.size);
        let mut done = 0usize;
        while done < buf.len() {
            let pos = offset + done as u64;
            if pos >= self.size {
                break;
            }
            let run = match self.runs.fetch(pos, want_end, self) {
                Fetch::Run(run) => run,
                // A lone request, or its run could not be read whole: read
                // what is asked, so an error names its own sectors.
                Fetch::Direct => return Ok(done + self.read_direct(&mut buf[done..], pos)?),
            };
            let take = usize::try_from(run.units.1.min(want_end).saturating_sub(pos))
                .unwrap_or(0)
                .min(buf.len() - done);
            match run.slice(0, pos, take) {
                Some(bytes) if take > 0 => buf[done..done + take].copy_from_slice(bytes),
                // Short: the media ended early.
                _ => return Ok(done + self.read_direct(&mut buf[done..], pos)?),
            }
            done += take;
        }
        Ok(done)
    }

    fn hint(&self, offset: u64, len: u64) {
        self.runs
            .hint(offset, offset.saturating_add(len).min(self.size));
    }

    fn read_size(&self) -> u64 {
        self.run_bytes
    }

    fn visit(
        &self,
        offset: u64,
        len: u64,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<u64, SourceError> {
        let end = offset.saturating_add(len).min(self.size);
        let mut pos = offset;
        while pos < end {
            let left = end - pos;
            // Through the runs whatever the size: a run another thread
            // holds is not read again, and runs cost no copy here.
            if let Fetch::Run(run) = self.runs.fetch(pos, end, self)
                && let Some(bytes) = run.slice(
                    0,
                    pos,
                    usize::try_from(run.units.1.min(end).saturating_sub(pos)).unwrap_or(0),
                )
                && !bytes.is_empty()
            {
                // Straight from the run.
                visit(bytes);
                pos += bytes.len() as u64;
                continue;
            }
            // Large, lone or unreadable as a run: read as asked, a run's
            // size at a time, into this thread's buffer.
            let n = usize::try_from(left.min(self.run_bytes)).unwrap_or(0);
            let got = BUFFER.with(|b| -> Result<usize, SourceError> {
                let mut b = b.borrow_mut();
                if b.len() < n {
                    b.resize(n, 0);
                }
                let got = self.read_direct(&mut b[..n], pos)?;
                visit(&b[..got]);
                Ok(got)
            })?;
            if got == 0 {
                break;
            }
            pos += got as u64;
        }
        Ok(pos - offset.min(pos))
    }

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn damage_unit(&self) -> u64 {
        SECTOR_SIZE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ChannelKind;

    #[test]
    fn split_parts_concatenate_and_count_on_the_channel() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("img.001"), &data[..1024]).unwrap();
        std::fs::write(dir.path().join("img.002"), &data[1024..2048]).unwrap();
        std::fs::write(dir.path().join("img.003"), &data[2048..]).unwrap();
        let ch = Channel::new(ChannelKind::Evidence, dir.path(), Vec::new());
        let src =
            RawSource::open(&dir.path().join("img.001"), &ch, ReadOptions::default()).unwrap();
        assert_eq!(src.size(), 3000);
        assert_eq!(src.info().format, SourceFormat::SplitRaw);
        let mut buf = vec![0u8; 2000];
        assert_eq!(src.read_at(&mut buf, 500).unwrap(), 2000);
        assert_eq!(&buf[..], &data[500..2500]);
        // A lone request is read as asked, part by part.
        assert_eq!(ch.snapshot().bytes_read, 2000);
        assert_eq!(ch.snapshot().read_ops, 3);
        // The next one continues it: a small request, so a run from there
        // (here to the media's end) is read ahead.
        let mut tail = vec![0u8; 100];
        assert_eq!(src.read_at(&mut tail, 2500).unwrap(), 100);
        assert_eq!(&tail[..], &data[2500..2600]);
        assert_eq!(ch.snapshot().bytes_read, 2500);
        assert_eq!(src.read_at(&mut tail, 2950).unwrap(), 50);
        assert_eq!(&tail[..50], &data[2950..]);
        assert_eq!(ch.snapshot().bytes_read, 2500);

        // Inside a hinted span, runs reach as far as the span and the run
        // size allow, and later requests are served from them.
        let ch = Channel::new(ChannelKind::Evidence, dir.path(), Vec::new());
        let small = ReadOptions {
            run_bytes: 512,
            cache_runs: 2,
        };
        let src = RawSource::open(&dir.path().join("img.001"), &ch, small).unwrap();
        src.hint(0, 3000);
        let mut buf = vec![0u8; 200];
        assert_eq!(src.read_at(&mut buf, 500).unwrap(), 200);
        assert_eq!(&buf[..], &data[500..700]);
        assert_eq!(ch.snapshot().bytes_read, 512);
        assert_eq!(ch.snapshot().read_ops, 1);
        assert_eq!(src.read_at(&mut buf, 800).unwrap(), 200);
        assert_eq!(&buf[..], &data[800..1000]);
        assert_eq!(ch.snapshot().read_ops, 1);
        // Across the run's end: the rest comes from the next run.
        assert_eq!(src.read_at(&mut buf, 900).unwrap(), 200);
        assert_eq!(&buf[..], &data[900..1100]);
        assert_eq!(ch.snapshot().bytes_read, 1024);
        // The second run, 1012..1524, lies across two parts: two reads.
        assert_eq!(ch.snapshot().read_ops, 3);
        // A request of a run or more is read as asked.
        let mut big = vec![0u8; 1000];
        assert_eq!(src.read_at(&mut big, 1500).unwrap(), 1000);
        assert_eq!(&big[..], &data[1500..2500]);
        assert_eq!(ch.snapshot().bytes_read, 2024);
    }

    #[test]
    fn a_missing_or_short_middle_part_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("img.001"), [0u8; 1024]).unwrap();
        std::fs::write(dir.path().join("img.003"), [0u8; 1024]).unwrap();
        let ch = Channel::new(ChannelKind::Evidence, dir.path(), Vec::new());
        let err =
            RawSource::open(&dir.path().join("img.001"), &ch, ReadOptions::default()).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");

        std::fs::write(dir.path().join("img.002"), [0u8; 100]).unwrap();
        let err =
            RawSource::open(&dir.path().join("img.001"), &ch, ReadOptions::default()).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
    }

    #[test]
    fn missing_evidence_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let ch = Channel::new(ChannelKind::Evidence, dir.path(), Vec::new());
        let err =
            RawSource::open(&dir.path().join("nope.dd"), &ch, ReadOptions::default()).unwrap_err();
        assert!(err.to_string().contains("cannot open evidence"), "{err}");
    }
}
