//! Disk and volume geometry: partition table (MBR or GPT) and the FAT
//! layout (sector and cluster sizes, FAT size, where the data area starts).

use crate::apfs::ApfsParams;
use crate::error::CorpusError;
use crate::exfat::ExfatParams;
use crate::fat::FatType;
use serde::{Deserialize, Serialize};

/// Bytes per disk sector (the partition table's unit).
pub const DISK_SECTOR: u64 = 512;
/// First partition sector: 1 MiB, as every current partitioning tool aligns.
pub const PART_START_LBA: u64 = 2048;
/// Smallest disk accepted.
pub const MIN_DISK: u64 = 32 << 20;
/// Largest disk accepted (FAT32's cluster-number limit at 32 KiB clusters).
pub const MAX_DISK: u64 = 8 << 40;
/// Size above which an MBR cannot describe the partition.
pub const MBR_LIMIT: u64 = (u32::MAX as u64) * DISK_SECTOR;

/// Partition table kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableKind {
    /// Classic DOS partition table.
    Mbr,
    /// GUID partition table with protective MBR and backup at the end.
    Gpt,
}

/// Everything needed to place a byte of the volume on the disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    /// Disk size in bytes (a multiple of 512).
    pub disk_bytes: u64,
    /// Partition table kind.
    pub table: TableKind,
    /// Partition start in 512-byte disk sectors.
    pub part_start_lba: u64,
    /// Partition length in 512-byte disk sectors.
    pub part_sectors: u64,
    /// FAT variant.
    pub fat: FatType,
    /// Logical bytes per sector of the file system (512, or 4096 above 2 TiB
    /// where a 32-bit sector count of 512-byte sectors no longer reaches).
    pub bps: u32,
    /// Logical sectors per cluster.
    pub spc: u32,
    /// Reserved logical sectors before the first FAT.
    pub reserved: u32,
    /// Logical sectors per FAT.
    pub fat_sectors: u32,
    /// Root directory entries (FAT12/16 fixed root; 0 on FAT32).
    pub root_entries: u32,
    /// Logical sectors in the volume.
    pub total_sectors: u64,
    /// Number of data clusters (cluster numbers 2..clusters+2).
    pub clusters: u32,
    /// An NTFS volume: the planner's clusters are NTFS clusters from
    /// [`crate::ntfs::Head::data`] on, `reserved` covers `$Boot` and the
    /// head, `fat` is unused (FAT32, so the root folder gets clusters like
    /// any other).
    pub ntfs: bool,
    /// An exFAT volume: where its regions lie. The planner's clusters are
    /// the heap's after the bitmap and up-case table (planner cluster 2 at
    /// `reserved`, which covers the boot region, the FAT and those two);
    /// `fat` is unused (FAT32, so the root gets clusters like any folder).
    pub exfat: Option<ExfatParams>,
    /// An APFS container filling the partition: where its objects lie.
    /// The planner's clusters are 4 KiB blocks from
    /// [`ApfsParams::data_base`] on (`reserved` covers the blocks before);
    /// `fat` is unused (FAT32).
    pub apfs: Option<ApfsParams>,
    /// An ext4 volume: where its structures lie. The planner's clusters
    /// are its blocks after the head (superblock, descriptors, bitmaps,
    /// inode tables, lost+found and journal), which `reserved` covers.
    pub ext4: Option<crate::ext4::Ext4Params>,
}

fn fat32_cluster_bytes(vol: u64) -> u64 {
    match vol {
        v if v <= 260 << 20 => 512,
        v if v <= 8 << 30 => 4096,
        v if v <= 16 << 30 => 8192,
        v if v <= 32 << 30 => 16384,
        _ => 32768,
    }
}

/// (fat sectors, clusters) for a volume layout, by the usual fixed-point
/// iteration: the FAT must describe every cluster left after it.
fn layout(total: u64, reserved: u64, root_secs: u64, spc: u64, bps: u64, bits: u64) -> (u64, u64) {
    let mut fatsz = 1u64;
    loop {
        let data = total.saturating_sub(reserved + 2 * fatsz + root_secs);
        let clusters = data / spc;
        let need = ((clusters + 2) * bits).div_ceil(8).div_ceil(bps);
        if need <= fatsz {
            return (fatsz, clusters);
        }
        fatsz = need;
    }
}

impl Geometry {
    /// Plan a disk of `disk_bytes` (rounded down to whole sectors) with the
    /// requested (or automatic) partition table and FAT type.
    pub fn plan(
        disk_bytes: u64,
        table: Option<TableKind>,
        fat: Option<FatType>,
    ) -> Result<Geometry, CorpusError> {
        let disk_bytes = disk_bytes / DISK_SECTOR * DISK_SECTOR;
        if disk_bytes < MIN_DISK {
            return Err(CorpusError::Invalid(format!(
                "size {disk_bytes} bytes is below the minimum of 32 MiB"
            )));
        }
        if disk_bytes > MAX_DISK {
            return Err(CorpusError::Invalid(format!(
                "size {disk_bytes} bytes is above the maximum of 8 TiB (FAT32's cluster limit)"
            )));
        }
        let table = Self::table_for(disk_bytes, table)?;
        let lbas = disk_bytes / DISK_SECTOR;
        let last_usable = match table {
            TableKind::Mbr => lbas - 1,
            TableKind::Gpt => lbas - 34,
        };
        let vol_bytes_raw = (last_usable + 1 - PART_START_LBA) * DISK_SECTOR;
        let bps: u64 = if vol_bytes_raw / 512 > u32::MAX as u64 {
            4096
        } else {
            512
        };
        // Whole logical sectors, and whole 4 KiB units for alignment.
        let vol_bytes = vol_bytes_raw / 4096 * 4096;
        let part_sectors = vol_bytes / DISK_SECTOR;
        let total = vol_bytes / bps;

        let try_fat = |ft: FatType, cluster: u64| -> Option<Geometry> {
            if cluster < bps || cluster > 65536 {
                return None;
            }
            let spc = cluster / bps;
            let (reserved, root_entries, bits) = match ft {
                FatType::Fat32 => (32u64, 0u64, 32u64),
                FatType::Fat16 => (4, 512, 16),
                FatType::Fat12 => (4, 512, 12),
            };
            let root_secs = (root_entries * 32).div_ceil(bps);
            let (fatsz, clusters) = layout(total, reserved, root_secs, spc, bps, bits);
            let ok = match ft {
                FatType::Fat12 => (1..=4084).contains(&clusters),
                FatType::Fat16 => (4085..=65524).contains(&clusters),
                FatType::Fat32 => (65525..=0x0FFF_FFF5 - 2).contains(&clusters),
            };
            if !ok || total > u32::MAX as u64 || fatsz > u32::MAX as u64 {
                return None;
            }
            Some(Geometry {
                disk_bytes,
                table,
                part_start_lba: PART_START_LBA,
                part_sectors,
                fat: ft,
                bps: bps as u32,
                spc: spc as u32,
                reserved: reserved as u32,
                fat_sectors: fatsz as u32,
                root_entries: root_entries as u32,
                total_sectors: total,
                clusters: clusters as u32,
                ntfs: false,
                exfat: None,
                apfs: None,
                ext4: None,
            })
        };
        let smallest =
            |ft: FatType| -> Option<Geometry> { (9..=16).find_map(|sh| try_fat(ft, 1u64 << sh)) };
        let fat32 = || {
            let c = fat32_cluster_bytes(vol_bytes).max(bps);
            try_fat(FatType::Fat32, c).or_else(|| try_fat(FatType::Fat32, c * 2))
        };
        let found = match fat {
            Some(FatType::Fat32) => fat32(),
            Some(ft) => smallest(ft),
            None => fat32()
                .or_else(|| smallest(FatType::Fat16))
                .or_else(|| smallest(FatType::Fat12)),
        };
        found.ok_or_else(|| {
            CorpusError::Invalid(format!(
                "no valid {} layout fits a {disk_bytes}-byte disk",
                fat.map(|f| f.name()).unwrap_or("FAT")
            ))
        })
    }

    /// Plan an NTFS disk of `disk_bytes`: 4 KiB clusters, the volume one
    /// sector short of the partition (the backup boot sector's place).
    pub fn plan_ntfs(disk_bytes: u64, table: Option<TableKind>) -> Result<Geometry, CorpusError> {
        use crate::ntfs::{CLUSTER, Head, MIN_DISK};
        let (disk_bytes, table, vol_bytes) = Self::partition(disk_bytes, table, "NTFS", MIN_DISK)?;
        let part_sectors = vol_bytes / DISK_SECTOR;
        let total_sectors = part_sectors - 1;
        let total_clusters = total_sectors / (CLUSTER as u64 / DISK_SECTOR);
        let head = Head::new(total_clusters);
        let clusters = total_clusters
            .checked_sub(head.data)
            .filter(|c| *c > 1024 && *c <= u32::MAX as u64 - 2)
            .ok_or_else(|| CorpusError::Invalid("volume too small for NTFS's own files".into()))?;
        Ok(Geometry {
            disk_bytes,
            table,
            part_start_lba: PART_START_LBA,
            part_sectors,
            fat: FatType::Fat32,
            bps: DISK_SECTOR as u32,
            spc: (CLUSTER as u64 / DISK_SECTOR) as u32,
            reserved: (head.data * CLUSTER as u64 / DISK_SECTOR) as u32,
            fat_sectors: 0,
            root_entries: 0,
            total_sectors,
            clusters: clusters as u32,
            ntfs: true,
            exfat: None,
            apfs: None,
            ext4: None,
        })
    }

    /// Plan an exFAT disk of `disk_bytes`: the volume fills the
    /// partition (whole 4 KiB units), laid out as mkfs.exfat does.
    pub fn plan_exfat(disk_bytes: u64, table: Option<TableKind>) -> Result<Geometry, CorpusError> {
        let (disk_bytes, table, vol_bytes) = Self::partition(disk_bytes, table, "exFAT", MIN_DISK)?;
        let p = ExfatParams::for_volume(vol_bytes, PART_START_LBA * DISK_SECTOR)
            .filter(|p| p.cluster_count - p.sys_clusters() > 1024)
            .ok_or_else(|| CorpusError::Invalid("volume too small for exFAT".into()))?;
        let spc = 1u32 << p.spc_shift;
        Ok(Geometry {
            exfat: Some(p),
            ..Self::filling(
                (disk_bytes, table, vol_bytes),
                spc,
                p.heap_offset + p.sys_clusters() * spc,
                p.volume_sectors,
                p.cluster_count - p.sys_clusters(),
            )
        })
    }

    /// A volume of 512-byte sectors filling the partition, with no FAT of
    /// its own (`fat` FAT32, so the root gets clusters like any folder):
    /// `spc` sectors per cluster, `reserved` sectors before cluster 2,
    /// `total` sectors and `clusters` planner clusters.
    fn filling(
        (disk_bytes, table, vol_bytes): (u64, TableKind, u64),
        spc: u32,
        reserved: u32,
        total: u64,
        clusters: u32,
    ) -> Geometry {
        Geometry {
            disk_bytes,
            table,
            part_start_lba: PART_START_LBA,
            part_sectors: vol_bytes / DISK_SECTOR,
            fat: FatType::Fat32,
            bps: DISK_SECTOR as u32,
            spc,
            reserved,
            fat_sectors: 0,
            root_entries: 0,
            total_sectors: total,
            clusters,
            ntfs: false,
            exfat: None,
            apfs: None,
            ext4: None,
        }
    }

    /// Plan an APFS disk of `disk_bytes`: GPT unless an MBR is asked for
    /// (a Mac's disks are GUID-partitioned), one container filling the
    /// partition (whole 4 KiB blocks).
    pub fn plan_apfs(disk_bytes: u64, table: Option<TableKind>) -> Result<Geometry, CorpusError> {
        let table = Some(table.unwrap_or(TableKind::Gpt));
        let (disk_bytes, table, vol_bytes) =
            Self::partition(disk_bytes, table, "APFS", crate::apfs::MIN_DISK)?;
        let p = ApfsParams::for_container(vol_bytes).ok_or_else(|| {
            CorpusError::Invalid(format!(
                "size {disk_bytes} bytes is outside APFS's range here (8 MiB to 7 TiB: above, \
                 the space manager would need chunk-info address blocks)"
            ))
        })?;
        let spc = (crate::apfs::BLOCK as u64 / DISK_SECTOR) as u32;
        Ok(Geometry {
            apfs: Some(p),
            ..Self::filling(
                (disk_bytes, table, vol_bytes),
                spc,
                (p.data_base * spc as u64) as u32,
                vol_bytes / DISK_SECTOR,
                (p.blocks - p.data_base) as u32,
            )
        })
    }

    /// Plan an ext4 disk of `disk_bytes`: the volume fills the partition
    /// (whole 4 KiB blocks), laid out as [`crate::ext4`] says; its UUID
    /// and hash seed come from `seed`.
    pub fn plan_ext4(
        disk_bytes: u64,
        table: Option<TableKind>,
        ids: crate::ext4::Ids,
    ) -> Result<Geometry, CorpusError> {
        let (disk_bytes, table, vol_bytes) =
            Self::partition(disk_bytes, table, "ext4", crate::ext4::MIN_DISK)?;
        let mut p = crate::ext4::Ext4Params::for_volume(vol_bytes)
            .ok_or_else(|| CorpusError::Invalid("volume too small for ext4".into()))?;
        p.ids = ids;
        let spc = (crate::ext4::BLOCK / DISK_SECTOR) as u32;
        let head = p.head_blocks();
        Ok(Geometry {
            ext4: Some(p),
            ..Self::filling(
                (disk_bytes, table, vol_bytes),
                spc,
                (head * spc as u64) as u32,
                p.blocks * spc as u64,
                (p.blocks - head) as u32,
            )
        })
    }

    /// The disk (whole sectors), its table and the partition's bytes
    /// (whole 4 KiB units) for a file system `fs` whose minimum disk here
    /// is `min`.
    fn partition(
        disk_bytes: u64,
        table: Option<TableKind>,
        fs: &str,
        min: u64,
    ) -> Result<(u64, TableKind, u64), CorpusError> {
        let disk_bytes = disk_bytes / DISK_SECTOR * DISK_SECTOR;
        if disk_bytes < min {
            return Err(CorpusError::Invalid(format!(
                "size {disk_bytes} bytes is below {fs}'s minimum here of {} MiB",
                min >> 20
            )));
        }
        if disk_bytes > MAX_DISK {
            return Err(CorpusError::Invalid(format!(
                "size {disk_bytes} bytes is above the maximum of 8 TiB"
            )));
        }
        let table = Self::table_for(disk_bytes, table)?;
        let lbas = disk_bytes / DISK_SECTOR;
        let last_usable = match table {
            TableKind::Mbr => lbas - 1,
            TableKind::Gpt => lbas - 34,
        };
        let vol_bytes = (last_usable + 1 - PART_START_LBA) * DISK_SECTOR / 4096 * 4096;
        Ok((disk_bytes, table, vol_bytes))
    }

    fn table_for(disk_bytes: u64, table: Option<TableKind>) -> Result<TableKind, CorpusError> {
        Ok(match table {
            Some(TableKind::Mbr) if disk_bytes > MBR_LIMIT => {
                return Err(CorpusError::Invalid(format!(
                    "an MBR cannot address a {disk_bytes}-byte disk (limit 2 TiB); use --partition-table gpt"
                )));
            }
            Some(t) => t,
            None if disk_bytes > MBR_LIMIT => TableKind::Gpt,
            None => TableKind::Mbr,
        })
    }

    /// Cluster size in bytes.
    pub fn cluster_bytes(&self) -> u64 {
        self.bps as u64 * self.spc as u64
    }

    /// Byte offset of the partition (the boot sector).
    pub fn part_offset(&self) -> u64 {
        self.part_start_lba * DISK_SECTOR
    }

    /// Byte length of the partition.
    pub fn part_bytes(&self) -> u64 {
        self.part_sectors * DISK_SECTOR
    }

    /// Byte offset of FAT number `i` (0 or 1).
    pub fn fat_offset(&self, i: u32) -> u64 {
        self.part_offset()
            + (self.reserved as u64 + i as u64 * self.fat_sectors as u64) * self.bps as u64
    }

    /// Bytes of one FAT.
    pub fn fat_bytes(&self) -> u64 {
        self.fat_sectors as u64 * self.bps as u64
    }

    /// Byte offset of the fixed FAT12/16 root directory (equals the data
    /// offset on FAT32).
    pub fn root_offset(&self) -> u64 {
        self.fat_offset(2)
    }

    /// Bytes of the fixed root directory region (0 on FAT32).
    pub fn root_bytes(&self) -> u64 {
        (self.root_entries as u64 * 32).div_ceil(self.bps as u64) * self.bps as u64
    }

    /// Byte offset of cluster 2.
    pub fn data_offset(&self) -> u64 {
        self.root_offset() + self.root_bytes()
    }

    /// Byte offset on the disk of cluster `c` (c ≥ 2).
    pub fn cluster_offset(&self, c: u32) -> u64 {
        self.data_offset() + (c as u64 - 2) * self.cluster_bytes()
    }

    /// Byte offset where the volume's clusters end (slack sectors of the
    /// volume that no cluster covers follow up to the partition end).
    pub fn data_end(&self) -> u64 {
        self.data_offset() + self.clusters as u64 * self.cluster_bytes()
    }

    /// Partition type byte as an MBR records it.
    pub fn mbr_type(&self) -> u8 {
        if self.ext4.is_some() {
            return 0x83;
        }
        if self.apfs.is_some() {
            // Apple's type byte (HFS+ and APFS).
            return 0xAF;
        }
        if self.ntfs || self.exfat.is_some() {
            return 0x07;
        }
        match self.fat {
            FatType::Fat32 => 0x0C,
            FatType::Fat16 => 0x0E,
            FatType::Fat12 => 0x01,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_disks_fall_back_to_fat16_and_large_to_gpt() {
        let g = Geometry::plan(32 << 20, None, None).unwrap();
        assert_eq!(g.fat, FatType::Fat16);
        let g = Geometry::plan(64 << 20, None, None).unwrap();
        assert_eq!(g.fat, FatType::Fat32);
        assert_eq!(g.cluster_bytes(), 512);
        let g = Geometry::plan(4 << 30, None, None).unwrap();
        assert_eq!(g.cluster_bytes(), 4096);
        assert_eq!(g.table, TableKind::Mbr);
        let g = Geometry::plan(3 << 40, None, None).unwrap();
        assert_eq!(g.table, TableKind::Gpt);
        assert_eq!(g.bps, 4096);
        assert!(Geometry::plan(3 << 40, Some(TableKind::Mbr), None).is_err());
        let g = Geometry::plan(32 << 20, None, Some(FatType::Fat12)).unwrap();
        assert!(g.clusters <= 4084);
        assert!(Geometry::plan(32 << 20, None, Some(FatType::Fat32)).is_err());
        assert!(Geometry::plan(31 << 20, None, None).is_err());
    }

    #[test]
    fn fat_covers_every_cluster() {
        for size in [32u64 << 20, 40 << 20, 96 << 20, 300 << 20, 5 << 30] {
            let g = Geometry::plan(size, None, None).unwrap();
            let bits = match g.fat {
                FatType::Fat12 => 12,
                FatType::Fat16 => 16,
                FatType::Fat32 => 32,
            };
            assert!((g.clusters as u64 + 2) * bits / 8 <= g.fat_bytes());
            assert!(g.data_end() <= g.part_offset() + g.part_bytes());
        }
    }
}
