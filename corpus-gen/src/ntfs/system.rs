//! Contents of NTFS's own files: the boot sector, `$AttrDef`, `$UpCase`,
//! `$Secure`'s descriptor stream and its two indexes, `$Volume`'s values.

use super::index::{COLLATION_FILE_NAME, Entry};
use super::{CLUSTER, RECORD_BYTES, SECTOR};

/// Bytes of `$UpCase` (one upper-case unit for every UTF-16 unit).
pub const UPCASE_BYTES: usize = 0x20000;
/// Bytes of `$AttrDef` as Windows sizes it.
pub const ATTRDEF_BYTES: usize = 0xA00;
/// First security id handed out (lower ids are reserved).
pub const FIRST_SECURITY_ID: u32 = 0x100;
/// Size of one half of the `$SDS` stream (the other half mirrors it).
pub const SDS_BLOCK: u64 = 0x40000;

/// The upper-case table: simple (one-unit) upper-case mappings of the
/// Basic Multilingual Plane, every other unit mapping to itself.
pub fn upcase_table() -> Vec<u16> {
    (0..=0xFFFFu32)
        .map(|u| {
            let Some(c) = char::from_u32(u) else {
                return u as u16;
            };
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(x), None) if (x as u32) <= 0xFFFF => x as u32 as u16,
                _ => u as u16,
            }
        })
        .collect()
}

/// The upper-case table, built once.
pub fn upcase() -> &'static [u16] {
    static TABLE: std::sync::OnceLock<Vec<u16>> = std::sync::OnceLock::new();
    TABLE.get_or_init(upcase_table)
}

/// `$UpCase`'s bytes.
pub fn upcase_bytes(table: &[u16]) -> Vec<u8> {
    table.iter().flat_map(|u| u.to_le_bytes()).collect()
}

/// `$AttrDef`: name, type, collation, flags, minimum and maximum size of
/// every attribute type NTFS 3.1 defines.
pub fn attrdef() -> Vec<u8> {
    const RESIDENT: u32 = 0x40;
    const INDEXABLE: u32 = 0x02;
    const ALWAYS_LOG: u32 = 0x80;
    let table: [(&str, u32, u32, u32, u64, i64); 16] = [
        ("$STANDARD_INFORMATION", 0x10, 0, RESIDENT, 0x30, 0x48),
        ("$ATTRIBUTE_LIST", 0x20, 0, ALWAYS_LOG, 0, -1),
        (
            "$FILE_NAME",
            0x30,
            COLLATION_FILE_NAME,
            RESIDENT | INDEXABLE,
            0x44,
            0x242,
        ),
        ("$OBJECT_ID", 0x40, 0, RESIDENT, 0, 0x100),
        ("$SECURITY_DESCRIPTOR", 0x50, 0, ALWAYS_LOG, 0, -1),
        ("$VOLUME_NAME", 0x60, 0, RESIDENT, 2, 0x100),
        ("$VOLUME_INFORMATION", 0x70, 0, RESIDENT, 0xC, 0xC),
        ("$DATA", 0x80, 0, 0, 0, -1),
        ("$INDEX_ROOT", 0x90, 0, RESIDENT, 0, -1),
        ("$INDEX_ALLOCATION", 0xA0, 0, ALWAYS_LOG, 0, -1),
        ("$BITMAP", 0xB0, 0, ALWAYS_LOG, 0, -1),
        ("$REPARSE_POINT", 0xC0, 0, ALWAYS_LOG, 0, 0x4000),
        ("$EA_INFORMATION", 0xD0, 0, RESIDENT, 8, 8),
        ("$EA", 0xE0, 0, 0, 0, 0x10000),
        ("$LOGGED_UTILITY_STREAM", 0x100, 0, ALWAYS_LOG, 0, 0x10000),
        ("", 0, 0, 0, 0, 0),
    ];
    let mut out = vec![0u8; ATTRDEF_BYTES];
    for (i, (name, kind, collation, flags, min, max)) in table.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        let at = i * 0xA0;
        for (j, u) in name.encode_utf16().enumerate() {
            out[at + 2 * j..at + 2 * j + 2].copy_from_slice(&u.to_le_bytes());
        }
        out[at + 0x80..at + 0x84].copy_from_slice(&kind.to_le_bytes());
        out[at + 0x88..at + 0x8C].copy_from_slice(&collation.to_le_bytes());
        out[at + 0x8C..at + 0x90].copy_from_slice(&flags.to_le_bytes());
        out[at + 0x90..at + 0x98].copy_from_slice(&min.to_le_bytes());
        out[at + 0x98..at + 0xA0].copy_from_slice(&max.to_le_bytes());
    }
    out
}

/// What the boot sector records.
#[derive(Debug, Clone, Copy)]
pub struct BootFacts {
    /// Sectors in the volume (the backup boot sector follows them).
    pub total_sectors: u64,
    /// First cluster of `$MFT`.
    pub mft_lcn: u64,
    /// First cluster of `$MFTMirr`.
    pub mirror_lcn: u64,
    /// Volume serial number.
    pub serial: u64,
    /// Sectors before the partition (the BIOS field).
    pub hidden_sectors: u32,
}

/// The NTFS boot sector (the same bytes serve as the backup at the end).
pub fn boot_sector(f: &BootFacts) -> Vec<u8> {
    let mut b = vec![0u8; SECTOR];
    b[0..3].copy_from_slice(&[0xEB, 0x52, 0x90]);
    b[3..11].copy_from_slice(b"NTFS    ");
    b[0x0B..0x0D].copy_from_slice(&(SECTOR as u16).to_le_bytes());
    b[0x0D] = (CLUSTER / SECTOR) as u8;
    b[0x15] = 0xF8; // fixed disk
    b[0x18..0x1A].copy_from_slice(&63u16.to_le_bytes());
    b[0x1A..0x1C].copy_from_slice(&255u16.to_le_bytes());
    b[0x1C..0x20].copy_from_slice(&f.hidden_sectors.to_le_bytes());
    b[0x24..0x28].copy_from_slice(&0x0080_0080u32.to_le_bytes());
    b[0x28..0x30].copy_from_slice(&f.total_sectors.to_le_bytes());
    b[0x30..0x38].copy_from_slice(&f.mft_lcn.to_le_bytes());
    b[0x38..0x40].copy_from_slice(&f.mirror_lcn.to_le_bytes());
    // Records of 2^10 bytes (a negative shift), one cluster per index block.
    b[0x40] = (-((RECORD_BYTES.trailing_zeros()) as i8)) as u8;
    b[0x44] = 1;
    b[0x48..0x50].copy_from_slice(&f.serial.to_le_bytes());
    // Boot code: a stub that prints Windows' message and halts, so the
    // sector is not empty where real ones hold code.
    let msg = b"A disk read error occurred\r\n\0BOOTMGR is missing\r\n\0";
    b[0x54..0x54 + 2].copy_from_slice(&[0xFA, 0x33]);
    b[0x180..0x180 + msg.len()].copy_from_slice(msg);
    b[0x1FE] = 0x55;
    b[0x1FF] = 0xAA;
    b
}

/// `$VOLUME_INFORMATION`: NTFS 3.1, clean.
pub fn volume_information() -> Vec<u8> {
    let mut v = vec![0u8; 12];
    v[8] = 3;
    v[9] = 1;
    v
}

/// A self-relative security descriptor: owner and group SIDs and a DACL
/// with the given (flags, mask, SID) allow entries.
fn descriptor(owner: &[u8], group: &[u8], aces: &[(u8, u32, &[u8])]) -> Vec<u8> {
    let mut acl = vec![0u8; 8];
    for (flags, mask, sid) in aces {
        let size = 8 + sid.len();
        acl.push(0); // ACCESS_ALLOWED
        acl.push(*flags);
        acl.extend_from_slice(&(size as u16).to_le_bytes());
        acl.extend_from_slice(&mask.to_le_bytes());
        acl.extend_from_slice(sid);
    }
    acl[0] = 2; // revision
    let acl_len = acl.len() as u16;
    acl[2..4].copy_from_slice(&acl_len.to_le_bytes());
    acl[4..6].copy_from_slice(&(aces.len() as u16).to_le_bytes());
    let mut sd = vec![0u8; 20];
    sd[0] = 1; // revision
    // SE_SELF_RELATIVE | SE_DACL_PRESENT
    sd[2..4].copy_from_slice(&0x8004u16.to_le_bytes());
    let owner_at = 20 + acl.len();
    let group_at = owner_at + owner.len();
    sd[4..8].copy_from_slice(&(owner_at as u32).to_le_bytes());
    sd[8..12].copy_from_slice(&(group_at as u32).to_le_bytes());
    sd[16..20].copy_from_slice(&20u32.to_le_bytes());
    sd.extend_from_slice(&acl);
    sd.extend_from_slice(owner);
    sd.extend_from_slice(group);
    sd
}

fn sid(authority: u8, subs: &[u32]) -> Vec<u8> {
    let mut s = vec![1, subs.len() as u8, 0, 0, 0, 0, 0, authority];
    for v in subs {
        s.extend_from_slice(&v.to_le_bytes());
    }
    s
}

/// The hash `$SDH` keys descriptors by: rotate left 3 and add each
/// 32-bit word.
pub fn descriptor_hash(sd: &[u8]) -> u32 {
    sd.chunks_exact(4).fold(0u32, |h, w| {
        h.rotate_left(3)
            .wrapping_add(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    })
}

/// `$Secure`'s content: the `$SDS` stream and the sorted `$SII` and
/// `$SDH` entries.
#[derive(Debug, Clone)]
pub struct Secure {
    /// The `$SDS` bytes (first block, then its mirror).
    pub sds: Vec<u8>,
    /// `$SII` entries, by security id.
    pub sii: Vec<Entry>,
    /// `$SDH` entries, by hash then id.
    pub sdh: Vec<Entry>,
    /// Security id of files (inherited from the user's profile).
    pub file_id: u32,
    /// Security id of directories.
    pub dir_id: u32,
    /// Security id of NTFS's own files.
    pub system_id: u32,
}

/// The descriptors a Windows system volume starts with: system files
/// (SYSTEM and Administrators), and user content (the user, SYSTEM and
/// Administrators full control; directories inheriting it).
pub fn secure(user_rid: u32) -> Secure {
    let system = sid(5, &[18]);
    let admins = sid(5, &[32, 544]);
    let users = sid(5, &[32, 545]);
    let user = sid(5, &[21, 0x2A6B_1C3D, 0x5E4F_7081, 0x1A2B_3C4D, user_rid]);
    let full = 0x001F_01FF;
    let read = 0x0012_0089;
    let descriptors = [
        descriptor(
            &admins,
            &system,
            &[(0, full, &system), (0, full, &admins), (0, read, &users)],
        ),
        descriptor(
            &user,
            &user,
            &[
                (0x10, full, &system),
                (0x10, full, &admins),
                (0x10, full, &user),
            ],
        ),
        descriptor(
            &user,
            &user,
            &[
                (0x13, full, &system),
                (0x13, full, &admins),
                (0x13, full, &user),
            ],
        ),
    ];
    let mut sds = Vec::new();
    let mut sii = Vec::new();
    let mut sdh = Vec::new();
    for (i, sd) in descriptors.iter().enumerate() {
        let id = FIRST_SECURITY_ID + i as u32;
        let offset = sds.len() as u64;
        let hash = descriptor_hash(sd);
        let len = 20 + sd.len() as u32;
        let mut header = Vec::with_capacity(20);
        header.extend_from_slice(&hash.to_le_bytes());
        header.extend_from_slice(&id.to_le_bytes());
        header.extend_from_slice(&offset.to_le_bytes());
        header.extend_from_slice(&len.to_le_bytes());
        sds.extend_from_slice(&header);
        sds.extend_from_slice(sd);
        sds.resize(sds.len().div_ceil(16) * 16, 0);
        sii.push(Entry::view(&id.to_le_bytes(), &header, &[]));
        let mut key = hash.to_le_bytes().to_vec();
        key.extend_from_slice(&id.to_le_bytes());
        sdh.push((hash, id, Entry::view(&key, &header, b"I\0I\0")));
    }
    sdh.sort_by_key(|(h, id, _)| (*h, *id));
    // The mirror copy of the first block starts 256 KiB in.
    let used = sds.len();
    let mut stream = sds.clone();
    stream.resize(SDS_BLOCK as usize, 0);
    stream.extend_from_slice(&sds[..used]);
    Secure {
        sds: stream,
        sii,
        sdh: sdh.into_iter().map(|(_, _, e)| e).collect(),
        system_id: FIRST_SECURITY_ID,
        file_id: FIRST_SECURITY_ID + 1,
        dir_id: FIRST_SECURITY_ID + 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upcase_maps_ascii_and_latin() {
        let t = upcase_table();
        assert_eq!(t[b'a' as usize], b'A' as u16);
        assert_eq!(t[b'Z' as usize], b'Z' as u16);
        assert_eq!(t[0xE9], 0xC9);
        assert_eq!(t[0xD800], 0xD800);
        assert_eq!(upcase_bytes(&t).len(), UPCASE_BYTES);
    }

    #[test]
    fn boot_sector_parses_with_the_ntfs_crate_fields() {
        let b = boot_sector(&BootFacts {
            total_sectors: 1 << 20,
            mft_lcn: 4,
            mirror_lcn: 2,
            serial: 0x1234,
            hidden_sectors: 2048,
        });
        assert_eq!(&b[3..11], b"NTFS    ");
        assert_eq!(b[0x40], 0xF6);
        assert_eq!(&b[510..], &[0x55, 0xAA]);
    }

    #[test]
    fn secure_stream_mirrors_its_descriptors() {
        let s = secure(1001);
        assert_eq!(s.sii.len(), 3);
        let used = s.sds.len() - SDS_BLOCK as usize;
        assert_eq!(s.sds[..used], s.sds[SDS_BLOCK as usize..]);
    }
}
