//! FAT boot sector (BIOS parameter block) validation and geometry.

use crate::kind::FsKind;

/// The geometry and identity read from a FAT boot sector, after validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootSector {
    /// FAT12, FAT16 or FAT32.
    pub kind: FsKind,
    /// OEM name (bytes 3..11), verbatim.
    pub oem_name: [u8; 8],
    /// Bytes per sector.
    pub bytes_per_sector: u32,
    /// Sectors per cluster.
    pub sectors_per_cluster: u32,
    /// Reserved sectors before the first FAT.
    pub reserved_sectors: u32,
    /// Number of FAT copies.
    pub fat_count: u32,
    /// Sectors per FAT.
    pub fat_sectors: u64,
    /// Root directory entries (FAT12/16; 0 on FAT32).
    pub root_entries: u32,
    /// Total sectors the boot sector claims.
    pub total_sectors: u64,
    /// First sector after the FATs: the FAT12/16 root directory, or the
    /// first cluster on FAT32. TSK numbers directory entries from here.
    pub first_data_sector: u64,
    /// First sector of cluster 2.
    pub first_cluster_sector: u64,
    /// Number of data clusters (after clamping to what the FAT can map).
    pub cluster_count: u64,
    /// FAT32 root directory cluster (0 on FAT12/16).
    pub root_cluster: u32,
    /// Volume serial number.
    pub volume_id: u32,
    /// Volume label from the boot sector (11 bytes), when the extended boot
    /// signature is present.
    pub volume_label: Option<[u8; 11]>,
    /// File-system type label (8 bytes), when present.
    pub fs_type_label: Option<[u8; 8]>,
    /// Whether the cluster count had to be reduced to what the FAT maps.
    pub fat_too_small: bool,
}

impl BootSector {
    /// Bytes per cluster.
    pub fn cluster_size(&self) -> u64 {
        u64::from(self.bytes_per_sector) * u64::from(self.sectors_per_cluster)
    }

    /// Highest valid cluster number.
    pub fn last_cluster(&self) -> u64 {
        self.cluster_count + 1
    }

    /// Validates a boot sector. The reason for a rejection names the field.
    pub fn parse(b: &[u8; 512]) -> Result<BootSector, String> {
        let u16f = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32f = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        if b[510] != 0x55 || b[511] != 0xAA {
            return Err("no 0x55AA signature".into());
        }
        let bps = u32::from(u16f(11));
        if !matches!(bps, 512 | 1024 | 2048 | 4096) {
            return Err(format!("bytes per sector {bps}"));
        }
        let spc = u32::from(b[13]);
        if spc == 0 || !spc.is_power_of_two() {
            return Err(format!("sectors per cluster {spc}"));
        }
        let reserved = u32::from(u16f(14));
        if reserved == 0 {
            return Err("no reserved sectors".into());
        }
        let fat_count = u32::from(b[16]);
        if fat_count == 0 || fat_count > 8 {
            return Err(format!("FAT count {fat_count}"));
        }
        let media = b[21];
        if media != 0xF0 && media < 0xF8 {
            return Err(format!("media descriptor {media:#04x}"));
        }
        let root_entries = u32::from(u16f(17));
        let fat16 = u64::from(u16f(22));
        let fat32 = u64::from(u32f(36));
        let total16 = u64::from(u16f(19));
        let total = if total16 != 0 {
            total16
        } else {
            u64::from(u32f(32))
        };
        if total == 0 {
            return Err("total sectors 0".into());
        }
        let is_fat32 = fat16 == 0;
        let fat_sectors = if is_fat32 { fat32 } else { fat16 };
        if fat_sectors == 0 {
            return Err("sectors per FAT 0".into());
        }
        if is_fat32 && root_entries != 0 {
            return Err("FAT32 with a fixed root directory".into());
        }
        let root_sectors = (u64::from(root_entries) * 32).div_ceil(u64::from(bps));
        let first_data = u64::from(reserved) + u64::from(fat_count) * fat_sectors;
        let first_cluster = first_data + root_sectors;
        if first_cluster >= total {
            return Err(format!(
                "data area starts at sector {first_cluster}, past the {total} sectors of the volume"
            ));
        }
        let mut clusters = (total - first_cluster) / u64::from(spc);
        if clusters == 0 {
            return Err("no data clusters".into());
        }
        let kind = if is_fat32 {
            FsKind::Fat32
        } else if clusters < 4085 {
            FsKind::Fat12
        } else {
            FsKind::Fat16
        };
        // Clusters the FAT can describe (entries 0 and 1 are reserved).
        let bits = match kind {
            FsKind::Fat12 => 12,
            FsKind::Fat16 => 16,
            _ => 32,
        };
        let mappable = (fat_sectors * u64::from(bps) * 8 / bits).saturating_sub(2);
        let fat_too_small = mappable < clusters;
        if fat_too_small {
            clusters = mappable;
        }
        if clusters == 0 {
            return Err("FAT maps no clusters".into());
        }
        let (ext, root_cluster) = if is_fat32 { (64, u32f(44)) } else { (36, 0) };
        if is_fat32 && (root_cluster < 2 || u64::from(root_cluster) > clusters + 1) {
            return Err(format!("FAT32 root cluster {root_cluster}"));
        }
        let has_ext = b[ext + 2] == 0x29 || b[ext + 2] == 0x28;
        let volume_id = if has_ext { u32f(ext + 3) } else { 0 };
        let mut label = [0u8; 11];
        label.copy_from_slice(&b[ext + 7..ext + 18]);
        let mut fs_type = [0u8; 8];
        fs_type.copy_from_slice(&b[ext + 18..ext + 26]);
        let mut oem_name = [0u8; 8];
        oem_name.copy_from_slice(&b[3..11]);
        Ok(BootSector {
            kind,
            oem_name,
            bytes_per_sector: bps,
            sectors_per_cluster: spc,
            reserved_sectors: reserved,
            fat_count,
            fat_sectors,
            root_entries,
            total_sectors: total,
            first_data_sector: first_data,
            first_cluster_sector: first_cluster,
            cluster_count: clusters,
            root_cluster,
            volume_id,
            volume_label: has_ext.then_some(label),
            fs_type_label: (b[ext + 2] == 0x29).then_some(fs_type),
            fat_too_small,
        })
    }
}
