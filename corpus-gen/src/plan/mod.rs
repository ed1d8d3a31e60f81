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

mod draw;
mod place;

use draw::GroupBuilder;
/// Preferred batch size (the disk stretch one batch of content is drawn
/// for).
const BATCH_BYTES: u64 = 128 << 20;
/// Most batches a volume is split into: their folders are numbered with
/// four hex digits in their short names (and FAT's groups are batches).
const MAX_GROUPS: u64 = 30_000;
/// Largest single file.
const MAX_FILE: u64 = 24 << 20;
/// The logical plan's allocation unit: a file is charged its size rounded
/// up to it, whatever the file system's cluster (NTFS's default cluster;
/// a layout with larger clusters leaves less free space, one with smaller
/// more).
pub const UNIT: u64 = 4096;

/// The smallest cluster of any layout (a sector): where the logical plan
/// puts a planted straddle before placement moves it onto a cluster.
const SECTOR: u64 = 512;

/// Bytes a `size`-byte file is charged in the logical plan.
fn on_disk(size: u64) -> u64 {
    size.div_ceil(UNIT) * UNIT
}
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
    /// `Windows/System32` (system disks; known files).
    System,
    /// `Windows/WinSxS`, the component store updates grow (system disks;
    /// known files).
    WinSxS,
    /// A Linux server's `/etc` (configuration files).
    Config,
    /// A Linux server's application data, `/var/lib/<app>` (databases).
    Data,
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

/// The same on a Linux server ([`Profile::linux`]): documents, pictures,
/// downloads, mail, the web root and the logs.
const LINUX_GROUP_LEAVES: &[(Leaf, &[&str])] = &[
    (
        Leaf::Documents,
        &["Projects", "Reports", "Clients", "Archive", "Notes"],
    ),
    (Leaf::Pictures, &["Camera", "Scans"]),
    (Leaf::Downloads, &["Saved", "Setup"]),
    // Maildir++ folders (`.NAME`, each with `cur`, `new` and `tmp`).
    (Leaf::Mail, &[".Archive", ".Lists", ".Sent", ".Work"]),
    (Leaf::Cache, &["site", "static"]),
    (
        Leaf::Browser,
        &["nginx", "apache2", "mysql", "postgresql", "apt"],
    ),
    (Leaf::Data, &["data", "backup"]),
];

/// The same on a stick ([`Profile::stick`]): documents, pictures, archives
/// and music.
const STICK_GROUP_LEAVES: &[(Leaf, &[&str])] = NTFS_GROUP_LEAVES.split_at(4).0;

/// The same on system disks ([`Profile::system_disk`]), which add a
/// component folder per update (batch) under `Windows/WinSxS` (the last
/// entry; other disks use the others).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// A link, not a file of its own (file systems whose layout has
    /// [`FsLayout::links`]): no content drawn; clusters only for a
    /// symbolic link whose target the inode cannot hold.
    pub link: Option<Link>,
    /// A symbolic link's target text, set once names are final (its
    /// `spec.size` when it is stored in clusters, else 0).
    pub link_text: Option<String>,
}

/// What a link item names. Links are drawn after their batch's files, to
/// a live file of the same group (a lower item index) in the link's own
/// folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// Another name of item `.0`: its inode, with one more link.
    Hard(usize),
    /// A symbolic link whose target is item `.0`'s stored name (a
    /// sibling, so a relative target; short enough for ext4 to keep it in
    /// the inode: a fast symlink).
    Symbolic(usize),
    /// A symbolic link whose target is item `.0`'s absolute path (`/`
    /// and its path from the root): often longer than an inode holds, so
    /// stored in a block (a slow symlink).
    SymbolicAbsolute(usize),
}

impl Link {
    /// The item the link names.
    pub fn target(self) -> usize {
        match self {
            Link::Hard(t) | Link::Symbolic(t) | Link::SymbolicAbsolute(t) => t,
        }
    }
}

/// How a file's data sits in its clusters when not byte for byte: NTFS's
/// compression and sparse files work in 64 KiB units (16 clusters), as
/// Windows does; APFS's compression keeps a resource fork instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packing {
    /// LZNT1-compressed: the clusters each unit occupies on disk (see
    /// the NTFS layout's LZNT1 store).
    Compressed(Vec<u8>),
    /// Sparse: per unit, whether it holds data; a hole reads as zeros and
    /// has no clusters.
    Sparse(Vec<bool>),
    /// APFS decmpfs: the clusters hold the file's resource fork of `fork`
    /// bytes (zlib blocks; see the APFS writer's `decmpfs`).
    Decmpfs {
        /// Bytes of the resource fork.
        fork: u64,
    },
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
            Packing::Decmpfs { fork } => fork.div_ceil(cluster) as u32,
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
            Packing::Compressed(_) | Packing::Decmpfs { .. } => Vec::new(),
            Packing::Sparse(data) => data
                .iter()
                .enumerate()
                .filter(|(_, d)| !**d)
                .map(|(u, _)| (u as u64 * unit, ((u as u64 + 1) * unit).min(size)))
                .collect(),
        }
    }
}

/// Make a `share` of the eligible files sparse (disk images and
/// downloads in progress: `Container` files of four units or more, live,
/// not planted or duplicated): their first and last `unit`-byte units
/// hold data, a random share of the others are holes. NTFS and ext4 both
/// draw them this way, each from its own stream.
pub fn choose_sparse(rng: &mut Rng, items: &mut [ItemPlan], share: f64, unit: u64) {
    for it in items.iter_mut() {
        let eligible = it.spec.kind == Kind::Container
            && it.packing.is_none()
            && !it.deleted
            && !it.residue
            && it.dup_group.is_none()
            && !it.known
            && !it.notable
            && it.spec.keywords.is_empty()
            && it.spec.size >= 4 * unit;
        if !eligible || !rng.chance(share) {
            continue;
        }
        let units = it.spec.size.div_ceil(unit) as usize;
        let missing = 0.2 + 0.6 * rng.unit();
        let data: Vec<bool> = (0..units)
            .map(|u| u == 0 || u + 1 == units || !rng.chance(missing))
            .collect();
        if data.iter().all(|d| *d) {
            continue;
        }
        it.packing = Some(Packing::Sparse(data));
    }
}

impl ItemPlan {
    /// A live file named `name` (stored name unset) under `parent`, drawn
    /// from `spec`, with nothing else decided yet.
    pub fn new(name: String, parent: Option<Parent>, leaf: Leaf, spec: Spec, times: Times) -> Self {
        ItemPlan {
            name,
            form: NameForm {
                short: [b' '; 11],
                long: None,
                nt_flags: 0,
            },
            parent,
            leaf,
            spec,
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
            slack_random: false,
            resident: false,
            packing: None,
            link: None,
            link_text: None,
        }
    }

    /// Number of clusters the content needs.
    pub fn clusters(&self, cluster: u64) -> u32 {
        if (self.resident && !self.residue) || (self.link.is_some() && self.spec.size == 0) {
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
        self.link.is_none()
            && !self.residue
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

/// Where a file system's head bytes go, in disk order (the image sink,
/// which tees them to an E01 too).
pub trait Out {
    /// Append bytes.
    fn put(&mut self, b: &[u8]) -> Result<(), CorpusError>;
    /// Append `n` zero bytes.
    fn put_zeros(&mut self, n: u64) -> Result<(), CorpusError>;
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
    /// The name the file system stores for a drawn `name` it cannot
    /// store as it is (exFAT: forbidden characters replaced, as Windows
    /// renames them); `None` keeps it.
    fn storable_name(&self, _name: &str) -> Option<String> {
        None
    }
    /// Whether the file system stores hard and symbolic links, so that a
    /// profile that has them ([`crate::profile::Profile::linux`]) draws
    /// them. Only a writer that writes [`ItemPlan::link`] may say so.
    fn links(&self) -> bool {
        false
    }
    /// Longest symbolic-link target kept in the inode itself (ext4: 59
    /// bytes); a longer one takes clusters.
    fn inline_link_max(&self) -> u64 {
        0
    }
}

/// Which of a deleted directory's `children` (in order) fit `cap`
/// directory entries when each takes `entries(form)`: a directory of
/// fixed-size entries keeps those in its one cluster.
pub fn keep_in_order(
    children: &[&NameForm],
    cap: usize,
    entries: impl Fn(&NameForm) -> usize,
) -> Vec<bool> {
    let mut used = 0;
    children
        .iter()
        .map(|f| {
            let s = entries(f);
            let fits = used + s <= cap;
            if fits {
                used += s;
            }
            fits
        })
        .collect()
}

/// Clusters group directory `d` needs when it holds `fixed` entries of
/// its own plus `entries(form)` per child, each `entry` bytes (at least
/// one cluster; a deleted one keeps one).
pub fn dir_clusters_for(
    dirs: &[DirPlan],
    items: &[ItemPlan],
    d: usize,
    cluster: u64,
    fixed: usize,
    entries: impl Fn(&NameForm) -> usize,
) -> u32 {
    if dirs[d].deleted {
        return 1;
    }
    let n = fixed
        + dirs[d]
            .children
            .iter()
            .map(|c| match *c {
                Child::Item(i) => entries(&items[i].form),
                Child::Dir(x) => entries(&dirs[x].form),
            })
            .sum::<usize>();
    (n as u64 * 32).div_ceil(cluster).max(1) as u32
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
    /// A Windows system disk, with its `Windows` folder (the profile's
    /// [`Profile::system_disk`], whatever the file system).
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
        // Sized from the disk, not the file system's data area, so that a
        // batch is the same on every file system (whole MiB: a multiple of
        // any cluster).
        let batch_bytes = BATCH_BYTES.max(
            geo.disk_bytes
                .div_ceil(MAX_GROUPS)
                .next_multiple_of(1 << 20),
        );
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
        let mut tree = if profile.mac {
            // A Mac's home folder: mail and Safari under Library.
            vec![
                (String::new(), 0, None),                            // 0 root
                ("Users".into(), 0, None),                           // 1
                (user.clone(), 1, None),                             // 2
                ("Desktop".into(), 2, Some(Leaf::Desktop)),          // 3
                ("Documents".into(), 2, Some(Leaf::Documents)),      // 4
                ("Downloads".into(), 2, Some(Leaf::Downloads)),      // 5
                ("Pictures".into(), 2, Some(Leaf::Pictures)),        // 6
                ("Music".into(), 2, Some(Leaf::Music)),              // 7
                ("Library".into(), 2, None),                         // 8
                ("Mail".into(), 8, Some(Leaf::Mail)),                // 9
                ("Safari".into(), 8, Some(Leaf::Browser)),           // 10
                ("Caches".into(), 8, None),                          // 11
                ("com.apple.Safari".into(), 11, Some(Leaf::Cache)),  // 12
                ("Applications".into(), 0, None),                    // 13
                (format!("{vendor}.app"), 13, Some(Leaf::Programs)), // 14
            ]
        } else if profile.stick {
            // A stick's own tree; `Transfer` holds the loose files.
            vec![
                (String::new(), 0, None),                       // 0 root
                ("DCIM".into(), 0, None),                       // 1
                ("100MEDIA".into(), 1, Some(Leaf::Pictures)),   // 2
                ("Documents".into(), 0, Some(Leaf::Documents)), // 3
                ("Archives".into(), 0, Some(Leaf::Downloads)),  // 4
                ("Music".into(), 0, Some(Leaf::Music)),         // 5
                ("Transfer".into(), 0, Some(Leaf::Desktop)),    // 6
            ]
        } else if profile.linux {
            // A server's tree: the user's home (loose files in it), mail
            // in Maildir, the web root, logs and databases under `var`,
            // the package cache (the skeleton's known files).
            vec![
                (String::new(), 0, None),                            // 0 root
                ("etc".into(), 0, Some(Leaf::Config)),               // 1
                ("home".into(), 0, None),                            // 2
                (user.clone(), 2, Some(Leaf::Desktop)),              // 3
                ("Documents".into(), 3, Some(Leaf::Documents)),      // 4
                ("Pictures".into(), 3, Some(Leaf::Pictures)),        // 5
                ("Downloads".into(), 3, Some(Leaf::Downloads)),      // 6
                ("Maildir".into(), 3, Some(Leaf::Mail)),             // 7
                ("cur".into(), 7, None),                             // 8
                ("var".into(), 0, None),                             // 9
                ("log".into(), 9, Some(Leaf::Browser)),              // 10
                ("www".into(), 9, None),                             // 11
                ("html".into(), 11, Some(Leaf::Cache)),              // 12
                ("cache".into(), 9, None),                           // 13
                ("apt".into(), 13, None),                            // 14
                ("archives".into(), 14, Some(Leaf::Programs)),       // 15
                ("lib".into(), 9, None),                             // 16
                (vendor.to_ascii_lowercase(), 16, Some(Leaf::Data)), // 17
                // The inbox's other two Maildir folders (each batch's
                // mail folder has its own three).
                ("new".into(), 7, None), // 18
                ("tmp".into(), 7, None), // 19
            ]
        } else {
            tree
        };
        let system_disk = profile.system_disk && !profile.stick && !profile.mac && !profile.linux;
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
        if self.profile.linux {
            LINUX_GROUP_LEAVES
        } else if self.profile.stick {
            STICK_GROUP_LEAVES
        } else if self.system_disk {
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

    /// Batches the disk's size makes, whatever its file system holds:
    /// what their time windows divide the years in use by.
    fn nominal_batches(&self) -> u64 {
        let batch = self.batch_clusters as u64 * self.geo.cluster_bytes();
        self.geo.disk_bytes.div_ceil(batch).max(1)
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
        let span = (e - s) / self.nominal_batches();
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

    /// The skeleton folders' (first cluster, clusters), by first cluster:
    /// they tile the clusters from 2 to [`Volume::groups_start`].
    pub fn skeleton_runs(&self) -> Vec<(u32, u32)> {
        let mut skel: Vec<(u32, u32)> = self
            .skel
            .iter()
            .filter(|d| d.clusters > 0)
            .map(|d| (d.first, d.clusters))
            .collect();
        skel.sort_unstable();
        skel
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

/// Kinds each leaf holds, with weights (a Linux server's where `linux`).
fn leaf_kinds(leaf: Leaf, linux: bool) -> &'static [(Kind, f64)] {
    match (leaf, linux) {
        // `/var/log`: current and rotated logs, the older ones gzipped.
        (Leaf::Browser, true) => return &[(Kind::Log, 3.0), (Kind::Gzip, 2.0)],
        // Maildir holds one message a file.
        (Leaf::Mail, true) => return &[(Kind::Eml, 1.0)],
        // No Windows installers on a server.
        (Leaf::Downloads, true) => {
            return &[
                (Kind::Zip, 3.0),
                (Kind::Pdf, 2.0),
                (Kind::Gzip, 1.0),
                (Kind::Jpeg, 1.0),
                (Kind::Png, 1.0),
                (Kind::Container, 0.6),
                (Kind::Html, 1.0),
            ];
        }
        _ => {}
    }
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
        Leaf::Programs if linux => &[(Kind::Deb, 1.0)],
        Leaf::Programs => &[(Kind::Exe, 4.0), (Kind::Text, 1.0), (Kind::Log, 1.0)],
        Leaf::System => &[(Kind::Exe, 6.0), (Kind::Text, 1.0), (Kind::Log, 0.3)],
        Leaf::WinSxS => &[(Kind::Exe, 5.0), (Kind::Text, 2.0)],
        Leaf::Config => &[(Kind::Text, 1.0)],
        Leaf::Data => &[(Kind::Sqlite, 1.0)],
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

/// How often a new file is the operating system's on a system disk
/// (added to [`LEAF_WEIGHTS`]): a Windows volume holds more system files
/// than user files, most of them small.
const NTFS_SYSTEM_WEIGHTS: &[(Leaf, f64)] = &[(Leaf::System, 60.0), (Leaf::WinSxS, 60.0)];

/// Size range of system files (DLLs, drivers, manifests, INFs).
const SYSTEM_SIZES: (u64, u64) = (4 << 10, 600 << 10);

/// How often a new file lands in each leaf of a stick: mostly photos and
/// documents, archives, some music (loose files go to documents).
const STICK_WEIGHTS: &[(Leaf, f64)] = &[
    (Leaf::Documents, 30.0),
    (Leaf::Pictures, 45.0),
    (Leaf::Downloads, 15.0),
    (Leaf::Music, 6.0),
    (Leaf::Desktop, 4.0),
];

/// How often a new file lands in each leaf of a Linux server: documents,
/// mail, the web root, logs and application databases (loose files in the
/// home folder).
const LINUX_WEIGHTS: &[(Leaf, f64)] = &[
    (Leaf::Desktop, 4.0),
    (Leaf::Documents, 24.0),
    (Leaf::Downloads, 6.0),
    (Leaf::Pictures, 8.0),
    (Leaf::Mail, 20.0),
    (Leaf::Browser, 10.0),
    (Leaf::Data, 2.0),
    (Leaf::Cache, 26.0),
];

/// The user leaves' weights (a stick's when `stick`, a server's when
/// `linux`), the mail stores' set to give `mail_share` of the picks when
/// asked.
fn leaf_weights(mail_share: Option<f64>, stick: bool, linux: bool) -> Vec<(Leaf, f64)> {
    if stick {
        return STICK_WEIGHTS.to_vec();
    }
    let mut w = if linux {
        LINUX_WEIGHTS.to_vec()
    } else {
        LEAF_WEIGHTS.to_vec()
    };
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
        Kind::Gzip => (2 << 10, 1 << 20),
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
        Kind::Deb => (16 << 10, 8 << 20),
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

/// Logs rsyslog and the services of a server write in `/var/log`.
const LINUX_LOGS: &[&str] = &[
    "syslog",
    "auth.log",
    "kern.log",
    "daemon.log",
    "mail.log",
    "messages",
    "access.log",
    "error.log",
    "dpkg.log",
    "fail2ban.log",
];

/// Files of a server's `/etc`, as many distributions install them.
pub const LINUX_CONFIGS: &[&str] = &[
    "hostname",
    "hosts",
    "fstab",
    "passwd",
    "group",
    "resolv.conf",
    "crontab",
    "sudoers",
    "sysctl.conf",
    "logrotate.conf",
    "rsyslog.conf",
    "nsswitch.conf",
    "login.defs",
    "adduser.conf",
    "ld.so.conf",
    "environment",
    "timezone",
    "motd",
];

/// The name a Linux server gives a new file of `kind` in `leaf` (`None`:
/// the name [`file_name`] gives), dated `t`, on the disk made from `seed`
/// (its host name): rotated logs (`syslog.1`, `auth.log.3.gz`), Maildir
/// messages, web pages and images, databases.
fn linux_name(rng: &mut Rng, leaf: Leaf, kind: Kind, t: u64, seed: u64) -> Option<String> {
    let word = |rng: &mut Rng| words::zipf_word(rng).to_ascii_lowercase();
    Some(match (leaf, kind) {
        (Leaf::Browser, Kind::Gzip) => {
            format!("{}.{}.gz", rng.pick(LINUX_LOGS), rng.range(2, 10))
        }
        (Leaf::Browser, _) => match rng.below(3) {
            0 => (*rng.pick(LINUX_LOGS)).to_string(),
            _ => format!("{}.1", rng.pick(LINUX_LOGS)),
        },
        // Maildir's unique name: time, delivery and process, the server's
        // host name (one per disk), flags.
        (Leaf::Mail, _) => format!(
            "{}.M{}P{}.{}:2,{}",
            t + crate::ext4::TO_1980,
            rng.below(1_000_000),
            rng.range(300, 65_000),
            word(&mut Rng::derive(seed, &[0x484F_5354])),
            rng.pick(&["S", "RS", "FS", ""])
        ),
        (Leaf::Cache, Kind::Html) => format!("{}.html", word(rng)),
        (Leaf::Cache, _) => format!("{}-{}.{}", word(rng), rng.range(1, 99), kind.ext()),
        (Leaf::Data, _) => format!("{}.{}", word(rng), rng.pick(&["db", "sqlite"])),
        (Leaf::Config, _) => (*rng.pick(LINUX_CONFIGS)).to_string(),
        (_, Kind::Gzip) => format!("{}.log.gz", word(rng)),
        _ => return None,
    })
}

/// The name a Mac gives a file `file_name` named: Safari's history is
/// `History.db`, Mail's messages are `.emlx` files (the content stays an
/// RFC 822 message: Apple's byte-count line and property list are not
/// written).
fn mac_name(name: String, leaf: Leaf, kind: Kind) -> String {
    match (leaf, kind) {
        (Leaf::Browser, Kind::Sqlite) => "History.db".into(),
        (_, Kind::Eml) => match name.strip_suffix(".eml") {
            Some(stem) => format!("{stem}.emlx"),
            None => name,
        },
        _ => name,
    }
}

impl GroupPlan {
    /// Absolute first cluster of a run list (0 when empty).
    pub fn first_cluster(&self, runs: &[Run]) -> u32 {
        runs.first().map(|r| self.base + r.start).unwrap_or(0)
    }

    /// Which of the group's clusters live folders and the files `holds`
    /// accepts occupy (a file system adds its own records).
    pub fn used_by(&self, holds: impl Fn(&ItemPlan) -> bool) -> Vec<bool> {
        let mut used = vec![false; self.n as usize];
        let mut mark = |runs: &[Run]| {
            for r in runs {
                for c in r.start..r.start + r.len {
                    if let Some(u) = used.get_mut(c as usize) {
                        *u = true;
                    }
                }
            }
        };
        for d in &self.dirs {
            if !d.deleted {
                mark(&d.runs);
            }
        }
        for it in &self.items {
            if holds(it) {
                mark(&it.runs);
            }
        }
        used
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

    /// What the logical plan says of a file: everything but where and
    /// how the file system stores it (clusters, short names, residence,
    /// packing, the straddle's cluster, and the placement's fragmentation
    /// and overwrite choices).
    fn logical(it: &ItemPlan) -> String {
        format!(
            "{} {:?} {:?} {} {} {} {:?} {:?} {:?} {} {} {} {} {} {:?} {}",
            it.name,
            it.leaf,
            it.spec.kind,
            it.spec.size,
            it.spec.key,
            it.spec.variant,
            it.spec.keywords,
            it.times.created.secs,
            it.times.modified.secs,
            it.deleted,
            it.residue,
            it.in_deleted_dir,
            it.known,
            it.notable,
            it.dup_group,
            it.slack_random,
        )
    }

    /// What the logical plan says of a folder.
    fn folder(d: &DirPlan) -> String {
        format!(
            "{} {:?} {} {}",
            d.name, d.leaf, d.deleted, d.times.created.secs
        )
    }

    #[test]
    fn the_logical_plan_is_the_same_on_every_file_system() {
        // One GiB: FAT16 (32 KiB clusters), FAT32 (4 KiB), NTFS (4 KiB
        // and its own records), exFAT (32 KiB, entry sets) and APFS (4 KiB,
        // each group's leaf nodes) hold the same batches.
        let size = 1 << 30;
        let seed = 11;
        let pool = Pool::build(seed).expect("pool");
        let geos = [
            Geometry::plan(size, None, Some(crate::fat::FatType::Fat16)).expect("fat16"),
            Geometry::plan(size, None, Some(crate::fat::FatType::Fat32)).expect("fat32"),
            Geometry::plan_ntfs(size, None).expect("ntfs"),
            Geometry::plan_exfat(size, None).expect("exfat"),
        ];
        let mut plans: Vec<Vec<Vec<String>>> = Vec::new();
        for geo in geos {
            let layout = crate::layouts::for_geometry(&geo);
            let profile = Profile::by_name("workstation").expect("profile");
            let vol = Volume::new(geo, seed, profile, &pool, layout).expect("volume");
            // The last group's batches are drawn for the room it has.
            let full = (0..vol.groups - 1)
                .map(|k| {
                    assert_eq!(vol.group_batches(k), k..k + 1, "one batch a group at 1 GiB");
                    let plan = vol.plan_group(k);
                    let mut v: Vec<String> = plan.items.iter().map(logical).collect();
                    v.extend(plan.dirs.iter().map(|d| format!("dir {}", folder(d))));
                    v
                })
                .collect();
            plans.push(full);
        }
        let n = plans.iter().map(|p| p.len()).min().unwrap_or(0);
        assert!(n >= 6, "{n} full groups");
        for k in 0..n {
            assert!(
                plans[0][k].len() > 100,
                "group {k}: {} items",
                plans[0][k].len()
            );
            for (fs, p) in ["FAT32", "NTFS", "exFAT"].iter().zip(&plans[1..]) {
                assert_eq!(plans[0][k], p[k], "group {k}: FAT16 against {fs}");
            }
        }
        // APFS holds the same batches; a deleted folder keeps no listing
        // there, so what was in one is residue rather than a deleted entry.
        let geo = Geometry::plan_apfs(size, None).expect("apfs");
        let layout = crate::layouts::for_geometry(&geo);
        let profile = Profile::by_name("workstation").expect("profile");
        let apfs = Volume::new(geo, seed, profile, &pool, layout).expect("volume");
        let neutral = |plan: &GroupPlan| -> Vec<String> {
            let mut v: Vec<String> = plan
                .items
                .iter()
                .map(|it| {
                    // Gone (deleted or residue) either way.
                    let mut it = it.clone();
                    it.deleted |= it.residue;
                    it.residue = false;
                    it.in_deleted_dir = false;
                    logical(&it)
                })
                .collect();
            v.extend(plan.dirs.iter().map(|d| format!("dir {}", folder(d))));
            v
        };
        let fat16 = {
            let geo = Geometry::plan(size, None, Some(crate::fat::FatType::Fat16)).expect("fat16");
            let layout = crate::layouts::for_geometry(&geo);
            let profile = Profile::by_name("workstation").expect("profile");
            Volume::new(geo, seed, profile, &pool, layout).expect("volume")
        };
        let m = n.min(apfs.groups as usize - 1);
        assert!(m >= 6, "{m} full APFS groups");
        for k in 0..m as u32 {
            let (a, b) = (neutral(&fat16.plan_group(k)), neutral(&apfs.plan_group(k)));
            let first = a.iter().zip(&b).position(|(x, y)| x != y);
            assert!(
                a == b,
                "group {k}: FAT16 against APFS: {} and {} entries, first difference {:?}",
                a.len(),
                b.len(),
                first.map(|i| (&a[i], &b[i]))
            );
        }
        // At 16 GiB an NTFS group holds two batches, a FAT group one: NTFS
        // group g holds what FAT groups 2g and 2g + 1 hold, in order.
        let size = 16 << 30;
        let mut vols = Vec::new();
        for geo in [
            Geometry::plan(size, None, Some(crate::fat::FatType::Fat32)).expect("fat32"),
            Geometry::plan_ntfs(size, None).expect("ntfs"),
        ] {
            let layout = crate::layouts::for_geometry(&geo);
            let profile = Profile::by_name("workstation").expect("profile");
            vols.push(Volume::new(geo, seed, profile, &pool, layout).expect("volume"));
        }
        // (items, folders) of a group.
        let group = |vol: &Volume, k: u32| -> (Vec<String>, Vec<String>) {
            let plan = vol.plan_group(k);
            let items = plan.items.iter().map(logical).collect();
            let dirs = plan.dirs.iter().map(folder).collect();
            (items, dirs)
        };
        let (fat, ntfs) = (&vols[0], &vols[1]);
        assert_eq!(ntfs.group_batches(1), 2..4, "two batches an NTFS group");
        for g in [0u32, 1, 7, 20] {
            assert!(2 * g + 1 < fat.groups - 1 && g < ntfs.groups - 1);
            let (mut items, mut dirs) = group(fat, 2 * g);
            let (more_items, more_dirs) = group(fat, 2 * g + 1);
            items.extend(more_items);
            dirs.extend(more_dirs);
            assert_eq!(
                (items, dirs),
                group(ntfs, g),
                "NTFS group {g} against FAT groups {} and {}",
                2 * g,
                2 * g + 1
            );
        }
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

    /// Small files at a high fill on 16 KiB clusters take more clusters
    /// than the plan's 4 KiB units: a group cannot hold them all, a few are
    /// dropped (empty residue, which the generator counts as
    /// `dropped_files`), and the placed group still holds its invariants.
    #[test]
    fn a_plan_that_does_not_fit_its_clusters_drops_files_and_stays_sound() {
        let pool = Pool::build(4).expect("pool");
        let geo = Geometry::plan(1 << 30, None, Some(crate::fat::FatType::Fat16)).expect("fat16");
        assert!(geo.cluster_bytes() >= 16 << 10, "{}", geo.cluster_bytes());
        let layout = crate::layouts::for_geometry(&geo);
        let mut profile = Profile::by_name("workstation").expect("profile");
        profile.fill = 0.95;
        profile.size_scale = 0.1;
        let vol = Volume::new(geo, 4, profile.clone(), &pool, layout).expect("volume");
        let plan = vol.plan_group(1);
        check(&vol, &plan);
        let dropped = |p: &GroupPlan| {
            p.items
                .iter()
                .filter(|i| i.residue && i.spec.size == 0)
                .count()
        };
        assert!(dropped(&plan) > 0, "nothing dropped");
        // With 4 KiB clusters the same plan fits.
        let geo = Geometry::plan(1 << 30, None, Some(crate::fat::FatType::Fat32)).expect("fat32");
        let layout = crate::layouts::for_geometry(&geo);
        let vol = Volume::new(geo, 4, profile, &pool, layout).expect("volume");
        assert_eq!(dropped(&vol.plan_group(1)), 0);
    }

    #[test]
    fn huge_disks_plan_with_gpt_and_bounded_groups() {
        // A system disk's component store has a long-named folder per
        // batch: past FAT's 65,536 entries a folder, refused by name.
        let pool = Pool::build(5).expect("pool");
        let geo = Geometry::plan(3 << 40, None, None).expect("geometry");
        let layout = crate::layouts::for_geometry(&geo);
        let profile = Profile::by_name("workstation").expect("profile");
        let err = Volume::new(geo, 5, profile, &pool, layout).expect_err("too many entries");
        assert!(err.to_string().contains("/Windows/WinSxS"), "{err}");
        assert!(err.to_string().contains("65,536"), "{err}");
        let vol = volume(3 << 40, 5, "suspect");
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
