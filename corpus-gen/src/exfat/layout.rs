//! exFAT's layout planner: directories sized in entry sets (File, Stream
//! Extension and one File Name entry per 15 characters; no `.` and `..`;
//! the root opens with the label, bitmap and up-case entries), each
//! batch's folder at its group's start as on FAT, and the bytes only exFAT
//! has: entry sets, FAT chains (directories and fragmented files; a
//! contiguous file says `NoFatChain`) and the allocation bitmap.

use super::{ENTRY, ExfatParams, MAX_DIR_BYTES, ROOT_HEAD_ENTRIES, SetRecord, encode_set};
use crate::error::CorpusError;
use crate::names::{NameForm, Times};
use crate::plan::{
    Child, DirPlan, FsLayout, GroupPlan, ItemPlan, LEAF_CAP, Run, Volume, dir_clusters_for,
    keep_in_order,
};
use caseload_fs::exfat::upcase::Upcase;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Entries one of the skeleton's own files may take (names under 45
/// characters).
const MAX_SET: usize = 5;
/// Most groups (as on FAT: one batch folder each in the leaves).
const MAX_GROUPS: u64 = 30_000;

/// The exFAT layout planner.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExfatLayout;

fn upcase() -> &'static Upcase {
    static UP: OnceLock<Upcase> = OnceLock::new();
    UP.get_or_init(|| Upcase::decode(super::UPCASE))
}

fn entries(form: &NameForm) -> usize {
    super::set_entries(&super::form_name(form))
}

impl FsLayout for ExfatLayout {
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
        let n = skeleton_entries(vol, i);
        let bytes = n as u64 * ENTRY as u64;
        if bytes > MAX_DIR_BYTES {
            return Err(CorpusError::Invalid(format!(
                "folder /{} would need {n} directory entries for {} batches, and an exFAT \
                 folder holds at most {} (256 MiB): a disk this large needs NTFS",
                vol.skel[i].path,
                vol.batches(),
                MAX_DIR_BYTES / ENTRY as u64
            )));
        }
        Ok(Some(bytes.div_ceil(vol.geo.cluster_bytes()).max(1) as u32))
    }

    /// A deleted directory keeps exactly one cluster (so recovery of its
    /// listing is exact): the children whose sets fit it, in order.
    fn deleted_dir_keeps(&self, children: &[&NameForm], cluster: u64) -> Vec<bool> {
        keep_in_order(children, cluster as usize / ENTRY, entries)
    }

    fn dir_clusters(&self, dirs: &[DirPlan], items: &[ItemPlan], d: usize, cluster: u64) -> u32 {
        // No `.` and `..` entries.
        dir_clusters_for(dirs, items, d, cluster, 0, entries)
    }

    fn group_reserve(&self, _dirs: &[DirPlan], _items: &[ItemPlan]) -> u32 {
        0
    }

    fn pack(&self, _vol: &Volume, _k: u32, _items: &mut [ItemPlan]) {}

    fn storable_name(&self, name: &str) -> Option<String> {
        super::storable_name(name)
    }
}

/// Entries skeleton directory `i` needs (an upper bound for the skeleton's
/// own files).
fn skeleton_entries(vol: &Volume, i: usize) -> usize {
    let d = &vol.skel[i];
    let mut n = if i == 0 { ROOT_HEAD_ENTRIES } else { 0 };
    for &c in &d.children {
        n += entries(&vol.skel[c].form);
    }
    if d.leaf.is_some() {
        n += LEAF_CAP * MAX_SET;
    }
    for f in vol.group_folders_in(i) {
        n += entries(&f.form);
    }
    n
}

/// Who an entry set in a directory stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Who {
    /// Skeleton folder `i`.
    Skel(usize),
    /// A batch folder, by its planner first cluster.
    Folder(u32),
    /// A child of a group's plan (group 0's for skeleton folders).
    Child(Child),
}

/// A directory's bytes and where each set starts in them.
pub struct DirBytes {
    /// The directory, sized to its clusters.
    pub bytes: Vec<u8>,
    /// Byte offset of each set's File entry.
    pub sets: Vec<(Who, usize)>,
}

fn dir_record<'a>(
    p: &ExfatParams,
    name: &'a str,
    runs: &[Run],
    base: u32,
    cluster: u64,
    times: Times,
    deleted: bool,
) -> SetRecord<'a> {
    let clusters: u64 = runs.iter().map(|r| r.len as u64).sum();
    SetRecord {
        name,
        dir: true,
        cluster: runs.first().map(|r| p.cluster(base + r.start)).unwrap_or(0),
        size: clusters * cluster,
        no_fat_chain: false,
        times,
        deleted,
    }
}

/// The set of `child` of a group's plan.
fn child_set(p: &ExfatParams, plan: &GroupPlan, cluster: u64, child: Child, out: &mut Vec<u8>) {
    let up = upcase();
    match child {
        Child::Item(i) => {
            let it = &plan.items[i];
            let empty = it.spec.size == 0;
            let name = super::form_name(&it.form);
            encode_set(
                out,
                &SetRecord {
                    name: &name,
                    dir: false,
                    cluster: if empty {
                        0
                    } else {
                        p.cluster(plan.first_cluster(&it.runs))
                    },
                    size: it.spec.size,
                    no_fat_chain: !empty && it.runs.len() == 1,
                    times: it.times,
                    deleted: it.deleted,
                },
                up,
            );
        }
        Child::Dir(d) => {
            let dir = &plan.dirs[d];
            let name = super::form_name(&dir.form);
            encode_set(
                out,
                &dir_record(
                    p,
                    &name,
                    &dir.runs,
                    plan.base,
                    cluster,
                    dir.times,
                    dir.deleted,
                ),
                up,
            );
        }
    }
}

fn params(vol: &Volume) -> Result<ExfatParams, CorpusError> {
    vol.geo
        .exfat
        .ok_or_else(|| CorpusError::Worker("exFAT layout on a volume without exFAT".into()))
}

/// Directory bytes of skeleton directory `i` (whole, sized to its
/// clusters). Group 0's plan supplies the skeleton's own files;
/// `folder_runs` every batch folder's absolute runs by its first cluster.
pub fn skeleton_dir_bytes(
    vol: &Volume,
    i: usize,
    g0: &GroupPlan,
    folder_runs: &HashMap<u32, Vec<Run>>,
) -> Result<DirBytes, CorpusError> {
    let p = params(vol)?;
    let cs = vol.geo.cluster_bytes();
    let up = upcase();
    let d = &vol.skel[i];
    let mut out = Vec::new();
    let mut sets = Vec::new();
    if i == 0 {
        super::encode_root_head(&mut out, &p);
    }
    for &c in &d.children {
        let s = &vol.skel[c];
        sets.push((Who::Skel(c), out.len()));
        let name = super::form_name(&s.form);
        let runs = [Run {
            start: s.first,
            len: s.clusters,
        }];
        encode_set(
            &mut out,
            &dir_record(&p, &name, &runs, 0, cs, s.times, false),
            up,
        );
    }
    for (parent, child) in &g0.skel_children {
        if *parent == i {
            sets.push((Who::Child(*child), out.len()));
            child_set(&p, g0, cs, *child, &mut out);
        }
    }
    for f in vol.group_folders_in(i) {
        sets.push((Who::Folder(f.first), out.len()));
        let name = super::form_name(&f.form);
        // A batch folder's first cluster is fixed; the rest of it lies in
        // its group, so it is chained through the FAT and its size is
        // known only from its group's plan (`folder_runs`, absolute).
        let runs = folder_runs.get(&f.first).cloned().unwrap_or_else(|| {
            vec![Run {
                start: f.first,
                len: 1,
            }]
        });
        encode_set(
            &mut out,
            &dir_record(&p, &name, &runs, 0, cs, f.times, false),
            up,
        );
    }
    let room = (d.clusters as u64 * cs) as usize;
    if out.len() > room {
        return Err(CorpusError::Worker(format!(
            "folder /{} needs {} bytes of entries and has {room}",
            d.path,
            out.len()
        )));
    }
    out.resize(room, 0);
    Ok(DirBytes { bytes: out, sets })
}

/// Every batch folder's absolute runs, by its first cluster.
pub fn folder_runs(plan: &GroupPlan, into: &mut HashMap<u32, Vec<Run>>) {
    for d in &plan.dirs {
        if d.group_folder {
            into.insert(
                plan.first_cluster(&d.runs),
                d.runs
                    .iter()
                    .map(|r| Run {
                        start: plan.base + r.start,
                        len: r.len,
                    })
                    .collect(),
            );
        }
    }
}

/// Bytes of group directory `d` (whole; sized to its clusters).
pub fn dir_bytes(plan: &GroupPlan, vol: &Volume, d: usize) -> Result<DirBytes, CorpusError> {
    let p = params(vol)?;
    let cs = vol.geo.cluster_bytes();
    let dir = &plan.dirs[d];
    let mut out = Vec::new();
    let mut sets = Vec::new();
    for &c in &dir.children {
        sets.push((Who::Child(c), out.len()));
        child_set(&p, plan, cs, c, &mut out);
    }
    let clusters: u32 = dir.runs.iter().map(|r| r.len).sum();
    out.resize(clusters as usize * cs as usize, 0);
    Ok(DirBytes { bytes: out, sets })
}

/// FAT values for the group's clusters in exFAT numbering (next cluster,
/// end of chain, 0 for free or `NoFatChain`), in cluster order.
pub fn fat_entries(plan: &GroupPlan, p: &ExfatParams) -> Vec<u32> {
    let mut next = vec![0u32; plan.n as usize];
    let mut chain = |runs: &[Run]| {
        let mut prev: Option<u32> = None;
        for r in runs {
            for c in r.start..r.start + r.len {
                if let Some(q) = prev {
                    next[q as usize] = p.cluster(plan.base + c);
                }
                prev = Some(c);
            }
        }
        if let Some(q) = prev {
            next[q as usize] = 0xFFFF_FFFF;
        }
    };
    for d in &plan.dirs {
        if !d.deleted {
            chain(&d.runs);
        }
    }
    for it in &plan.items {
        if !it.deleted && !it.residue && it.spec.size > 0 && it.runs.len() > 1 {
            chain(&it.runs);
        }
    }
    next
}

/// Which of the group's clusters are allocated (the bitmap's bits).
pub fn used_clusters(plan: &GroupPlan) -> Vec<bool> {
    let mut used = vec![false; plan.n as usize];
    let mut mark = |runs: &[Run]| {
        for r in runs {
            for c in r.start..r.start + r.len {
                used[c as usize] = true;
            }
        }
    };
    for d in &plan.dirs {
        if !d.deleted {
            mark(&d.runs);
        }
    }
    for it in &plan.items {
        if !it.deleted && !it.residue && it.spec.size > 0 {
            mark(&it.runs);
        }
    }
    used
}
