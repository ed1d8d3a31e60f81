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
//! Group `k ≥ 1` owns one folder in each group leaf of the skeleton (e.g.
//! `Documents/Reports 0007`), whose name, short name, times and first
//! cluster follow from `k` alone, so the skeleton directories listing
//! thousands of groups are written without planning those groups. Group 0
//! puts its files straight into the skeleton folders, so a small corpus
//! (one group) looks like an ordinary user's disk.

use crate::content::{Kind, Pool, Spec};
use crate::error::CorpusError;
use crate::fat::{self, NameForm, Record, Stamp, Times, attr};
use crate::geometry::Geometry;
use crate::profile::Profile;
use crate::rng::{Rng, derive_key};
use crate::words;
use std::collections::HashSet;

/// Preferred allocation-group size.
const GROUP_BYTES: u64 = 128 << 20;
/// Most groups a volume is split into: group folders are numbered with four
/// hex digits in their short names.
const MAX_GROUPS: u64 = 30_000;
/// Largest single file.
const MAX_FILE: u64 = 24 << 20;
/// Group-0 entries allowed directly in one skeleton folder (bounds the
/// skeleton region, which is sized before group 0 is planned).
const LEAF_CAP: usize = 160;
/// Slots one group-0 entry may take (names are kept under 39 characters).
const MAX_SLOTS: usize = 4;
/// Keywords a group may plant (token indexes are `k * KW_PER_GROUP + i`).
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
    /// [`crate::ntfs::lznt1::store`]).
    Compressed(Vec<u8>),
    /// Sparse: per unit, whether it holds data; a hole reads as zeros and
    /// has no clusters.
    Sparse(Vec<bool>),
}

impl Packing {
    /// Clusters of unit `u` of a `size`-byte stream (the last may be short).
    pub fn unit_clusters(size: u64, u: usize) -> u64 {
        let unit = crate::ntfs::lznt1::UNIT_BYTES as u64;
        let cluster = crate::ntfs::CLUSTER as u64;
        size.saturating_sub(u as u64 * unit)
            .min(unit)
            .div_ceil(cluster)
    }

    /// Clusters allocated on disk for a `size`-byte stream.
    pub fn clusters(&self, size: u64) -> u32 {
        match self {
            Packing::Compressed(units) => units.iter().map(|&n| n as u32).sum(),
            Packing::Sparse(data) => data
                .iter()
                .enumerate()
                .filter(|(_, d)| **d)
                .map(|(u, _)| Self::unit_clusters(size, u) as u32)
                .sum(),
        }
    }

    /// Byte ranges of a sparse stream's holes (empty when compressed).
    pub fn holes(&self, size: u64) -> Vec<(u64, u64)> {
        let unit = crate::ntfs::lznt1::UNIT_BYTES as u64;
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
            return p.clusters(self.spec.size);
        }
        self.spec.size.div_ceil(cluster) as u32
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
    /// Absolute cluster where group 0 starts.
    pub groups_start: u32,
    /// Pool member sizes the planner sizes files from.
    pool_sizes: PoolSizes,
    /// Plan for estimates only (E01 ratio calibration): skip work that
    /// only refines cluster counts, such as compressing files.
    pub estimate_only: bool,
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
    ) -> Result<Volume, CorpusError> {
        let mut rng = Rng::derive(seed, &[0x534B_454C]);
        let (f, l) = words::person(&mut rng);
        let user = format!("{}{}", &f[..1], l).to_ascii_lowercase();
        let cluster = geo.cluster_bytes();
        let data_bytes = geo.clusters as u64 * cluster;
        // NTFS adds a run to $MFT per group, and $MFT's run list must fit
        // its record: fewer, larger groups.
        let max_groups = if geo.ntfs {
            crate::ntfs::MAX_GROUPS
        } else {
            MAX_GROUPS
        };
        let group_bytes = GROUP_BYTES.max(data_bytes.div_ceil(max_groups));
        let group_clusters = (group_bytes / cluster).max(1) as u32;

        let start = days_to_secs(fat::days_from_civil(
            EPOCH_START.0,
            EPOCH_START.1,
            EPOCH_START.2,
        ));
        let end = days_to_secs(fat::days_from_civil(EPOCH_END.0, EPOCH_END.1, EPOCH_END.2));
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
        if geo.ntfs {
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
                    fat::name_form(&skel[c].name, &|s| taken.contains(s)).ok_or_else(|| {
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
            groups_start: 2,
            pool_sizes,
            estimate_only: false,
            epoch: (start, end),
        };
        // Size the skeleton from an upper bound on the group count; spare
        // directory space is simply unused (zeroed) entries.
        let total = vol.geo.clusters;
        let upper = (total / group_clusters).max(1);
        vol.groups = upper;
        let mut next = 2u32;
        let fat32 = vol.geo.fat == fat::FatType::Fat32;
        for i in 0..vol.skel.len() {
            if i == 0 && !fat32 {
                continue;
            }
            let clusters = if vol.geo.ntfs {
                vol.ntfs_skel_clusters(i)?
            } else {
                let slots = vol.skel_slots(i);
                (slots as u64 * 32).div_ceil(cluster).max(1) as u32
            };
            vol.skel[i].first = next;
            vol.skel[i].clusters = clusters;
            next += clusters;
        }
        if !fat32 && vol.skel_slots(0) as u32 > vol.geo.root_entries {
            return Err(CorpusError::Invalid(
                "root directory region too small".into(),
            ));
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

    /// Slots needed by skeleton directory `i` (an upper bound for group 0).
    fn skel_slots(&self, i: usize) -> usize {
        let d = &self.skel[i];
        let mut slots = if i == 0 { 0 } else { 2 };
        for &c in &d.children {
            slots += fat::slots(&self.skel[c].form);
        }
        if let Some(leaf) = d.leaf {
            slots += LEAF_CAP * MAX_SLOTS;
            if GROUP_LEAVES.iter().any(|(l, _)| *l == leaf) {
                for k in 1..self.groups {
                    let (name, _) = self.group_folder_name(k, leaf);
                    slots += if name.len() <= 13 { 2 } else { 3 };
                }
            }
        }
        slots
    }

    /// Clusters reserved for skeleton folder `i`'s NTFS index: what its
    /// known children, the largest possible group-0 share and every
    /// group's folder need, with an eighth to spare (group 0's names are
    /// not known yet).
    fn ntfs_skel_clusters(&self, i: usize) -> Result<u32, CorpusError> {
        use crate::ntfs::write::{dir_blocks, names_of};
        let d = &self.skel[i];
        let mut names: Vec<String> = Vec::new();
        if i == 0 {
            for n in [
                "$MFT", "$MFTMirr", "$LogFile", "$Volume", "$AttrDef", ".", "$Bitmap", "$Boot",
                "$BadClus", "$Secure", "$UpCase", "$Extend",
            ] {
                names.push(n.to_string());
            }
        }
        for &c in &d.children {
            let s = &self.skel[c];
            names.extend(names_of(&s.name, &s.form).into_iter().map(|(n, _)| n));
        }
        if let Some(leaf) = d.leaf {
            let longest = "x".repeat(52);
            for _ in 0..LEAF_CAP {
                names.push(longest.clone());
                names.push("XXXXXX~1.XXX".to_string());
            }
            if self.group_leaf_index(leaf).is_some() {
                for k in 1..self.groups {
                    let (name, short) = self.group_folder_name(k, leaf);
                    names.push(name);
                    names.push(fat::short_display(&short));
                }
            }
        }
        let own = if i == 0 {
            vec![(".".to_string(), crate::ntfs::record::NS_WIN32_AND_DOS)]
        } else {
            names_of(&d.name, &d.form)
        };
        let blocks = dir_blocks(&own, names.iter().map(|s| s.as_str()), true)
            .map_err(|e| CorpusError::Invalid(format!("skeleton folder {}: {e}", d.path)))?;
        Ok((blocks + blocks / 8 + 1) as u32)
    }

    /// Position of `leaf` among the leaves holding group folders.
    pub fn group_leaf_index(&self, leaf: Leaf) -> Option<usize> {
        self.group_leaves().position(|l| l == leaf)
    }

    /// The leaves holding group folders, with their folder-name stems.
    fn group_leaf_table(&self) -> &'static [(Leaf, &'static [&'static str])] {
        if self.geo.ntfs {
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

    /// Group `k`'s time window (seconds since 1980).
    fn window(&self, k: u32) -> (u64, u64) {
        let (s, e) = self.epoch;
        let span = (e - s) / self.groups as u64;
        (s + span * k as u64, s + span * (k as u64 + 1))
    }

    /// Name and short name of group `k`'s folder in `leaf` (k ≥ 1).
    fn group_folder_name(&self, k: u32, leaf: Leaf) -> (String, [u8; 11]) {
        let stems = self
            .group_leaf_table()
            .iter()
            .find(|(l, _)| *l == leaf)
            .map(|(_, s)| *s)
            .unwrap_or(&["Folder"]);
        let mut r = Rng::derive(self.seed, &[0x4746, k as u64, leaf as u64]);
        let stem = *r.pick(stems);
        let name = format!("{stem} {k:04}");
        // Windows' hashed alias shape: two letters, four hex digits, ~1.
        let mut short = [b' '; 11];
        let up: Vec<u8> = stem
            .bytes()
            .take(2)
            .map(|c| c.to_ascii_uppercase())
            .collect();
        short[..2].copy_from_slice(&up);
        short[2..6].copy_from_slice(format!("{:04X}", k & 0xFFFF).as_bytes());
        short[6] = b'~';
        short[7] = b'1';
        (name, short)
    }

    /// Group leaves, in the order their group folders take the group's
    /// first clusters.
    fn group_leaves(&self) -> impl Iterator<Item = Leaf> + use<> {
        self.group_leaf_table().iter().map(|(l, _)| *l)
    }

    /// Group `k`'s folder in `leaf`: stored name, times, first cluster.
    pub fn group_folder(&self, k: u32, leaf: Leaf) -> Option<(NameForm, Times, u32)> {
        let idx = self.group_leaves().position(|l| l == leaf)?;
        let (name, short) = self.group_folder_name(k, leaf);
        let (base, _) = self.group_range(k);
        let (w0, _) = self.window(k);
        let mut r = Rng::derive(self.seed, &[0x4754, k as u64, leaf as u64]);
        let at = w0 + r.range(0, 86_400);
        let times = times_around(&mut r, at);
        Some((
            NameForm {
                short,
                long: Some(name),
                nt_flags: 0,
            },
            times,
            base + idx as u32,
        ))
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

    /// Directory bytes of skeleton directory `i`, whole (it is at most a
    /// few MiB even with the maximum number of groups). Group 0's plan
    /// supplies its direct entries.
    pub fn skel_dir_bytes(&self, i: usize, g0: &GroupPlan) -> Vec<u8> {
        let d = &self.skel[i];
        let mut out = Vec::new();
        if i != 0 {
            let parent_first = if d.parent == 0 {
                0
            } else {
                self.skel[d.parent].first
            };
            fat::encode_dots(&mut out, d.first, parent_first, d.times);
        }
        for &c in &d.children {
            let s = &self.skel[c];
            fat::encode(
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
                g0.encode_child(&mut out, *child);
            }
        }
        if let Some(leaf) = d.leaf {
            for k in 1..self.groups {
                if let Some((form, times, first)) = self.group_folder(k, leaf) {
                    fat::encode(
                        &mut out,
                        &Record {
                            form: &form,
                            attr: attr::DIRECTORY,
                            cluster: first,
                            size: 0,
                            times,
                            deleted: false,
                        },
                    );
                }
            }
        }
        out
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
    rng: Rng,
    cluster: u64,
    window: (u64, u64),
    dirs: Vec<DirPlan>,
    items: Vec<ItemPlan>,
    skel_children: Vec<(usize, Child)>,
    homes: Vec<(Leaf, Parent)>,
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
            rng: Rng::derive(vol.seed, &[0x4752_4F55, k as u64]),
            cluster: vol.geo.cluster_bytes(),
            window: vol.window(k),
            dirs: Vec::new(),
            items: Vec::new(),
            skel_children: Vec::new(),
            homes: Vec::new(),
            kw_next: 0,
            incompressible: 0,
            compressible: 0,
            dup_next: 0,
        }
    }

    /// Groups after the first have folders only in the group leaves; their
    /// Desktop and browser-profile files go to Documents instead.
    fn leaf_for(&self, leaf: Leaf) -> Leaf {
        if self.k == 0 || self.vol.group_leaf_index(leaf).is_some() {
            leaf
        } else if leaf == Leaf::System {
            // Later system files arrive with updates, in the component store.
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

    fn pick_size(&mut self, kind: Kind, room: u64) -> Option<(u64, u32)> {
        let sizes = &self.vol.pool_sizes;
        let max = MAX_FILE.min(self.n as u64 * self.cluster / 12).min(room);
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
        let (lo, hi) = scaled(size_range(kind), self.vol.profile.size_scale);
        let min = sizes
            .min(kind)
            .max(lo.min(if kind == Kind::Text { 0 } else { lo }));
        let lo = lo.max(min);
        if lo > max {
            return None;
        }
        let size = self.rng.log_uniform(lo.max(1), hi.min(max).max(lo.max(1)));
        // Images vary the largest pool member that leaves room for the
        // variation (the generator needs at least 64 bytes of it).
        let variant = sizes
            .members(kind)
            .iter()
            .rposition(|m| m + 64 <= size)
            .unwrap_or(0) as u32;
        Some((size, variant))
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
            &[0x4954_454D, self.k as u64, self.items.len() as u64],
        );
        if kind.incompressible() {
            self.incompressible += size;
        } else {
            self.compressible += size;
        }
        let slack_random = self.rng.below(2) == 0;
        let resident = self.vol.geo.ntfs && size > 0 && size <= crate::ntfs::RESIDENT_MAX;
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
        let cluster = self.cluster;
        // Group folders take the group's first clusters, in leaf order.
        let mut reserved = 0u32;
        if k == 0 {
            for (i, s) in vol.skel.iter().enumerate() {
                if let Some(leaf) = s.leaf {
                    self.homes.push((leaf, Parent::Skel(i)));
                }
            }
            // A few ordinary sub-folders, as any user has.
            for (leaf, name) in [
                (Leaf::Documents, "Work"),
                (Leaf::Documents, "Personal"),
                (Leaf::Pictures, "Camera Roll"),
                (Leaf::Cache, "Cache_Data"),
                (Leaf::Downloads, "Programs"),
            ] {
                let p = Parent::Skel(vol.leaf_index(leaf));
                let d = self.add_dir(name.to_string(), p, leaf, false, false);
                self.homes.push((leaf, Parent::Dir(d)));
            }
            self.homes
                .retain(|(l, p)| !(*l == Leaf::Cache && matches!(p, Parent::Skel(_))));
        } else {
            for leaf in vol.group_leaves() {
                let p = Parent::Skel(vol.leaf_index(leaf));
                let d = self.add_dir(String::new(), p, leaf, false, true);
                if let Some((form, times, _)) = vol.group_folder(k, leaf) {
                    self.dirs[d].name = form.long.clone().unwrap_or_default();
                    self.dirs[d].form = form;
                    self.dirs[d].times = times;
                }
                // On FAT the folder's first cluster is fixed (the skeleton
                // points at it); on NTFS the skeleton points at its record.
                if !vol.geo.ntfs {
                    self.dirs[d].runs.push(Run {
                        start: reserved,
                        len: 1,
                    });
                    reserved += 1;
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
        }
        let prof = vol.profile.clone();
        // NTFS: an estimate of the group's $MFT fragment, sized exactly
        // once the files are known.
        let mft_estimate = if vol.geo.ntfs { self.n / 64 } else { 0 };
        let avail = self.n.saturating_sub(reserved + mft_estimate) as u64;
        let budget = (avail as f64 * prof.fill) as u64;
        let mut used = 0u64;

        // Group 0 installs the program folder's files first: known files.
        if k == 0 {
            let prog = Parent::Skel(vol.leaf_index(Leaf::Programs));
            for j in 0..self.rng.range(4, 9) {
                let kind = if j == 0 { Kind::Text } else { Kind::Exe };
                let room = (budget.saturating_sub(used)) * cluster / 4;
                if let Some((size, v)) = self.pick_size(kind, room) {
                    let i = self.new_item(Leaf::Programs, kind, size, v, Some(prog));
                    self.items[i].known = true;
                    used += self.items[i].clusters(cluster) as u64;
                }
            }
            // One browser history database.
            let room = (budget.saturating_sub(used)) * cluster / 4;
            if let Some((size, v)) = self.pick_size(Kind::Sqlite, room) {
                let b = Parent::Skel(vol.leaf_index(Leaf::Browser));
                let i = self.new_item(Leaf::Browser, Kind::Sqlite, size, v, Some(b));
                used += self.items[i].clusters(cluster) as u64;
            }
        }

        let mut weights: Vec<(Leaf, f64)> = leaf_weights(prof.mail_share);
        if vol.geo.ntfs {
            weights.extend_from_slice(NTFS_SYSTEM_WEIGHTS);
        }
        let leaf_w: Vec<f64> = weights.iter().map(|(_, w)| *w).collect();
        let mut misses = 0;
        while used < budget && misses < 50 {
            let pick = weights[self.rng.weighted(&leaf_w)].0;
            let leaf = self.leaf_for(pick);
            let kind = self.pick_kind(leaf);
            let room = (budget - used) * cluster;
            if leaf.is_system() {
                // The operating system's files: live, known, small.
                let (sys_lo, sys_hi) = scaled(SYSTEM_SIZES, prof.size_scale);
                let max = sys_hi.min(room);
                let lo = sys_lo.max(self.vol.pool_sizes.min(kind));
                if lo > max {
                    misses += 1;
                    continue;
                }
                let size = self.rng.log_uniform(lo, max);
                let parent = self.home(leaf);
                let i = self.new_item(leaf, kind, size, 0, Some(parent));
                self.items[i].known = true;
                used += self.items[i].clusters(cluster) as u64;
                continue;
            }
            let Some((size, variant)) = self.pick_size(kind, room) else {
                misses += 1;
                continue;
            };
            // Deleted directory with a few deleted files.
            if self.rng.chance(prof.deleted_dirs_per_100 / 100.0) {
                let parent = self.home(leaf);
                let name = format!(
                    "{} {}",
                    words::zipf_word(&mut self.rng),
                    self.rng.range(1, 999)
                );
                let d = self.add_dir(name, parent, leaf, true, false);
                used += 1;
                for _ in 0..self.rng.range(1, 3) {
                    let kind = self.pick_kind(leaf);
                    let room = (budget.saturating_sub(used)) * cluster;
                    if let Some((size, v)) = self.pick_size(kind, room) {
                        let i = self.new_item(leaf, kind, size, v, Some(Parent::Dir(d)));
                        self.items[i].deleted = true;
                        self.items[i].in_deleted_dir = true;
                        used += self.items[i].clusters(cluster) as u64;
                    }
                }
                continue;
            }
            if self.rng.chance(prof.residue_share) && kind.carvable() {
                let i = self.new_item(leaf, kind, size.max(1), variant, None);
                self.items[i].residue = true;
                used += self.items[i].clusters(cluster) as u64;
                continue;
            }
            let parent = self.home(leaf);
            // Planted duplicate of an earlier live file.
            if self.rng.chance(prof.duplicate_share) {
                let cands: Vec<usize> = (0..self.items.len())
                    .filter(|&j| {
                        let it = &self.items[j];
                        !it.residue
                            && !it.deleted
                            && it.spec.size > 0
                            && it.leaf != Leaf::Programs
                            && !it.leaf.is_system()
                    })
                    .collect();
                if !cands.is_empty() {
                    let j = *self.rng.pick(&cands);
                    let group = match self.items[j].dup_group {
                        Some(g) => g,
                        None => {
                            let g = ((k as u64) << 20) | self.dup_next;
                            self.dup_next += 1;
                            self.items[j].dup_group = Some(g);
                            g
                        }
                    };
                    let src = self.items[j].clone();
                    let i = self.new_item(
                        leaf,
                        src.spec.kind,
                        src.spec.size,
                        src.spec.variant,
                        Some(parent),
                    );
                    let ext = src.spec.kind.ext();
                    if !ext.is_empty() && !self.items[i].name.to_ascii_lowercase().ends_with(ext) {
                        let n = format!("{} copy.{ext}", self.items[i].name);
                        self.items[i].name = n;
                    }
                    self.items[i].spec = src.spec.clone();
                    self.items[i].dup_group = Some(group);
                    self.items[i].known = src.known;
                    self.items[i].notable = src.notable;
                    used += self.items[i].clusters(cluster) as u64;
                    continue;
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
            used += self.items[i].clusters(cluster) as u64;
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
        self.finish_names();
        self.trim_deleted_dirs();
        if vol.geo.ntfs && !vol.estimate_only {
            self.pack_some();
        }
        let mut mft = 0;
        if vol.geo.ntfs {
            let records =
                self.dirs.len() as u64 + self.items.iter().filter(|i| !i.residue).count() as u64;
            mft = crate::ntfs::write::fragment_clusters(records) as u32;
            reserved = mft;
        }
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

    /// NTFS: store a share of the live text and log files compressed, as a
    /// user's "compress contents to save disk space" folders or an
    /// application's logs are, and a share of large containers sparse.
    /// Chosen from their own random stream (the rest of the plan is
    /// unchanged) once content is final (keywords planted); a compressed
    /// file's content is generated here to know each unit's stored size,
    /// which the layout needs.
    fn pack_some(&mut self) {
        let share = self.vol.profile.compressed_share;
        let mut rng = Rng::derive(self.vol.seed, &[0x4C5A_4E54, self.k as u64]);
        let cluster = self.cluster;
        for it in &mut self.items {
            let eligible = share > 0.0
                && matches!(it.spec.kind, Kind::Text | Kind::Log)
                && !it.deleted
                && !it.residue
                && !it.resident
                && it.dup_group.is_none()
                && it.spec.size >= 2 * cluster;
            if !eligible || !rng.chance(share) {
                continue;
            }
            let Some(bytes) = crate::content::generate_text(&it.spec) else {
                continue;
            };
            let stored = crate::ntfs::lznt1::store(&bytes);
            // Only where it saves space, as NTFS keeps such units raw.
            if stored.bytes.len() as u64 >= it.spec.size.div_ceil(cluster) * cluster {
                continue;
            }
            it.packing = Some(Packing::Compressed(stored.units));
        }
        // Sparse files: downloads in progress (a torrent client's
        // preallocated file, pieces still missing) and disk images; their
        // first and last units hold data (headers, trailers), a share of
        // the others are holes.
        let share = self.vol.profile.sparse_share;
        if share <= 0.0 {
            return;
        }
        let unit = crate::ntfs::lznt1::UNIT_BYTES as u64;
        for it in &mut self.items {
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

    /// Make sure every group, however small, has at least one of each
    /// planted case: a notable file, a known file outside the program
    /// folder, and a duplicate pair (so tests on small corpora always see
    /// them).
    fn guarantee(&mut self) {
        let live: Vec<usize> = (0..self.items.len())
            .filter(|&i| {
                let it = &self.items[i];
                !it.residue
                    && !it.deleted
                    && it.spec.size > 0
                    && it.leaf != Leaf::Programs
                    && !it.leaf.is_system()
                    && it.dup_group.is_none()
            })
            .collect();
        if live.len() < 4 {
            return;
        }
        if !self.items.iter().any(|i| i.notable) {
            let i = live[self.rng.below(live.len() as u64) as usize];
            self.items[i].notable = true;
            self.items[i].known = false;
        }
        if !self
            .items
            .iter()
            .any(|i| i.known && i.leaf != Leaf::Programs && !i.leaf.is_system())
            && let Some(&i) = live.iter().find(|&&i| !self.items[i].notable)
        {
            self.items[i].known = true;
        }
        if !self.items.iter().any(|i| i.dup_group.is_some())
            && let Some(&j) = live
                .iter()
                .find(|&&i| self.items[i].spec.size < self.n as u64 * self.cluster / 40)
        {
            let g = ((self.k as u64) << 20) | self.dup_next;
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
            let i = self.new_item(
                leaf,
                src.spec.kind,
                src.spec.size,
                src.spec.variant,
                Some(parent),
            );
            let ext = src.spec.kind.ext();
            self.items[i].name = if ext.is_empty() {
                format!("{} copy", src.name)
            } else {
                format!("Copy of {}", src.name)
            };
            self.items[i].spec = src.spec.clone();
            self.items[i].dup_group = Some(g);
            self.items[i].known = src.known;
            self.items[i].notable = src.notable;
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
        for i in 0..self.items.len() {
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
                    self.k * KW_PER_GROUP + self.kw_next,
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
            let form = fat::name_form(&candidate, &|s| {
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

    /// A deleted directory keeps exactly one cluster (so recovery of its
    /// listing is exact); drop children that do not fit, making them
    /// residue instead.
    fn trim_deleted_dirs(&mut self) {
        let cap = (self.cluster / 32) as usize - 2;
        for d in 0..self.dirs.len() {
            if !self.dirs[d].deleted {
                continue;
            }
            let mut slots = 0;
            let mut keep = Vec::new();
            for c in std::mem::take(&mut self.dirs[d].children) {
                let s = match c {
                    Child::Item(i) => fat::slots(&self.items[i].form),
                    Child::Dir(x) => fat::slots(&self.dirs[x].form),
                };
                if slots + s <= cap {
                    slots += s;
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

    /// Slots a group directory needs.
    fn dir_slots(&self, d: usize) -> usize {
        2 + self.dirs[d]
            .children
            .iter()
            .map(|c| match *c {
                Child::Item(i) => fat::slots(&self.items[i].form),
                Child::Dir(x) => fat::slots(&self.dirs[x].form),
            })
            .sum::<usize>()
    }

    /// Index blocks (clusters) NTFS directory `d` needs for its live
    /// children's names: deleting a file removes its names from the
    /// index, and a deleted directory keeps an empty root.
    fn ntfs_dir_clusters(&self, d: usize) -> u32 {
        use crate::ntfs::write::{dir_blocks, names_of};
        let dir = &self.dirs[d];
        if dir.deleted {
            return 0;
        }
        let mut names: Vec<String> = Vec::new();
        for c in &dir.children {
            let (name, form, deleted) = match *c {
                Child::Item(i) => (
                    &self.items[i].name,
                    &self.items[i].form,
                    self.items[i].deleted,
                ),
                Child::Dir(x) => (&self.dirs[x].name, &self.dirs[x].form, self.dirs[x].deleted),
            };
            if !deleted {
                names.extend(names_of(name, form).into_iter().map(|(n, _)| n));
            }
        }
        let own = names_of(&dir.name, &dir.form);
        // The writer builds the same index and reports a mismatch.
        dir_blocks(&own, names.iter().map(|s| s.as_str()), false).unwrap_or(1) as u32
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
        let ntfs = self.vol.geo.ntfs;
        for d in 0..self.dirs.len() {
            if ntfs {
                // Index blocks; small and deleted directories have none.
                let need = self.ntfs_dir_clusters(d);
                if need > 0 {
                    units.push(Unit::Dir(d, 0, need));
                }
                continue;
            }
            let need = if self.dirs[d].deleted {
                1
            } else {
                (self.dir_slots(d) as u64 * 32).div_ceil(cluster).max(1) as u32
            };
            if self.dirs[d].group_folder {
                if need > 1 {
                    units.push(Unit::Dir(d, 1, need - 1));
                }
            } else {
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
        // Trailing free space: a few areas, some random.
        let end = self.n;
        while cursor < end {
            let len = (self.rng.below((end - cursor) as u64 / 2 + 1) as u32 + 1).min(end - cursor);
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

    /// Encode the entry for `child` (in its parent directory).
    pub fn encode_child(&self, out: &mut Vec<u8>, child: Child) {
        match child {
            Child::Item(i) => {
                let it = &self.items[i];
                fat::encode(
                    out,
                    &Record {
                        form: &it.form,
                        attr: attr::ARCHIVE,
                        cluster: if it.spec.size == 0 {
                            0
                        } else {
                            self.first_cluster(&it.runs)
                        },
                        size: it.spec.size as u32,
                        times: it.times,
                        deleted: it.deleted,
                    },
                );
            }
            Child::Dir(d) => {
                let dir = &self.dirs[d];
                fat::encode(
                    out,
                    &Record {
                        form: &dir.form,
                        attr: attr::DIRECTORY,
                        cluster: self.first_cluster(&dir.runs),
                        size: 0,
                        times: dir.times,
                        deleted: dir.deleted,
                    },
                );
            }
        }
    }

    /// Bytes of group directory `d` (whole; sized to its clusters).
    pub fn dir_bytes(&self, vol: &Volume, d: usize) -> Vec<u8> {
        let dir = &self.dirs[d];
        let own = self.first_cluster(&dir.runs);
        let parent = match dir.parent {
            Parent::Skel(s) => {
                if s == 0 {
                    0
                } else {
                    vol.skel[s].first
                }
            }
            Parent::Dir(p) => self.first_cluster(&self.dirs[p].runs),
        };
        let mut out = Vec::new();
        fat::encode_dots(&mut out, own, parent, dir.times);
        for &c in &dir.children {
            self.encode_child(&mut out, c);
        }
        let clusters: u32 = dir.runs.iter().map(|r| r.len).sum();
        out.resize(clusters as usize * vol.geo.cluster_bytes() as usize, 0);
        out
    }

    /// FAT values for the group's clusters (absolute next-cluster numbers,
    /// end-of-chain marks, 0 for free), in cluster order.
    pub fn fat_entries(&self, eoc: u32) -> Vec<u32> {
        let mut next = vec![0u32; self.n as usize];
        let mut chain = |runs: &[Run]| {
            let mut prev: Option<u32> = None;
            for r in runs {
                for c in r.start..r.start + r.len {
                    if let Some(p) = prev {
                        next[p as usize] = self.base + c;
                    }
                    prev = Some(c);
                }
            }
            if let Some(p) = prev {
                next[p as usize] = eoc;
            }
        };
        for d in &self.dirs {
            if !d.deleted {
                chain(&d.runs);
            }
        }
        for it in &self.items {
            if !it.deleted && !it.residue && it.spec.size > 0 {
                chain(&it.runs);
            }
        }
        next
    }

    /// Clusters marked in use in the FAT.
    pub fn used_clusters(&self, cluster: u64) -> u64 {
        let dirs: u64 = self
            .dirs
            .iter()
            .filter(|d| !d.deleted)
            .map(|d| d.runs.iter().map(|r| r.len as u64).sum::<u64>())
            .sum();
        let files: u64 = self
            .items
            .iter()
            .filter(|i| !i.deleted && !i.residue)
            .map(|i| i.spec.size.div_ceil(cluster))
            .sum();
        dirs + files
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
        Volume::new(
            geo,
            seed,
            Profile::by_name(profile).expect("profile"),
            &pool,
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
        let fat = plan.fat_entries(vol.geo.fat.eoc());
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
