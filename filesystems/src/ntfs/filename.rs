//! `$FILE_NAME` structures (attribute values and directory index keys),
//! parsed by the `ntfs` crate.

use std::num::NonZeroU64;

use ntfs::indexes::NtfsIndexEntryKey;
use ntfs::structured_values::{NtfsFileName, NtfsFileNamespace};

use super::mft::{RecordError, RecordPart};
use crate::bytes::decode_utf16;
use crate::record::{Times, Timestamp};

/// Namespace value of DOS-only (8.3) names.
pub const NAMESPACE_DOS: u8 = 2;

/// A parsed `$FILE_NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileName {
    /// The parent directory's record number.
    pub parent_record: u64,
    /// Its sequence number.
    pub parent_seq: u16,
    /// The name (unpaired surrogates replaced).
    pub name: String,
    /// The name's UTF-16 units as stored.
    pub units: Vec<u16>,
    /// Whether `name` spells `units` exactly.
    pub exact: bool,
    /// 0 POSIX, 1 Win32, 2 DOS, 3 Win32 and DOS.
    pub namespace: u8,
    /// The four times the name carries.
    pub times: Times,
    /// Whether it names a directory.
    pub is_directory: bool,
}

impl FileName {
    /// The name's bytes as stored (UTF-16LE).
    pub fn raw_name(&self) -> Vec<u8> {
        self.units.iter().flat_map(|u| u.to_le_bytes()).collect()
    }
}

/// Converts an NT timestamp (100 ns intervals since 1601) to Unix time;
/// 0 means "not set".
pub fn nt_time(t: u64) -> Option<Timestamp> {
    if t == 0 {
        return None;
    }
    const EPOCH_DIFF: i128 = 116_444_736_000_000_000;
    let since_unix = i128::from(t) - EPOCH_DIFF;
    let secs = since_unix.div_euclid(10_000_000);
    let rem = since_unix.rem_euclid(10_000_000);
    Some(Timestamp {
        secs: i64::try_from(secs).ok()?,
        nanos: u32::try_from(rem * 100).ok()?,
    })
}

/// Parses a `$FILE_NAME` from raw bytes (an attribute value or an index
/// key). `position` is the absolute offset of the bytes, for the crate's
/// error messages.
pub fn parse(bytes: &[u8], position: u64) -> Result<FileName, RecordError> {
    let pos = NonZeroU64::new(position).unwrap_or(NonZeroU64::MIN);
    let f = NtfsFileName::key_from_slice(bytes, pos.into())
        .map_err(|e| RecordError::new(RecordPart::FileName, 0, e.to_string()))?;
    let units: Vec<u16> = f.name().u16_iter().collect();
    let (name, exact) = decode_utf16(&units);
    let parent = f.parent_directory_reference();
    let namespace = match f.namespace() {
        NtfsFileNamespace::Posix => 0,
        NtfsFileNamespace::Win32 => 1,
        NtfsFileNamespace::Dos => 2,
        NtfsFileNamespace::Win32AndDos => 3,
    };
    Ok(FileName {
        parent_record: parent.file_record_number(),
        parent_seq: parent.sequence_number(),
        name,
        units,
        exact,
        namespace,
        times: Times {
            modified: nt_time(f.modification_time().nt_timestamp()),
            accessed: nt_time(f.access_time().nt_timestamp()),
            changed: nt_time(f.mft_record_modification_time().nt_timestamp()),
            created: nt_time(f.creation_time().nt_timestamp()),
        },
        is_directory: f.is_directory(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nt_times_convert_to_unix() {
        // 2004-02-29 20:01:37.3603904 UTC (DFTT #7, mult1.dat creation).
        let t = nt_time(127_225_584_973_603_904).unwrap();
        assert_eq!(t.secs, 1_078_084_897);
        assert_eq!(t.nanos, 360_390_400);
        assert_eq!(nt_time(0), None);
        assert!(nt_time(1).unwrap().secs < 0);
    }

    #[test]
    fn file_names_parse_through_the_crate() {
        let mut v = vec![0u8; 66 + 6];
        v[0..8].copy_from_slice(&((7u64 << 48) | 5).to_le_bytes());
        v[56..60].copy_from_slice(&0x1000_0000u32.to_le_bytes());
        v[64] = 3;
        v[65] = 1;
        for (i, u) in "a/b".encode_utf16().enumerate() {
            v[66 + 2 * i..68 + 2 * i].copy_from_slice(&u.to_le_bytes());
        }
        let f = parse(&v, 4096).unwrap();
        assert_eq!((f.parent_record, f.parent_seq), (5, 7));
        assert_eq!(f.name, "a/b");
        assert!(f.is_directory);
        v[64] = 200;
        assert!(parse(&v, 4096).is_err());
    }
}
