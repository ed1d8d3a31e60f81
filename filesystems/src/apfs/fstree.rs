//! File-system tree records (`j_key_t` and its values): inodes, directory
//! records (hashed and unhashed names), file extents, data-stream ids,
//! extended attributes, sibling links and snapshot metadata. Every field
//! is read through the bounds-checked accessors; a record too short for
//! its type is `None`.

use std::cmp::Ordering;

use crate::bytes::{slice_at, u16_at, u32_at, u64_at};

/// Record type: snapshot metadata.
pub const TYPE_SNAP_METADATA: u8 = 1;
/// Record type: inode.
pub const TYPE_INODE: u8 = 3;
/// Record type: extended attribute.
pub const TYPE_XATTR: u8 = 4;
/// Record type: sibling link (a hard link's name).
pub const TYPE_SIBLING_LINK: u8 = 5;
/// Record type: data-stream reference count.
pub const TYPE_DSTREAM_ID: u8 = 6;
/// Record type: file extent.
pub const TYPE_FILE_EXTENT: u8 = 8;
/// Record type: directory record (a name).
pub const TYPE_DIR_REC: u8 = 9;
/// Record type: snapshot name.
pub const TYPE_SNAP_NAME: u8 = 11;
/// The root directory's inode number.
pub const ROOT_DIR: u64 = 2;
/// `j_inode_val_t.bsd_flags`: content is compressed (decmpfs).
pub const UF_COMPRESSED: u32 = 0x20;
/// `x_type` of an inode's data stream.
const XF_DSTREAM: u8 = 8;
/// `x_type` of an inode's name.
const XF_NAME: u8 = 4;
/// `S_IFMT`.
pub const S_IFMT: u16 = 0o170_000;
/// Directory.
pub const S_IFDIR: u16 = 0o040_000;
/// Symbolic link.
pub const S_IFLNK: u16 = 0o120_000;
/// Regular file.
pub const S_IFREG: u16 = 0o100_000;
/// Directory-record type: directory.
pub const DT_DIR: u16 = 4;

/// The object id and record type of a key.
pub fn key_header(k: &[u8]) -> Option<(u64, u8)> {
    let v = u64_at(k, 0)?;
    Some((v & 0x0fff_ffff_ffff_ffff, (v >> 60) as u8))
}

/// Orders a key by (object id, type) against `(oid, kind)`; the name or
/// offset that follows is not compared (a scan for every record of one
/// kind starts at the first).
pub fn cmp_header(k: &[u8], oid: u64, kind: u8) -> Ordering {
    match key_header(k) {
        Some(h) => h.cmp(&(oid, kind)),
        None => Ordering::Less,
    }
}

/// A data stream (`j_dstream_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dstream {
    /// Logical size in bytes.
    pub size: u64,
    /// Bytes allocated.
    pub alloced_size: u64,
}

impl Dstream {
    fn parse(b: &[u8]) -> Option<Dstream> {
        Some(Dstream {
            size: u64_at(b, 0)?,
            alloced_size: u64_at(b, 8)?,
        })
    }
}

/// An inode record's value (`j_inode_val_t`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InodeVal {
    /// Parent directory's id.
    pub parent_id: u64,
    /// Id of the data stream's extents.
    pub private_id: u64,
    /// Creation time, ns since 1970.
    pub create_time: u64,
    /// Content modification time.
    pub mod_time: u64,
    /// Attribute change time.
    pub change_time: u64,
    /// Access time.
    pub access_time: u64,
    /// Children (directories) or links (files).
    pub nchildren_or_nlink: i32,
    /// BSD flags (`UF_COMPRESSED`).
    pub bsd_flags: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Mode and type.
    pub mode: u16,
    /// `uncompressed_size` (meaningful for compressed files).
    pub uncompressed_size: u64,
    /// The data stream, where the inode has one.
    pub dstream: Option<Dstream>,
    /// The name extended field, where present.
    pub name: Option<String>,
}

impl InodeVal {
    /// Parses an inode value and its extended fields (`xf_blob_t`).
    pub fn parse(v: &[u8]) -> Option<InodeVal> {
        let mut ino = InodeVal {
            parent_id: u64_at(v, 0)?,
            private_id: u64_at(v, 8)?,
            create_time: u64_at(v, 16)?,
            mod_time: u64_at(v, 24)?,
            change_time: u64_at(v, 32)?,
            access_time: u64_at(v, 40)?,
            nchildren_or_nlink: u32_at(v, 56)? as i32,
            bsd_flags: u32_at(v, 68)?,
            uid: u32_at(v, 72)?,
            gid: u32_at(v, 76)?,
            mode: u16_at(v, 80)?,
            uncompressed_size: u64_at(v, 84).unwrap_or(0),
            dstream: None,
            name: None,
        };
        for (kind, data) in xfields(v.get(92..).unwrap_or(&[])) {
            match kind {
                XF_DSTREAM => ino.dstream = Dstream::parse(data),
                XF_NAME => {
                    let end = data.iter().position(|&c| c == 0).unwrap_or(data.len());
                    ino.name = Some(String::from_utf8_lossy(&data[..end]).into_owned());
                }
                _ => {}
            }
        }
        Some(ino)
    }
}

/// The extended fields of an `xf_blob_t`: (type, data), each in bounds.
fn xfields(b: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    let Some(n) = u16_at(b, 0) else {
        return out;
    };
    let n = usize::from(n);
    let mut data = 4 + 4 * n;
    for i in 0..n {
        let (Some(kind), Some(size)) = (b.get(4 + 4 * i).copied(), u16_at(b, 4 + 4 * i + 2)) else {
            break;
        };
        let size = usize::from(size);
        let Some(d) = slice_at(b, data, size) else {
            break;
        };
        out.push((kind, d));
        data += size.div_ceil(8) * 8;
    }
    out
}

/// A directory record: one name in a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirRec {
    /// The name's bytes as stored, without the terminating NUL.
    pub raw_name: Vec<u8>,
    /// The inode the name refers to.
    pub file_id: u64,
    /// When the name was added, ns since 1970.
    pub date_added: u64,
    /// The record's type bits (`DT_*`).
    pub dtype: u16,
}

/// Parses a directory record: the key's name is hashed
/// (`j_drec_hashed_key_t`, the form every macOS volume uses) where its
/// length field fits the key exactly, else unhashed (`j_drec_key_t`);
/// `hashed_first` says which form the volume's flags prefer when both fit.
pub fn parse_dir_rec(k: &[u8], v: &[u8], hashed_first: bool) -> Option<DirRec> {
    let hashed = || {
        let len = (u32_at(k, 8)? & 0x3ff) as usize;
        (k.len() == 12 + len)
            .then(|| slice_at(k, 12, len))
            .flatten()
    };
    let plain = || {
        let len = usize::from(u16_at(k, 8)?);
        (k.len() == 10 + len)
            .then(|| slice_at(k, 10, len))
            .flatten()
    };
    let name = if hashed_first {
        hashed().or_else(plain)
    } else {
        plain().or_else(hashed)
    }?;
    let name = name.strip_suffix(&[0]).unwrap_or(name);
    Some(DirRec {
        raw_name: name.to_vec(),
        file_id: u64_at(v, 0)?,
        date_added: u64_at(v, 8)?,
        dtype: u16_at(v, 16)? & 0xf,
    })
}

/// A file extent (`j_file_extent_key_t` and `_val_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileExtent {
    /// Offset in the file.
    pub logical: u64,
    /// Length in bytes.
    pub len: u64,
    /// First physical block (0: a hole).
    pub phys_block: u64,
    /// Encryption key id (0: not encrypted).
    pub crypto_id: u64,
}

/// Parses a file-extent record.
pub fn parse_extent(k: &[u8], v: &[u8]) -> Option<FileExtent> {
    Some(FileExtent {
        logical: u64_at(k, 8)?,
        len: u64_at(v, 0)? & 0x00ff_ffff_ffff_ffff,
        phys_block: u64_at(v, 8)?,
        crypto_id: u64_at(v, 16)?,
    })
}

/// Parses a sealed volume's file-extent tree record (`fext_tree_key_t`:
/// private id and offset; `fext_tree_val_t`: length and block).
pub fn parse_fext(k: &[u8], v: &[u8]) -> Option<FileExtent> {
    Some(FileExtent {
        logical: u64_at(k, 8)?,
        len: u64_at(v, 0)? & 0x00ff_ffff_ffff_ffff,
        phys_block: u64_at(v, 8)?,
        crypto_id: 0,
    })
}

/// Where an extended attribute's value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XattrData {
    /// In the record.
    Embedded(Vec<u8>),
    /// In a data stream with its own extents (`xattr_obj_id`).
    Stream {
        /// Id of the stream's extents.
        oid: u64,
        /// Its size.
        dstream: Dstream,
    },
}

/// An extended attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xattr {
    /// The name, without the terminating NUL.
    pub name: String,
    /// The value.
    pub data: XattrData,
}

/// `j_xattr_val_t.flags`: the value is a data stream.
const XATTR_DATA_STREAM: u16 = 0x1;

/// Parses an extended-attribute record.
pub fn parse_xattr(k: &[u8], v: &[u8]) -> Option<Xattr> {
    let len = usize::from(u16_at(k, 8)?);
    let raw = slice_at(k, 10, len)?;
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    let flags = u16_at(v, 0)?;
    let xlen = usize::from(u16_at(v, 2)?);
    let data = if flags & XATTR_DATA_STREAM != 0 {
        XattrData::Stream {
            oid: u64_at(v, 4)?,
            dstream: Dstream::parse(slice_at(v, 12, 16)?)?,
        }
    } else {
        XattrData::Embedded(slice_at(v, 4, xlen)?.to_vec())
    };
    Some(Xattr {
        name: String::from_utf8_lossy(raw).into_owned(),
        data,
    })
}

/// A snapshot (`j_snap_metadata_val_t`), for the per-volume note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The snapshot's transaction id.
    pub xid: u64,
    /// Its name.
    pub name: String,
    /// When it was made, ns since 1970.
    pub create_time: u64,
}

/// Parses a snapshot-metadata record.
pub fn parse_snapshot(k: &[u8], v: &[u8]) -> Option<Snapshot> {
    let (xid, kind) = key_header(k)?;
    if kind != TYPE_SNAP_METADATA {
        return None;
    }
    let len = usize::from(u16_at(v, 48)?);
    let raw = slice_at(v, 50, len)?;
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    Some(Snapshot {
        xid,
        name: String::from_utf8_lossy(raw).into_owned(),
        create_time: u64_at(v, 16)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_records_in_both_key_forms() {
        let mut v = vec![0u8; 18];
        v[0] = 20;
        v[16] = 8;
        let mut hashed = vec![0u8; 8];
        hashed[7] = 0x90;
        hashed.extend_from_slice(&(4u32 | (0x1234 << 10)).to_le_bytes());
        hashed.extend_from_slice(b"abc\0");
        let d = parse_dir_rec(&hashed, &v, true).unwrap();
        assert_eq!(d.raw_name, b"abc");
        assert_eq!(d.file_id, 20);
        let mut plain = vec![0u8; 8];
        plain.extend_from_slice(&4u16.to_le_bytes());
        plain.extend_from_slice(b"xyz\0");
        assert_eq!(parse_dir_rec(&plain, &v, true).unwrap().raw_name, b"xyz");
        assert!(parse_dir_rec(&plain[..12], &v, true).is_none());
        assert!(parse_dir_rec(&plain, &v[..10], true).is_none());
    }

    #[test]
    fn extended_fields_out_of_bounds_are_dropped() {
        let mut v = vec![0u8; 92];
        v.extend_from_slice(&1u16.to_le_bytes());
        v.extend_from_slice(&40u16.to_le_bytes());
        v.extend_from_slice(&[XF_DSTREAM, 0, 40, 0]);
        v.extend_from_slice(&[0u8; 10]);
        assert_eq!(InodeVal::parse(&v).unwrap().dstream, None);
        v.extend_from_slice(&[0u8; 30]);
        v[96 + 4] = 7;
        assert_eq!(InodeVal::parse(&v).unwrap().dstream.unwrap().size, 7);
    }
}
