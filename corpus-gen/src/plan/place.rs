//! Placing a drawn group on its file system: residence and straddles
//! fitted to the clusters, stored (8.3) names, what a deleted folder keeps,
//! the file system's own records, then every folder and file in the
//! group's clusters (fragments, overwrite pairs, free gaps) from the
//! placement's own random stream. What is file-system specific comes from
//! the volume's [`FsLayout`].

use super::*;

/// Bytes a planted token needs after its straddle boundary.
const STRADDLE_ROOM: u64 = 32;

impl GroupBuilder<'_> {
    /// Place the drawn group on the volume's file system.
    pub(super) fn place(mut self) -> GroupPlan {
        let vol = self.vol;
        let k = self.k;
        self.settle();
        // On FAT a batch folder's first cluster is fixed (the skeleton
        // points at it): the group's first clusters, in batch then leaf
        // order; on NTFS the skeleton points at its record.
        if vol.layout.folders_at_group_start() {
            for d in 0..self.dirs.len() {
                if self.dirs[d].group_folder {
                    self.dirs[d].runs.push(Run {
                        start: self.reserved,
                        len: 1,
                    });
                    self.reserved += 1;
                }
            }
        }
        self.finish_names();
        self.trim_deleted_dirs();
        self.link_texts();
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
            // A name the file system cannot store is renamed first (the
            // manifest gives the stored name).
            let name = self.vol.layout.storable_name(&name).unwrap_or(name);
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

    /// Symbolic links' targets, now that names are final: a sibling's
    /// stored name, or a file's absolute path; one longer than the inode
    /// holds is the link's content, in clusters.
    fn link_texts(&mut self) {
        let inline = self.vol.layout.inline_link_max();
        for i in 0..self.items.len() {
            let text = match self.items[i].link {
                Some(Link::Symbolic(t)) => crate::names::stored_name(&self.items[t].form),
                Some(Link::SymbolicAbsolute(t)) => {
                    let dir = match self.items[t].parent {
                        Some(Parent::Skel(s)) => self.vol.skel[s].path.clone(),
                        Some(Parent::Dir(d)) => self.dir_path(d),
                        None => continue,
                    };
                    let name = crate::names::stored_name(&self.items[t].form);
                    if dir.is_empty() {
                        format!("/{name}")
                    } else {
                        format!("/{dir}/{name}")
                    }
                }
                _ => continue,
            };
            if text.len() as u64 > inline {
                self.items[i].spec.size = text.len() as u64;
            }
            self.items[i].link_text = Some(text);
        }
    }

    /// Group directory `d`'s path from the root, with stored names.
    fn dir_path(&self, d: usize) -> String {
        let dir = &self.dirs[d];
        let parent = match dir.parent {
            Parent::Skel(s) => self.vol.skel[s].path.clone(),
            Parent::Dir(p) => self.dir_path(p),
        };
        let name = crate::names::stored_name(&dir.form);
        if parent.is_empty() {
            name
        } else {
            format!("{parent}/{name}")
        }
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

    /// Fit the drawn files to the file system's allocation: small files
    /// stored in their records (NTFS), planted straddles moved onto a
    /// cluster boundary (the one at or before the drawn sector boundary;
    /// at the first cluster's end if that is 0; none where a token would
    /// not fit after it).
    fn settle(&mut self) {
        let cluster = self.cluster;
        let resident_max = self.vol.layout.resident_max();
        for it in &mut self.items {
            it.resident = it.spec.size > 0 && it.spec.size <= resident_max;
            if let Some(&at) = it.spec.straddle.first() {
                let snapped = (at / cluster * cluster).max(cluster);
                // Room after the boundary for a token to cross it.
                it.spec.straddle = if snapped + STRADDLE_ROOM <= it.spec.size {
                    vec![snapped]
                } else {
                    Vec::new()
                };
            }
        }
    }

    /// Put `len` clusters of item `i` (its fragment starting at cluster
    /// `from` of the item) at `at`; returns the cluster after them.
    fn put_fragment(
        &mut self,
        extents: &mut Vec<Extent>,
        at: u32,
        i: usize,
        from: u32,
        len: u32,
    ) -> u32 {
        self.items[i].runs.push(Run { start: at, len });
        extents.push(Extent {
            start: at,
            len,
            fill: Fill::Item(i, from),
        });
        at + len
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
                !it.deleted
                    && !it.residue
                    && it.clusters(cluster) > 0
                    && it.packing.is_none()
                    && it.link.is_none()
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
        // The logical plan charges 4 KiB units against the fill share; a
        // file system whose clusters are larger (FAT16, FAT32 past 32 GiB)
        // adds slack, and with its folders and fragment gaps a group near
        // a fill of 0.95 may not hold it all. Then units are dropped from
        // the end (they are shuffled: a random few), as in tiny groups.
        let mut needed = needed;
        let mut kept_dirs = Vec::new();
        while needed + frag_count as u64 > avail {
            match units.pop() {
                Some(u) => match u {
                    Unit::Item(i) => {
                        needed -= span(&u, &self.items);
                        if self.items[i].fragmented {
                            frag_count -= self.items[i].clusters(cluster).min(4);
                        }
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
        let free = avail.saturating_sub(needed + frag_count as u64);
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
                cursor = self.put_fragment(&mut extents, cursor, p.1, p.2, p.3);
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
            cursor = self.put_fragment(&mut extents, cursor + 1, p.1, p.2, p.3);
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
        // A link to a dropped file goes with it.
        let links: Vec<usize> = (0..self.items.len())
            .filter(|&l| {
                self.items[l].link.is_some_and(|k| k.target() == i)
                    && self.items[l].parent.is_some()
            })
            .collect();
        for l in links {
            self.drop_item(l);
        }
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
