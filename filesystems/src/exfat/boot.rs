//! The exFAT boot sector (its geometry, validated as TSK's `exfatfs_open`
//! validates it) and the checksum of the 12-sector boot region.

use crate::bytes::{u16_at, u32_at, u64_at};

/// The geometry and identity read from an exFAT boot sector, after
/// validation. Sector numbers are relative to the start of the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExfatBoot {
    /// `PartitionOffset`: where the writer thought the volume starts on its
    /// disk, in sectors (informational; nothing here relies on it).
    pub partition_offset: u64,
    /// `VolumeLength` in sectors.
    pub volume_sectors: u64,
    /// First sector of the first FAT.
    pub fat_offset: u64,
    /// Sectors per FAT.
    pub fat_sectors: u64,
    /// First sector of the cluster heap (cluster 2). TSK numbers directory
    /// entries from here.
    pub heap_offset: u64,
    /// Clusters in the heap.
    pub cluster_count: u64,
    /// First cluster of the root directory.
    pub root_cluster: u32,
    /// Volume serial number.
    pub serial: u32,
    /// File-system revision, major in the high byte.
    pub revision: u16,
    /// `VolumeFlags` (bit 0 ActiveFat, 1 VolumeDirty, 2 MediaFailure).
    pub volume_flags: u16,
    /// Bytes per sector (512 to 4096).
    pub bytes_per_sector: u32,
    /// Sectors per cluster.
    pub sectors_per_cluster: u32,
    /// Number of FATs (1, or 2 with TexFAT).
    pub fat_count: u32,
    /// Whether the sector ends with the 0x55 0xAA signature.
    pub signature_ok: bool,
}

impl ExfatBoot {
    /// Bytes per cluster.
    pub fn cluster_size(&self) -> u64 {
        u64::from(self.bytes_per_sector) * u64::from(self.sectors_per_cluster)
    }

    /// Highest valid cluster number.
    pub fn last_cluster(&self) -> u64 {
        self.cluster_count + 1
    }

    /// First sector after the cluster heap.
    pub fn heap_end(&self) -> u64 {
        self.heap_offset + self.cluster_count * u64::from(self.sectors_per_cluster)
    }

    /// Volume-relative first sector of cluster `c` (clusters start at 2).
    pub fn cluster_sector(&self, c: u64) -> u64 {
        self.heap_offset + c.saturating_sub(2) * u64::from(self.sectors_per_cluster)
    }

    /// Validates an exFAT boot sector (at least its first 512 bytes). The
    /// checks are TSK's, so a volume TSK opens opens here: sector size
    /// 2^9..2^12, cluster at most 32 MiB, a non-empty FAT and volume, one
    /// or two FATs, FAT and heap inside the volume and in that order, the
    /// root directory inside the heap. The reason for a rejection names the
    /// field.
    pub fn parse(b: &[u8]) -> Result<ExfatBoot, String> {
        if b.len() < 512 {
            return Err(format!("boot sector has {} bytes, not 512", b.len()));
        }
        if b.get(3..11) != Some(b"EXFAT   ".as_slice()) {
            return Err("file-system name is not `EXFAT   `".to_string());
        }
        let u32f = |o| u64::from(u32_at(b, o).unwrap_or(0));
        let bps_shift = u32::from(b[108]);
        let spc_shift = u32::from(b[109]);
        if !(9..=12).contains(&bps_shift) {
            return Err(format!("bytes-per-sector shift {bps_shift} is not 9..=12"));
        }
        if bps_shift + spc_shift > 25 {
            return Err(format!(
                "cluster of 2^{} bytes is larger than 32 MiB",
                bps_shift + spc_shift
            ));
        }
        let volume_sectors = u64_at(b, 72).unwrap_or(0);
        if volume_sectors == 0 {
            return Err("volume length is 0".to_string());
        }
        let fat_count = u32::from(b[110]);
        if fat_count != 1 && fat_count != 2 {
            return Err(format!("{fat_count} FATs (1 or 2 expected)"));
        }
        let fat_offset = u32f(80);
        let fat_sectors = u32f(84);
        if fat_sectors == 0 {
            return Err("FAT length is 0".to_string());
        }
        if fat_offset == 0 || fat_offset >= volume_sectors {
            return Err(format!(
                "FAT offset {fat_offset} is outside the volume of {volume_sectors} sectors"
            ));
        }
        let heap_offset = u32f(88);
        let fats_end = fat_offset + fat_sectors * u64::from(fat_count);
        if heap_offset < fats_end || heap_offset >= volume_sectors {
            return Err(format!(
                "cluster heap offset {heap_offset} is not between the FATs' end ({fats_end}) and the volume's ({volume_sectors})"
            ));
        }
        let cluster_count = u32f(92);
        let spc = 1u64 << spc_shift;
        if cluster_count == 0 || heap_offset + cluster_count * spc > volume_sectors {
            return Err(format!(
                "{cluster_count} clusters of {spc} sectors from sector {heap_offset} do not fit the volume of {volume_sectors} sectors"
            ));
        }
        let root_cluster = u32_at(b, 96).unwrap_or(0);
        if u64::from(root_cluster) < 2 || u64::from(root_cluster) > cluster_count + 1 {
            return Err(format!(
                "root directory cluster {root_cluster} is outside 2..={}",
                cluster_count + 1
            ));
        }
        Ok(ExfatBoot {
            partition_offset: u64_at(b, 64).unwrap_or(0),
            volume_sectors,
            fat_offset,
            fat_sectors,
            heap_offset,
            cluster_count,
            root_cluster,
            serial: u32_at(b, 100).unwrap_or(0),
            revision: u16_at(b, 104).unwrap_or(0),
            volume_flags: u16_at(b, 106).unwrap_or(0),
            bytes_per_sector: 1 << bps_shift,
            sectors_per_cluster: 1 << spc_shift,
            fat_count,
            signature_ok: b[510] == 0x55 && b[511] == 0xAA,
        })
    }
}

/// The boot-region checksum: every byte of the first 11 sectors except
/// `VolumeFlags` (106, 107) and `PercentInUse` (112), which change without
/// the region being rewritten.
pub fn boot_checksum(region: &[u8], bytes_per_sector: usize) -> u32 {
    let end = (11 * bytes_per_sector).min(region.len());
    region[..end]
        .iter()
        .enumerate()
        .filter(|(i, _)| !matches!(i, 106 | 107 | 112))
        .fold(0u32, |sum, (_, &b)| {
            sum.rotate_right(1).wrapping_add(u32::from(b))
        })
}

/// Checks a boot region (12 sectors: 11 checksummed, the 12th holding the
/// checksum repeated). Returns the computed checksum and the first stored
/// value that differs from it, if any.
pub fn check_boot_region(region: &[u8], bytes_per_sector: usize) -> (u32, Option<u32>) {
    let sum = boot_checksum(region, bytes_per_sector);
    let stored = region
        .get(11 * bytes_per_sector..12 * bytes_per_sector)
        .unwrap_or(&[]);
    let bad = stored
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .find(|&v| v != sum);
    let bad = if stored.len() < 4 { Some(0) } else { bad };
    (sum, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_rotates_and_skips_the_volatile_fields() {
        let mut region = vec![0u8; 12 * 512];
        region[0] = 1;
        let base = boot_checksum(&region, 512);
        // Changing the volatile fields leaves the sum alone...
        region[106] = 0xFF;
        region[107] = 0xFF;
        region[112] = 0x42;
        assert_eq!(boot_checksum(&region, 512), base);
        // ...any other byte changes it.
        region[113] = 1;
        assert_ne!(boot_checksum(&region, 512), base);
        let sum = boot_checksum(&region, 512);
        for c in region[11 * 512..].chunks_exact_mut(4) {
            c.copy_from_slice(&sum.to_le_bytes());
        }
        assert_eq!(check_boot_region(&region, 512), (sum, None));
        region[11 * 512 + 8] ^= 1;
        assert!(check_boot_region(&region, 512).1.is_some());
    }

    #[test]
    fn rejections_name_the_field() {
        let mut b = vec![0u8; 512];
        b[3..11].copy_from_slice(b"EXFAT   ");
        b[108] = 8;
        assert!(ExfatBoot::parse(&b).unwrap_err().contains("shift"));
        b[108] = 9;
        b[109] = 17;
        assert!(ExfatBoot::parse(&b).unwrap_err().contains("32 MiB"));
        b[109] = 3;
        assert!(ExfatBoot::parse(&b).unwrap_err().contains("volume length"));
        b[72] = 0; // 65536 sectors
        b[74] = 1;
        b[110] = 1;
        assert!(ExfatBoot::parse(&b).unwrap_err().contains("FAT length"));
        b[80] = 128;
        b[84] = 8;
        b[88] = 64;
        assert!(ExfatBoot::parse(&b).unwrap_err().contains("heap"));
        b[88] = 0;
        b[89] = 1; // 256
        b[92] = 0xFF;
        b[93] = 0xFF; // 65535 clusters of 8 sectors: too many
        assert!(ExfatBoot::parse(&b).unwrap_err().contains("fit"));
        b[92] = 100;
        b[93] = 0;
        b[96] = 200;
        assert!(ExfatBoot::parse(&b).unwrap_err().contains("root"));
        b[96] = 4;
        let boot = ExfatBoot::parse(&b).unwrap();
        assert_eq!(boot.cluster_size(), 4096);
        assert_eq!(boot.last_cluster(), 101);
        assert_eq!(boot.cluster_sector(4), 256 + 16);
        assert!(!boot.signature_ok);
    }
}
