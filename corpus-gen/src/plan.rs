//! The disk planner.
//!
//! The data area is a fixed skeleton region (the directory tree of a
//! Windows user's disk) followed by allocation groups of fixed size. Each
//! group is planned from (seed, group index) alone: its folders, files,
//! deleted entries, residue, fragmentation and free areas. Planning is
//! metadata only and cheap, so a group is re-planned whenever it is needed
//! (to count free clusters, to emit its FAT entries, to write its data)
//! instead of being kept: memory does not grow with the disk.
//!
//! What a group holds is drawn in *batches*: a batch is a fixed 128 MiB
//! stretch of the disk (larger only past 30,000 batches), drawn from
//! (seed, batch number) alone and alike for every batch, so that a GiB of
//! a 16 GiB corpus holds what a GiB of a 1 GiB corpus holds. A group is
//! one batch on FAT and as many as NTFS needs to keep its `$MFT` fragments
//! (one per group) within record 0. Batch `j` owns one folder in each
//! group leaf of the skeleton (e.g. `Documents/Reports 0007`), whose name,
//! short name, times and first cluster or record follow from `j` alone,
//! so the skeleton directories listing thousands of batches are written
//! without planning them. The skeleton's own files (the program folder,
//! the browser history, a few Desktop and system files) are planned once,
//! with group 0, from their own random stream.

use crate::content::{Kind, Pool, Spec};
use crate::error::CorpusError;
use crate::geometry::Geometry;
use crate::names::{self, NameForm, Stamp, Times};
use crate::profile::Profile;
use crate::rng::{Rng, derive_key};
use crate::words;
use std::collections::HashSet;
use std::sync::Arc;

/// Preferred batch size (the disk stretch one batch of content is drawn
/// for).
const BATCH_BYTES: u64 = 128 << 20;
/// Most batches a volume is split into: their folders are numbered with
/// four hex digits in their short names (and FAT's groups are batches).
const MAX_GROUPS: u64 = 30_000;
/// Largest single file.
const MAX_FILE: u64 = 24 << 20;
/// The skeleton's own entries allowed directly in one skeleton folder
/// (bounds the skeleton region, which is sized before they are planned;
/// their names are kept under 39 characters).
pub const LEAF_CAP: usize = 160;
/// Keywords a batch may plant (token indexes are `(j + 1) * KW_PER_GROUP +
/// i` for batch `j`, `i` for the skeleton's files).
const KW_PER_GROUP: u32 = 256;
/// First and last instants files are dated between (local time).
const EPOCH_START: (i64, u32, u32) = (2016, 1, 4);
const EPOCH_END: (i64, u32, u32) = (2024, 11, 29);

/// The skeleton folders that receive files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Leaf {
    /// `Users/<user>/Desktop`
    Desktop,
    /// `Users/<user>/Documents`
    Documents,
    /// `Users/<user>/Downloads`
    Downloads,
    /// `Users/<user>/Pictures`
    Pictures,
    /// `Users/<user>/Music`
    Music,
    /// The mail client's folder (mbox files and saved messages).
    Mail,
    /// The browser profile (history database).
    Browser,
    /// The browser cache.
    Cache,
    /// A program folder under `Program Files` (known files).
    Programs,
    /// `Windows/System32` (NTFS system disks; known files).
    System,
    /// `Windows/WinSxS`, the component store updates grow (NTFS system
    /// disks; known files).
    WinSxS,
}

impl Leaf {
    /// Leaves holding the operating system's files: all known (in NSRL),
    /// small, never deleted by the user.
    pub fn is_system(self) -> bool {
        matches!(self, Leaf::System | Leaf::WinSxS)
    }
}

/// Leaves where every group `k ≥ 1` owns a folder, with the folder-name
/// stems for each.
const GROUP_LEAVES: &[(Leaf, &[&str])] = NTFS_GROUP_LEAVES.split_at(6).0;

/// The same on NTFS system disks, which add a component folder per update
/// (group) under `Windows/WinSxS` (the last entry; FAT disks use the
/// others).
const NTFS_GROUP_LEAVES: &[(Leaf, &[&str])] = &[
    (
        Leaf::Documents,
        &[
            "Projects", "Reports", "Clients", "Archive", "Notes", "Taxes",
        ],
    ),
    (
        Leaf::Pictures,
        &["Camera", "Trip", "Family", "Events", "Scans"],
    ),
    (Leaf::Downloads, &["Saved", "Batch", "Setup"]),
    (Leaf::Music, &["Album", "Mix"]),
    (Leaf::Mail, &["Archive", "Folder"]),
    (Leaf::Cache, &["Data"]),
    (
        Leaf::WinSxS,
        &[
            "amd64_microsoft-windows-servicingstack",
            "amd64_microsoft-windows-shell32",
            "wow64_microsoft-windows-ole-automation",
            "x86_microsoft-windows-gdiplus",
        ],
    ),
];

/// A skeleton directory.
#[derive(Debug, Clone)]
pub struct SkelDir {
    /// Long name.
    pub name: String,
    /// Index of the parent (the root is its own parent).
    pub parent: usize,
    /// Which leaf this is, if files go here.
    pub leaf: Option<Leaf>,
    /// Stored name in the parent.
    pub form: NameForm,
    /// Timestamps.
    pub times: Times,
    /// First cluster (0 for a FAT12/16 root).
    pub first: u32,
    /// Clusters reserved (contiguous).
    pub clusters: u32,
    /// Skeleton children, in entry order.
    pub children: Vec<usize>,
    /// Full path from the root (`""` for the root).
    pub path: String,
}

/// Where an entry lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    /// A skeleton directory (by index).
    Skel(usize),
    /// A directory of the same group (by index).
    Dir(usize),
}

/// An entry of a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// A file of the group.
    Item(usize),
    /// A directory of the group.
    Dir(usize),
}

/// A run of clusters, relative to the group's first cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// First cluster (group-relative).
    pub start: u32,
    /// Number of clusters.
    pub len: u32,
}

/// A directory owned by a group.
#[derive(Debug, Clone)]
pub struct DirPlan {
    /// Long name.
    pub name: String,
    /// Stored name (set once the parent's entries are known).
    pub form: NameForm,
    /// Parent.
    pub parent: Parent,
    /// Leaf this directory belongs under.
    pub leaf: Leaf,
    /// Timestamps.
    pub times: Times,
    /// Whether the directory is deleted (then it holds one cluster and only
    /// deleted entries).
    pub deleted: bool,
    /// Entries, in on-disk order.
    pub children: Vec<Child>,
    /// Clusters in chain order (group-relative).
    pub runs: Vec<Run>,
    /// Whether this is the group's folder in a skeleton leaf.
    pub group_folder: bool,
}

/// A file (live, deleted, or residue without an entry).
#[derive(Debug, Clone)]
pub struct ItemPlan {
    /// Long name (residue keeps the name it once had, for reference).
    pub name: String,
    /// Stored name (unset for residue).
    pub form: NameForm,
    /// Parent (`None` for residue).
    pub parent: Option<Parent>,
    /// Leaf the file belongs under.
    pub leaf: Leaf,
    /// What to generate.
    pub spec: Spec,
    /// Timestamps.
    pub times: Times,
    /// Deleted (entry marked, clusters freed).
    pub deleted: bool,
    /// Residue: content in free space, no entry at all.
    pub residue: bool,
    /// Inside a deleted directory.
    pub in_deleted_dir: bool,
    /// Clusters in file order (group-relative).
    pub runs: Vec<Run>,
    /// Planned as fragmented (the runs are not one contiguous range).
    pub fragmented: bool,
    /// Some of its clusters now hold another file's data.
    pub overwritten: bool,
    /// Its hash is in the known set.
    pub known: bool,
    /// Its hash is in the notable set.
    pub notable: bool,
    /// Planted duplicate group (shared by the original and its copies).
    pub dup_group: Option<u64>,
    /// Slack filled with random bytes (else with leftover text).
    pub slack_random: bool,
    /// Stored inside its MFT record (NTFS, small files): no clusters.
    pub resident: bool,
    /// NTFS: data not stored byte for byte in its clusters (compressed or
    /// sparse).
    pub packing: Option<Packing>,
}

/// How an NTFS file's data sits in its clusters when not byte for byte;
/// both work in 64 KiB units (16 clusters), as Windows does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packing {
    /// LZNT1-compressed: the clusters each unit occupies on disk (see
    /// the NTFS layout's LZNT1 store).
    Compressed(Vec<u8>),
    /// Sparse: per unit, whether it holds data; a hole reads as zeros and
    /// has no clusters.
    Sparse(Vec<bool>),
}

impl Packing {
    /// Clusters per unit (NTFS's compression unit, 16 clusters).
    pub const UNIT_CLUSTERS: u64 = 16;

    /// Clusters of unit `u` of a `size`-byte stream (the last may be short).
    pub fn unit_clusters(size: u64, u: usize, cluster: u64) -> u64 {
        let unit = Self::UNIT_CLUSTERS * cluster;
        size.saturating_sub(u as u64 * unit)
            .min(unit)
            .div_ceil(cluster)
    }

    /// Clusters allocated on disk for a `size`-byte stream.
    pub fn clusters(&self, size: u64, cluster: u64) -> u32 {
        match self {
            Packing::Compressed(units) => units.iter().map(|&n| n as u32).sum(),
            Packing::Sparse(data) => data
                .iter()
                .enumerate()
                .filter(|(_, d)| **d)
                .map(|(u, _)| Self::unit_clusters(size, u, cluster) as u32)
                .sum(),
        }
    }

    /// Byte ranges of a sparse stream's holes (empty when compressed).
    pub fn holes(&self, size: u64, cluster: u64) -> Vec<(u64, u64)> {
        let unit = Self::UNIT_CLUSTERS * cluster;
        match self {
            Packing::Compressed(_) => Vec::new(),
            Packing::Sparse(data) => data
                .iter()
                .enumerate()
                .filter(|(_, d)| !**d)
                .map(|(u, _)| (u as u64 * unit, ((u as u64 + 1) * unit).min(size)))
                .collect(),
        }
    }
}

impl ItemPlan {
    /// Number of clusters the content needs.
    pub fn clusters(&self, cluster: u64) -> u32 {
        if self.resident && !self.residue {
            return 0;
        }
        if let Some(p) = &self.packing {
            return p.clusters(self.spec.size, cluster);
        }
        self.spec.size.div_ceil(cluster) as u32
    }

    /// A live, non-empty file of the user's (not the program folder's or
    /// the operating system's): one that may be copied or marked.
    fn user_live(&self) -> bool {
        !self.residue
            && !self.deleted
            && self.spec.size > 0
            && self.leaf != Leaf::Programs
            && !self.leaf.is_system()
    }

    /// Deleted or residue content that a carver or recovery can get back
    /// whole: one contiguous run, never overwritten.
    pub fn intact(&self) -> bool {
        !self.overwritten && self.runs.len() <= 1
    }
}

/// What fills a run of clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Directory `d`, from its cluster number `index` on.
    Dir(usize, u32),
    /// Item `i`, from its cluster number `index` on.
    Item(usize, u32),
    /// Zeros.
    Zero,
    /// Random bytes from the given key.
    Random(u64),
}

/// A run of the group's clusters and what fills it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// First cluster (group-relative).
    pub start: u32,
    /// Number of clusters.
    pub len: u32,
    /// Content.
    pub fill: Fill,
}

/// A planned group.
#[derive(Debug, Clone)]
pub struct GroupPlan {
    /// Group index.
    pub k: u32,
    /// Absolute number of its first cluster.
    pub base: u32,
    /// Clusters in the group.
    pub n: u32,
    /// Directories.
    pub dirs: Vec<DirPlan>,
    /// Files.
    pub items: Vec<ItemPlan>,
    /// Entries this group adds directly to skeleton directories.
    pub skel_children: Vec<(usize, Child)>,
    /// Non-overlapping, sorted runs with content (the rest is zero).
    pub extents: Vec<Extent>,
    /// Clusters at the group's start holding its `$MFT` fragment (NTFS;
    /// 0 on FAT).
    pub mft: u32,
}

/// What a file system's layout planner tells the shared planner: how much
/// room its own structures take, so that one logical plan is placed in
/// clusters alike on every file system. `fat::layout` and `ntfs::layout`
/// implement it and know nothing of each other; the planner knows neither.
pub trait FsLayout: std::fmt::Debug + Send + Sync {
    /// Most allocation groups a volume may have.
    fn max_groups(&self) -> u64;
    /// Largest file stored inside its directory record (0: none).
    fn resident_max(&self) -> u64;
    /// Whether each batch folder takes one of its group's first clusters,
    /// known without planning the group (FAT: the skeleton's entry points
    /// at it); else folders are placed like other directories.
    fn folders_at_group_start(&self) -> bool;
    /// Clusters skeleton folder `i` reserves for its entries: its known
    /// children, every batch's folder and up to [`LEAF_CAP`] of the
    /// skeleton's own files. `None`: it lies outside the data area (a
    /// FAT12/16 root).
    fn skeleton_dir_clusters(&self, vol: &Volume, i: usize) -> Result<Option<u32>, CorpusError>;
    /// Clusters of a batch not given to content: its folders, or its share
    /// of the file system's records, as estimated before its files are
    /// known.
    fn batch_overhead(&self, batch_clusters: u32, folders: u32) -> u32;
    /// Which of a deleted directory's children (stored names, in order)
    /// it keeps listed; the others become residue.
    fn deleted_dir_keeps(&self, children: &[&NameForm], cluster: u64) -> Vec<bool>;
    /// Clusters group directory `d` needs for its entries (0: none outside
    /// its record).
    fn dir_clusters(&self, dirs: &[DirPlan], items: &[ItemPlan], d: usize, cluster: u64) -> u32;
    /// Clusters at the group's start for the file system's own records
    /// (NTFS: the group's `$MFT` fragment), once its entries are known.
    fn group_reserve(&self, dirs: &[DirPlan], items: &[ItemPlan]) -> u32;
    /// Last changes to the files before placement, from their own random
    /// stream (NTFS: compressed and sparse files).
    fn pack(&self, vol: &Volume, k: u32, items: &mut [ItemPlan]);
}

/// A batch's folder in a group leaf, as the skeleton lists it.
#[derive(Debug, Clone)]
pub struct GroupFolder {
    /// Stored name.
    pub form: NameForm,
    /// Timestamps.
    pub times: Times,
    /// The group holding the batch.
    pub group: u32,
    /// Place among the group's batch folders (batch, then leaf order):
    /// they take the group's first clusters on FAT and its first records
    /// on NTFS.
    pub slot: u32,
    /// Absolute first cluster (FAT).
    pub first: u32,
}

/// The whole volume's plan: geometry, skeleton and group arithmetic.
#[derive(Debug, Clone)]
pub struct Volume {
    /// Disk geometry.
    pub geo: Geometry,
    /// Corpus seed.
    pub seed: u64,
    /// Profile knobs.
    pub profile: Profile,
    /// The user's account name.
    pub user: String,
    /// Skeleton directories (0 is the root).
    pub skel: Vec<SkelDir>,
    /// Clusters per group.
    pub group_clusters: u32,
    /// Number of groups.
    pub groups: u32,
    /// Clusters per batch (a group of full size holds
    /// `group_clusters / batch_clusters` batches).
    pub batch_clusters: u32,
    /// Absolute cluster where group 0 starts.
    pub groups_start: u32,
    /// Pool member sizes the planner sizes files from.
    pool_sizes: PoolSizes,
    /// Plan for estimates only (E01 ratio calibration): skip work that
    /// only refines cluster counts, such as compressing files.
    pub estimate_only: bool,
    /// A Windows system disk, with its `Windows` folder (NTFS volumes are;
    /// FAT ones are sticks and cards).
    pub system_disk: bool,
    /// The file system's layout planner.
    pub layout: Arc<dyn FsLayout>,
    epoch: (u64, u64),
}

#[derive(Debug, Clone)]
struct PoolSizes {
    min: [(Kind, u64); 16],
    sqlite: Vec<u64>,
    jpeg: Vec<u64>,
    png: Vec<u64>,
    gif: Vec<u64>,
}

impl PoolSizes {
    fn members(&self, kind: Kind) -> &[u64] {
        match kind {
            Kind::Jpeg => &self.jpeg,
            Kind::Png => &self.png,
            Kind::Gif => &self.gif,
            _ => &[],
        }
    }

    fn min(&self, kind: Kind) -> u64 {
        self.min
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, s)| *s)
            .unwrap_or(0)
    }
}

fn stamp(secs: u64) -> Stamp {
    Stamp { secs, centis: 0 }
}

/// Times for an entry created around `t`: creation with hundredths,
/// modification a little later (or earlier, for copied files, as Windows
/// keeps a copy's modification time), access on a later day.
fn times_around(rng: &mut Rng, t: u64) -> Times {
    let created = Stamp {
        secs: t,
        centis: rng.below(100) as u8,
    };
    let modified = if rng.below(4) == 0 {
        stamp(t.saturating_sub(rng.range(3600, 86_400 * 400))).even()
    } else {
        stamp(t + rng.range(0, 86_400 * 20)).even()
    };
    let accessed = stamp(created.secs.max(modified.secs) + rng.range(0, 86_400 * 45));
    Times {
        created,
        modified,
        accessed,
    }
}

/// Hex-digit test for the hashed short-name shape `XXhhhh~1`.
fn looks_like_group_alias(s: &[u8; 11]) -> bool {
    s[6] == b'~' && s[7] == b'1' && s[2..6].iter().all(|c| c.is_ascii_hexdigit())
}

impl Volume {
    /// Plan a volume: skeleton tree, group size and count.
    pub fn new(
        geo: Geometry,
        seed: u64,
        profile: Profile,
        pool: &Pool,
        layout: Arc<dyn FsLayout>,
    ) -> Result<Volume, CorpusError> {
        let mut rng = Rng::derive(seed, &[0x534B_454C]);
        let (f, l) = words::person(&mut rng);
        let user = format!("{}{}", &f[..1], l).to_ascii_lowercase();
        let cluster = geo.cluster_bytes();
        let data_bytes = geo.clusters as u64 * cluster;
        // NTFS adds a run to $MFT per group, and $MFT's run list must fit
        // its record: fewer, larger groups.
        let max_groups = layout.max_groups().min(MAX_GROUPS);
        // Batches are a fixed size whatever the disk; a group is a whole
        // number of them.
        let batch_bytes = BATCH_BYTES.max(data_bytes.div_ceil(MAX_GROUPS));
        let batch_clusters = (batch_bytes / cluster).max(1);
        let per_group = data_bytes
            .div_ceil(max_groups)
            .div_ceil(batch_clusters * cluster)
            .max(1);
        let group_clusters = (batch_clusters * per_group) as u32;
        let batch_clusters = batch_clusters as u32;

        let start = days_to_secs(names::days_from_civil(
            EPOCH_START.0,
            EPOCH_START.1,
            EPOCH_START.2,
        ));
        let end = days_to_secs(names::days_from_civil(
            EPOCH_END.0,
            EPOCH_END.1,
            EPOCH_END.2,
        ));
        let install = start - rng.range(86_400 * 20, 86_400 * 60);

        let mut min = [(Kind::Text, 0u64); 16];
        for (slot, kind) in min.iter_mut().zip(Kind::ALL) {
            *slot = (kind, kind.min_size(pool));
        }
        let pool_sizes = PoolSizes {
            min,
            sqlite: pool.sqlite_sizes(),
            jpeg: pool.member_sizes(Kind::Jpeg),
            png: pool.member_sizes(Kind::Png),
            gif: pool.member_sizes(Kind::Gif),
        };

        let vendors = [
            ("Northwind Traders", "Ledger"),
            ("Contoso", "PhotoDesk"),
            ("Fabrikam", "SyncTool"),
            ("Litware", "NoteTaker"),
        ];
        let (vendor, _) = *rng.pick(&vendors);
        // (name, parent, leaf)
        let tree: Vec<(String, usize, Option<Leaf>)> = vec![
            (String::new(), 0, None),                       // 0 root
            ("Users".into(), 0, None),                      // 1
            (user.clone(), 1, None),                        // 2
            ("Desktop".into(), 2, Some(Leaf::Desktop)),     // 3
            ("Documents".into(), 2, Some(Leaf::Documents)), // 4
            ("Downloads".into(), 2, Some(Leaf::Downloads)), // 5
            ("Pictures".into(), 2, Some(Leaf::Pictures)),   // 6
            ("Music".into(), 2, Some(Leaf::Music)),         // 7
            ("AppData".into(), 2, None),                    // 8
            ("Roaming".into(), 8, None),                    // 9
            ("Thunderbird".into(), 9, None),                // 10
            ("Mail".into(), 10, Some(Leaf::Mail)),          // 11
            ("Local".into(), 8, None),                      // 12
            ("Google".into(), 12, None),                    // 13
            ("Chrome".into(), 13, None),                    // 14
            ("User Data".into(), 14, None),                 // 15
            ("Default".into(), 15, Some(Leaf::Browser)),    // 16
            ("Cache".into(), 16, Some(Leaf::Cache)),        // 17
            ("Program Files".into(), 0, None),              // 18
            (vendor.into(), 18, Some(Leaf::Programs)),      // 19
        ];
        let mut tree = tree;
        let system_disk = geo.ntfs;
        if system_disk {
            // A Windows system disk: the operating system's own folders.
            tree.push(("Windows".into(), 0, None)); // 20
            tree.push(("System32".into(), 20, Some(Leaf::System))); // 21
            tree.push(("WinSxS".into(), 20, Some(Leaf::WinSxS))); // 22
        }
        let mut skel: Vec<SkelDir> = Vec::with_capacity(tree.len());
        for (i, (name, parent, leaf)) in tree.iter().enumerate() {
            let t = install + i as u64 * rng.range(5, 400);
            let times = Times {
                created: Stamp {
                    secs: t,
                    centis: rng.below(100) as u8,
                },
                modified: stamp(t).even(),
                accessed: stamp(end),
            };
            let path = if i == 0 {
                String::new()
            } else if *parent == 0 {
                name.clone()
            } else {
                format!("{}/{name}", skel[*parent].path)
            };
            skel.push(SkelDir {
                name: name.clone(),
                parent: *parent,
                leaf: *leaf,
                form: NameForm {
                    short: [b' '; 11],
                    long: None,
                    nt_flags: 0,
                },
                times,
                first: 0,
                clusters: 0,
                children: Vec::new(),
                path,
            });
            if i > 0 {
                skel[*parent].children.push(i);
            }
        }
        // Short names of skeleton children (unique within each parent).
        for p in 0..skel.len() {
            let kids = skel[p].children.clone();
            let mut taken: HashSet<[u8; 11]> = HashSet::new();
            for c in kids {
                let form =
                    names::name_form(&skel[c].name, &|s| taken.contains(s)).ok_or_else(|| {
                        CorpusError::Invalid("no short name for a skeleton folder".into())
                    })?;
                taken.insert(form.short);
                skel[c].form = form;
            }
        }

        let mut vol = Volume {
            geo,
            seed,
            profile,
            user,
            skel,
            group_clusters,
            groups: 1,
            batch_clusters,
            groups_start: 2,
            pool_sizes,
            estimate_only: false,
            system_disk,
            layout,
            epoch: (start, end),
        };
        // Size the skeleton from an upper bound on the group count; spare
        // directory space is simply unused (zeroed) entries.
        let total = vol.geo.clusters;
        let upper = (total / group_clusters).max(1);
        vol.groups = upper;
        let mut next = 2u32;
        for i in 0..vol.skel.len() {
            let Some(clusters) = vol.layout.clone().skeleton_dir_clusters(&vol, i)? else {
                continue;
            };
            vol.skel[i].first = next;
            vol.skel[i].clusters = clusters;
            next += clusters;
        }
        vol.groups_start = next;
        let left = total
            .checked_sub(next - 2)
            .filter(|l| *l > 64)
            .ok_or_else(|| {
                CorpusError::Invalid("volume too small for the directory skeleton".into())
            })?;
        vol.groups = (left / group_clusters).clamp(1, upper);
        Ok(vol)
    }

    /// Every batch's folder in skeleton folder `i` (none unless it is a
    /// group leaf).
    pub fn group_folders_in(&self, i: usize) -> Vec<GroupFolder> {
        match self.skel[i].leaf {
            Some(leaf) if self.group_leaf_index(leaf).is_some() => (0..self.batches())
                .filter_map(|j| self.group_folder(j, leaf))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Position of `leaf` among the leaves holding group folders.
    pub fn group_leaf_index(&self, leaf: Leaf) -> Option<usize> {
        self.group_leaves().position(|l| l == leaf)
    }

    /// The leaves holding group folders, with their folder-name stems.
    fn group_leaf_table(&self) -> &'static [(Leaf, &'static [&'static str])] {
        if self.system_disk {
            NTFS_GROUP_LEAVES
        } else {
            GROUP_LEAVES
        }
    }

    /// Absolute first cluster and cluster count of group `k`; the last group
    /// takes the remainder.
    pub fn group_range(&self, k: u32) -> (u32, u32) {
        let base = self.groups_start + k * self.group_clusters;
        let end = 2 + self.geo.clusters;
        let n = if k + 1 == self.groups {
            end - base
        } else {
            self.group_clusters
        };
        (base, n)
    }

    /// Batches of group `k`, by number: a full group holds
    /// `group_clusters / batch_clusters`, the last as many as its clusters
    /// make (rounded, at least one).
    pub fn group_batches(&self, k: u32) -> std::ops::Range<u32> {
        let per = self.group_clusters / self.batch_clusters;
        let first = k * per;
        if k + 1 == self.groups {
            let (_, n) = self.group_range(k);
            let bc = self.batch_clusters as u64;
            let m = ((n as u64 + bc / 2) / bc).max(1) as u32;
            first..first + m
        } else {
            first..first + per
        }
    }

    /// Number of batches on the volume.
    pub fn batches(&self) -> u32 {
        self.group_batches(self.groups - 1).end
    }

    /// The group holding batch `j` and the batch's place in it.
    fn batch_home(&self, j: u32) -> (u32, u32) {
        let per = self.group_clusters / self.batch_clusters;
        let k = (j / per).min(self.groups - 1);
        (k, j - k * per)
    }

    /// Batch `j`'s time window (seconds since 1980): the batches follow
    /// one another through the years the disk was used.
    fn window(&self, j: u32) -> (u64, u64) {
        let (s, e) = self.epoch;
        let span = (e - s) / self.batches() as u64;
        (s + span * j as u64, s + span * (j as u64 + 1))
    }

    /// Name and short name of batch `j`'s folder in `leaf`.
    fn group_folder_name(&self, j: u32, leaf: Leaf) -> (String, [u8; 11]) {
        let stems = self
            .group_leaf_table()
            .iter()
            .find(|(l, _)| *l == leaf)
            .map(|(_, s)| *s)
            .unwrap_or(&["Folder"]);
        let mut r = Rng::derive(self.seed, &[0x4746, j as u64, leaf as u64]);
        let stem = *r.pick(stems);
        let name = format!("{stem} {j:04}");
        // Windows' hashed alias shape: two letters, four hex digits, ~1.
        let mut short = [b' '; 11];
        let up: Vec<u8> = stem
            .bytes()
            .take(2)
            .map(|c| c.to_ascii_uppercase())
            .collect();
        short[..2].copy_from_slice(&up);
        short[2..6].copy_from_slice(format!("{:04X}", j & 0xFFFF).as_bytes());
        short[6] = b'~';
        short[7] = b'1';
        (name, short)
    }

    /// Group leaves, in the order their group folders take the group's
    /// first clusters.
    pub fn group_leaves(&self) -> impl Iterator<Item = Leaf> + use<> {
        self.group_leaf_table().iter().map(|(l, _)| *l)
    }

    /// Batch `j`'s folder in `leaf`, known without planning the batch.
    pub fn group_folder(&self, j: u32, leaf: Leaf) -> Option<GroupFolder> {
        let idx = self.group_leaves().position(|l| l == leaf)?;
        let (name, short) = self.group_folder_name(j, leaf);
        let (group, b) = self.batch_home(j);
        let (base, _) = self.group_range(group);
        let (w0, _) = self.window(j);
        let mut r = Rng::derive(self.seed, &[0x4754, j as u64, leaf as u64]);
        let at = w0 + r.range(0, 86_400);
        let times = times_around(&mut r, at);
        let slot = b * self.group_leaves().count() as u32 + idx as u32;
        Some(GroupFolder {
            form: NameForm {
                short,
                long: Some(name),
                nt_flags: 0,
            },
            times,
            group,
            slot,
            first: base + slot,
        })
    }

    /// Skeleton index of a leaf.
    pub fn leaf_index(&self, leaf: Leaf) -> usize {
        self.skel
            .iter()
            .position(|d| d.leaf == Some(leaf))
            .unwrap_or(0)
    }

    /// Plan group `k`.
    pub fn plan_group(&self, k: u32) -> GroupPlan {
        GroupBuilder::new(self, k).build()
    }
}

fn days_to_secs(days_since_1970: i64) -> u64 {
    ((days_since_1970 - 3652).max(0) as u64) * 86_400 + 9 * 3600
}

/// Kinds each leaf holds, with weights.
fn leaf_kinds(leaf: Leaf) -> &'static [(Kind, f64)] {
    match leaf {
        Leaf::Desktop => &[
            (Kind::Text, 3.0),
            (Kind::Docx, 2.0),
            (Kind::Pdf, 2.0),
            (Kind::Jpeg, 1.0),
            (Kind::Xlsx, 1.0),
            (Kind::Zip, 1.0),
        ],
        Leaf::Documents => &[
            (Kind::Text, 3.0),
            (Kind::Docx, 4.0),
            (Kind::Xlsx, 3.0),
            (Kind::Pdf, 4.0),
            (Kind::Html, 1.0),
            (Kind::Zip, 1.0),
            (Kind::Eml, 1.0),
            (Kind::Container, 0.4),
        ],
        Leaf::Downloads => &[
            (Kind::Zip, 3.0),
            (Kind::Pdf, 2.0),
            (Kind::Exe, 2.0),
            (Kind::Jpeg, 1.0),
            (Kind::Png, 1.0),
            (Kind::Mp3, 1.0),
            (Kind::Container, 0.6),
            (Kind::Html, 1.0),
        ],
        Leaf::Pictures => &[(Kind::Jpeg, 8.0), (Kind::Png, 2.0), (Kind::Gif, 1.0)],
        Leaf::Music => &[(Kind::Mp3, 1.0)],
        Leaf::Mail => &[(Kind::Eml, 4.0), (Kind::Mbox, 1.0)],
        Leaf::Browser => &[(Kind::Sqlite, 1.0), (Kind::Log, 1.0)],
        Leaf::Cache => &[
            (Kind::Jpeg, 3.0),
            (Kind::Png, 2.0),
            (Kind::Gif, 2.0),
            (Kind::Html, 3.0),
        ],
        Leaf::Programs => &[(Kind::Exe, 4.0), (Kind::Text, 1.0), (Kind::Log, 1.0)],
        Leaf::System => &[(Kind::Exe, 6.0), (Kind::Text, 1.0), (Kind::Log, 0.3)],
        Leaf::WinSxS => &[(Kind::Exe, 5.0), (Kind::Text, 2.0)],
    }
}

/// How often a new file lands in each leaf.
const LEAF_WEIGHTS: &[(Leaf, f64)] = &[
    (Leaf::Desktop, 4.0),
    (Leaf::Documents, 24.0),
    (Leaf::Downloads, 10.0),
    (Leaf::Pictures, 20.0),
    (Leaf::Music, 4.0),
    (Leaf::Mail, 6.0),
    (Leaf::Browser, 1.0),
    (Leaf::Cache, 22.0),
];

/// How often a new file is the operating system's on an NTFS system disk
/// (added to [`LEAF_WEIGHTS`]): a Windows volume holds more system files
/// than user files, most of them small.
const NTFS_SYSTEM_WEIGHTS: &[(Leaf, f64)] = &[(Leaf::System, 60.0), (Leaf::WinSxS, 60.0)];

/// Size range of system files (DLLs, drivers, manifests, INFs).
const SYSTEM_SIZES: (u64, u64) = (4 << 10, 600 << 10);

/// The user leaves' weights, the mail stores' set to give `mail_share` of
/// the picks when asked.
fn leaf_weights(mail_share: Option<f64>) -> Vec<(Leaf, f64)> {
    let mut w = LEAF_WEIGHTS.to_vec();
    if let Some(share) = mail_share {
        let others: f64 = w
            .iter()
            .filter(|(l, _)| *l != Leaf::Mail)
            .map(|(_, x)| x)
            .sum();
        for (l, x) in &mut w {
            if *l == Leaf::Mail {
                *x = others * share / (1.0 - share);
            }
        }
    }
    w
}

/// A size range times `scale` (at least a byte at the bottom).
fn scaled((lo, hi): (u64, u64), scale: f64) -> (u64, u64) {
    if scale == 1.0 {
        return (lo, hi);
    }
    let at = |x: u64| ((x as f64 * scale).round() as u64).max(1);
    (at(lo), at(hi))
}

/// Size range (bytes) of each kind before pool and budget limits.
fn size_range(kind: Kind) -> (u64, u64) {
    match kind {
        Kind::Text => (200, 96 << 10),
        Kind::Log => (2 << 10, 2 << 20),
        Kind::Html => (1 << 10, 200 << 10),
        Kind::Eml => (2 << 10, 2 << 20),
        Kind::Mbox => (100 << 10, 8 << 20),
        Kind::Jpeg => (30 << 10, 3 << 20),
        Kind::Png => (5 << 10, 1 << 20),
        Kind::Gif => (1 << 10, 300 << 10),
        Kind::Pdf => (4 << 10, 2 << 20),
        Kind::Zip => (8 << 10, 4 << 20),
        Kind::Docx => (8 << 10, 2 << 20),
        Kind::Xlsx => (8 << 10, 1 << 20),
        Kind::Sqlite => (0, 0),
        Kind::Mp3 => (1 << 20, 8 << 20),
        Kind::Container => (256 << 10, 12 << 20),
        Kind::Exe => (16 << 10, 4 << 20),
    }
}

/// A file name for a new file of `kind` in `leaf`.
fn file_name(rng: &mut Rng, leaf: Leaf, kind: Kind, t: u64) -> String {
    let s = stamp(t).iso();
    let date = &s[..10];
    let ext = kind.ext();
    let words3 = |rng: &mut Rng| {
        let mut v = Vec::new();
        for i in 0..rng.range(1, 3) {
            let w = words::zipf_word(rng);
            if i == 0 {
                let mut c = w.chars();
                if let Some(f) = c.next() {
                    v.push(format!("{}{}", f.to_ascii_uppercase(), c.as_str()));
                }
            } else {
                v.push(w.to_string());
            }
        }
        v.join(" ")
    };
    let name = match (leaf, kind) {
        (Leaf::Pictures, Kind::Jpeg) | (Leaf::Desktop, Kind::Jpeg) => match rng.below(3) {
            0 => format!("IMG_{:04}.JPG", rng.range(1, 9999)),
            1 => format!("DSC{:05}.JPG", rng.range(1, 99_999)),
            _ => format!("{} {}.jpg", words3(rng), date),
        },
        (Leaf::Pictures, _) => format!("Screenshot {} {:06}.{ext}", date, rng.below(240_000)),
        (Leaf::Cache, _) => format!("f_{:06x}", rng.below(1 << 24)),
        (Leaf::Music, _) => {
            format!("{:02} - {}.mp3", rng.range(1, 14), words3(rng))
        }
        (Leaf::Mail, Kind::Mbox) => match rng.below(4) {
            0 => "Inbox".to_string(),
            1 => "Sent".to_string(),
            2 => format!("Archive {}", &date[..4]),
            _ => words3(rng),
        },
        (Leaf::Browser, Kind::Sqlite) => "History".to_string(),
        (Leaf::Browser, _) => format!("debug_{}.log", rng.range(1, 99)),
        (Leaf::Programs, Kind::Exe) => {
            let w = words::zipf_word(rng);
            if rng.below(2) == 0 {
                format!("{w}.exe")
            } else {
                format!("{w}core.dll")
            }
        }
        (Leaf::Programs, Kind::Text) => "readme.txt".to_string(),
        (Leaf::Programs, _) => "install.log".to_string(),
        (Leaf::System, Kind::Exe) | (Leaf::WinSxS, Kind::Exe) => {
            let w = words::zipf_word(rng);
            match rng.below(6) {
                0 => format!("{w}.exe"),
                1 => format!("{w}.sys"),
                2 => format!("{w}.dll.mui"),
                3 => format!("{w}svc.dll"),
                _ => format!("{w}.dll"),
            }
        }
        (Leaf::System, Kind::Text) => format!("{}.inf", words::zipf_word(rng)),
        (Leaf::System, _) => format!("setupapi.{}.log", words::zipf_word(rng)),
        (Leaf::WinSxS, _) => format!("{}.manifest", words::zipf_word(rng)),
        (_, Kind::Text) if rng.below(3) == 0 => {
            format!("{}.txt", words::zipf_word(rng))
        }
        (_, Kind::Exe) => format!("{}_setup_x64.exe", words::zipf_word(rng)),
        _ => {
            if ext.is_empty() {
                words3(rng)
            } else {
                format!("{}.{ext}", words3(rng))
            }
        }
    };
    // Keep names short enough for three long-name slots.
    if name.chars().count() > 38 {
        let keep: String = name.chars().take(30).collect();
        if ext.is_empty() {
            keep
        } else {
            format!("{keep}.{ext}")
        }
    } else {
        name
    }
}

struct GroupBuilder<'a> {
    vol: &'a Volume,
    k: u32,
    base: u32,
    n: u32,
    /// The stream being drawn from: the skeleton's files', then each
    /// batch's, then the layout's.
    rng: Rng,
    cluster: u64,
    /// Clusters each batch of this group is drawn for.
    batch_n: u32,
    /// Clusters the group's batch folders take at its start (FAT).
    reserved: u32,
    dirs: Vec<DirPlan>,
    items: Vec<ItemPlan>,
    skel_children: Vec<(usize, Child)>,
    // What follows belongs to the batch being drawn (or the skeleton's
    // files), reset by `begin`.
    /// 0 for the skeleton's files, `j + 1` for batch `j`: numbers item
    /// keys, keyword tokens and duplicate groups apart.
    space: u64,
    window: (u64, u64),
    homes: Vec<(Leaf, Parent)>,
    first_item: usize,
    kw_next: u32,
    incompressible: u64,
    compressible: u64,
    dup_next: u64,
}

impl<'a> GroupBuilder<'a> {
    fn new(vol: &'a Volume, k: u32) -> Self {
        let (base, n) = vol.group_range(k);
        GroupBuilder {
            vol,
            k,
            base,
            n,
            rng: Rng::derive(vol.seed, &[0x534B_4649]),
            cluster: vol.geo.cluster_bytes(),
            batch_n: n / vol.group_batches(k).len().max(1) as u32,
            reserved: 0,
            dirs: Vec::new(),
            items: Vec::new(),
            skel_children: Vec::new(),
            space: 0,
            window: vol.window(0),
            homes: Vec::new(),
            first_item: 0,
            kw_next: 0,
            incompressible: 0,
            compressible: 0,
            dup_next: 0,
        }
    }

    /// Start drawing batch `j` (`None`: the skeleton's own files) from its
    /// own stream, so that a batch is the same whichever group holds it.
    fn begin(&mut self, batch: Option<u32>) {
        let vol = self.vol;
        match batch {
            Some(j) => {
                self.rng = Rng::derive(vol.seed, &[0x4241_5443, j as u64]);
                self.space = j as u64 + 1;
                self.window = vol.window(j);
            }
            None => {
                self.rng = Rng::derive(vol.seed, &[0x534B_4649]);
                self.space = 0;
                self.window = vol.window(0);
            }
        }
        self.homes.clear();
        self.first_item = self.items.len();
        self.kw_next = 0;
        self.incompressible = 0;
        self.compressible = 0;
        self.dup_next = 0;
    }

    /// Batches have folders only in the group leaves; their Desktop and
    /// browser-profile files go to Documents instead, and system files
    /// arrive with updates, in the component store.
    fn leaf_for(&self, leaf: Leaf) -> Leaf {
        if self.vol.group_leaf_index(leaf).is_some() {
            leaf
        } else if leaf == Leaf::System {
            Leaf::WinSxS
        } else {
            Leaf::Documents
        }
    }

    fn when(&mut self) -> u64 {
        let (a, b) = self.window;
        self.rng.range(a, b.max(a + 1))
    }

    fn blank() -> NameForm {
        NameForm {
            short: [b' '; 11],
            long: None,
            nt_flags: 0,
        }
    }

    fn add_dir(
        &mut self,
        name: String,
        parent: Parent,
        leaf: Leaf,
        deleted: bool,
        group_folder: bool,
    ) -> usize {
        let t = self.when();
        let times = times_around(&mut self.rng, t);
        self.dirs.push(DirPlan {
            name,
            form: Self::blank(),
            parent,
            leaf,
            times,
            deleted,
            children: Vec::new(),
            runs: Vec::new(),
            group_folder,
        });
        self.dirs.len() - 1
    }

    fn count_in_skel(&self, s: usize) -> usize {
        self.dirs
            .iter()
            .filter(|d| d.parent == Parent::Skel(s))
            .count()
            + self
                .items
                .iter()
                .filter(|i| i.parent == Some(Parent::Skel(s)))
                .count()
    }

    /// A home (parent) for a new entry in `leaf`.
    fn home(&mut self, leaf: Leaf) -> Parent {
        let options: Vec<Parent> = self
            .homes
            .iter()
            .filter(|(l, _)| *l == leaf)
            .map(|(_, p)| *p)
            .filter(|p| match p {
                Parent::Skel(s) => self.count_in_skel(*s) < LEAF_CAP - 8,
                Parent::Dir(_) => true,
            })
            .collect();
        if options.is_empty() {
            // Every group has a nested folder per leaf, created on demand.
            let parent = self
                .homes
                .iter()
                .find(|(l, _)| *l == leaf)
                .map(|(_, p)| *p)
                .unwrap_or(Parent::Skel(self.vol.leaf_index(leaf)));
            let name = format!("{} {}", words::zipf_word(&mut self.rng), self.dirs.len());
            let d = self.add_dir(name, parent, leaf, false, false);
            self.homes.push((leaf, Parent::Dir(d)));
            return Parent::Dir(d);
        }
        *self.rng.pick(&options)
    }

    fn pick_kind(&mut self, leaf: Leaf) -> Kind {
        let table = leaf_kinds(leaf);
        let total = (self.incompressible + self.compressible).max(1) as f64;
        let share = self.incompressible as f64 / total;
        let target = self.vol.profile.incompressible_share;
        let weights: Vec<f64> = table
            .iter()
            .map(|(k, w)| {
                if k.incompressible() == (share < target) {
                    w * 4.0
                } else {
                    *w
                }
            })
            .collect();
        table[self.rng.weighted(&weights)].0
    }

    /// The largest file a batch of this group holds.
    fn max_file(&self) -> u64 {
        MAX_FILE.min(self.batch_n as u64 * self.cluster / 12)
    }

    /// Size range of a file of `kind`, the operating system's (`system`)
    /// or the user's, scaled by the profile and raised to the pool's
    /// smallest member of the kind.
    fn size_bounds(&self, system: bool, kind: Kind) -> (u64, u64) {
        let range = if system {
            SYSTEM_SIZES
        } else {
            size_range(kind)
        };
        let (lo, hi) = scaled(range, self.vol.profile.size_scale);
        (lo.max(self.vol.pool_sizes.min(kind)), hi)
    }

    fn pick_size(&mut self, kind: Kind, room: u64) -> Option<(u64, u32)> {
        let sizes = &self.vol.pool_sizes;
        let max = self.max_file().min(room);
        if kind == Kind::Sqlite {
            let fitting: Vec<(usize, u64)> = sizes
                .sqlite
                .iter()
                .copied()
                .enumerate()
                .filter(|(_, s)| *s <= max)
                .collect();
            if fitting.is_empty() {
                return None;
            }
            let (i, s) = fitting[self.rng.below(fitting.len() as u64) as usize];
            return Some((s, i as u32));
        }
        let (lo, hi) = self.size_bounds(false, kind);
        if lo > max {
            return None;
        }
        let size = self.rng.log_uniform(lo.max(1), hi.min(max).max(lo.max(1)));
        Some((size, self.variant_for(kind, size)))
    }

    /// The size of a cell's next file with `left` bytes of its quota: the
    /// kind's own draw, trimmed to what is left when it passes the quota
    /// and the rest is a size the kind has, else kept whole with
    /// probability left / size (so a quota is met on average); the cell is
    /// closed (`left` = 0) either way. `None`: nothing fits.
    fn quota_size(
        &mut self,
        leaf: Leaf,
        kind: Kind,
        room: u64,
        left: &mut u64,
    ) -> Option<(u64, u32)> {
        let drawn = if leaf.is_system() {
            let (lo, hi) = self.size_bounds(true, kind);
            let hi = hi.min(room);
            if lo > hi {
                return None;
            }
            (self.rng.log_uniform(lo, hi), 0)
        } else {
            self.pick_size(kind, room)?
        };
        if drawn.0 <= *left {
            return Some(drawn);
        }
        let quota = std::mem::take(left);
        let lo = self.size_bounds(leaf.is_system(), kind).0.max(1);
        if kind != Kind::Sqlite && quota >= lo {
            return Some((quota, self.variant_for(kind, quota)));
        }
        let keep = quota as f64 / drawn.0.max(1) as f64;
        self.rng.chance(keep).then_some(drawn)
    }

    /// The pool member an image of `size` bytes varies: the largest that
    /// leaves room for the variation (the generator needs at least 64
    /// bytes of it).
    fn variant_for(&self, kind: Kind, size: u64) -> u32 {
        self.vol
            .pool_sizes
            .members(kind)
            .iter()
            .rposition(|m| m + 64 <= size)
            .unwrap_or(0) as u32
    }

    fn new_item(
        &mut self,
        leaf: Leaf,
        kind: Kind,
        size: u64,
        variant: u32,
        parent: Option<Parent>,
    ) -> usize {
        let t = self.when();
        let name = file_name(&mut self.rng, leaf, kind, t);
        let times = times_around(&mut self.rng, t);
        let key = derive_key(
            self.vol.seed,
            &[
                0x4954_454D,
                self.space,
                (self.items.len() - self.first_item) as u64,
            ],
        );
        if kind.incompressible() {
            self.incompressible += size;
        } else {
            self.compressible += size;
        }
        let slack_random = self.rng.below(2) == 0;
        let resident = size > 0 && size <= self.vol.layout.resident_max();
        self.items.push(ItemPlan {
            name,
            form: Self::blank(),
            parent,
            leaf,
            spec: Spec {
                kind,
                size,
                key,
                keywords: Vec::new(),
                straddle: Vec::new(),
                variant,
                when: t,
            },
            times,
            deleted: false,
            residue: false,
            in_deleted_dir: false,
            runs: Vec::new(),
            fragmented: false,
            overwritten: false,
            known: false,
            notable: false,
            dup_group: None,
            slack_random,
            resident,
            packing: None,
        });
        self.items.len() - 1
    }

    fn build(mut self) -> GroupPlan {
        let vol = self.vol;
        let k = self.k;
        // The skeleton's own files come with group 0, before its batches,
        // and take the first batch's room.
        let mut skeleton_used = 0;
        if k == 0 {
            skeleton_used = self.skeleton_files();
        }
        for j in vol.group_batches(k) {
            self.draw_batch(j, skeleton_used);
            skeleton_used = 0;
        }
        self.finish_names();
        self.trim_deleted_dirs();
        if !vol.estimate_only {
            vol.layout.pack(vol, k, &mut self.items);
        }
        let mft = vol.layout.group_reserve(&self.dirs, &self.items);
        let reserved = self.reserved + mft;
        // Placement has its own stream: what a batch holds does not
        // depend on where it lands.
        self.rng = Rng::derive(vol.seed, &[0x4C41_594F, k as u64]);
        let extents = self.layout(reserved);
        GroupPlan {
            k,
            base: self.base,
            n: self.n,
            dirs: self.dirs,
            items: self.items,
            skel_children: self.skel_children,
            extents,
            mft,
        }
    }

    /// Clusters of content a batch holds: its share of the clusters, less
    /// what its folders (FAT) or its share of the file system's records
    /// (NTFS, estimated) take.
    fn batch_budget(&self) -> u64 {
        let vol = self.vol;
        let own = vol
            .layout
            .batch_overhead(self.batch_n, vol.group_leaves().count() as u32);
        let avail = self.batch_n.saturating_sub(own) as u64;
        (avail as f64 * vol.profile.fill) as u64
    }

    /// The skeleton's own files, planned once: the program folder's (known
    /// files), the browser's history database, a few Desktop files and, on
    /// NTFS, the system folder's. Returns the clusters they take.
    fn skeleton_files(&mut self) -> u64 {
        self.begin(None);
        let vol = self.vol;
        let cluster = self.cluster;
        // Each file has at most a 16th of a batch's content, and all of
        // them a quarter (a small disk is not all program files).
        let budget = self.batch_budget();
        let room = budget * cluster / 16;
        let cap = budget / 4;
        let mut used = 0u64;
        let prog = Parent::Skel(vol.leaf_index(Leaf::Programs));
        for j in 0..self.rng.range(4, 9) {
            let kind = if j == 0 { Kind::Text } else { Kind::Exe };
            if used >= cap {
                break;
            }
            if let Some((size, v)) = self.pick_size(kind, room) {
                let i = self.new_item(Leaf::Programs, kind, size, v, Some(prog));
                self.items[i].known = true;
                used += self.items[i].clusters(cluster) as u64;
            }
        }
        if let Some((size, v)) = self.pick_size(Kind::Sqlite, room) {
            let b = Parent::Skel(vol.leaf_index(Leaf::Browser));
            let i = self.new_item(Leaf::Browser, Kind::Sqlite, size, v, Some(b));
            used += self.items[i].clusters(cluster) as u64;
        }
        let desktop = Parent::Skel(vol.leaf_index(Leaf::Desktop));
        for _ in 0..self.rng.range(2, 7) {
            let kind = self.pick_kind(Leaf::Desktop);
            if used >= cap {
                break;
            }
            if let Some((size, v)) = self.pick_size(kind, room) {
                let i = self.new_item(Leaf::Desktop, kind, size, v, Some(desktop));
                used += self.items[i].clusters(cluster) as u64;
            }
        }
        if vol.system_disk {
            let system = Parent::Skel(vol.leaf_index(Leaf::System));
            for _ in 0..self.rng.range(16, 41) {
                let kind = self.pick_kind(Leaf::System);
                if used >= cap {
                    break;
                }
                let (lo, hi) = self.size_bounds(true, kind);
                if lo > hi {
                    continue;
                }
                let size = self.rng.log_uniform(lo, hi);
                let i = self.new_item(Leaf::System, kind, size, 0, Some(system));
                self.items[i].known = true;
                used += self.items[i].clusters(cluster) as u64;
            }
        }
        self.plant_keywords();
        used
    }

    /// Draw batch `j`: its folder in each group leaf, then files until its
    /// share of the clusters (less `taken`, already used in its stretch)
    /// is used.
    fn draw_batch(&mut self, j: u32, taken: u64) {
        self.begin(Some(j));
        let vol = self.vol;
        let cluster = self.cluster;
        for leaf in vol.group_leaves() {
            let p = Parent::Skel(vol.leaf_index(leaf));
            let d = self.add_dir(String::new(), p, leaf, false, true);
            if let Some(f) = vol.group_folder(j, leaf) {
                self.dirs[d].name = f.form.long.clone().unwrap_or_default();
                self.dirs[d].form = f.form;
                self.dirs[d].times = f.times;
            }
            // On FAT the folder's first cluster is fixed (the skeleton
            // points at it); on NTFS the skeleton points at its record.
            if vol.layout.folders_at_group_start() {
                self.dirs[d].runs.push(Run {
                    start: self.reserved,
                    len: 1,
                });
                self.reserved += 1;
            }
            self.homes.push((leaf, Parent::Dir(d)));
            if matches!(leaf, Leaf::Documents | Leaf::Pictures) && self.rng.below(2) == 0 {
                let name = format!(
                    "{} {}",
                    words::zipf_word(&mut self.rng),
                    self.rng.range(1, 99)
                );
                let nd = self.add_dir(name, Parent::Dir(d), leaf, false, false);
                self.homes.push((leaf, Parent::Dir(nd)));
            }
        }
        // The batch's folders (FAT) and, on NTFS, an estimate of its share
        // of the group's $MFT fragment (sized exactly once the files are
        // known) are not content.
        let budget = self.batch_budget().saturating_sub(taken);
        let mut used = 0u64;

        // Each (leaf, kind) has its quota of the batch's bytes, drawn in
        // a random order weighted by what is left of each: a batch's mix
        // (and so its messages, members and text per GiB) is the same in
        // every batch, not left to a few large mailboxes or archives.
        let cells = self.cells();
        let mut left: Vec<u64> = cells
            .iter()
            .map(|c| (c.2 * (budget * cluster) as f64) as u64)
            .collect();
        // Each cell draws from its own stream, so that a larger budget
        // gives the same files and more (the E01 calibration bisects on
        // it); the order cells take turns in is the batch's.
        let mut streams: Vec<Rng> = (0..cells.len())
            .map(|c| Rng::derive(vol.seed, &[0x4345_4C4C, j as u64, c as u64]))
            .collect();
        while used < budget {
            let weights: Vec<f64> = cells
                .iter()
                .zip(&left)
                .map(|(c, l)| if *l > 0 { c.2 } else { 0.0 })
                .collect();
            if weights.iter().all(|w| *w <= 0.0) {
                break;
            }
            let c = self.rng.weighted(&weights);
            let (leaf, kind, _) = cells[c];
            let room = (budget - used) * cluster;
            std::mem::swap(&mut self.rng, &mut streams[c]);
            used += self.draw_one(leaf, kind, room, &mut left[c], budget, used);
            std::mem::swap(&mut self.rng, &mut streams[c]);
        }
        // A few empty files (a fresh "New Text Document.txt").
        if self.rng.below(2) == 0 {
            let leaf = self.leaf_for(Leaf::Desktop);
            let p = self.home(leaf);
            let i = self.new_item(leaf, Kind::Text, 0, 0, Some(p));
            self.items[i].name = "New Text Document.txt".into();
        }

        self.guarantee();
        self.plant_keywords();
    }

    /// One pick of cell (`leaf`, `kind`) with `left` bytes of its quota:
    /// a file (live, deleted, a copy or residue) or a deleted folder with a
    /// few files. Returns the clusters taken.
    fn draw_one(
        &mut self,
        leaf: Leaf,
        kind: Kind,
        room: u64,
        left: &mut u64,
        budget: u64,
        used: u64,
    ) -> u64 {
        let vol = self.vol;
        let prof = &vol.profile;
        let cluster = self.cluster;
        let mut got = 0u64;
        let Some((size, variant)) = self.quota_size(leaf, kind, room, left) else {
            *left = 0;
            return 0;
        };
        if leaf.is_system() {
            // The operating system's files: live, known, small.
            let parent = self.home(leaf);
            let i = self.new_item(leaf, kind, size, 0, Some(parent));
            self.items[i].known = true;
            got += self.charge(i, left);
            return got;
        }
        // Deleted directory with a few deleted files.
        if self.rng.chance(prof.deleted_dirs_per_100 / 100.0) {
            let parent = self.home(leaf);
            let name = format!(
                "{} {}",
                words::zipf_word(&mut self.rng),
                self.rng.range(1, 999)
            );
            let d = self.add_dir(name, parent, leaf, true, false);
            got += 1;
            *left = left.saturating_sub(cluster);
            for _ in 0..self.rng.range(1, 3) {
                let kind = self.pick_kind(leaf);
                let room = budget.saturating_sub(used + got) * cluster;
                if let Some((size, v)) = self.pick_size(kind, room) {
                    let i = self.new_item(leaf, kind, size, v, Some(Parent::Dir(d)));
                    self.items[i].deleted = true;
                    self.items[i].in_deleted_dir = true;
                    got += self.charge(i, left);
                }
            }
            return got;
        }
        if self.rng.chance(prof.residue_share) && kind.carvable() {
            let i = self.new_item(leaf, kind, size.max(1), variant, None);
            self.items[i].residue = true;
            got += self.charge(i, left);
            return got;
        }
        let parent = self.home(leaf);
        // Planted duplicate of an earlier live file.
        if self.rng.chance(prof.duplicate_share) {
            let cands: Vec<usize> = (self.first_item..self.items.len())
                .filter(|&j| self.items[j].user_live())
                .collect();
            if !cands.is_empty() {
                let j = *self.rng.pick(&cands);
                let group = match self.items[j].dup_group {
                    Some(g) => g,
                    None => {
                        let g = (self.space << 20) | self.dup_next;
                        self.dup_next += 1;
                        self.items[j].dup_group = Some(g);
                        g
                    }
                };
                let i = self.copy_of(j, group, leaf, parent);
                let ext = self.items[i].spec.kind.ext();
                if !ext.is_empty() && !self.items[i].name.to_ascii_lowercase().ends_with(ext) {
                    let n = format!("{} copy.{ext}", self.items[i].name);
                    self.items[i].name = n;
                }
                got += self.charge(i, left);
                return got;
            }
        }
        let i = self.new_item(leaf, kind, size, variant, Some(parent));
        let it = &mut self.items[i];
        if self.rng.chance(prof.deleted_share) {
            it.deleted = true;
        }
        if self.rng.chance(prof.notable_share) {
            it.notable = true;
        } else if self.rng.chance(prof.known_share) {
            it.known = true;
        }
        got += self.charge(i, left);
        got
    }

    /// A copy of item `j` (same content, in duplicate group `group`) in
    /// `leaf` under `parent`, named as a new file there.
    fn copy_of(&mut self, j: usize, group: u64, leaf: Leaf, parent: Parent) -> usize {
        let src = self.items[j].clone();
        let i = self.new_item(
            leaf,
            src.spec.kind,
            src.spec.size,
            src.spec.variant,
            Some(parent),
        );
        let it = &mut self.items[i];
        it.spec = src.spec;
        it.dup_group = Some(group);
        it.known = src.known;
        it.notable = src.notable;
        i
    }

    /// Clusters item `i` takes, its bytes (at least a cluster's worth when
    /// not resident) taken from a quota.
    fn charge(&self, i: usize, quota: &mut u64) -> u64 {
        let clusters = self.items[i].clusters(self.cluster) as u64;
        let bytes = (clusters * self.cluster).max(self.items[i].spec.size);
        *quota = quota.saturating_sub(bytes.max(1));
        clusters
    }

    /// The batch's (leaf, kind) cells with their shares of its content
    /// bytes: each leaf's share of new files times its kinds' shares times
    /// their mean sizes, with incompressible kinds' bytes scaled to the
    /// profile's target share.
    fn cells(&self) -> Vec<(Leaf, Kind, f64)> {
        let vol = self.vol;
        let prof = &vol.profile;
        let mut weights: Vec<(Leaf, f64)> = leaf_weights(prof.mail_share);
        if vol.system_disk {
            weights.extend_from_slice(NTFS_SYSTEM_WEIGHTS);
        }
        let max = self.max_file();
        let mut cells: Vec<(Leaf, Kind, f64)> = Vec::new();
        let total_w: f64 = weights.iter().map(|(_, w)| w).sum();
        for (pick, w) in weights {
            let leaf = self.leaf_for(pick);
            let kinds = leaf_kinds(leaf);
            let kind_w: f64 = kinds.iter().map(|(_, x)| x).sum();
            for (kind, kw) in kinds {
                let (lo, hi) = self.size_bounds(leaf.is_system(), *kind);
                let mean = if *kind == Kind::Sqlite {
                    let fit: Vec<u64> = vol
                        .pool_sizes
                        .sqlite
                        .iter()
                        .copied()
                        .filter(|s| *s <= max)
                        .collect();
                    fit.iter().sum::<u64>() as f64 / fit.len().max(1) as f64
                } else {
                    let lo = lo.max(1) as f64;
                    let hi = (hi.min(max) as f64).max(lo);
                    if hi > lo {
                        (hi - lo) / (hi / lo).ln()
                    } else {
                        lo
                    }
                };
                let share = w / total_w * kw / kind_w * mean;
                match cells.iter_mut().find(|c| c.0 == leaf && c.1 == *kind) {
                    Some(c) => c.2 += share,
                    None => cells.push((leaf, *kind, share)),
                }
            }
        }
        // The target incompressible share is of all content bytes; the
        // operating system's files (all compressible) keep their share and
        // the user's kinds are scaled to reach it.
        let sum = |f: &dyn Fn(&(Leaf, Kind, f64)) -> bool| -> f64 {
            cells.iter().filter(|c| f(c)).map(|c| c.2).sum()
        };
        let inc = sum(&|c| !c.0.is_system() && c.1.incompressible());
        let comp = sum(&|c| !c.0.is_system() && !c.1.incompressible());
        let all = sum(&|_| true);
        let want = (prof.incompressible_share * all).min(0.95 * (inc + comp));
        if inc > 0.0 && comp > 0.0 {
            let users = inc + comp;
            for c in cells.iter_mut().filter(|c| !c.0.is_system()) {
                c.2 *= if c.1.incompressible() {
                    want / inc
                } else {
                    (users - want) / comp
                };
            }
        }
        let total: f64 = cells.iter().map(|c| c.2).sum();
        for c in &mut cells {
            c.2 /= total.max(f64::MIN_POSITIVE);
        }
        cells
    }

    /// Make sure every group, however small, has at least one of each
    /// planted case: a notable file, a known file outside the program
    /// folder, and a duplicate pair (so tests on small corpora always see
    /// them).
    fn guarantee(&mut self) {
        let live: Vec<usize> = (self.first_item..self.items.len())
            .filter(|&i| self.items[i].user_live() && self.items[i].dup_group.is_none())
            .collect();
        if live.len() < 4 {
            return;
        }
        let batch = self.first_item..self.items.len();
        if !self.items[batch.clone()].iter().any(|i| i.notable) {
            let i = live[self.rng.below(live.len() as u64) as usize];
            self.items[i].notable = true;
            self.items[i].known = false;
        }
        if !self.items[batch.clone()]
            .iter()
            .any(|i| i.known && i.leaf != Leaf::Programs && !i.leaf.is_system())
            && let Some(&i) = live.iter().find(|&&i| !self.items[i].notable)
        {
            self.items[i].known = true;
        }
        if !self.items[batch].iter().any(|i| i.dup_group.is_some())
            && let Some(&j) = live
                .iter()
                .find(|&&i| self.items[i].spec.size < self.batch_n as u64 * self.cluster / 40)
        {
            let g = (self.space << 20) | self.dup_next;
            self.dup_next += 1;
            self.items[j].dup_group = Some(g);
            let src = self.items[j].clone();
            let leaf = if src.leaf == Leaf::Documents {
                Leaf::Downloads
            } else {
                Leaf::Documents
            };
            let leaf = self.leaf_for(leaf);
            let parent = self.home(leaf);
            let i = self.copy_of(j, g, leaf, parent);
            self.items[i].name = if src.spec.kind.ext().is_empty() {
                format!("{} copy", src.name)
            } else {
                format!("Copy of {}", src.name)
            };
        }
    }

    /// Choose files to carry planted keywords: some deleted, some
    /// fragmented (decided later, so any file may be), some straddling a
    /// cluster boundary (text and logs, where the offset is exact).
    fn plant_keywords(&mut self) {
        let share = self.vol.profile.keyword_share;
        let cluster = self.cluster;
        let mut have_deleted = false;
        let mut have_straddle = false;
        let mut kinds_done: HashSet<Kind> = HashSet::new();
        for i in self.first_item..self.items.len() {
            let it = &self.items[i];
            // Audio, containers and executables hold no text to plant in.
            let holds_text = !matches!(it.spec.kind, Kind::Mp3 | Kind::Container | Kind::Exe);
            if it.spec.size < 1024 || it.dup_group.is_some() || it.known || !holds_text {
                continue;
            }
            let wanted = it.deleted || it.residue;
            let p = if wanted { share * 2.0 } else { share };
            let text_like =
                matches!(it.spec.kind, Kind::Text | Kind::Log) && it.spec.size > 2 * cluster;
            // The first file of each searchable kind always carries one, so
            // every extraction path (PDF text, OOXML, ZIP, mail, SQLite,
            // image comments) is exercised even on the smallest disk.
            let first_of_kind = !it.deleted && !it.residue && kinds_done.insert(it.spec.kind);
            let force = (wanted && !have_deleted) || (text_like && !have_straddle) || first_of_kind;
            if !(force || self.rng.chance(p)) || self.kw_next + 3 > KW_PER_GROUP {
                continue;
            }
            have_deleted |= wanted;
            have_straddle |= text_like;
            let n = self.rng.range(1, 3) as u32;
            let mut kws = Vec::new();
            for _ in 0..n {
                kws.push(words::keyword_token(
                    self.vol.seed,
                    self.space as u32 * KW_PER_GROUP + self.kw_next,
                ));
                self.kw_next += 1;
            }
            let it = &mut self.items[i];
            if matches!(it.spec.kind, Kind::Text | Kind::Log) && it.spec.size > 2 * cluster {
                let clusters = it.spec.size / cluster;
                let j = 1 + self.rng.below(clusters - 1);
                it.spec.straddle = vec![j * cluster];
            }
            it.spec.keywords = kws;
        }
    }

    /// Assign stored names, unique per directory, and build child lists.
    fn finish_names(&mut self) {
        // Children per parent, in creation order (dirs first, as created).
        let mut per_skel: Vec<Vec<Child>> = vec![Vec::new(); self.vol.skel.len()];
        let mut per_dir: Vec<Vec<Child>> = vec![Vec::new(); self.dirs.len()];
        for (d, dir) in self.dirs.iter().enumerate() {
            if dir.group_folder {
                continue;
            }
            match dir.parent {
                Parent::Skel(s) => per_skel[s].push(Child::Dir(d)),
                Parent::Dir(p) => per_dir[p].push(Child::Dir(d)),
            }
        }
        for (i, it) in self.items.iter().enumerate() {
            match it.parent {
                Some(Parent::Skel(s)) => per_skel[s].push(Child::Item(i)),
                Some(Parent::Dir(p)) => per_dir[p].push(Child::Item(i)),
                None => {}
            }
        }
        for (s, kids) in per_skel.into_iter().enumerate() {
            let mut taken: HashSet<[u8; 11]> = self.vol.skel[s]
                .children
                .iter()
                .map(|&c| self.vol.skel[c].form.short)
                .collect();
            let mut longs: HashSet<String> = self.vol.skel[s]
                .children
                .iter()
                .map(|&c| self.vol.skel[c].name.to_lowercase())
                .collect();
            let kids = self.name_children(kids, &mut taken, &mut longs, true);
            for c in kids {
                self.skel_children.push((s, c));
            }
        }
        for (d, kids) in per_dir.into_iter().enumerate() {
            let mut taken = HashSet::new();
            let mut longs = HashSet::new();
            let kids = self.name_children(kids, &mut taken, &mut longs, false);
            self.dirs[d].children = kids;
        }
    }

    fn name_children(
        &mut self,
        kids: Vec<Child>,
        taken: &mut HashSet<[u8; 11]>,
        longs: &mut HashSet<String>,
        in_skel_leaf: bool,
    ) -> Vec<Child> {
        let mut out = Vec::with_capacity(kids.len());
        for c in kids {
            let name = match c {
                Child::Item(i) => self.items[i].name.clone(),
                Child::Dir(d) => self.dirs[d].name.clone(),
            };
            // Unique long name: append " (2)", " (3)"... before the extension.
            let mut candidate = name.clone();
            let mut n = 2;
            while longs.contains(&candidate.to_lowercase()) {
                candidate = match name.rfind('.') {
                    Some(p) if p > 0 => format!("{} ({n}){}", &name[..p], &name[p..]),
                    _ => format!("{name} ({n})"),
                };
                n += 1;
            }
            let form = names::name_form(&candidate, &|s| {
                taken.contains(s) || (in_skel_leaf && looks_like_group_alias(s))
            });
            let Some(form) = form else { continue };
            longs.insert(candidate.to_lowercase());
            taken.insert(form.short);
            match c {
                Child::Item(i) => {
                    self.items[i].name = candidate;
                    self.items[i].form = form;
                }
                Child::Dir(d) => {
                    self.dirs[d].name = candidate;
                    self.dirs[d].form = form;
                }
            }
            out.push(c);
        }
        out
    }

    /// A deleted directory keeps what the file system lets it list (on
    /// FAT, one cluster, so that recovery of its listing is exact); the
    /// children it cannot keep become residue.
    fn trim_deleted_dirs(&mut self) {
        for d in 0..self.dirs.len() {
            if !self.dirs[d].deleted {
                continue;
            }
            let kids = std::mem::take(&mut self.dirs[d].children);
            let forms: Vec<&NameForm> = kids
                .iter()
                .map(|c| match *c {
                    Child::Item(i) => &self.items[i].form,
                    Child::Dir(x) => &self.dirs[x].form,
                })
                .collect();
            let keeps = self.vol.layout.deleted_dir_keeps(&forms, self.cluster);
            let mut keep = Vec::new();
            for (c, kept) in kids.into_iter().zip(keeps) {
                if kept {
                    keep.push(c);
                } else if let Child::Item(i) = c {
                    let it = &mut self.items[i];
                    it.parent = None;
                    it.residue = true;
                    it.deleted = false;
                    it.in_deleted_dir = false;
                }
            }
            self.dirs[d].children = keep;
        }
    }

    /// Place everything in the group's clusters.
    fn layout(&mut self, reserved: u32) -> Vec<Extent> {
        let cluster = self.cluster;
        let prof = self.vol.profile.clone();
        #[derive(Clone, Copy)]
        enum Unit {
            Dir(usize, u32, u32), // dir, first dir-cluster index, clusters
            Item(usize),
            Pair(usize, usize, u32), // deleted, overwriter, offset
        }
        let mut units: Vec<Unit> = Vec::new();
        let at_start = self.vol.layout.folders_at_group_start();
        for d in 0..self.dirs.len() {
            let need = self
                .vol
                .layout
                .dir_clusters(&self.dirs, &self.items, d, cluster);
            if at_start && self.dirs[d].group_folder {
                // Its first cluster is already placed.
                if need > 1 {
                    units.push(Unit::Dir(d, 1, need - 1));
                }
            } else if need > 0 {
                units.push(Unit::Dir(d, 0, need));
            }
        }
        // Overwrite pairs: a deleted file partly reused by a later live one.
        let mut paired = vec![false; self.items.len()];
        // Overwriters take clusters (NTFS resident files have none).
        let live: Vec<usize> = (0..self.items.len())
            .filter(|&i| {
                let it = &self.items[i];
                // A compressed or sparse file's clusters are not its bytes
                // in order: never an overwriter.
                !it.deleted && !it.residue && it.clusters(cluster) > 0 && it.packing.is_none()
            })
            .collect();
        let mut live_iter = {
            let mut v = live.clone();
            for j in (1..v.len()).rev() {
                let r = self.rng.below(j as u64 + 1) as usize;
                v.swap(j, r);
            }
            v.into_iter()
        };
        for i in 0..self.items.len() {
            let it = &self.items[i];
            if it.deleted && it.clusters(cluster) >= 2 && self.rng.chance(prof.overwrite_share) {
                let Some(a) = live_iter.next() else { break };
                let m = self.rng.range(1, it.clusters(cluster) as u64 - 1) as u32;
                paired[i] = true;
                paired[a] = true;
                self.items[i].overwritten = true;
                units.push(Unit::Pair(i, a, m));
            }
        }
        // Fragmentation choice for the rest.
        let mut frag_count = 0u32;
        for (i, is_paired) in paired.iter().copied().enumerate() {
            let it = &self.items[i];
            if is_paired || it.clusters(cluster) == 0 {
                continue;
            }
            if !it.residue
                && it.clusters(cluster) >= 2
                && self.rng.chance(prof.fragmented_share)
                && it.packing.is_none()
            {
                self.items[i].fragmented = true;
                frag_count += self.items[i].clusters(cluster).min(4);
            }
            units.push(Unit::Item(i));
        }
        for j in (1..units.len()).rev() {
            let r = self.rng.below(j as u64 + 1) as usize;
            units.swap(j, r);
        }
        let span = |u: &Unit, items: &Vec<ItemPlan>| -> u64 {
            match *u {
                Unit::Dir(_, _, c) => c as u64,
                Unit::Item(i) => items[i].clusters(cluster) as u64,
                Unit::Pair(d, a, m) => (items[d].clusters(cluster) as u64)
                    .max(m as u64 + items[a].clusters(cluster) as u64),
            }
        };
        let needed: u64 = units.iter().map(|u| span(u, &self.items)).sum();
        let avail = (self.n - reserved) as u64;
        // Planning keeps content under the fill share, so this only trims in
        // pathological cases (tiny groups): drop units from the end.
        let mut needed = needed;
        let mut kept_dirs = Vec::new();
        while needed + frag_count as u64 > avail {
            match units.pop() {
                Some(u) => match u {
                    Unit::Item(i) => {
                        needed -= span(&u, &self.items);
                        self.drop_item(i);
                    }
                    Unit::Pair(d, a, _) => {
                        needed -= span(&u, &self.items);
                        self.drop_item(d);
                        self.drop_item(a);
                    }
                    // Directories are never dropped: entries point at them.
                    Unit::Dir(..) => kept_dirs.push(u),
                },
                None => break,
            }
        }
        let free = avail - needed - frag_count as u64;
        let gap_budget = free / 2;
        let gaps = (units.len() / 4 + 1) as u64;
        let mut gap_left = gap_budget;

        units.extend(kept_dirs);
        let mut extents: Vec<Extent> = Vec::new();
        for (d, dir) in self.dirs.iter().enumerate() {
            if dir.group_folder
                && let Some(r) = dir.runs.first()
            {
                extents.push(Extent {
                    start: r.start,
                    len: 1,
                    fill: Fill::Dir(d, 0),
                });
            }
        }
        let mut cursor = reserved;
        let mut pending: Vec<(usize, usize, u32, u32, u32)> = Vec::new(); // (due, item, file cluster, len, seq)
        let mut step = 0usize;
        let place_gap = |rng: &mut Rng,
                         extents: &mut Vec<Extent>,
                         cursor: &mut u32,
                         len: u32,
                         random_share: f64| {
            if len == 0 {
                return;
            }
            let fill = if rng.chance(random_share) {
                Fill::Random(rng.next_u64())
            } else {
                Fill::Zero
            };
            if fill != Fill::Zero {
                extents.push(Extent {
                    start: *cursor,
                    len,
                    fill,
                });
            }
            *cursor += len;
        };
        let mut units_iter = units.into_iter();
        loop {
            // Fragments that are due go first.
            pending.sort_by_key(|p| (p.0, p.1, p.4));
            while let Some(p) = pending.first().copied() {
                if p.0 > step {
                    break;
                }
                pending.remove(0);
                self.items[p.1].runs.push(Run {
                    start: cursor,
                    len: p.3,
                });
                extents.push(Extent {
                    start: cursor,
                    len: p.3,
                    fill: Fill::Item(p.1, p.2),
                });
                cursor += p.3;
            }
            let Some(u) = units_iter.next() else { break };
            step += 1;
            if gap_left > 0 && self.rng.below(4) == 0 {
                let g = self.rng.below((2 * gap_budget / gaps).max(1)).min(gap_left) as u32;
                gap_left -= g as u64;
                place_gap(
                    &mut self.rng,
                    &mut extents,
                    &mut cursor,
                    g,
                    prof.random_free_share,
                );
            }
            match u {
                Unit::Dir(d, first_idx, c) => {
                    self.dirs[d].runs.push(Run {
                        start: cursor,
                        len: c,
                    });
                    extents.push(Extent {
                        start: cursor,
                        len: c,
                        fill: Fill::Dir(d, first_idx),
                    });
                    cursor += c;
                }
                Unit::Item(i) => {
                    let total = self.items[i].clusters(cluster);
                    if self.items[i].fragmented {
                        let parts = (self.rng.range(2, 4) as u32).min(total);
                        let mut cuts: Vec<u32> = (1..parts)
                            .map(|_| 1 + self.rng.below(total as u64 - 1) as u32)
                            .collect();
                        cuts.sort_unstable();
                        cuts.dedup();
                        let mut bounds = vec![0];
                        bounds.extend(cuts);
                        bounds.push(total);
                        for (j, w) in bounds.windows(2).enumerate() {
                            let (a, b) = (w[0], w[1]);
                            if j == 0 {
                                self.items[i].runs.push(Run {
                                    start: cursor,
                                    len: b - a,
                                });
                                extents.push(Extent {
                                    start: cursor,
                                    len: b - a,
                                    fill: Fill::Item(i, a),
                                });
                                cursor += b - a;
                            } else {
                                let due = step + 1 + 3 * j + self.rng.below(2) as usize;
                                pending.push((due, i, a, b - a, j as u32));
                            }
                        }
                    } else {
                        self.items[i].runs.push(Run {
                            start: cursor,
                            len: total,
                        });
                        extents.push(Extent {
                            start: cursor,
                            len: total,
                            fill: Fill::Item(i, 0),
                        });
                        cursor += total;
                    }
                }
                Unit::Pair(d, a, m) => {
                    let nd = self.items[d].clusters(cluster);
                    let na = self.items[a].clusters(cluster);
                    self.items[d].runs.push(Run {
                        start: cursor,
                        len: nd,
                    });
                    self.items[a].runs.push(Run {
                        start: cursor + m,
                        len: na,
                    });
                    extents.push(Extent {
                        start: cursor,
                        len: m,
                        fill: Fill::Item(d, 0),
                    });
                    extents.push(Extent {
                        start: cursor + m,
                        len: na,
                        fill: Fill::Item(a, 0),
                    });
                    if nd > m + na {
                        extents.push(Extent {
                            start: cursor + m + na,
                            len: nd - m - na,
                            fill: Fill::Item(d, m + na),
                        });
                    }
                    cursor += nd.max(m + na);
                }
            }
        }
        // Left-over fragments: a one-cluster gap keeps each apart from the
        // previous fragment of the same file.
        pending.sort_by_key(|p| (p.1, p.4));
        for p in pending {
            cursor += 1;
            self.items[p.1].runs.push(Run {
                start: cursor,
                len: p.3,
            });
            extents.push(Extent {
                start: cursor,
                len: p.3,
                fill: Fill::Item(p.1, p.2),
            });
            cursor += p.3;
        }
        // Trailing free space: areas of up to 2 MiB (old files' room), some
        // random. Bounded so that random free bytes stay near their share:
        // one random area of half a group's free space made a small disk's
        // E01 ratio jump between neighbouring fills.
        let end = self.n;
        let most = ((2u64 << 20) / cluster).max(1);
        while cursor < end {
            let half = ((end - cursor) as u64 / 2).min(most);
            let len = (self.rng.below(half + 1) as u32 + 1).min(end - cursor);
            place_gap(
                &mut self.rng,
                &mut extents,
                &mut cursor,
                len,
                prof.random_free_share,
            );
        }
        // Runs in file order (fragments were appended in placement order,
        // which is file order per file) and the fragmented flag from facts.
        for it in &mut self.items {
            let mut merged: Vec<Run> = Vec::new();
            for r in it.runs.drain(..) {
                match merged.last_mut() {
                    Some(last) if last.start + last.len == r.start => last.len += r.len,
                    _ => merged.push(r),
                }
            }
            it.fragmented = merged.len() > 1;
            it.runs = merged;
        }
        extents.sort_by_key(|e| e.start);
        extents
    }

    fn drop_item(&mut self, i: usize) {
        // Dropped items stay in the list (indices are stable) but own no
        // clusters and no entry: turn them into empty residue.
        let it = &mut self.items[i];
        it.spec.size = 0;
        it.parent = None;
        it.residue = true;
        it.deleted = false;
        it.spec.keywords.clear();
        it.spec.straddle.clear();
        self.skel_children.retain(|(_, c)| *c != Child::Item(i));
        for d in &mut self.dirs {
            d.children.retain(|c| *c != Child::Item(i));
        }
    }
}

impl GroupPlan {
    /// Absolute first cluster of a run list (0 when empty).
    pub fn first_cluster(&self, runs: &[Run]) -> u32 {
        runs.first().map(|r| self.base + r.start).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::Pool;
    use crate::geometry::Geometry;

    fn volume(size: u64, seed: u64, profile: &str) -> Volume {
        let pool = Pool::build(seed).expect("pool");
        let geo = Geometry::plan(size, None, None).expect("geometry");
        let layout = crate::layouts::for_geometry(&geo);
        Volume::new(
            geo,
            seed,
            Profile::by_name(profile).expect("profile"),
            &pool,
            layout,
        )
        .expect("volume")
    }

    /// Structural invariants of a group plan that the writer and the FAT
    /// rely on.
    fn check(vol: &Volume, plan: &GroupPlan) {
        let cs = vol.geo.cluster_bytes();
        let mut owner = vec![None; plan.n as usize];
        let mut last_end = 0;
        for e in &plan.extents {
            assert!(e.start >= last_end, "extents overlap or are unsorted");
            assert!(e.start + e.len <= plan.n, "extent past the group");
            last_end = e.start + e.len;
            for c in e.start..e.start + e.len {
                owner[c as usize] = Some(e.fill);
            }
        }
        for (i, it) in plan.items.iter().enumerate() {
            if it.spec.size == 0 {
                assert!(it.runs.is_empty());
                continue;
            }
            let total: u32 = it.runs.iter().map(|r| r.len).sum();
            assert_eq!(total, it.clusters(cs), "item {i} runs");
            // Live files and intact deleted files own every cluster of their
            // runs; overwritten ones lose some to the overwriter.
            if !it.overwritten {
                let mut idx = 0u32;
                for r in &it.runs {
                    for c in r.start..r.start + r.len {
                        match owner[c as usize] {
                            Some(Fill::Item(j, _)) => assert_eq!(j, i, "cluster {c} of item {i}"),
                            other => panic!("cluster {c} of item {i} holds {other:?}"),
                        }
                        idx += 1;
                    }
                }
                assert_eq!(idx, total);
            }
            assert_eq!(it.fragmented, it.runs.len() > 1);
        }
        for d in &plan.dirs {
            let clusters: u32 = d.runs.iter().map(|r| r.len).sum();
            assert!(clusters >= 1);
            if d.deleted {
                assert_eq!(clusters, 1);
            }
        }
        // The FAT chains walk exactly each live file's runs.
        let fat = crate::fat::layout::fat_entries(plan, vol.geo.fat.eoc());
        for it in plan
            .items
            .iter()
            .filter(|i| !i.deleted && !i.residue && i.spec.size > 0)
        {
            let mut c = plan.base + it.runs[0].start;
            let mut n = 1;
            loop {
                let v = fat[(c - plan.base) as usize];
                if v == vol.geo.fat.eoc() {
                    break;
                }
                c = v;
                n += 1;
            }
            assert_eq!(n, it.clusters(cs));
        }
        // Deleted entries never point at live clusters.
        for it in plan
            .items
            .iter()
            .filter(|i| i.deleted && i.intact() && i.spec.size > 0)
        {
            for r in &it.runs {
                for c in r.start..r.start + r.len {
                    assert_eq!(fat[c as usize], 0, "intact deleted file on a used cluster");
                }
            }
        }
    }

    #[test]
    fn plans_hold_their_invariants() {
        for (size, seed, profile) in [
            (32u64 << 20, 1u64, "workstation"),
            (48 << 20, 2, "suspect"),
            (300 << 20, 3, "workstation"),
            (300 << 20, 4, "suspect"),
        ] {
            let vol = volume(size, seed, profile);
            for k in 0..vol.groups {
                let plan = vol.plan_group(k);
                check(&vol, &plan);
                // Planning is a pure function of (seed, k).
                let again = vol.plan_group(k);
                assert_eq!(plan.extents, again.extents);
            }
        }
    }

    #[test]
    fn huge_disks_plan_with_gpt_and_bounded_groups() {
        let vol = volume(3 << 40, 5, "workstation");
        assert_eq!(vol.geo.table, crate::geometry::TableKind::Gpt);
        assert!(vol.groups as u64 <= MAX_GROUPS);
        // Skeleton directories stay within FAT's 65,536-entry limit.
        for (i, d) in vol.skel.iter().enumerate() {
            assert!(
                d.clusters as u64 * vol.geo.cluster_bytes() / 32 <= 65_536,
                "skeleton dir {i}"
            );
        }
        let last = vol.groups - 1;
        let (base, n) = vol.group_range(last);
        assert_eq!(base as u64 + n as u64, vol.geo.clusters as u64 + 2);
        check(&vol, &vol.plan_group(last));
        check(&vol, &vol.plan_group(1234));
    }
}
