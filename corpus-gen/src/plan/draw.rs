//! The logical plan of a group: what its batches hold (folders, files,
//! kinds, sizes, names, times, deleted and residue intents, keywords,
//! duplicates, hash-set membership), drawn from (seed, profile, batch)
//! alone and the same on every file system. Files are charged in
//! [`UNIT`]s, never in a file system's clusters; [`super::place`] puts the
//! drawn group on the volume.

use super::*;
use crate::content::{SERVER_VARIANT, SESSION_VARIANT};

/// A group being drawn, then placed ([`GroupBuilder::place`]).
pub(super) struct GroupBuilder<'a> {
    pub(super) vol: &'a Volume,
    pub(super) k: u32,
    pub(super) base: u32,
    pub(super) n: u32,
    /// The stream being drawn from: the skeleton's files', then each
    /// batch's, then the layout's.
    pub(super) rng: Rng,
    /// The file system's cluster: the batches' bytes, and placement.
    pub(super) cluster: u64,
    /// Clusters each batch of this group is drawn for.
    pub(super) batch_n: u32,
    /// Clusters the group's batch folders take at its start (FAT).
    pub(super) reserved: u32,
    pub(super) dirs: Vec<DirPlan>,
    pub(super) items: Vec<ItemPlan>,
    pub(super) skel_children: Vec<(usize, Child)>,
    // What follows belongs to the batch being drawn (or the skeleton's
    // files), reset by `begin`.
    /// 0 for the skeleton's files, `j + 1` for batch `j`: numbers item
    /// keys, keyword tokens and duplicate groups apart.
    pub(super) space: u64,
    pub(super) window: (u64, u64),
    pub(super) homes: Vec<(Leaf, Parent)>,
    pub(super) first_item: usize,
    /// The first folder of the batch being drawn (folders are numbered in
    /// their batch, whatever else its group holds).
    pub(super) first_dir: usize,
    pub(super) kw_next: u32,
    pub(super) incompressible: u64,
    pub(super) compressible: u64,
    pub(super) dup_next: u64,
}

impl<'a> GroupBuilder<'a> {
    pub(super) fn new(vol: &'a Volume, k: u32) -> Self {
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
            first_dir: 0,
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
        self.first_dir = self.dirs.len();
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
            let name = format!(
                "{} {}",
                words::zipf_word(&mut self.rng),
                self.dirs.len() - self.first_dir
            );
            let d = self.add_dir(name, parent, leaf, false, false);
            self.homes.push((leaf, Parent::Dir(d)));
            return Parent::Dir(d);
        }
        *self.rng.pick(&options)
    }

    fn pick_kind(&mut self, leaf: Leaf) -> Kind {
        let table = leaf_kinds(leaf, self.vol.profile.linux);
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
        MAX_FILE.min(self.batch_bytes() / 12)
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
        let linux = self.vol.profile.linux;
        let name =
            match linux.then(|| super::linux_name(&mut self.rng, leaf, kind, t, self.vol.seed)) {
                Some(Some(name)) => name,
                _ => file_name(&mut self.rng, leaf, kind, t),
            };
        // A server writes its logs as rsyslog does and its /etc as
        // settings.
        let variant = match kind {
            Kind::Log | Kind::Gzip if linux => SERVER_VARIANT,
            Kind::Text if leaf == Leaf::Config => SERVER_VARIANT,
            _ => variant,
        };
        // A Mac names Safari's history `History.db` and Mail's messages
        // `.emlx` (no draw changes: other profiles stay as they were).
        let name = if self.vol.profile.mac {
            super::mac_name(name, leaf, kind)
        } else {
            name
        };
        let times = times_around(&mut self.rng, t);
        let key = derive_key(
            self.vol.seed,
            &[
                0x4954_454D,
                self.space,
                (self.items.len() - self.first_item) as u64,
            ],
        );
        // A package is named for what it holds; an `ar` archive's length
        // is even.
        let (name, size) = if kind == Kind::Deb {
            let (pkg, version) = crate::content::deb::identity(key);
            (format!("{pkg}_{version}_amd64.deb"), size & !1)
        } else {
            (name, size)
        };
        if kind.incompressible() {
            self.incompressible += size;
        } else {
            self.compressible += size;
        }
        let slack_random = self.rng.below(2) == 0;
        let mut it = ItemPlan::new(
            name,
            parent,
            leaf,
            Spec {
                kind,
                size,
                key,
                keywords: Vec::new(),
                straddle: Vec::new(),
                variant,
                when: t,
            },
            times,
        );
        it.slack_random = slack_random;
        self.items.push(it);
        self.items.len() - 1
    }

    pub(super) fn build(mut self) -> GroupPlan {
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
        self.place()
    }

    /// Bytes of a batch of this group: 128 MiB (more on disks past
    /// 30,000 of them) in every full group, whatever the file system; the
    /// last group's as its clusters make.
    fn batch_bytes(&self) -> u64 {
        self.batch_n as u64 * self.cluster
    }

    /// Bytes of content a batch holds, counted in [`UNIT`]s: the profile's
    /// fill of its bytes. The file system's own structures (folders,
    /// `$MFT` records) and slack past the unit come out of the free share
    /// when the batch is placed.
    fn batch_budget(&self) -> u64 {
        (self.batch_bytes() as f64 * self.vol.profile.fill) as u64
    }

    /// The skeleton's own files, planned once: the program folder's (known
    /// files), the browser's history database, a few Desktop files and, on
    /// a system disk, the system folder's. Returns the bytes they are
    /// charged.
    fn skeleton_files(&mut self) -> u64 {
        self.begin(None);
        let vol = self.vol;
        // Each file has at most a 16th of a batch's content, and all of
        // them a quarter (a small disk is not all program files).
        let budget = self.batch_budget();
        let room = budget / 16;
        let cap = budget / 4;
        let mut used = 0u64;
        let prog = Parent::Skel(vol.leaf_index(Leaf::Programs));
        // A stick has no program folder or browser profile.
        let programs = if vol.profile.stick {
            0
        } else {
            self.rng.range(4, 9)
        };
        for j in 0..programs {
            // A server's package cache holds packages only.
            let kind = match (vol.profile.linux, j) {
                (true, _) => Kind::Deb,
                (false, 0) => Kind::Text,
                (false, _) => Kind::Exe,
            };
            if used >= cap {
                break;
            }
            if let Some((size, v)) = self.pick_size(kind, room) {
                let i = self.new_item(Leaf::Programs, kind, size, v, Some(prog));
                self.items[i].known = true;
                used += on_disk(self.items[i].spec.size);
            }
        }
        // A server keeps its database under /var/lib, a desktop in the
        // browser's profile.
        let db = if vol.profile.linux {
            Leaf::Data
        } else {
            Leaf::Browser
        };
        if !vol.profile.stick
            && let Some((size, v)) = self.pick_size(Kind::Sqlite, room)
        {
            let b = Parent::Skel(vol.leaf_index(db));
            let i = self.new_item(db, Kind::Sqlite, size, v, Some(b));
            used += on_disk(self.items[i].spec.size);
        }
        if vol.profile.linux {
            // /etc: small configuration files, each name once.
            let etc = Parent::Skel(vol.leaf_index(Leaf::Config));
            let mut names: Vec<&str> = super::LINUX_CONFIGS.to_vec();
            for _ in 0..self.rng.range(6, 13) {
                let at = self.rng.below(names.len() as u64) as usize;
                let name = names.swap_remove(at);
                let size = self.rng.log_uniform(20, 6 << 10);
                let i = self.new_item(Leaf::Config, Kind::Text, size, 0, Some(etc));
                self.items[i].name = name.to_string();
                used += on_disk(size);
            }
        }
        let desktop = Parent::Skel(vol.leaf_index(Leaf::Desktop));
        for _ in 0..self.rng.range(2, 7) {
            let kind = self.pick_kind(Leaf::Desktop);
            if used >= cap {
                break;
            }
            if let Some((size, v)) = self.pick_size(kind, room) {
                let i = self.new_item(Leaf::Desktop, kind, size, v, Some(desktop));
                used += on_disk(self.items[i].spec.size);
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
                used += on_disk(self.items[i].spec.size);
            }
        }
        self.plant_keywords();
        used
    }

    /// Draw batch `j`: its folder in each group leaf, then files until its
    /// content budget (less `taken` bytes, already used in its stretch)
    /// is used.
    fn draw_batch(&mut self, j: u32, taken: u64) {
        self.begin(Some(j));
        let vol = self.vol;
        for leaf in vol.group_leaves() {
            let p = Parent::Skel(vol.leaf_index(leaf));
            let d = self.add_dir(String::new(), p, leaf, false, true);
            if let Some(f) = vol.group_folder(j, leaf) {
                self.dirs[d].name = f.form.long.clone().unwrap_or_default();
                self.dirs[d].form = f.form;
                self.dirs[d].times = f.times;
            }
            let home = if leaf == Leaf::Mail && vol.profile.linux {
                self.maildir_folders(d)
            } else {
                d
            };
            self.homes.push((leaf, Parent::Dir(home)));
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
        let budget = self.batch_budget().saturating_sub(taken);
        let mut used = 0u64;

        // Each (leaf, kind) has its quota of the batch's bytes, drawn in
        // a random order weighted by what is left of each: a batch's mix
        // (and so its messages, members and text per GiB) is the same in
        // every batch, not left to a few large mailboxes or archives.
        let cells = self.cells();
        let mut left: Vec<u64> = cells.iter().map(|c| (c.2 * budget as f64) as u64).collect();
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
            let room = budget - used;
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
        if vol.profile.linux && vol.layout.links() {
            self.draw_links(j);
        }
        if vol.profile.linux {
            self.draw_sessions(j);
        }
    }

    /// A web application's PHP sessions, as `session.save_path` fills:
    /// a `sessions` folder in the batch's /var/lib folder holding 150 to
    /// 400 small live files `sess_ID` (26 characters of `[0-9a-v]`, as
    /// PHP names them; 100 B to 2 KiB of serialized pairs). So many names
    /// pass one block, and ext4 hashes the folder (an htree), as a busy
    /// server's are. Their own stream, after the batch's files (which
    /// stay as they were); their bytes come on top of the batch's fill.
    fn draw_sessions(&mut self, j: u32) {
        let Some(&(_, Parent::Dir(data))) = self.homes.iter().find(|(l, _)| *l == Leaf::Data)
        else {
            return;
        };
        let mut rng = Rng::derive(self.vol.seed, &[0x5345_5353, j as u64]);
        let dir = self.made_with("sessions", data);
        std::mem::swap(&mut self.rng, &mut rng);
        for _ in 0..self.rng.range(150, 400) {
            let size = self.rng.log_uniform(100, 2 << 10);
            let id: String = (0..26)
                .map(|_| {
                    char::from(b"0123456789abcdefghijklmnopqrstuv"[self.rng.below(32) as usize])
                })
                .collect();
            let i = self.new_item(
                Leaf::Data,
                Kind::Text,
                size,
                SESSION_VARIANT,
                Some(Parent::Dir(dir)),
            );
            self.items[i].name = format!("sess_{id}");
        }
        std::mem::swap(&mut self.rng, &mut rng);
    }

    /// A Maildir++ folder's `cur`, `new` and `tmp` in batch folder `d`,
    /// made with it; returns `cur`, where delivered messages live.
    fn maildir_folders(&mut self, d: usize) -> usize {
        let cur = self.made_with("cur", d);
        self.made_with("new", d);
        self.made_with("tmp", d);
        cur
    }

    /// A live folder `name` in folder `d`, of its leaf, made with it (its
    /// times: no draw, so nothing else drawn moves); returns its index.
    fn made_with(&mut self, name: &str, d: usize) -> usize {
        self.dirs.push(DirPlan {
            name: name.to_string(),
            form: Self::blank(),
            parent: Parent::Dir(d),
            leaf: self.dirs[d].leaf,
            times: self.dirs[d].times,
            deleted: false,
            children: Vec::new(),
            runs: Vec::new(),
            group_folder: false,
        });
        self.dirs.len() - 1
    }

    /// A server's links, from their own stream (what else the batch holds
    /// does not change): in about one folder in four a `latest` symbolic
    /// link to one of its files (as log and release folders keep one; by
    /// its name or by its absolute path),
    /// and about one file in a hundred with a second name (a hard link,
    /// as `cp -al` and `ln` leave): beside it as `NAME.orig.EXT`, or,
    /// half the time, under its own name in another of the batch's
    /// folders. Only live files in live batch folders are linked to.
    fn draw_links(&mut self, j: u32) {
        let mut rng = Rng::derive(self.vol.seed, &[0x4C49_4E4B, j as u64]);
        let mut folders: Vec<(usize, Vec<usize>)> = Vec::new();
        for i in self.first_item..self.items.len() {
            let it = &self.items[i];
            let Some(Parent::Dir(d)) = it.parent else {
                continue;
            };
            if it.link.is_some() || it.deleted || it.residue || self.dirs[d].deleted {
                continue;
            }
            match folders.iter_mut().find(|(x, _)| *x == d) {
                Some((_, v)) => v.push(i),
                None => folders.push((d, vec![i])),
            }
        }
        for (d, files) in &folders {
            // Maildir folders hold messages only.
            if self.dirs[*d].leaf == Leaf::Mail {
                continue;
            }
            // A relative target of at most 40 bytes (and a suffix the
            // folder's unique names may add) stays under ext4's 60-byte
            // fast-symlink limit.
            let short: Vec<usize> = files
                .iter()
                .copied()
                .filter(|&i| self.items[i].name.len() <= 40)
                .collect();
            if short.is_empty() || !rng.chance(0.25) {
                continue;
            }
            let t = *rng.pick(&short);
            // A rotated log's number is not an extension.
            let name = match self.items[t].name.rsplit_once('.') {
                Some((stem, ext))
                    if !stem.is_empty()
                        && ext.len() <= 5
                        && ext.chars().all(|c| c.is_ascii_alphanumeric())
                        && ext.chars().any(|c| !c.is_ascii_digit()) =>
                {
                    format!("latest.{ext}")
                }
                _ => "latest".to_string(),
            };
            // Half point by absolute path (as `ln -s` with a full path
            // leaves) at the folder's longest-named file: a path past
            // the inode's 59 bytes is a slow symlink, in a block.
            if rng.chance(0.5) {
                let far = files
                    .iter()
                    .copied()
                    .max_by_key(|&i| (self.items[i].name.len(), std::cmp::Reverse(i)))
                    .unwrap_or(t);
                self.add_link(far, name, Link::SymbolicAbsolute(far));
            } else {
                self.add_link(t, name, Link::Symbolic(t));
            }
        }
        // Folders a hard link may be made in: not Maildir's, which hold
        // messages only.
        let homes: Vec<usize> = folders
            .iter()
            .map(|(d, _)| *d)
            .filter(|&d| self.dirs[d].leaf != Leaf::Mail)
            .collect();
        for (d, files) in &folders {
            for &t in files {
                if rng.chance(0.01) {
                    // Half the time the second name sits in another of
                    // the batch's folders under the file's own name, as
                    // `cp -al` backups and `ln` into a shared folder
                    // leave it; otherwise beside the file as a copy.
                    let away: Vec<usize> = homes.iter().copied().filter(|x| x != d).collect();
                    if !away.is_empty() && rng.chance(0.5) {
                        let home = *rng.pick(&away);
                        let name = self.items[t].name.clone();
                        self.add_link_in(t, Some(Parent::Dir(home)), name, Link::Hard(t));
                        continue;
                    }
                    let name = match self.items[t].name.rsplit_once('.') {
                        Some((stem, ext)) if !stem.is_empty() => format!("{stem}.orig.{ext}"),
                        _ => format!("{}.orig", self.items[t].name),
                    };
                    self.add_link(t, name, Link::Hard(t));
                }
            }
        }
    }

    /// Link item `link` named `name` beside item `t`, with `t`'s times (a
    /// hard link shares its inode; a `latest` link is made when its
    /// target is).
    fn add_link(&mut self, t: usize, name: String, link: Link) {
        self.add_link_in(t, self.items[t].parent, name, link);
    }

    /// Link item `link` named `name` to item `t` in folder `parent`.
    fn add_link_in(&mut self, t: usize, parent: Option<Parent>, name: String, link: Link) {
        let target = &self.items[t];
        let mut it = ItemPlan::new(name, parent, target.leaf, target.spec.clone(), target.times);
        it.link = Some(link);
        // No content of its own: the manifest gives a hard link its
        // target's, a symbolic link its target's name.
        it.spec.size = 0;
        it.spec.keywords.clear();
        it.spec.straddle.clear();
        self.items.push(it);
    }

    /// One pick of cell (`leaf`, `kind`) with `left` bytes of its quota:
    /// a file (live, deleted, a copy or residue) or a deleted folder with a
    /// few files. Returns the bytes charged.
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
            got += UNIT;
            *left = left.saturating_sub(UNIT);
            for _ in 0..self.rng.range(1, 3) {
                let kind = self.pick_kind(leaf);
                let room = budget.saturating_sub(used + got);
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
            // A server's copies stay with their kind (no mail among the
            // logs); other profiles copy anything anywhere.
            let linux = prof.linux;
            let fits = |k: Kind| !linux || leaf_kinds(leaf, true).iter().any(|(x, _)| *x == k);
            let cands: Vec<usize> = (self.first_item..self.items.len())
                .filter(|&j| self.items[j].user_live() && fits(self.items[j].spec.kind))
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
                if linux {
                    // A server's copy keeps its name (`cp` to a backup).
                    self.items[i].name = self.items[j].name.clone();
                } else if !ext.is_empty() && !self.items[i].name.to_ascii_lowercase().ends_with(ext)
                {
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

    /// Bytes item `i` is charged (its size in whole [`UNIT`]s), taken
    /// from a quota (at least one byte, so that empty files end a cell
    /// too).
    fn charge(&self, i: usize, quota: &mut u64) -> u64 {
        let bytes = on_disk(self.items[i].spec.size);
        *quota = quota.saturating_sub(bytes.max(1));
        bytes
    }

    /// The batch's (leaf, kind) cells with their shares of its content
    /// bytes: each leaf's share of new files times its kinds' shares times
    /// their mean sizes, with incompressible kinds' bytes scaled to the
    /// profile's target share.
    fn cells(&self) -> Vec<(Leaf, Kind, f64)> {
        let vol = self.vol;
        let prof = &vol.profile;
        let mut weights: Vec<(Leaf, f64)> = leaf_weights(prof.mail_share, prof.stick, prof.linux);
        if vol.system_disk {
            weights.extend_from_slice(NTFS_SYSTEM_WEIGHTS);
        }
        let max = self.max_file();
        let mut cells: Vec<(Leaf, Kind, f64)> = Vec::new();
        let total_w: f64 = weights.iter().map(|(_, w)| w).sum();
        for (pick, w) in weights {
            let leaf = self.leaf_for(pick);
            let kinds = leaf_kinds(leaf, prof.linux);
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
                .find(|&&i| self.items[i].spec.size < self.batch_bytes() / 40)
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
        let mut have_deleted = false;
        let mut have_straddle = false;
        let mut kinds_done: HashSet<Kind> = HashSet::new();
        for i in self.first_item..self.items.len() {
            let it = &self.items[i];
            // Audio, containers and executables hold no text to plant in.
            let holds_text = !matches!(
                it.spec.kind,
                Kind::Mp3 | Kind::Container | Kind::Exe | Kind::Deb
            );
            if it.spec.size < 1024 || it.dup_group.is_some() || it.known || !holds_text {
                continue;
            }
            let wanted = it.deleted || it.residue;
            let p = if wanted { share * 2.0 } else { share };
            let text_like =
                matches!(it.spec.kind, Kind::Text | Kind::Log) && it.spec.size > 2 * SECTOR;
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
            if matches!(it.spec.kind, Kind::Text | Kind::Log) && it.spec.size > 2 * SECTOR {
                // A sector boundary (the smallest cluster any file system
                // here has); placement moves it onto one of its clusters.
                let sectors = it.spec.size / SECTOR;
                let j = 1 + self.rng.below(sectors - 1);
                it.spec.straddle = vec![j * SECTOR];
            }
            it.spec.keywords = kws;
        }
    }
}
