//! Converting a raw image: open it (single file or split `.001`, `.002`,
//! ...) and stream it through an [`EwfWriter`].

use crate::error::EwfWriteError;
use crate::options::WriterOptions;
use crate::writer::{EwfWriter, Summary};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// A raw image: one file, or the numbered parts of a split image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawImage {
    /// The files, in order.
    pub parts: Vec<PathBuf>,
    /// Their total size.
    pub size: u64,
}

/// For `name.001`, the path of part `n` (`name.002`, ...); `None` when the
/// path does not look like the first part of a split image.
fn split_part(first: &Path, n: usize) -> Option<PathBuf> {
    let ext = first.extension()?.to_str()?;
    if ext.len() < 3 || !ext.bytes().all(|b| b.is_ascii_digit()) || ext.parse::<u64>().ok()? != 1 {
        return None;
    }
    let width = ext.len();
    Some(first.with_extension(format!("{n:0width$}")))
}

impl RawImage {
    /// Open `path`. A path ending in `.001` (or `.0001`...) also takes the
    /// parts that follow it (`.002`, `.003`, ... up to the first missing one).
    pub fn open(path: &Path) -> Result<RawImage, EwfWriteError> {
        let open_error = |p: &Path, source: io::Error| EwfWriteError::SourceOpen {
            path: p.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(|e| open_error(path, e))?;
        if !meta.is_file() {
            return Err(open_error(
                path,
                io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
            ));
        }
        let mut parts = vec![path.to_path_buf()];
        let mut size = meta.len();
        let mut n = 2;
        while let Some(next) = split_part(path, n) {
            match std::fs::metadata(&next) {
                Ok(m) if m.is_file() => {
                    size += m.len();
                    parts.push(next);
                    n += 1;
                }
                _ => break,
            }
        }
        Ok(RawImage { parts, size })
    }

    /// A reader over all parts in order.
    pub fn reader(&self) -> Result<Box<dyn Read + Send>, EwfWriteError> {
        let mut chain: Box<dyn Read + Send> = Box::new(io::empty());
        for p in &self.parts {
            let f = File::open(p).map_err(|source| EwfWriteError::SourceOpen {
                path: p.clone(),
                source,
            })?;
            chain = Box::new(chain.chain(f));
        }
        Ok(chain)
    }
}

/// Write `size` bytes read from `reader` as an EWF image at `prefix`,
/// calling `progress` with the bytes done so far after each block.
///
/// On any error (unreadable or short source, full disk, ...) the segment
/// files already written are removed before the error is returned.
pub fn convert(
    mut reader: impl Read,
    size: u64,
    prefix: &Path,
    options: &WriterOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Summary, EwfWriteError> {
    let mut writer = EwfWriter::create(prefix, size, options.clone())?;
    let mut done = 0u64;
    while done < size {
        // The writer reads into its own batch buffers: no copy on the way.
        let n = writer.read_media(&mut reader)?;
        if n == 0 {
            return Err(EwfWriteError::ShortMedia {
                expected: size,
                got: done,
            });
        }
        done += n as u64;
        progress(done);
    }
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_parts_follow_the_first_ones_width() {
        assert_eq!(
            split_part(Path::new("/x/disk.001"), 2),
            Some(PathBuf::from("/x/disk.002"))
        );
        assert_eq!(
            split_part(Path::new("disk.0001"), 12),
            Some(PathBuf::from("disk.0012"))
        );
        assert_eq!(split_part(Path::new("disk.dd"), 2), None);
        assert_eq!(split_part(Path::new("disk.002"), 3), None);
        assert_eq!(split_part(Path::new("disk.01"), 2), None);
    }
}
