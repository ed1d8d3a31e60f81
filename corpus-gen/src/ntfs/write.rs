//! Turning the planner's volume into NTFS bytes: NTFS's own records and
//! files, the skeleton folders' indexes, each group's `$MFT` fragment and
//! its directories' index blocks.

use super::index::{self, BuiltIndex, Entry, IndexError};
use super::layout::{name_value_len, names_of};
use super::record::{
    self, AT_BITMAP, AT_DATA, AT_FILE_NAME, AT_INDEX_ALLOCATION, AT_INDEX_ROOT,
    AT_STANDARD_INFORMATION, AT_VOLUME_INFORMATION, AT_VOLUME_NAME, DataRun, FileName, NonResident,
    NtTimes, RecordBuf, RecordFull, file_ref,
};
use super::system::{self, Secure};
use super::{CLUSTER, HEAD_RECORDS, Head, RECORD_BYTES, RECORDS_PER_CLUSTER, rec};
use crate::error::CorpusError;
use crate::plan::{Child, GroupPlan, Packing, Parent, Volume};
use std::collections::HashMap;
use std::sync::Arc;

impl From<RecordFull> for CorpusError {
    fn from(e: RecordFull) -> Self {
        CorpusError::Worker(e.to_string())
    }
}

impl From<IndexError> for CorpusError {
    fn from(e: IndexError) -> Self {
        CorpusError::Worker(e.to_string())
    }
}

pub use crate::plan::Out;

/// Name of the stream Windows attaches to downloaded files.
pub const ZONE_IDENTIFIER: &str = "Zone.Identifier";

/// The `Zone.Identifier` stream of a downloaded file (browsers mark what
/// came from the Internet, zone 3), or `None` for files that were not
/// downloaded. Only non-resident files carry one, so the record always has
/// room for it.
pub fn zone_identifier(it: &crate::plan::ItemPlan) -> Option<Vec<u8>> {
    if it.leaf != crate::plan::Leaf::Downloads || it.residue || it.resident || it.spec.size == 0 {
        return None;
    }
    let file: String = it
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c.to_string()
            } else {
                format!("%{:02X}", c as u32 & 0xFF)
            }
        })
        .collect();
    let host = [
        "download.example.com",
        "files.example.org",
        "cdn.example.net",
    ][(it.spec.key % 3) as usize];
    Some(
        format!(
            "[ZoneTransfer]\r\nZoneId=3\r\nReferrerUrl=https://{host}/\r\nHostUrl=https://{host}/get/{file}\r\n"
        )
        .into_bytes(),
    )
}

/// Sequence number of a record of NTFS's own (as `mkntfs` numbers them).
fn system_seq(r: u64) -> u16 {
    match r {
        0 => 1,
        1..=15 => r as u16,
        _ => 1,
    }
}

/// A reference to record `r` of NTFS's own.
fn system_ref(r: u64) -> u64 {
    file_ref(r, system_seq(r))
}

/// Record numbers of one group's directories and files.
#[derive(Debug, Clone)]
pub struct Numbering {
    /// Record of each directory.
    pub dir: Vec<u64>,
    /// Record of each file (`None` for residue, which has none).
    pub item: Vec<Option<u64>>,
    /// Records the group uses.
    pub count: u64,
}

/// Number a group's records from `base`: group folders first (in leaf
/// order), then the other directories, then the files.
pub fn number(plan: &GroupPlan, base: u64) -> Numbering {
    let mut next = base;
    let mut dir = vec![0u64; plan.dirs.len()];
    for pass in [true, false] {
        for (d, x) in plan.dirs.iter().enumerate() {
            if x.group_folder == pass {
                dir[d] = next;
                next += 1;
            }
        }
    }
    let item = plan
        .items
        .iter()
        .map(|it| {
            if it.residue {
                None
            } else {
                next += 1;
                Some(next - 1)
            }
        })
        .collect();
    Numbering {
        dir,
        item,
        count: next - base,
    }
}

/// A bit stream written in order (cluster or record bitmaps).
struct Bits<'o> {
    out: &'o mut dyn Out,
    byte: u8,
    n: u64,
    buf: Vec<u8>,
}

impl<'o> Bits<'o> {
    fn new(out: &'o mut dyn Out) -> Self {
        Bits {
            out,
            byte: 0,
            n: 0,
            buf: Vec::with_capacity(1 << 16),
        }
    }

    fn push(&mut self, set: bool, count: u64) -> Result<(), CorpusError> {
        let mut left = count;
        while left > 0 {
            if self.n.is_multiple_of(8) && left >= 8 {
                // Whole bytes at once.
                let bytes = left / 8;
                for _ in 0..bytes {
                    self.buf.push(if set { 0xFF } else { 0 });
                    if self.buf.len() >= 1 << 16 {
                        self.out.put(&self.buf)?;
                        self.buf.clear();
                    }
                }
                self.n += bytes * 8;
                left -= bytes * 8;
                continue;
            }
            if set {
                self.byte |= 1 << (self.n % 8);
            }
            self.n += 1;
            left -= 1;
            if self.n.is_multiple_of(8) {
                self.buf.push(self.byte);
                self.byte = 0;
                if self.buf.len() >= 1 << 16 {
                    self.out.put(&self.buf)?;
                    self.buf.clear();
                }
            }
        }
        Ok(())
    }

    /// Flush, pad with zero bits to `bytes` bytes in all.
    fn finish(mut self, bytes: u64) -> Result<(), CorpusError> {
        if !self.n.is_multiple_of(8) {
            self.buf.push(self.byte);
        }
        let written = self.n.div_ceil(8);
        self.out.put(&self.buf)?;
        self.out.put_zeros(bytes.saturating_sub(written))
    }
}

/// One group's facts the head needs, from the pre-pass.
#[derive(Debug, Clone, Copy)]
pub struct GroupFacts {
    /// Clusters of the group's `$MFT` fragment.
    pub mft_clusters: u64,
}

/// The NTFS side of a corpus: everything that depends on the volume as a
/// whole, computed once.
pub struct NtfsWriter<'a> {
    vol: &'a Volume,
    head: Head,
    upcase: Vec<u16>,
    secure: Secure,
    serial: u64,
    hidden_sectors: u32,
    /// First record of each group.
    bases: Vec<u64>,
    /// `$MFT`'s runs: the head fragment, then one per group.
    mft_runs: Vec<DataRun>,
    /// Record slots in `$MFT`.
    mft_slots: u64,
    /// Built skeleton indexes (0 is the root).
    skel: Vec<BuiltIndex>,
    /// Group 0's numbering (the skeleton's own files sit in skeleton
    /// folders).
    g0: Numbering,
}

impl<'a> NtfsWriter<'a> {
    /// Prepare a volume's NTFS structures from the pre-pass facts of every
    /// group and group 0's plan.
    pub fn new(
        vol: &'a Volume,
        head: Head,
        groups: &[GroupFacts],
        g0: &GroupPlan,
        serial: u64,
        hidden_sectors: u32,
    ) -> Result<NtfsWriter<'a>, CorpusError> {
        let mut bases = Vec::with_capacity(groups.len());
        let mut mft_runs = vec![DataRun {
            lcn: Some(head.mft),
            len: HEAD_RECORDS / RECORDS_PER_CLUSTER,
        }];
        let mut next = HEAD_RECORDS;
        for (k, g) in groups.iter().enumerate() {
            bases.push(next);
            next += g.mft_clusters * RECORDS_PER_CLUSTER;
            let (base, _) = vol.group_range(k as u32);
            mft_runs.push(DataRun {
                lcn: Some(lcn_of(&head, base)),
                len: g.mft_clusters,
            });
        }
        let user_rid = 1000 + (vol.seed % 7) as u32;
        let mut w = NtfsWriter {
            vol,
            head,
            upcase: system::upcase().to_vec(),
            secure: system::secure(user_rid),
            serial,
            hidden_sectors,
            bases,
            mft_runs,
            mft_slots: next,
            skel: Vec::new(),
            g0: number(g0, HEAD_RECORDS),
        };
        let mut skel = Vec::with_capacity(vol.skel.len());
        for i in 0..vol.skel.len() {
            skel.push(w.build_skeleton(i, g0)?);
        }
        w.skel = skel;
        Ok(w)
    }

    /// Record slots in `$MFT` (in use or not).
    pub fn mft_slots(&self) -> u64 {
        self.mft_slots
    }

    /// Logical cluster number of the planner's cluster `c`.
    pub fn lcn(&self, c: u32) -> u64 {
        lcn_of(&self.head, c)
    }

    /// The volume's NTFS facts for the manifest.
    pub fn facts(&self) -> crate::manifest::NtfsFacts {
        crate::manifest::NtfsFacts {
            mft_cluster: self.head.mft,
            mft_mirror_cluster: self.head.mirror,
            record_size: RECORD_BYTES as u64,
            index_block_size: super::INDEX_BLOCK as u64,
            mft_records: self.mft_slots,
            mft_fragments: self.mft_runs.iter().filter(|r| r.len > 0).count() as u64,
            total_clusters: self.head.total_clusters,
            serial: format!("{:016x}", self.serial),
        }
    }

    /// First record of group `k`.
    pub fn base(&self, k: u32) -> u64 {
        self.bases.get(k as usize).copied().unwrap_or(HEAD_RECORDS)
    }

    fn skel_ref(&self, i: usize) -> u64 {
        if i == 0 {
            system_ref(rec::ROOT)
        } else {
            file_ref(super::FIRST_SKELETON_RECORD + i as u64 - 1, 1)
        }
    }

    fn parent_ref(&self, num: &Numbering, p: Parent) -> u64 {
        match p {
            Parent::Skel(s) => self.skel_ref(s),
            // A parent deleted later keeps the sequence number its
            // children recorded; deletion bumps the parent's own by one.
            Parent::Dir(d) => file_ref(num.dir[d], 1),
        }
    }

    fn sorted(&self, mut v: Vec<(Vec<u16>, Entry)>) -> Vec<Entry> {
        v.sort_by(|a, b| index::collate_names(&a.0, &b.0, &self.upcase));
        v.into_iter().map(|(_, e)| e).collect()
    }

    /// Index entries for a child with names `names`.
    fn child_entries(
        out: &mut Vec<(Vec<u16>, Entry)>,
        child: u64,
        names: &[(String, u8)],
        template: &FileName,
    ) {
        for (n, ns) in names {
            let f = FileName {
                name: n.clone(),
                namespace: *ns,
                ..template.clone()
            };
            out.push((
                n.encode_utf16().collect(),
                Entry::file_name(child, &f.value()),
            ));
        }
    }

    fn system_entries(&self, out: &mut Vec<(Vec<u16>, Entry)>) {
        let root = system_ref(rec::ROOT);
        let t = self.format_times();
        let sys = |r: u64, name: &str, alloc: u64, size: u64, dir: bool| {
            let f = FileName {
                parent: root,
                times: t,
                allocated: alloc,
                size,
                flags: if dir {
                    record::FILE_NAME_DIRECTORY | 0x06
                } else {
                    record::FILE_ATTRIBUTE_HIDDEN | record::FILE_ATTRIBUTE_SYSTEM
                },
                name: name.to_string(),
                namespace: record::NS_WIN32_AND_DOS,
            };
            (
                name.encode_utf16().collect::<Vec<u16>>(),
                Entry::file_name(system_ref(r), &f.value()),
            )
        };
        let h = &self.head;
        let c = CLUSTER as u64;
        let mft_bytes = self.mft_slots * RECORD_BYTES as u64;
        out.push(sys(rec::MFT, "$MFT", mft_bytes, mft_bytes, false));
        out.push(sys(rec::MFT_MIRR, "$MFTMirr", c, c, false));
        out.push(sys(
            rec::LOGFILE,
            "$LogFile",
            h.logfile_clusters * c,
            h.logfile_clusters * c,
            false,
        ));
        out.push(sys(rec::VOLUME, "$Volume", 0, 0, false));
        out.push(sys(
            rec::ATTRDEF,
            "$AttrDef",
            c,
            system::ATTRDEF_BYTES as u64,
            false,
        ));
        out.push(sys(rec::ROOT, ".", 0, 0, true));
        out.push(sys(
            rec::BITMAP,
            "$Bitmap",
            h.bitmap_clusters * c,
            self.bitmap_bytes(),
            false,
        ));
        out.push(sys(rec::BOOT, "$Boot", 8192, 8192, false));
        out.push(sys(rec::BADCLUS, "$BadClus", 0, 0, false));
        out.push(sys(rec::SECURE, "$Secure", 0, 0, false));
        out.push(sys(
            rec::UPCASE,
            "$UpCase",
            system::UPCASE_BYTES as u64,
            system::UPCASE_BYTES as u64,
            false,
        ));
        out.push(sys(rec::EXTEND, "$Extend", 0, 0, true));
    }

    /// Times of NTFS's own files: when Windows was installed.
    fn format_times(&self) -> NtTimes {
        super::nt_times(&self.vol.skel[0].times)
    }

    fn bitmap_bytes(&self) -> u64 {
        self.head.total_clusters.div_ceil(64) * 8
    }

    fn build_skeleton(&self, i: usize, g0: &GroupPlan) -> Result<BuiltIndex, CorpusError> {
        let vol = self.vol;
        let d = &vol.skel[i];
        let mut entries: Vec<(Vec<u16>, Entry)> = Vec::new();
        let me = self.skel_ref(i);
        if i == 0 {
            self.system_entries(&mut entries);
        }
        for &c in &d.children {
            let s = &vol.skel[c];
            let t = dir_template(me, super::nt_times(&s.times));
            Self::child_entries(
                &mut entries,
                self.skel_ref(c),
                &names_of(&s.name, &s.form),
                &t,
            );
        }
        for (p, child) in &g0.skel_children {
            if *p == i {
                self.group_child(&mut entries, g0, &self.g0, *child, me);
            }
        }
        if let Some(leaf) = d.leaf {
            for j in 0..vol.batches() {
                if let Some(f) = vol.group_folder(j, leaf) {
                    let name = f.form.long.clone().unwrap_or_default();
                    let t = dir_template(me, super::nt_times(&f.times));
                    let r = file_ref(self.base(f.group) + f.slot as u64, 1);
                    Self::child_entries(&mut entries, r, &names_of(&name, &f.form), &t);
                }
            }
        }
        let entries = self.sorted(entries);
        let own = self.skel_names(i);
        let own_lens: Vec<usize> = own.iter().map(|(n, _)| name_value_len(n)).collect();
        let rooms = super::DirRooms::new(&own_lens);
        let small = if d.clusters > 0 { 0 } else { rooms.small };
        let built = index::build(
            &entries,
            AT_FILE_NAME,
            index::COLLATION_FILE_NAME,
            small,
            &|b| rooms.large(b),
            1,
        )?;
        if built.blocks.len() as u64 > d.clusters as u64 {
            return Err(CorpusError::Worker(format!(
                "the index of {} needs {} blocks, {} were reserved",
                if d.path.is_empty() {
                    "the root"
                } else {
                    &d.path
                },
                built.blocks.len(),
                d.clusters
            )));
        }
        Ok(built)
    }

    fn skel_names(&self, i: usize) -> Vec<(String, u8)> {
        if i == 0 {
            vec![(".".to_string(), record::NS_WIN32_AND_DOS)]
        } else {
            let s = &self.vol.skel[i];
            names_of(&s.name, &s.form)
        }
    }

    /// Index entries of a group's child (live children only: deleting a
    /// file removes its names from the parent's index).
    fn group_child(
        &self,
        out: &mut Vec<(Vec<u16>, Entry)>,
        plan: &GroupPlan,
        num: &Numbering,
        child: Child,
        parent: u64,
    ) {
        match child {
            Child::Item(i) => {
                let it = &plan.items[i];
                let Some(r) = num.item[i] else { return };
                if it.deleted {
                    return;
                }
                let (alloc, size) = self.data_sizes(plan, i);
                let t = FileName {
                    parent,
                    times: super::nt_times(&it.times),
                    allocated: alloc,
                    size,
                    flags: file_attributes(it),
                    name: String::new(),
                    namespace: 0,
                };
                Self::child_entries(out, file_ref(r, 1), &names_of(&it.name, &it.form), &t);
            }
            Child::Dir(d) => {
                let dir = &plan.dirs[d];
                if dir.deleted {
                    return;
                }
                let t = FileName {
                    parent,
                    times: super::nt_times(&dir.times),
                    allocated: 0,
                    size: 0,
                    flags: record::FILE_NAME_DIRECTORY,
                    name: String::new(),
                    namespace: 0,
                };
                Self::child_entries(
                    out,
                    file_ref(num.dir[d], 1),
                    &names_of(&dir.name, &dir.form),
                    &t,
                );
            }
        }
    }

    /// (allocated, size) of a file's unnamed `$DATA`.
    fn data_sizes(&self, plan: &GroupPlan, i: usize) -> (u64, u64) {
        let it = &plan.items[i];
        let size = it.spec.size;
        if it.resident {
            (size.div_ceil(8) * 8, size)
        } else if let Some(Packing::Compressed(units)) = &it.packing {
            // Compressed: whole compression units are allocated (virtual
            // clusters, the sparse ones included).
            (units.len() as u64 * super::lznt1::UNIT_BYTES as u64, size)
        } else if let Some(Packing::Sparse(_)) = &it.packing {
            // Sparse: every virtual cluster, holes included.
            (size.div_ceil(CLUSTER as u64) * CLUSTER as u64, size)
        } else {
            let clusters: u64 = it.runs.iter().map(|r| r.len as u64).sum();
            (clusters * CLUSTER as u64, size)
        }
    }

    /// The index of group directory `d`.
    fn group_index(
        &self,
        plan: &GroupPlan,
        num: &Numbering,
        d: usize,
    ) -> Result<BuiltIndex, CorpusError> {
        let dir = &plan.dirs[d];
        let me = file_ref(num.dir[d], 1);
        let mut entries = Vec::new();
        if !dir.deleted {
            for &c in &dir.children {
                self.group_child(&mut entries, plan, num, c, me);
            }
        }
        let entries = self.sorted(entries);
        let own = names_of(&dir.name, &dir.form);
        let own_lens: Vec<usize> = own.iter().map(|(n, _)| name_value_len(n)).collect();
        let rooms = super::DirRooms::new(&own_lens);
        let reserved: u32 = dir.runs.iter().map(|r| r.len).sum();
        let built = index::build(
            &entries,
            AT_FILE_NAME,
            index::COLLATION_FILE_NAME,
            rooms.small,
            &|b| rooms.large(b),
            1,
        )?;
        if built.blocks.len() as u64 > reserved as u64 {
            return Err(CorpusError::Worker(format!(
                "the index of {} needs {} blocks, {} were reserved",
                dir.name,
                built.blocks.len(),
                reserved
            )));
        }
        Ok(built)
    }

    /// Bytes of the clusters of skeleton folder `i` (its index blocks,
    /// zero-padded to what it reserved).
    pub fn skeleton_bytes(&self, i: usize) -> Vec<u8> {
        let mut out: Vec<u8> = self.skel[i].blocks.concat();
        out.resize(self.vol.skel[i].clusters as usize * CLUSTER, 0);
        out
    }

    /// Bytes of group directory `d`'s clusters.
    pub fn dir_bytes(&self, plan: &GroupPlan, d: usize) -> Result<Vec<u8>, CorpusError> {
        let num = self.numbering(plan);
        let built = self.group_index(plan, &num, d)?;
        let reserved: u32 = plan.dirs[d].runs.iter().map(|r| r.len).sum();
        let mut out = built.blocks.concat();
        out.resize(reserved as usize * CLUSTER, 0);
        Ok(out)
    }

    /// Numbering of a group's records.
    pub fn numbering(&self, plan: &GroupPlan) -> Numbering {
        number(plan, self.base(plan.k))
    }

    fn dir_record(&self, d: DirRecord<'_>) -> Result<Vec<u8>, CorpusError> {
        let DirRecord {
            record: r,
            seq,
            flags,
            names,
            template,
            si,
            built,
            runs,
        } = d;
        let mut b = RecordBuf::new(r, seq, names.len() as u16, flags);
        b.resident(
            AT_STANDARD_INFORMATION,
            "",
            &record::standard_information(si.0, si.1, si.2),
            false,
        )?;
        for (n, ns) in names {
            let f = FileName {
                name: n.clone(),
                namespace: *ns,
                ..template.clone()
            };
            b.resident(AT_FILE_NAME, "", &f.value(), true)?;
        }
        b.resident(AT_INDEX_ROOT, "$I30", &built.root, false)?;
        if !built.blocks.is_empty() {
            let reserved: u64 = runs.iter().map(|r| r.len).sum();
            let used = (built.blocks.len() * CLUSTER) as u64;
            b.non_resident(
                AT_INDEX_ALLOCATION,
                "$I30",
                runs,
                NonResident {
                    allocated: reserved * CLUSTER as u64,
                    size: used,
                    initialized: used,
                    packed: None,
                },
            )?;
            b.resident(AT_BITMAP, "$I30", &built.bitmap, false)?;
        }
        Ok(b.finish(1))
    }

    fn group_runs(&self, plan: &GroupPlan, runs: &[crate::plan::Run]) -> Vec<DataRun> {
        runs.iter()
            .map(|r| DataRun {
                lcn: Some(lcn_of(&self.head, plan.base + r.start)),
                len: r.len as u64,
            })
            .collect()
    }

    /// The group's `$MFT` fragment: its records in number order, then spare
    /// never-used slots. `resident` gives the content of resident files.
    pub fn group_records(
        &self,
        plan: &GroupPlan,
        resident: &HashMap<usize, Arc<Vec<u8>>>,
    ) -> Result<Vec<u8>, CorpusError> {
        let num = self.numbering(plan);
        let mut out = Vec::with_capacity(plan.mft as usize * CLUSTER);
        let mut order: Vec<(u64, Child)> = Vec::with_capacity(num.count as usize);
        for d in 0..plan.dirs.len() {
            order.push((num.dir[d], Child::Dir(d)));
        }
        for (i, r) in num.item.iter().enumerate() {
            if let Some(r) = r {
                order.push((*r, Child::Item(i)));
            }
        }
        order.sort_by_key(|(r, _)| *r);
        for (r, c) in order {
            let bytes = match c {
                Child::Dir(d) => {
                    let dir = &plan.dirs[d];
                    let built = self.group_index(plan, &num, d)?;
                    let seq = if dir.deleted { 2 } else { 1 };
                    let flags =
                        record::MFT_DIRECTORY | if dir.deleted { 0 } else { record::MFT_IN_USE };
                    let times = super::nt_times(&dir.times);
                    let t = dir_template(self.parent_ref(&num, dir.parent), times);
                    self.dir_record(DirRecord {
                        record: r,
                        seq,
                        flags,
                        names: &names_of(&dir.name, &dir.form),
                        template: &t,
                        si: (&times, 0, self.secure.dir_id),
                        built: &built,
                        runs: &self.group_runs(plan, &dir.runs),
                    })?
                }
                Child::Item(i) => {
                    let it = &plan.items[i];
                    let Some(parent) = it.parent else {
                        return Err(CorpusError::Worker(
                            "a file with a record has no parent".into(),
                        ));
                    };
                    let names = names_of(&it.name, &it.form);
                    let seq = if it.deleted { 2 } else { 1 };
                    let flags = if it.deleted { 0 } else { record::MFT_IN_USE };
                    let times = super::nt_times(&it.times);
                    let (alloc, size) = self.data_sizes(plan, i);
                    let attributes = file_attributes(it);
                    let t = FileName {
                        parent: self.parent_ref(&num, parent),
                        times,
                        allocated: alloc,
                        size,
                        flags: attributes,
                        name: String::new(),
                        namespace: 0,
                    };
                    let mut b = RecordBuf::new(r, seq, names.len() as u16, flags);
                    b.resident(
                        AT_STANDARD_INFORMATION,
                        "",
                        &record::standard_information(&times, attributes, self.secure.file_id),
                        false,
                    )?;
                    for (n, ns) in &names {
                        let f = FileName {
                            name: n.clone(),
                            namespace: *ns,
                            ..t.clone()
                        };
                        b.resident(AT_FILE_NAME, "", &f.value(), true)?;
                    }
                    if it.resident || it.spec.size == 0 {
                        let content: &[u8] = if it.spec.size == 0 {
                            &[]
                        } else {
                            resident.get(&i).map(|v| v.as_slice()).ok_or_else(|| {
                                CorpusError::Worker(format!(
                                    "content of resident file {} missing",
                                    it.name
                                ))
                            })?
                        };
                        b.resident(AT_DATA, "", content, false)?;
                    } else if let Some(packing) = &it.packing {
                        // Stored clusters are contiguous from the first run.
                        let lcn = it
                            .runs
                            .first()
                            .map(|r| lcn_of(&self.head, plan.base + r.start))
                            .unwrap_or(0);
                        let stored = packing.clusters(size, CLUSTER as u64) as u64 * CLUSTER as u64;
                        let (runs, packed) = match packing {
                            Packing::Compressed(units) => (
                                super::lznt1::unit_runs(lcn, units),
                                record::Packed {
                                    flags: record::ATTR_COMPRESSED,
                                    unit_log2: 4,
                                    stored,
                                },
                            ),
                            Packing::Sparse(data) => (
                                sparse_runs(lcn, size, data),
                                record::Packed {
                                    flags: record::ATTR_SPARSE,
                                    unit_log2: 0,
                                    stored,
                                },
                            ),
                            Packing::Decmpfs { .. } => {
                                return Err(CorpusError::Worker(format!(
                                    "{} is planned with an APFS resource fork on NTFS",
                                    it.name
                                )));
                            }
                        };
                        b.non_resident(
                            AT_DATA,
                            "",
                            &runs,
                            NonResident {
                                allocated: alloc,
                                size,
                                initialized: size,
                                packed: Some(packed),
                            },
                        )?;
                    } else {
                        b.non_resident(
                            AT_DATA,
                            "",
                            &self.group_runs(plan, &it.runs),
                            NonResident {
                                allocated: alloc,
                                size,
                                initialized: size,
                                packed: None,
                            },
                        )?;
                    }
                    if let Some(zone) = zone_identifier(it) {
                        b.resident(AT_DATA, ZONE_IDENTIFIER, &zone, false)?;
                    }
                    b.finish(1)
                }
            };
            out.extend_from_slice(&bytes);
        }
        // Spare slots of the fragment: formatted, never used.
        let base = self.base(plan.k);
        let slots = plan.mft as u64 * RECORDS_PER_CLUSTER;
        for r in base + num.count..base + slots {
            out.extend_from_slice(&record::blank(r));
        }
        Ok(out)
    }

    /// Disk offset of byte 0 of resident file `i`'s content, and the
    /// offsets within its record where sector ends hold the update
    /// sequence instead of content (a token there is not found raw).
    pub fn resident_at(&self, plan: &GroupPlan, i: usize) -> Option<u64> {
        let it = &plan.items[i];
        let num = self.numbering(plan);
        let r = num.item[i]?;
        // Same attribute sizes as the record writer.
        let mut at = 0x38 + RecordBuf::resident_len("", 72);
        for (n, _) in names_of(&it.name, &it.form) {
            at += RecordBuf::resident_len("", name_value_len(&n));
        }
        let value = at + 0x18;
        let slot = r - self.base(plan.k);
        let (base, _) = self.vol.group_range(plan.k);
        Some(self.vol.geo.cluster_offset(base) + slot * RECORD_BYTES as u64 + value as u64)
    }

    fn system_record(&self, r: u64) -> Result<Vec<u8>, CorpusError> {
        let h = &self.head;
        let c = CLUSTER as u64;
        let t = self.format_times();
        let root = system_ref(rec::ROOT);
        let hs = record::FILE_ATTRIBUTE_HIDDEN | record::FILE_ATTRIBUTE_SYSTEM;
        let file = |name: &str, alloc: u64, size: u64| FileName {
            parent: root,
            times: t,
            allocated: alloc,
            size,
            flags: hs,
            name: name.to_string(),
            namespace: record::NS_WIN32_AND_DOS,
        };
        let start = |flags: u16, f: Option<&FileName>| -> Result<RecordBuf, CorpusError> {
            let mut b = RecordBuf::new(r, system_seq(r), f.is_some() as u16, flags);
            b.resident(
                AT_STANDARD_INFORMATION,
                "",
                &record::standard_information(&t, hs, self.secure.system_id),
                false,
            )?;
            if let Some(f) = f {
                b.resident(AT_FILE_NAME, "", &f.value(), true)?;
            }
            Ok(b)
        };
        let nonres = |b: &mut RecordBuf,
                      name: &str,
                      runs: &[DataRun],
                      size: u64|
         -> Result<(), CorpusError> {
            let clusters: u64 = runs.iter().map(|r| r.len).sum();
            b.non_resident(
                AT_DATA,
                name,
                runs,
                NonResident {
                    allocated: clusters * c,
                    size,
                    initialized: size,
                    packed: None,
                },
            )?;
            Ok(())
        };
        let one = |lcn: u64, len: u64| {
            [DataRun {
                lcn: Some(lcn),
                len,
            }]
        };
        let inuse = record::MFT_IN_USE;
        let bytes = match r {
            rec::MFT => {
                let bytes = self.mft_slots * RECORD_BYTES as u64;
                let mut b = start(inuse, Some(&file("$MFT", bytes, bytes)))?;
                nonres(&mut b, "", &self.mft_runs, bytes)?;
                let bm = self.mft_slots.div_ceil(64) * 8;
                b.non_resident(
                    AT_BITMAP,
                    "",
                    &one(h.mft_bitmap, h.mft_bitmap_clusters),
                    NonResident {
                        allocated: h.mft_bitmap_clusters * c,
                        size: bm,
                        initialized: bm,
                        packed: None,
                    },
                )?;
                b.finish(1)
            }
            rec::MFT_MIRR => {
                let mut b = start(inuse, Some(&file("$MFTMirr", c, c)))?;
                nonres(&mut b, "", &one(h.mirror, 1), c)?;
                b.finish(1)
            }
            rec::LOGFILE => {
                let n = h.logfile_clusters * c;
                let mut b = start(inuse, Some(&file("$LogFile", n, n)))?;
                nonres(&mut b, "", &one(h.logfile, h.logfile_clusters), n)?;
                b.finish(1)
            }
            rec::VOLUME => {
                let mut b = start(inuse, Some(&file("$Volume", 0, 0)))?;
                let label: Vec<u8> = "OS".encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
                b.resident(AT_VOLUME_NAME, "", &label, false)?;
                b.resident(
                    AT_VOLUME_INFORMATION,
                    "",
                    &system::volume_information(),
                    false,
                )?;
                b.resident(AT_DATA, "", &[], false)?;
                b.finish(1)
            }
            rec::ATTRDEF => {
                let n = system::ATTRDEF_BYTES as u64;
                let mut b = start(inuse, Some(&file("$AttrDef", c, n)))?;
                nonres(&mut b, "", &one(h.attrdef, 1), n)?;
                b.finish(1)
            }
            rec::ROOT => {
                let f = FileName {
                    flags: record::FILE_NAME_DIRECTORY | hs,
                    ..file(".", 0, 0)
                };
                let runs = self.skel_runs(0);
                self.dir_record(DirRecord {
                    record: r,
                    seq: system_seq(r),
                    flags: inuse | record::MFT_DIRECTORY,
                    names: &[(".".to_string(), record::NS_WIN32_AND_DOS)],
                    template: &f,
                    si: (&t, hs, self.secure.system_id),
                    built: &self.skel[0],
                    runs: &runs,
                })?
            }
            rec::BITMAP => {
                let n = self.bitmap_bytes();
                let mut b = start(inuse, Some(&file("$Bitmap", h.bitmap_clusters * c, n)))?;
                nonres(&mut b, "", &one(h.bitmap, h.bitmap_clusters), n)?;
                b.finish(1)
            }
            rec::BOOT => {
                let mut b = start(inuse, Some(&file("$Boot", 8192, 8192)))?;
                nonres(&mut b, "", &one(0, 2), 8192)?;
                b.finish(1)
            }
            rec::BADCLUS => {
                let mut b = start(inuse, Some(&file("$BadClus", 0, 0)))?;
                b.resident(AT_DATA, "", &[], false)?;
                let n = h.total_clusters * c;
                b.non_resident(
                    AT_DATA,
                    "$Bad",
                    &[DataRun {
                        lcn: None,
                        len: h.total_clusters,
                    }],
                    NonResident {
                        allocated: n,
                        size: n,
                        initialized: n,
                        packed: None,
                    },
                )?;
                b.finish(1)
            }
            rec::SECURE => {
                let mut b = start(inuse | record::MFT_VIEW_INDEX, Some(&file("$Secure", 0, 0)))?;
                let n = self.secure.sds.len() as u64;
                nonres(&mut b, "$SDS", &one(h.sds, super::clusters_for(n)), n)?;
                let huge = |_: usize| 0usize;
                let sdh = index::build(
                    &self.secure.sdh,
                    0,
                    index::COLLATION_NTOFS_SECURITY_HASH,
                    400,
                    &huge,
                    1,
                )?;
                let sii = index::build(
                    &self.secure.sii,
                    0,
                    index::COLLATION_NTOFS_ULONG,
                    400,
                    &huge,
                    1,
                )?;
                b.resident(AT_INDEX_ROOT, "$SDH", &sdh.root, false)?;
                b.resident(AT_INDEX_ROOT, "$SII", &sii.root, false)?;
                b.finish(1)
            }
            rec::UPCASE => {
                let n = system::UPCASE_BYTES as u64;
                let mut b = start(inuse, Some(&file("$UpCase", n, n)))?;
                nonres(&mut b, "", &one(h.upcase, super::clusters_for(n)), n)?;
                b.finish(1)
            }
            rec::EXTEND => {
                let f = FileName {
                    flags: record::FILE_NAME_DIRECTORY | hs,
                    ..file("$Extend", 0, 0)
                };
                let me = system_ref(rec::EXTEND);
                let mut entries = Vec::new();
                for (r, name) in [
                    (rec::QUOTA, "$Quota"),
                    (rec::OBJID, "$ObjId"),
                    (rec::REPARSE, "$Reparse"),
                ] {
                    let ff = FileName {
                        parent: me,
                        ..file(name, 0, 0)
                    };
                    entries.push((
                        name.encode_utf16().collect::<Vec<u16>>(),
                        Entry::file_name(file_ref(r, 1), &ff.value()),
                    ));
                }
                let entries = self.sorted(entries);
                let built = index::build(
                    &entries,
                    AT_FILE_NAME,
                    index::COLLATION_FILE_NAME,
                    600,
                    &|_| 0,
                    1,
                )?;
                self.dir_record(DirRecord {
                    record: r,
                    seq: system_seq(r),
                    flags: inuse | record::MFT_DIRECTORY,
                    names: &[("$Extend".to_string(), record::NS_WIN32_AND_DOS)],
                    template: &f,
                    si: (&t, hs, self.secure.system_id),
                    built: &built,
                    runs: &[],
                })?
            }
            12..=15 => {
                let mut b = start(inuse, None)?;
                b.resident(AT_DATA, "", &[], false)?;
                b.finish(1)
            }
            rec::QUOTA | rec::OBJID | rec::REPARSE => {
                let name = match r {
                    rec::QUOTA => "$Quota",
                    rec::OBJID => "$ObjId",
                    _ => "$Reparse",
                };
                let f = FileName {
                    parent: system_ref(rec::EXTEND),
                    ..file(name, 0, 0)
                };
                let mut b =
                    RecordBuf::new(r, 1, 1, inuse | record::MFT_IS_4 | record::MFT_VIEW_INDEX);
                b.resident(
                    AT_STANDARD_INFORMATION,
                    "",
                    &record::standard_information(&t, hs | 0x2000_0000, self.secure.system_id),
                    false,
                )?;
                b.resident(AT_FILE_NAME, "", &f.value(), true)?;
                let empty = |coll: u32| index::build(&[], 0, coll, 400, &|_| 0, 1);
                match r {
                    rec::QUOTA => {
                        b.resident(
                            AT_INDEX_ROOT,
                            "$O",
                            &empty(index::COLLATION_NTOFS_SID)?.root,
                            false,
                        )?;
                        b.resident(
                            AT_INDEX_ROOT,
                            "$Q",
                            &empty(index::COLLATION_NTOFS_ULONG)?.root,
                            false,
                        )?;
                    }
                    rec::OBJID => {
                        b.resident(
                            AT_INDEX_ROOT,
                            "$O",
                            &empty(index::COLLATION_NTOFS_ULONGS)?.root,
                            false,
                        )?;
                    }
                    _ => {
                        b.resident(
                            AT_INDEX_ROOT,
                            "$R",
                            &empty(index::COLLATION_NTOFS_ULONGS)?.root,
                            false,
                        )?;
                    }
                }
                b.finish(1)
            }
            r if r >= super::FIRST_SKELETON_RECORD
                && ((r - super::FIRST_SKELETON_RECORD + 1) as usize) < self.vol.skel.len() =>
            {
                let i = (r - super::FIRST_SKELETON_RECORD + 1) as usize;
                let s = &self.vol.skel[i];
                let times = super::nt_times(&s.times);
                let f = dir_template(self.skel_ref(s.parent), times);
                self.dir_record(DirRecord {
                    record: r,
                    seq: 1,
                    flags: inuse | record::MFT_DIRECTORY,
                    names: &names_of(&s.name, &s.form),
                    template: &f,
                    si: (&times, 0, self.secure.dir_id),
                    built: &self.skel[i],
                    runs: &self.skel_runs(i),
                })?
            }
            _ => record::blank(r),
        };
        Ok(bytes)
    }

    fn skel_runs(&self, i: usize) -> Vec<DataRun> {
        let s = &self.vol.skel[i];
        if s.clusters == 0 {
            return Vec::new();
        }
        vec![DataRun {
            lcn: Some(lcn_of(&self.head, s.first)),
            len: s.clusters as u64,
        }]
    }

    /// Whether head record `r` is in use.
    fn head_in_use(&self, r: u64) -> bool {
        r < 16
            || (rec::QUOTA..=rec::REPARSE).contains(&r)
            || (r >= super::FIRST_SKELETON_RECORD
                && ((r - super::FIRST_SKELETON_RECORD + 1) as usize) < self.vol.skel.len())
    }

    /// Everything before the planner's first cluster: `$Boot`, the head
    /// `$MFT` fragment and NTFS's other files, in cluster order. The
    /// bitmaps need every group's plan, so groups are planned again here
    /// (planning is cheap and keeps memory flat).
    pub fn write_head(&self, out: &mut dyn Out) -> Result<(), CorpusError> {
        let h = &self.head;
        let c = CLUSTER as u64;
        let boot = system::boot_sector(&self.boot_facts());
        out.put(&boot)?;
        out.put_zeros(2 * c - boot.len() as u64)?;
        let mut first4 = Vec::with_capacity(CLUSTER);
        for r in 0..HEAD_RECORDS {
            let b = self.system_record(r)?;
            if r < 4 {
                first4.extend_from_slice(&b);
            }
            out.put(&b)?;
        }
        out.put(&first4)?;
        // $LogFile: never written since formatting.
        let ff = vec![0xFFu8; CLUSTER];
        for _ in 0..h.logfile_clusters {
            out.put(&ff)?;
        }
        let mut ad = system::attrdef();
        ad.resize(CLUSTER, 0);
        out.put(&ad)?;
        self.write_bitmap(out)?;
        out.put(&system::upcase_bytes(&self.upcase))?;
        let sds = &self.secure.sds;
        out.put(sds)?;
        out.put_zeros(super::clusters_for(2 * system::SDS_BLOCK) * c - sds.len() as u64)?;
        self.write_mft_bitmap(out)?;
        Ok(())
    }

    fn boot_facts(&self) -> system::BootFacts {
        system::BootFacts {
            total_sectors: self.vol.geo.total_sectors,
            mft_lcn: self.head.mft,
            mirror_lcn: self.head.mirror,
            serial: self.serial,
            hidden_sectors: self.hidden_sectors,
        }
    }

    /// The backup boot sector (the partition's last sector).
    pub fn backup_boot(&self) -> Vec<u8> {
        system::boot_sector(&self.boot_facts())
    }

    fn write_bitmap(&self, out: &mut dyn Out) -> Result<(), CorpusError> {
        let vol = self.vol;
        let mut bits = Bits::new(out);
        // The head and the skeleton region are wholly allocated.
        let (g0_base, _) = vol.group_range(0);
        bits.push(true, lcn_of(&self.head, g0_base))?;
        for k in 0..vol.groups {
            let plan = vol.plan_group(k);
            let used = used_clusters(&plan);
            let mut run_start = 0usize;
            while run_start < used.len() {
                let v = used[run_start];
                let mut end = run_start;
                while end < used.len() && used[end] == v {
                    end += 1;
                }
                bits.push(v, (end - run_start) as u64)?;
                run_start = end;
            }
        }
        let covered = lcn_of(&self.head, 2 + vol.geo.clusters);
        bits.push(false, self.head.total_clusters - covered)?;
        bits.finish(self.head.bitmap_clusters * CLUSTER as u64)
    }

    fn write_mft_bitmap(&self, out: &mut dyn Out) -> Result<(), CorpusError> {
        let vol = self.vol;
        let mut bits = Bits::new(out);
        for r in 0..HEAD_RECORDS {
            bits.push(self.head_in_use(r), 1)?;
        }
        for k in 0..vol.groups {
            let plan = vol.plan_group(k);
            let num = self.numbering(&plan);
            let mut flags = vec![false; (plan.mft as u64 * RECORDS_PER_CLUSTER) as usize];
            let base = self.base(k);
            for (d, dir) in plan.dirs.iter().enumerate() {
                flags[(num.dir[d] - base) as usize] = !dir.deleted;
            }
            for (i, it) in plan.items.iter().enumerate() {
                if let Some(r) = num.item[i] {
                    flags[(r - base) as usize] = !it.deleted;
                }
            }
            for f in flags {
                bits.push(f, 1)?;
            }
        }
        bits.finish(self.head.mft_bitmap_clusters * CLUSTER as u64)
    }

    /// Clusters in use in the whole volume (for the manifest).
    pub fn used_clusters_total(&self) -> u64 {
        let vol = self.vol;
        let (g0_base, _) = vol.group_range(0);
        let mut n = lcn_of(&self.head, g0_base);
        for k in 0..vol.groups {
            n += used_clusters(&vol.plan_group(k))
                .iter()
                .filter(|&&u| u)
                .count() as u64;
        }
        n
    }
}

/// The `$FILE_NAME` fields of a directory other than its name.
fn dir_template(parent: u64, times: NtTimes) -> FileName {
    FileName {
        parent,
        times,
        allocated: 0,
        size: 0,
        flags: record::FILE_NAME_DIRECTORY,
        name: String::new(),
        namespace: 0,
    }
}

/// What a directory's record holds.
struct DirRecord<'x> {
    record: u64,
    seq: u16,
    flags: u16,
    names: &'x [(String, u8)],
    /// `$FILE_NAME` fields other than the name and namespace.
    template: &'x FileName,
    /// `$STANDARD_INFORMATION`: times, attributes, security id.
    si: (&'x NtTimes, u32, u32),
    built: &'x BuiltIndex,
    /// Clusters of `$INDEX_ALLOCATION`.
    runs: &'x [DataRun],
}

/// Logical cluster number of the planner's cluster `c`.
pub fn lcn_of(head: &Head, c: u32) -> u64 {
    head.data + c as u64 - 2
}

/// Which of a group's clusters are allocated: its `$MFT` fragment, live
/// directories' index blocks and live files' non-resident content.
pub fn used_clusters(plan: &GroupPlan) -> Vec<bool> {
    let mut used =
        plan.used_by(|it| !it.deleted && !it.residue && !it.resident && it.spec.size > 0);
    for u in used.iter_mut().take(plan.mft as usize) {
        *u = true;
    }
    used
}

/// A user file's attributes: archive, plus compressed or sparse where it
/// is.
fn file_attributes(it: &crate::plan::ItemPlan) -> u32 {
    record::FILE_ATTRIBUTE_ARCHIVE
        | match it.packing {
            Some(Packing::Compressed(_)) => record::FILE_ATTRIBUTE_COMPRESSED,
            Some(Packing::Sparse(_)) => record::FILE_ATTRIBUTE_SPARSE_FILE,
            Some(Packing::Decmpfs { .. }) | None => 0,
        }
}

/// The run list of a sparse stream of `size` bytes whose data units'
/// clusters start at `lcn` and are contiguous: each unit a data or a
/// sparse run of its clusters, neighbours of one kind merged.
fn sparse_runs(lcn: u64, size: u64, data: &[bool]) -> Vec<DataRun> {
    let mut runs: Vec<DataRun> = Vec::new();
    let mut at = lcn;
    for (u, &d) in data.iter().enumerate() {
        let n = Packing::unit_clusters(size, u, CLUSTER as u64);
        let next = if d { Some(at) } else { None };
        match runs.last_mut() {
            Some(r) if r.lcn.is_none() && next.is_none() => r.len += n,
            Some(r) if r.lcn.is_some() && r.lcn.map(|l| l + r.len) == next => r.len += n,
            _ => runs.push(DataRun { lcn: next, len: n }),
        }
        if d {
            at += n;
        }
    }
    runs
}
