//! FAT's layout planner: directories sized in 32-byte slots (long-name
//! slots and the 8.3 entry), each batch's folders at its group's start so
//! that the skeleton can point at them unplanned, and the bytes only FAT
//! has: directory entries and cluster chains.

use super::{FatType, Record, attr, encode, encode_dots, slots};
use crate::error::CorpusError;
use crate::names::NameForm;
use crate::plan::{
    Child, DirPlan, FsLayout, GroupPlan, ItemPlan, LEAF_CAP, Parent, Run, Volume, dir_clusters_for,
    keep_in_order,
};

/// Slots one of the skeleton's own entries may take (names are kept under
/// 39 characters).
const MAX_SLOTS: usize = 4;
/// Most groups (one batch each): batch folders are numbered with four hex
/// digits in their short names.
const MAX_GROUPS: u64 = 30_000;

/// The FAT layout planner.
#[derive(Debug, Clone, Copy, Default)]
pub struct FatLayout;

impl FsLayout for FatLayout {
    fn max_groups(&self) -> u64 {
        MAX_GROUPS
    }

    fn resident_max(&self) -> u64 {
        0
    }

    fn folders_at_group_start(&self) -> bool {
        true
    }

    fn skeleton_dir_clusters(&self, vol: &Volume, i: usize) -> Result<Option<u32>, CorpusError> {
        let slots = skeleton_slots(vol, i);
        if i == 0 && vol.geo.fat != FatType::Fat32 {
            // FAT12/16 keep the root in a fixed region before the data.
            if slots as u32 > vol.geo.root_entries {
                return Err(CorpusError::Invalid(
                    "root directory region too small".into(),
                ));
            }
            return Ok(None);
        }
        // FAT numbers a folder's 32-byte slots with 16 bits.
        if slots > 65_536 {
            return Err(CorpusError::Invalid(format!(
                "folder /{} would need {slots} directory entries for {} batches, and a FAT \
                 folder holds at most 65,536: a disk this large needs NTFS{}",
                vol.skel[i].path,
                vol.batches(),
                if vol.system_disk {
                    " (or a profile without the system folders)"
                } else {
                    ""
                }
            )));
        }
        let bytes = slots as u64 * 32;
        Ok(Some(bytes.div_ceil(vol.geo.cluster_bytes()).max(1) as u32))
    }

    /// A deleted directory keeps exactly one cluster (so recovery of its
    /// listing is exact): the children whose slots fit it, in order.
    fn deleted_dir_keeps(&self, children: &[&NameForm], cluster: u64) -> Vec<bool> {
        // `.` and `..` come first.
        keep_in_order(children, (cluster / 32) as usize - 2, slots)
    }

    fn dir_clusters(&self, dirs: &[DirPlan], items: &[ItemPlan], d: usize, cluster: u64) -> u32 {
        dir_clusters_for(dirs, items, d, cluster, 2, slots)
    }

    fn group_reserve(&self, _dirs: &[DirPlan], _items: &[ItemPlan]) -> u32 {
        0
    }

    fn pack(&self, _vol: &Volume, _k: u32, _items: &mut [ItemPlan]) {}
}

/// Slots skeleton directory `i` needs (an upper bound for the skeleton's
/// own files).
fn skeleton_slots(vol: &Volume, i: usize) -> usize {
    let d = &vol.skel[i];
    let mut n = if i == 0 { 0 } else { 2 };
    for &c in &d.children {
        n += slots(&vol.skel[c].form);
    }
    if d.leaf.is_some() {
        n += LEAF_CAP * MAX_SLOTS;
    }
    for f in vol.group_folders_in(i) {
        n += slots(&f.form);
    }
    n
}

/// Directory bytes of skeleton directory `i`, whole (it is at most a few
/// MiB even with the most batches). Group 0's plan supplies the skeleton's
/// own files.
pub fn skeleton_dir_bytes(vol: &Volume, i: usize, g0: &GroupPlan) -> Vec<u8> {
    let d = &vol.skel[i];
    let mut out = Vec::new();
    if i != 0 {
        let parent_first = if d.parent == 0 {
            0
        } else {
            vol.skel[d.parent].first
        };
        encode_dots(&mut out, d.first, parent_first, d.times);
    }
    for &c in &d.children {
        let s = &vol.skel[c];
        encode(
            &mut out,
            &Record {
                form: &s.form,
                attr: attr::DIRECTORY,
                cluster: s.first,
                size: 0,
                times: s.times,
                deleted: false,
            },
        );
    }
    for (p, child) in &g0.skel_children {
        if *p == i {
            encode_child(g0, &mut out, *child);
        }
    }
    for f in vol.group_folders_in(i) {
        encode(
            &mut out,
            &Record {
                form: &f.form,
                attr: attr::DIRECTORY,
                cluster: f.first,
                size: 0,
                times: f.times,
                deleted: false,
            },
        );
    }
    out
}

/// Encode the entry for `child` (in its parent directory).
pub fn encode_child(plan: &GroupPlan, out: &mut Vec<u8>, child: Child) {
    match child {
        Child::Item(i) => {
            let it = &plan.items[i];
            encode(
                out,
                &Record {
                    form: &it.form,
                    attr: attr::ARCHIVE,
                    cluster: if it.spec.size == 0 {
                        0
                    } else {
                        plan.first_cluster(&it.runs)
                    },
                    size: it.spec.size as u32,
                    times: it.times,
                    deleted: it.deleted,
                },
            );
        }
        Child::Dir(d) => {
            let dir = &plan.dirs[d];
            encode(
                out,
                &Record {
                    form: &dir.form,
                    attr: attr::DIRECTORY,
                    cluster: plan.first_cluster(&dir.runs),
                    size: 0,
                    times: dir.times,
                    deleted: dir.deleted,
                },
            );
        }
    }
}

/// Bytes of group directory `d` (whole; sized to its clusters).
pub fn dir_bytes(plan: &GroupPlan, vol: &Volume, d: usize) -> Vec<u8> {
    let dir = &plan.dirs[d];
    let own = plan.first_cluster(&dir.runs);
    let parent = match dir.parent {
        Parent::Skel(s) => {
            if s == 0 {
                0
            } else {
                vol.skel[s].first
            }
        }
        Parent::Dir(p) => plan.first_cluster(&plan.dirs[p].runs),
    };
    let mut out = Vec::new();
    encode_dots(&mut out, own, parent, dir.times);
    for &c in &dir.children {
        encode_child(plan, &mut out, c);
    }
    let clusters: u32 = dir.runs.iter().map(|r| r.len).sum();
    out.resize(clusters as usize * vol.geo.cluster_bytes() as usize, 0);
    out
}

/// FAT values for the group's clusters (absolute next-cluster numbers,
/// end-of-chain marks, 0 for free), in cluster order.
pub fn fat_entries(plan: &GroupPlan, eoc: u32) -> Vec<u32> {
    let mut next = vec![0u32; plan.n as usize];
    let mut chain = |runs: &[Run]| {
        let mut prev: Option<u32> = None;
        for r in runs {
            for c in r.start..r.start + r.len {
                if let Some(p) = prev {
                    next[p as usize] = plan.base + c;
                }
                prev = Some(c);
            }
        }
        if let Some(p) = prev {
            next[p as usize] = eoc;
        }
    };
    for d in &plan.dirs {
        if !d.deleted {
            chain(&d.runs);
        }
    }
    for it in &plan.items {
        if !it.deleted && !it.residue && it.spec.size > 0 {
            chain(&it.runs);
        }
    }
    next
}

/// Clusters marked in use in the FAT.
pub fn used_clusters(plan: &GroupPlan, cluster: u64) -> u64 {
    let dirs: u64 = plan
        .dirs
        .iter()
        .filter(|d| !d.deleted)
        .map(|d| d.runs.iter().map(|r| r.len as u64).sum::<u64>())
        .sum();
    let files: u64 = plan
        .items
        .iter()
        .filter(|i| !i.deleted && !i.residue)
        .map(|i| i.spec.size.div_ceil(cluster))
        .sum();
    dirs + files
}
