//! Hash sets and the hash library behind the `kff` (Known File Filter)
//! stage.
//!
//! A *hash set* is a named list of hashes tagged `known` (ignorable, such as
//! the NSRL) or `notable` (alert). Sets are imported from the formats
//! examiners actually hold ([`Format`]): NSRL RDS v3 (SQLite, the `FILE`
//! table or view), NSRL RDS 2.x `NSRLFile.txt` (quoted CSV), hashdeep files
//! and md5sum/sha1sum/sha256sum lists, into a *hash library*: a SQLite
//! database that lives on the database channel, separate from any one case so
//! that many cases share it, as a suite's KFF library is. Its layout is in
//! `docs/schema.md` ("Hash library").
//!
//! Import is streamed: each source is parsed once, its hashes go through an
//! external sort (bounded memory, runs spilled to a temp channel) and are
//! appended to the library's B-trees in key order, so importing 100 million
//! entries needs no more memory than importing ten. A set becomes visible to
//! lookups only once it is marked `complete`, at the very end; a failed or
//! interrupted import is never mistaken for a whole set.
//!
//! Lookups ([`Lookup`]) are point queries on `WITHOUT ROWID` tables keyed on
//! the binary hash: small random reads on the database drive, the access
//! pattern that made database IOPS decisive in the FTK study.

mod formats;
mod library;
mod lookup;
mod prepare;
mod sort;

pub use formats::{Format, detect_format};
pub use library::{
    ImportProgress, ImportReport, ImportRequest, Issue, IssueKind, LIBRARY_FILE_NAME,
    LIBRARY_SCHEMA_VERSION, Library, NoImportProgress, SetInfo, SetStatus, SourceReport,
};
pub use lookup::{Lookup, Query, SetLookup, StreamStats, find_parallel, lookup_stream};
pub use prepare::{Prepared, WantedSet, library_path, open_counted, prepare_sets, wanted_sets};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What a hash set means for a file whose hash is in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// Known and ignorable (operating system and application files).
    Known,
    /// Notable: the examiner must see it.
    Notable,
}

impl Category {
    /// The name stored in the library and the case database.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Known => "known",
            Category::Notable => "notable",
        }
    }

    /// Parse `known` or `notable`.
    pub fn parse(text: &str) -> Option<Category> {
        match text {
            "known" => Some(Category::Known),
            "notable" => Some(Category::Notable),
            _ => None,
        }
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A hash algorithm a set may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HashKind {
    /// MD5, 16 bytes.
    Md5,
    /// SHA-1, 20 bytes.
    Sha1,
    /// SHA-256, 32 bytes.
    Sha256,
}

impl HashKind {
    /// Every kind, in table order.
    pub const ALL: [HashKind; 3] = [HashKind::Md5, HashKind::Sha1, HashKind::Sha256];

    /// Digest length in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            HashKind::Md5 => 16,
            HashKind::Sha1 => 20,
            HashKind::Sha256 => 32,
        }
    }

    /// Lower-case name (`md5`, `sha1`, `sha256`), also the case database's
    /// column name.
    pub fn as_str(self) -> &'static str {
        match self {
            HashKind::Md5 => "md5",
            HashKind::Sha1 => "sha1",
            HashKind::Sha256 => "sha256",
        }
    }

    /// Name for messages (`MD5`, `SHA-1`, `SHA-256`).
    pub fn label(self) -> &'static str {
        match self {
            HashKind::Md5 => "MD5",
            HashKind::Sha1 => "SHA-1",
            HashKind::Sha256 => "SHA-256",
        }
    }

    /// The kind whose hex form has `digits` digits.
    pub fn from_hex_len(digits: usize) -> Option<HashKind> {
        match digits {
            32 => Some(HashKind::Md5),
            40 => Some(HashKind::Sha1),
            64 => Some(HashKind::Sha256),
            _ => None,
        }
    }

    /// Parse `md5`, `sha1` or `sha256` (also `sha-1`, `sha-256`, any case).
    pub fn parse(text: &str) -> Option<HashKind> {
        match text.to_ascii_lowercase().as_str() {
            "md5" => Some(HashKind::Md5),
            "sha1" | "sha-1" => Some(HashKind::Sha1),
            "sha256" | "sha-256" => Some(HashKind::Sha256),
            _ => None,
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            HashKind::Md5 => 0,
            HashKind::Sha1 => 1,
            HashKind::Sha256 => 2,
        }
    }
}

impl std::fmt::Display for HashKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Errors that stop an import or a lookup. Problems with single lines are
/// not errors (unless the import is strict): they are [`Issue`]s.
#[derive(Debug, thiserror::Error)]
pub enum HashSetError {
    /// A source file could not be read.
    #[error("`{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A source file has no bytes at all.
    #[error("`{}` is empty: a hash set needs at least one entry", .0.display())]
    Empty(PathBuf),
    /// A source holds no usable entry (only a header, comments or bad lines).
    #[error("`{}` holds no valid hash entry ({reason})", path.display())]
    NoEntries {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// The format could not be recognised.
    #[error("cannot tell the format of `{}` ({reason}); name it with --format (nsrl-rds3, nsrl-rds2, hashdeep, md5sum, sha1sum, sha256sum)", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// What the start of the file looks like.
        reason: String,
    },
    /// The file does not have the structure its (given or detected) format
    /// requires.
    #[error("`{}` is not valid {format}: {reason}", path.display())]
    BadFormat {
        /// The file.
        path: PathBuf,
        /// The format.
        format: Format,
        /// Why.
        reason: String,
    },
    /// A strict import met a malformed line.
    #[error("`{}` line {line}: {message} (strict import stopped; nothing was imported)", path.display())]
    Strict {
        /// The file.
        path: PathBuf,
        /// 1-based line (row for SQLite sources).
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// An RDS v3 source is truncated or damaged.
    #[error("`{}` is a damaged or truncated SQLite file: {reason}", path.display())]
    DamagedSqlite {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// SQLite failed on the library or a source database.
    #[error("`{}`: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// The file is not a caseload hash library (of this version).
    #[error("`{}` is not a caseload hash library of version {LIBRARY_SCHEMA_VERSION} ({reason})", path.display())]
    NotALibrary {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A complete set of that name exists and replacing was not asked for.
    #[error("the library already holds a set named `{0}` (remove it first, or replace it)")]
    SetExists(String),
    /// No complete set of that name.
    #[error("the library holds no complete set named `{0}`")]
    NoSuchSet(String),
    /// The set name is unusable.
    #[error("invalid set name `{0}`: use 1 to 200 characters, no control characters")]
    BadName(String),
    /// Options are contradictory or empty.
    #[error("{0}")]
    Invalid(String),
    /// A spill file on the temp channel failed.
    #[error(transparent)]
    Channel(#[from] crate::channel::ChannelError),
    /// The counting VFS could not be set up.
    #[error(transparent)]
    Db(#[from] crate::casedb::DbError),
    /// The import was interrupted; nothing was marked complete.
    #[error("interrupted; the set was not imported")]
    Interrupted,
}

/// Decode `digits` hex digits (either case) into `out`; `out.len() * 2`
/// digits are required.
///
/// Hand-written rather than taken from a crate because the error has to say
/// exactly what is wrong with a line (its length or the offending
/// character), and this runs once per digit of a 100-million-line file.
pub(crate) fn decode_hex(digits: &[u8], out: &mut [u8]) -> Result<(), HexError> {
    if digits.len() != out.len() * 2 {
        return Err(HexError::Length(digits.len()));
    }
    for (i, (o, pair)) in out.iter_mut().zip(digits.chunks_exact(2)).enumerate() {
        let hi = HEX[usize::from(pair[0])];
        let lo = HEX[usize::from(pair[1])];
        if hi == 0xFF {
            return Err(HexError::NotHex(i * 2, pair[0]));
        }
        if lo == 0xFF {
            return Err(HexError::NotHex(i * 2 + 1, pair[1]));
        }
        *o = (hi << 4) | lo;
    }
    Ok(())
}

/// Why a hex field was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HexError {
    /// It has this many characters instead of the digest's.
    Length(usize),
    /// The character at this 0-based position is not a hex digit.
    NotHex(usize, u8),
}

impl HexError {
    /// A message naming the field's hash kind.
    pub(crate) fn describe(self, kind: HashKind, field: &[u8]) -> String {
        match self {
            HexError::Length(n) => format!(
                "{} `{}` has {n} characters, expected {} hex digits",
                kind.label(),
                shown(field),
                kind.digest_len() * 2
            ),
            HexError::NotHex(at, byte) => format!(
                "{} `{}` has a non-hex character {} at position {}",
                kind.label(),
                shown(field),
                shown_byte(byte),
                at + 1
            ),
        }
    }
}

/// A field for a message: at most 80 characters, invalid UTF-8 replaced.
pub(crate) fn shown(field: &[u8]) -> String {
    let text = String::from_utf8_lossy(&field[..field.len().min(80)]);
    let mut s: String = text
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if field.len() > 80 {
        s.push('…');
    }
    s
}

fn shown_byte(b: u8) -> String {
    if b.is_ascii_graphic() || b == b' ' {
        format!("`{}`", b as char)
    } else {
        format!("0x{b:02X}")
    }
}

const HEX: [u8; 256] = {
    let mut t = [0xFFu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_decodes_both_cases_and_names_what_is_wrong() {
        let mut out = [0u8; 4];
        decode_hex(b"00fFa5C3", &mut out).unwrap();
        assert_eq!(out, [0x00, 0xFF, 0xA5, 0xC3]);
        assert_eq!(decode_hex(b"00ff", &mut out), Err(HexError::Length(4)));
        assert_eq!(
            decode_hex(b"00fgaaaa", &mut out),
            Err(HexError::NotHex(3, b'g'))
        );
        let msg = HexError::NotHex(3, b'g').describe(HashKind::Md5, b"00fg");
        assert!(msg.contains("non-hex character `g` at position 4"), "{msg}");
        let msg = HexError::Length(31).describe(HashKind::Md5, &[b'a'; 31]);
        assert!(msg.contains("31 characters, expected 32"), "{msg}");
    }

    #[test]
    fn kinds_round_trip() {
        for k in HashKind::ALL {
            assert_eq!(HashKind::parse(k.as_str()), Some(k));
            assert_eq!(HashKind::from_hex_len(k.digest_len() * 2), Some(k));
        }
        assert_eq!(HashKind::parse("SHA-256"), Some(HashKind::Sha256));
        assert_eq!(Category::parse("known"), Some(Category::Known));
        assert_eq!(Category::parse("bad"), None);
    }
}
