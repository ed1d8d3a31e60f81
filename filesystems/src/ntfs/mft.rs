//! MFT records, attributes and run lists, parsed with every length and
//! offset checked against the record.
//!
//! Why not the `ntfs` crate's `NtfsFile`/`NtfsAttribute` for this: they do
//! not expose an attribute's allocated and initialized (valid-data) sizes or
//! its compression unit, which correct content and slack need; they give no
//! data runs for attributes spread over an `$ATTRIBUTE_LIST`, which large
//! fragmented files use; `Ntfs::file` re-reads `$MFT`'s own record for every
//! lookup, so the engine would count a second MFT read per file; and their
//! header accessors index past a truncated attribute header, which panics on
//! a hostile record. The crate still parses every `$FILE_NAME` (see
//! [`super::filename`]) and validates the boot sector.

use crate::bytes::{slice_at, u8_at, u16_at, u32_at, u64_at, utf16_units};

/// Which structure a [`RecordError`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPart {
    /// The record's magic (`FILE`, `INDX`).
    Signature,
    /// The update sequence (fixup) array.
    UpdateSequence,
    /// The fixed record header.
    Header,
    /// An attribute header or value.
    Attribute,
    /// A run list.
    RunList,
    /// An `$ATTRIBUTE_LIST` value.
    AttributeList,
    /// A `$FILE_NAME` value or index key.
    FileName,
}

/// A record, attribute or run list that does not hold together: which
/// part, where (byte offset within the structure parsed: the record, the
/// run list, the attribute list or the value), and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct RecordError {
    /// The structure.
    pub part: RecordPart,
    /// Byte offset of the problem within it.
    pub offset: usize,
    /// What is wrong, for a reader (names the offset too).
    pub reason: String,
}

impl RecordError {
    pub(crate) fn new(part: RecordPart, offset: usize, reason: impl Into<String>) -> Self {
        RecordError {
            part,
            offset,
            reason: reason.into(),
        }
    }
}

/// Attribute type or flag `ATTR_STANDARD_INFORMATION`.
pub const ATTR_STANDARD_INFORMATION: u32 = 0x10;
/// Attribute type or flag `ATTR_ATTRIBUTE_LIST`.
pub const ATTR_ATTRIBUTE_LIST: u32 = 0x20;
/// Attribute type or flag `ATTR_FILE_NAME`.
pub const ATTR_FILE_NAME: u32 = 0x30;
/// Attribute type or flag `ATTR_VOLUME_NAME`.
pub const ATTR_VOLUME_NAME: u32 = 0x60;
/// Attribute type or flag `ATTR_VOLUME_INFORMATION`.
pub const ATTR_VOLUME_INFORMATION: u32 = 0x70;
/// Attribute type or flag `ATTR_DATA`.
pub const ATTR_DATA: u32 = 0x80;
/// Attribute type or flag `ATTR_INDEX_ROOT`.
pub const ATTR_INDEX_ROOT: u32 = 0x90;
/// Attribute type or flag `ATTR_INDEX_ALLOCATION`.
pub const ATTR_INDEX_ALLOCATION: u32 = 0xA0;
/// Attribute type or flag `ATTR_BITMAP`.
pub const ATTR_BITMAP: u32 = 0xB0;

/// Attribute type or flag `FLAG_IN_USE`.
pub const FLAG_IN_USE: u16 = 0x0001;
/// Attribute type or flag `FLAG_DIRECTORY`.
pub const FLAG_DIRECTORY: u16 = 0x0002;

/// Attribute type or flag `ATTR_FLAG_COMPRESSED`.
pub const ATTR_FLAG_COMPRESSED: u16 = 0x0001;
/// Attribute type or flag `ATTR_FLAG_ENCRYPTED`.
pub const ATTR_FLAG_ENCRYPTED: u16 = 0x4000;

/// Undoes the update-sequence ("fixup") protection of a multi-sector record
/// (`FILE` or `INDX`): the last two bytes of each 512-byte stride hold the
/// update sequence number and their real value sits in the array.
pub fn apply_fixups(buf: &mut [u8], magic: &[u8; 4]) -> Result<(), RecordError> {
    let usa = |offset: usize, reason: String| {
        RecordError::new(RecordPart::UpdateSequence, offset, reason)
    };
    if buf.get(0..4) != Some(&magic[..]) {
        let got = buf.get(0..4).unwrap_or(&[]);
        return Err(RecordError::new(
            RecordPart::Signature,
            0,
            format!(
                "signature {:?} instead of {:?}",
                String::from_utf8_lossy(got),
                String::from_utf8_lossy(magic)
            ),
        ));
    }
    let short = || usa(4, "record too short".into());
    let usa_off = usize::from(u16_at(buf, 4).ok_or_else(short)?);
    let usa_count = usize::from(u16_at(buf, 6).ok_or_else(short)?);
    if usa_count == 0 {
        return Err(usa(6, "update sequence count 0".into()));
    }
    let strides = usa_count - 1;
    if usa_off + usa_count * 2 > buf.len() || strides * 512 > buf.len() {
        return Err(usa(
            4,
            format!(
                "update sequence array ({usa_count} entries at {usa_off}) exceeds the {}-byte record",
                buf.len()
            ),
        ));
    }
    let usn = [buf[usa_off], buf[usa_off + 1]];
    for i in 1..=strides {
        let pos = i * 512 - 2;
        if buf[pos..pos + 2] != usn {
            return Err(usa(
                pos,
                format!("update sequence mismatch in stride {i} (torn or corrupt write)"),
            ));
        }
        let fix = usa_off + i * 2;
        buf[pos] = buf[fix];
        buf[pos + 1] = buf[fix + 1];
    }
    Ok(())
}

/// The fixed part of a `FILE` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Sequence number.
    pub seq: u16,
    /// Flags (in use, directory).
    pub flags: u16,
    /// File reference of the base record (0 for a base record).
    pub base_ref: u64,
    /// The record's own number, where the header holds it (Windows XP
    /// and later: the first attribute starts at 48 or beyond).
    pub number: Option<u32>,
    first_attr: usize,
    used: usize,
}

impl RecordHeader {
    /// Whether the record is in use (not deleted).
    pub fn in_use(&self) -> bool {
        self.flags & FLAG_IN_USE != 0
    }
    /// Whether it is a directory.
    pub fn is_directory(&self) -> bool {
        self.flags & FLAG_DIRECTORY != 0
    }
    /// The base record's number (0 for a base record itself).
    pub fn base_record(&self) -> u64 {
        self.base_ref & 0x0000_FFFF_FFFF_FFFF
    }
}

/// Parses and checks the header of a fixed-up `FILE` record.
pub fn parse_header(buf: &[u8]) -> Result<RecordHeader, RecordError> {
    let bad = |offset: usize, reason: String| RecordError::new(RecordPart::Header, offset, reason);
    let short = |o: usize| move || bad(o, "record too short".into());
    let seq = u16_at(buf, 16).ok_or_else(short(16))?;
    let first_attr = usize::from(u16_at(buf, 20).ok_or_else(short(20))?);
    let flags = u16_at(buf, 22).ok_or_else(short(22))?;
    let used = usize::try_from(u32_at(buf, 24).ok_or_else(short(24))?).unwrap_or(usize::MAX);
    let alloc = usize::try_from(u32_at(buf, 28).ok_or_else(short(28))?).unwrap_or(usize::MAX);
    let base_ref = u64_at(buf, 32).ok_or_else(short(32))?;
    if alloc > buf.len() {
        return Err(bad(
            28,
            format!(
                "allocated size {alloc} exceeds the {}-byte record",
                buf.len()
            ),
        ));
    }
    if used > alloc || used > buf.len() {
        return Err(bad(
            24,
            format!("used size {used} exceeds allocated size {alloc}"),
        ));
    }
    if first_attr < 42 || first_attr >= used {
        return Err(bad(
            20,
            format!("first attribute offset {first_attr} outside the used {used} bytes"),
        ));
    }
    let number = if first_attr >= 48 {
        u32_at(buf, 44)
    } else {
        None
    };
    Ok(RecordHeader {
        seq,
        flags,
        base_ref,
        number,
        first_attr,
        used,
    })
}

/// A non-resident attribute's header fields and raw run list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonResident {
    /// First VCN this attribute piece maps.
    pub start_vcn: u64,
    /// Last VCN it maps.
    pub last_vcn: u64,
    /// log2 of the compression unit in clusters (0: not compressed).
    pub compression_unit: u16,
    /// Allocated bytes.
    pub allocated_size: u64,
    /// Logical size.
    pub data_size: u64,
    /// Valid-data length.
    pub initialized_size: u64,
    /// The raw run list.
    pub runs: Vec<u8>,
}

/// An attribute's value: inline bytes, or a non-resident description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The value, stored in the record.
    Resident(Vec<u8>),
    /// Stored in clusters elsewhere.
    NonResident(NonResident),
}

/// One attribute of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// Attribute type (`ATTR_*`).
    pub ty: u32,
    /// Name (UTF-16 units; empty for the unnamed stream).
    pub name: Vec<u16>,
    /// Flags (compressed, encrypted, sparse).
    pub flags: u16,
    /// Instance number within the record.
    pub instance: u16,
    /// The value or its description.
    pub body: Body,
}

impl Attribute {
    /// Whether the attribute's name is `s`.
    pub fn name_is(&self, s: &str) -> bool {
        self.name.iter().copied().eq(s.encode_utf16())
    }

    /// The value, when resident.
    pub fn resident(&self) -> Option<&[u8]> {
        match &self.body {
            Body::Resident(v) => Some(v),
            Body::NonResident(_) => None,
        }
    }
}

/// The attributes of a record, and the reason parsing stopped early, if it
/// did (attributes before a corrupt one are kept).
pub struct Attributes {
    /// The attributes parsed, in record order.
    pub list: Vec<Attribute>,
    /// Why parsing stopped before the end marker, if it did.
    pub error: Option<RecordError>,
}

/// Parses every attribute of a fixed-up record, stopping at the end marker,
/// at the used size, or at the first attribute whose lengths do not fit.
pub fn parse_attributes(buf: &[u8], h: &RecordHeader) -> Attributes {
    let mut list = Vec::new();
    let mut off = h.first_attr;
    let used = h.used.min(buf.len());
    let rec = &buf[..used];
    let error = loop {
        let Some(ty) = u32_at(rec, off) else {
            break Some(RecordError::new(
                RecordPart::Attribute,
                off,
                format!("attribute list runs past the used size at {off}"),
            ));
        };
        if ty == 0xFFFF_FFFF {
            break None;
        }
        match parse_attribute(rec, off) {
            Ok((attr, len)) => {
                list.push(attr);
                off += len;
            }
            Err(e) => {
                break Some(RecordError::new(
                    RecordPart::Attribute,
                    off,
                    format!("attribute {ty:#x} at offset {off}: {e}"),
                ));
            }
        }
    };
    Attributes { list, error }
}

fn parse_attribute(rec: &[u8], off: usize) -> Result<(Attribute, usize), String> {
    let ty = u32_at(rec, off).ok_or("truncated")?;
    let len = usize::try_from(u32_at(rec, off + 4).ok_or("truncated header")?)
        .map_err(|_| "length overflows")?;
    let non_resident = u8_at(rec, off + 8).ok_or("truncated header")? != 0;
    let min = if non_resident { 64 } else { 24 };
    if len < min {
        return Err(format!("length {len} below the {min}-byte header"));
    }
    let a = slice_at(rec, off, len).ok_or_else(|| {
        format!(
            "length {len} runs past the {} used bytes of the record",
            rec.len()
        )
    })?;
    let name_len = usize::from(a[9]) * 2;
    let name_off = usize::from(u16_at(a, 10).ok_or("truncated header")?);
    let name = if name_len == 0 {
        Vec::new()
    } else {
        utf16_units(slice_at(a, name_off, name_len).ok_or("name outside the attribute")?)
    };
    let flags = u16_at(a, 12).ok_or("truncated header")?;
    let instance = u16_at(a, 14).ok_or("truncated header")?;
    let body = if non_resident {
        let runs_off = usize::from(u16_at(a, 32).ok_or("truncated header")?);
        if runs_off < 64 || runs_off > len {
            return Err(format!("run list offset {runs_off} outside the attribute"));
        }
        Body::NonResident(NonResident {
            start_vcn: u64_at(a, 16).ok_or("truncated header")?,
            last_vcn: u64_at(a, 24).ok_or("truncated header")?,
            compression_unit: u16_at(a, 34).ok_or("truncated header")?,
            allocated_size: u64_at(a, 40).ok_or("truncated header")?,
            data_size: u64_at(a, 48).ok_or("truncated header")?,
            initialized_size: u64_at(a, 56).ok_or("truncated header")?,
            runs: a[runs_off..].to_vec(),
        })
    } else {
        let vlen = usize::try_from(u32_at(a, 16).ok_or("truncated header")?)
            .map_err(|_| "value length overflows")?;
        let voff = usize::from(u16_at(a, 20).ok_or("truncated header")?);
        let v = slice_at(a, voff, vlen)
            .ok_or_else(|| format!("value ({vlen} bytes at {voff}) outside the attribute"))?;
        Body::Resident(v.to_vec())
    };
    Ok((
        Attribute {
            ty,
            name,
            flags,
            instance,
            body,
        },
        len,
    ))
}

/// One decoded data run: `clusters` clusters at `lcn` (`None`: sparse).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRun {
    /// First virtual cluster of the run.
    pub vcn: u64,
    /// Clusters in it.
    pub clusters: u64,
    /// First logical cluster on the volume (`None`: sparse).
    pub lcn: Option<u64>,
}

/// Decodes a run list. Runs must stay inside the `total_clusters` of the
/// volume; decoding stops at the first run that does not, with the reason.
pub fn decode_runs(
    raw: &[u8],
    start_vcn: u64,
    total_clusters: u64,
) -> (Vec<DataRun>, Option<RecordError>) {
    let err = |i: usize, reason: String| Some(RecordError::new(RecordPart::RunList, i, reason));
    let mut runs = Vec::new();
    let mut i = 0usize;
    let mut lcn: i64 = 0;
    let mut vcn = start_vcn;
    loop {
        let Some(&h) = raw.get(i) else {
            return (runs, err(i, "run list has no terminator".into()));
        };
        if h == 0 {
            return (runs, None);
        }
        let lb = usize::from(h & 0x0f);
        let ob = usize::from(h >> 4);
        if lb == 0 || lb > 8 || ob > 8 {
            return (runs, err(i, format!("bad run header byte {h:#04x} at {i}")));
        }
        let Some(field) = slice_at(raw, i + 1, lb + ob) else {
            return (runs, err(i, format!("run at {i} truncated")));
        };
        let mut len_bytes = [0u8; 8];
        len_bytes[..lb].copy_from_slice(&field[..lb]);
        let clusters = u64::from_le_bytes(len_bytes);
        if clusters == 0 || clusters > total_clusters {
            return (
                runs,
                err(i, format!("run at {i} has length {clusters} clusters")),
            );
        }
        let run_lcn = if ob == 0 {
            None
        } else {
            let mut off_bytes = [0u8; 8];
            off_bytes[..ob].copy_from_slice(&field[lb..]);
            if field[lb + ob - 1] & 0x80 != 0 {
                off_bytes[ob..].fill(0xff);
            }
            let delta = i64::from_le_bytes(off_bytes);
            let Some(next) = lcn.checked_add(delta) else {
                return (runs, err(i, format!("run at {i} overflows")));
            };
            lcn = next;
            let Ok(start) = u64::try_from(lcn) else {
                return (runs, err(i, format!("run at {i} starts at cluster {lcn}")));
            };
            if start
                .checked_add(clusters)
                .is_none_or(|e| e > total_clusters)
            {
                return (
                    runs,
                    err(
                        i,
                        format!(
                            "run at {i} ({clusters} clusters at {start}) lies outside the {total_clusters}-cluster volume"
                        ),
                    ),
                );
            }
            Some(start)
        };
        runs.push(DataRun {
            vcn,
            clusters,
            lcn: run_lcn,
        });
        let Some(next_vcn) = vcn.checked_add(clusters) else {
            return (runs, err(i, "VCN overflows".into()));
        };
        vcn = next_vcn;
        i += 1 + lb + ob;
    }
}

/// One `$ATTRIBUTE_LIST` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// Attribute type.
    pub ty: u32,
    /// The record holding it.
    pub record: u64,
}

/// Parses an `$ATTRIBUTE_LIST` value; stops at the first malformed entry.
pub fn parse_attribute_list(v: &[u8]) -> (Vec<ListEntry>, Option<RecordError>) {
    let err =
        |off: usize, reason: String| Some(RecordError::new(RecordPart::AttributeList, off, reason));
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < v.len() {
        let (Some(ty), Some(len), Some(fref)) =
            (u32_at(v, off), u16_at(v, off + 4), u64_at(v, off + 16))
        else {
            return (
                out,
                err(off, format!("attribute list entry at {off} truncated")),
            );
        };
        let len = usize::from(len);
        if len < 26 || off + len > v.len() {
            return (
                out,
                err(
                    off,
                    format!("attribute list entry at {off} has length {len}"),
                ),
            );
        }
        out.push(ListEntry {
            ty,
            record: fref & 0x0000_FFFF_FFFF_FFFF,
        });
        off += len;
    }
    (out, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_decode_relative_offsets_and_sparse_holes() {
        // 0x21: 1 length byte, 2 offset bytes. 16 clusters at 0x1234; sparse 8;
        // 4 clusters at 0x1234 - 0x34 = 0x1200 (negative delta).
        let raw = [0x21, 0x10, 0x34, 0x12, 0x01, 0x08, 0x11, 0x04, 0xCC, 0x00];
        let (runs, err) = decode_runs(&raw, 0, 0x10000);
        assert_eq!(err, None);
        assert_eq!(
            runs,
            vec![
                DataRun {
                    vcn: 0,
                    clusters: 16,
                    lcn: Some(0x1234)
                },
                DataRun {
                    vcn: 16,
                    clusters: 8,
                    lcn: None
                },
                DataRun {
                    vcn: 24,
                    clusters: 4,
                    lcn: Some(0x1200)
                },
            ]
        );
    }

    #[test]
    fn runs_outside_the_volume_or_malformed_stop_decoding() {
        let (runs, err) = decode_runs(&[0x21, 0x10, 0x00, 0x10, 0x00], 0, 100);
        assert!(runs.is_empty() && err.unwrap().reason.contains("outside"));
        let (_, err) = decode_runs(&[0x09, 0x01], 0, 100);
        assert!(err.unwrap().reason.contains("bad run header"));
        let (_, err) = decode_runs(&[0x21, 0x10], 0, 100);
        assert!(err.unwrap().reason.contains("truncated"));
        let (_, err) = decode_runs(&[0x11, 0x01, 0x80], 0, 100);
        assert!(err.unwrap().reason.contains("starts at cluster -128"));
        let (_, err) = decode_runs(&[], 0, 100);
        assert!(err.unwrap().reason.contains("terminator"));
    }

    #[test]
    fn fixups_restore_sector_tails_and_detect_torn_writes() {
        let mut rec = vec![0u8; 1024];
        rec[0..4].copy_from_slice(b"FILE");
        rec[4..6].copy_from_slice(&48u16.to_le_bytes());
        rec[6..8].copy_from_slice(&3u16.to_le_bytes());
        rec[48..50].copy_from_slice(&[0xAB, 0xCD]);
        rec[50..52].copy_from_slice(&[1, 2]);
        rec[52..54].copy_from_slice(&[3, 4]);
        rec[510..512].copy_from_slice(&[0xAB, 0xCD]);
        rec[1022..1024].copy_from_slice(&[0xAB, 0xCD]);
        let mut ok = rec.clone();
        apply_fixups(&mut ok, b"FILE").unwrap();
        assert_eq!(&ok[510..512], &[1, 2]);
        assert_eq!(&ok[1022..1024], &[3, 4]);
        rec[1022] = 0;
        let torn = apply_fixups(&mut rec.clone(), b"FILE").unwrap_err();
        assert_eq!((torn.part, torn.offset), (RecordPart::UpdateSequence, 1022));
        assert!(
            apply_fixups(&mut rec, b"FILE")
                .unwrap_err()
                .reason
                .contains("mismatch")
        );
        rec[6..8].copy_from_slice(&9u16.to_le_bytes());
        assert!(
            apply_fixups(&mut rec, b"FILE")
                .unwrap_err()
                .reason
                .contains("exceeds")
        );
    }

    #[test]
    fn attributes_with_bad_lengths_stop_parsing_without_panicking() {
        let mut rec = vec![0u8; 1024];
        rec[20..22].copy_from_slice(&56u16.to_le_bytes());
        rec[24..28].copy_from_slice(&1024u32.to_le_bytes());
        rec[28..32].copy_from_slice(&1024u32.to_le_bytes());
        // A resident attribute of 16 bytes (below its 24-byte header).
        rec[56..60].copy_from_slice(&0x80u32.to_le_bytes());
        rec[60..64].copy_from_slice(&16u32.to_le_bytes());
        let h = parse_header(&rec).unwrap();
        let a = parse_attributes(&rec, &h);
        assert!(a.list.is_empty());
        assert!(a.error.unwrap().reason.contains("below"));
        // A non-resident attribute near the end of the record, claiming 64
        // bytes that are not there.
        let mut rec2 = rec.clone();
        rec2[56..60].copy_from_slice(&0x10u32.to_le_bytes());
        rec2[60..64].copy_from_slice(&24u32.to_le_bytes());
        rec2[72..76].copy_from_slice(&0u32.to_le_bytes());
        rec2[76..78].copy_from_slice(&24u16.to_le_bytes());
        rec2[80..84].copy_from_slice(&0x80u32.to_le_bytes());
        rec2[84..88].copy_from_slice(&4000u32.to_le_bytes());
        rec2[88] = 1;
        let h = parse_header(&rec2).unwrap();
        let a = parse_attributes(&rec2, &h);
        assert_eq!(a.list.len(), 1);
        assert!(a.error.unwrap().reason.contains("runs past"));
    }
}
