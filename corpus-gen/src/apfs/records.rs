//! File-system and extent-reference records: keys and values as APFS
//! stores them, and the order the trees keep them in (object id, record
//! type, then the name hash or logical offset, then the name).

use super::btree::Rec;
use super::{name_hash, put16, put32, put64};

/// Record types (the key header's top four bits).
pub mod kind {
    /// Physical extent (extent-reference tree).
    pub const EXTENT: u8 = 2;
    /// Inode.
    pub const INODE: u8 = 3;
    /// Extended attribute.
    pub const XATTR: u8 = 4;
    /// Data-stream id (its reference count).
    pub const DSTREAM_ID: u8 = 6;
    /// File extent.
    pub const FILE_EXTENT: u8 = 8;
    /// Directory record.
    pub const DIR_REC: u8 = 9;
}

/// A record with the key it sorts by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Sorted {
    /// Object id.
    pub id: u64,
    /// Record type.
    pub kind: u8,
    /// Name hash (directory records) or logical offset (file extents).
    pub number: u64,
    /// Name bytes (directory records, extended attributes).
    pub name: Vec<u8>,
    /// The encoded record.
    pub rec: RecOrd,
}

/// A record, ordered after its sort key only by its bytes (never reached:
/// keys are unique).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecOrd {
    /// Key bytes.
    pub key: Vec<u8>,
    /// Value bytes.
    pub val: Vec<u8>,
}

impl Sorted {
    /// The plain record.
    pub fn into_rec(self) -> Rec {
        Rec {
            key: self.rec.key,
            val: self.rec.val,
        }
    }
}

fn header(id: u64, kind: u8) -> [u8; 8] {
    ((kind as u64) << 60 | (id & 0x0FFF_FFFF_FFFF_FFFF)).to_le_bytes()
}

/// Times, owner and mode of an inode.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    /// Birth time (ns since 1970).
    pub created: u64,
    /// Content modification time.
    pub modified: u64,
    /// Attribute change time.
    pub changed: u64,
    /// Access time.
    pub accessed: u64,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Mode, type bits included.
    pub mode: u16,
    /// BSD flags (`UF_COMPRESSED` on a compressed file).
    pub bsd_flags: u32,
}

/// Inode flag: no resource fork (what macOS sets on ordinary files).
pub const INODE_NO_RSRC_FORK: u64 = 0x8000;
/// Inode flag: a resource fork (a compressed file's), in place of
/// [`INODE_NO_RSRC_FORK`].
pub const INODE_HAS_RSRC_FORK: u64 = 0x4000;

/// An inode record: `children` is a directory's child count or a file's
/// link count; `stream` a file's (size, allocated bytes) when it has data.
pub fn inode(
    id: u64,
    parent: u64,
    name: &str,
    meta: &Meta,
    flags: u64,
    children: u32,
    stream: Option<(u64, u64)>,
) -> Sorted {
    let mut v = vec![0u8; 92];
    put64(&mut v, 0, parent);
    put64(&mut v, 8, id);
    put64(&mut v, 16, meta.created);
    put64(&mut v, 24, meta.modified);
    put64(&mut v, 32, meta.changed);
    put64(&mut v, 40, meta.accessed);
    put64(&mut v, 48, flags);
    put32(&mut v, 56, children);
    put32(&mut v, 68, meta.bsd_flags);
    put32(&mut v, 72, meta.uid);
    put32(&mut v, 76, meta.gid);
    put16(&mut v, 80, meta.mode);
    // Extended fields: the name (always), then the data stream.
    let name_len = name.len() + 1;
    let mut fields: Vec<(u8, u8, Vec<u8>)> = Vec::new();
    let mut nb = name.as_bytes().to_vec();
    nb.push(0);
    fields.push((4, 0x02, nb));
    if let Some((size, alloced)) = stream {
        let mut d = vec![0u8; 40];
        put64(&mut d, 0, size);
        put64(&mut d, 8, alloced);
        fields.push((8, 0x20, d));
    }
    let used: usize = fields.iter().map(|f| f.2.len().next_multiple_of(8)).sum();
    let mut blob = vec![0u8; 4];
    put16(&mut blob, 0, fields.len() as u16);
    put16(&mut blob, 2, used as u16);
    for (t, fl, data) in &fields {
        let mut h = [0u8; 4];
        h[0] = *t;
        h[1] = *fl;
        h[2..4].copy_from_slice(&(data.len() as u16).to_le_bytes());
        blob.extend_from_slice(&h);
    }
    // Each field's data padded to 8 bytes (counted from the data's start,
    // right after the field headers).
    for (_, _, data) in &fields {
        blob.extend_from_slice(data);
        let pad = data.len().next_multiple_of(8) - data.len();
        blob.extend(std::iter::repeat_n(0u8, pad));
    }
    debug_assert_eq!(name_len, fields[0].2.len());
    v.extend_from_slice(&blob);
    Sorted {
        id,
        kind: kind::INODE,
        number: 0,
        name: Vec::new(),
        rec: RecOrd {
            key: header(id, kind::INODE).to_vec(),
            val: v,
        },
    }
}

/// `d_type` of a directory record: regular file.
pub const DT_REG: u16 = 8;
/// `d_type` of a directory record: directory.
pub const DT_DIR: u16 = 4;

/// A directory record (hashed key) of `name` in `parent` for `file_id`.
pub fn drec(parent: u64, name: &str, file_id: u64, added: u64, dtype: u16) -> Sorted {
    let hash = name_hash(name);
    let len = name.len() + 1;
    let mut k = header(parent, kind::DIR_REC).to_vec();
    k.extend_from_slice(&(hash | len as u32).to_le_bytes());
    k.extend_from_slice(name.as_bytes());
    k.push(0);
    let mut v = vec![0u8; 18];
    put64(&mut v, 0, file_id);
    put64(&mut v, 8, added);
    put16(&mut v, 16, dtype);
    Sorted {
        id: parent,
        kind: kind::DIR_REC,
        number: hash as u64,
        name: name.as_bytes().to_vec(),
        rec: RecOrd { key: k, val: v },
    }
}

/// A data stream's reference count (one: no clones).
pub fn dstream_id(id: u64) -> Sorted {
    Sorted {
        id,
        kind: kind::DSTREAM_ID,
        number: 0,
        name: Vec::new(),
        rec: RecOrd {
            key: header(id, kind::DSTREAM_ID).to_vec(),
            val: 1u32.to_le_bytes().to_vec(),
        },
    }
}

/// A file extent: `len` bytes (whole blocks) of stream `id` from logical
/// offset `logical`, at block `block`.
pub fn file_extent(id: u64, logical: u64, len: u64, block: u64) -> Sorted {
    let mut k = header(id, kind::FILE_EXTENT).to_vec();
    k.extend_from_slice(&logical.to_le_bytes());
    let mut v = vec![0u8; 24];
    put64(&mut v, 0, len);
    put64(&mut v, 8, block);
    Sorted {
        id,
        kind: kind::FILE_EXTENT,
        number: logical,
        name: Vec::new(),
        rec: RecOrd { key: k, val: v },
    }
}

/// An extended attribute stored in its record.
pub fn xattr(id: u64, name: &str, data: &[u8]) -> Sorted {
    let mut v = vec![0u8; 4];
    // Flags: data embedded.
    put16(&mut v, 0, 0x02);
    put16(&mut v, 2, data.len() as u16);
    v.extend_from_slice(data);
    xattr_record(id, name, v)
}

/// An extended attribute whose value is a data stream: object `stream`
/// (its file extents' id) of `size` bytes in `alloced` bytes of blocks.
pub fn xattr_stream(id: u64, name: &str, stream: u64, size: u64, alloced: u64) -> Sorted {
    // Flags: a data stream; then `j_xattr_dstream_t`: the stream's id and
    // its `j_dstream_t` (size, allocated size, crypto id, bytes written
    // and read).
    let mut v = vec![0u8; 4 + 48];
    put16(&mut v, 0, 0x01);
    put16(&mut v, 2, 48);
    put64(&mut v, 4, stream);
    put64(&mut v, 12, size);
    put64(&mut v, 20, alloced);
    xattr_record(id, name, v)
}

/// An extended attribute's record: its key (`name`) and value `val`.
fn xattr_record(id: u64, name: &str, val: Vec<u8>) -> Sorted {
    let mut k = header(id, kind::XATTR).to_vec();
    k.extend_from_slice(&((name.len() + 1) as u16).to_le_bytes());
    k.extend_from_slice(name.as_bytes());
    k.push(0);
    Sorted {
        id,
        kind: kind::XATTR,
        number: 0,
        name: name.as_bytes().to_vec(),
        rec: RecOrd { key: k, val },
    }
}

/// A physical extent (extent-reference tree): `blocks` blocks from
/// `block`, new, owned by `owner`, referenced once.
pub fn phys_extent(block: u64, blocks: u64, owner: u64) -> Sorted {
    let mut v = vec![0u8; 20];
    put64(&mut v, 0, blocks | 1 << 60);
    put64(&mut v, 8, owner);
    put32(&mut v, 16, 1);
    Sorted {
        id: block,
        kind: kind::EXTENT,
        number: 0,
        name: Vec::new(),
        rec: RecOrd {
            key: header(block, kind::EXTENT).to_vec(),
            val: v,
        },
    }
}

/// The object id an object-map key holds.
pub fn key_oid(key: &[u8]) -> u64 {
    key.get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

/// An object-map record: virtual `oid` at block `block`.
pub fn omap(oid: u64, block: u64) -> Rec {
    let mut k = vec![0u8; 16];
    put64(&mut k, 0, oid);
    put64(&mut k, 8, super::XID);
    let mut v = vec![0u8; 16];
    put32(&mut v, 4, super::BLOCK as u32);
    put64(&mut v, 8, block);
    Rec { key: k, val: v }
}
