//! The exFAT volume's head as one sequential stream: both boot regions,
//! the FAT, the allocation bitmap, the up-case table and the skeleton's
//! folders (the groups' clusters follow, written like FAT's).

use super::layout::{Who, skeleton_dir_bytes};
use super::{ExfatParams, SECTOR, UPCASE, boot_region};
use crate::error::CorpusError;
use crate::plan::{GroupPlan, Out, Run, Volume};
use std::collections::HashMap;

/// Write the volume from its first sector to the end of the skeleton's
/// folders. `skel_order` lists the skeleton folders by first cluster,
/// `folder_runs` every batch folder's absolute runs, `free` the free
/// clusters. Returns the inode number (TSK's) of every set in a skeleton
/// folder.
#[allow(clippy::too_many_arguments)]
pub fn head(
    vol: &Volume,
    p: &ExfatParams,
    g0: &GroupPlan,
    folder_runs: &HashMap<u32, Vec<Run>>,
    skel_order: &[usize],
    free: u64,
    serial: u32,
    out: &mut dyn Out,
) -> Result<HashMap<Who, u64>, CorpusError> {
    let geo = &vol.geo;
    let cluster = p.cluster_bytes();
    let in_use = (geo.clusters as u64).saturating_sub(free) + p.sys_clusters() as u64;
    let percent = (in_use * 100 / p.cluster_count as u64) as u8;
    let region = boot_region(p, geo.part_start_lba, serial, percent);
    out.put(&region)?;
    out.put(&region)?;
    out.put_zeros((p.fat_offset as u64 - 24) * SECTOR)?;
    fat(vol, p, out)?;
    out.put_zeros((p.heap_offset as u64 - p.fat_offset as u64 - p.fat_length as u64) * SECTOR)?;
    bitmap(vol, p, out)?;
    let mut up = UPCASE.to_vec();
    up.resize((p.upcase_clusters as u64 * cluster) as usize, 0);
    out.put(&up)?;
    let mut inodes = HashMap::new();
    let heap = geo.part_offset() + p.heap_offset as u64 * SECTOR;
    for &i in skel_order {
        let b = skeleton_dir_bytes(vol, i, g0, folder_runs)?;
        let at = geo.cluster_offset(vol.skel[i].first);
        for (who, off) in &b.sets {
            inodes.insert(*who, (at + *off as u64 - heap) / 32 + 3);
        }
        out.put(&b.bytes)?;
    }
    Ok(inodes)
}

/// The exFAT FAT: media and end marks, the bitmap's and up-case table's
/// chains, the skeleton's, then each group's (directories and fragmented
/// files; a contiguous file's entries stay 0, it says `NoFatChain`).
fn fat(vol: &Volume, p: &ExfatParams, out: &mut dyn Out) -> Result<(), CorpusError> {
    const EOC: u32 = 0xFFFF_FFFF;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut count = 0u64;
    let mut push = |buf: &mut Vec<u8>, v: u32| {
        buf.extend_from_slice(&v.to_le_bytes());
        count += 1;
    };
    push(&mut buf, 0xFFFF_FFF8);
    push(&mut buf, EOC);
    for (first, n) in [
        (2, p.bitmap_clusters),
        (p.upcase_cluster(), p.upcase_clusters),
    ] {
        for c in first..first + n {
            push(&mut buf, if c + 1 == first + n { EOC } else { c + 1 });
        }
    }
    let mut next = 2u32;
    for (first, n) in vol.skeleton_runs() {
        for c in first..first + n {
            push(
                &mut buf,
                if c + 1 == first + n {
                    EOC
                } else {
                    p.cluster(c + 1)
                },
            );
        }
        next = first + n;
    }
    while next < vol.groups_start {
        push(&mut buf, 0);
        next += 1;
    }
    for k in 0..vol.groups {
        let plan = vol.plan_group(k);
        for v in super::layout::fat_entries(&plan, p) {
            push(&mut buf, v);
        }
        if buf.len() >= 1 << 20 {
            out.put(&buf)?;
            buf.clear();
        }
    }
    out.put(&buf)?;
    let bytes_total = p.fat_length as u64 * SECTOR;
    if count * 4 > bytes_total || count != p.cluster_count as u64 + 2 {
        return Err(CorpusError::Worker(format!(
            "exFAT FAT holds {count} entries for {} clusters in {bytes_total} bytes",
            p.cluster_count
        )));
    }
    out.put_zeros(bytes_total - count * 4)?;
    Ok(())
}

/// The exFAT allocation bitmap, padded to its clusters.
fn bitmap(vol: &Volume, p: &ExfatParams, out: &mut dyn Out) -> Result<(), CorpusError> {
    struct Bits {
        out: Vec<u8>,
        acc: u8,
        n: u64,
    }
    impl Bits {
        fn push(&mut self, used: bool) {
            if used {
                self.acc |= 1 << (self.n % 8);
            }
            self.n += 1;
            if self.n.is_multiple_of(8) {
                self.out.push(self.acc);
                self.acc = 0;
            }
        }
    }
    let mut b = Bits {
        out: Vec::with_capacity(1 << 20),
        acc: 0,
        n: 0,
    };
    for _ in 0..p.sys_clusters() {
        b.push(true);
    }
    let mut next = 2u32;
    for d in vol.skel.iter().filter(|d| d.clusters > 0) {
        for _ in 0..d.clusters {
            b.push(true);
        }
        next += d.clusters;
    }
    while next < vol.groups_start {
        b.push(false);
        next += 1;
    }
    for k in 0..vol.groups {
        let plan = vol.plan_group(k);
        for u in super::layout::used_clusters(&plan) {
            b.push(u);
        }
        if b.out.len() >= 1 << 20 {
            out.put(&b.out)?;
            b.out.clear();
        }
    }
    while b.n < p.cluster_count as u64 {
        b.push(false);
    }
    if !b.n.is_multiple_of(8) {
        b.out.push(b.acc);
    }
    let n = b.n;
    let bits = b.out;
    out.put(&bits)?;
    let total = p.bitmap_clusters as u64 * p.cluster_bytes();
    let written = n.div_ceil(8);
    if n != p.cluster_count as u64 || written > total {
        return Err(CorpusError::Worker(format!(
            "exFAT bitmap has {n} bits for {} clusters",
            p.cluster_count
        )));
    }
    out.put_zeros(total - written)?;
    Ok(())
}
