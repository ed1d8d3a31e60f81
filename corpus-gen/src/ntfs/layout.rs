//! NTFS's layout planner: what its structures take of the shared plan's
//! clusters (each group's `$MFT` fragment, `$I30` index blocks sized from
//! the names a directory lists, files small enough to live in their
//! record) and which files it stores compressed or sparse.

use super::index::{self, IndexError};
use super::{CLUSTER, MAX_GROUPS, RECORDS_PER_CLUSTER, RESIDENT_MAX, lznt1, record, system};
use crate::content::Kind;
use crate::error::CorpusError;
use crate::names::{NameForm, short_display};
use crate::plan::{Child, DirPlan, FsLayout, ItemPlan, LEAF_CAP, Packing, Volume};
use crate::rng::Rng;

// The planner's packing unit is NTFS's compression unit.
const _: () = assert!(Packing::UNIT_CLUSTERS as usize * CLUSTER == lznt1::UNIT_BYTES);

/// Longest name the skeleton's own files are sized for (with room to
/// spare over the planner's 39 characters).
const LONGEST_OWN_NAME: usize = 52;

/// The names a file carries: one name valid as both Win32 and DOS when the
/// name is its own upper-case 8.3 form, else the long name and its alias.
pub fn names_of(name: &str, form: &NameForm) -> Vec<(String, u8)> {
    let short = short_display(&form.short);
    if form.long.is_none() && short == name {
        vec![(name.to_string(), record::NS_WIN32_AND_DOS)]
    } else {
        vec![
            (name.to_string(), record::NS_WIN32),
            (short, record::NS_DOS),
        ]
    }
}

/// Length of the `$FILE_NAME` value of `name`.
pub fn name_value_len(name: &str) -> usize {
    0x42 + 2 * name.encode_utf16().count()
}

/// Index blocks a directory with names `own` needs for children named
/// `children` (every name of every live child).
pub fn dir_blocks<'a>(
    own: &[(String, u8)],
    children: impl Iterator<Item = &'a str>,
    force_blocks: bool,
) -> Result<usize, IndexError> {
    // The block count depends on the order the entries are packed in:
    // sort as the writer does.
    let mut names: Vec<Vec<u16>> = children.map(|n| n.encode_utf16().collect()).collect();
    let up = system::upcase();
    names.sort_by(|a, b| index::collate_names(a, b, up));
    let lens: Vec<usize> = names
        .iter()
        .map(|n| index::file_name_entry_len(n.len()))
        .collect();
    let own_lens: Vec<usize> = own.iter().map(|(n, _)| name_value_len(n)).collect();
    let rooms = super::DirRooms::new(&own_lens);
    let small = if force_blocks { 0 } else { rooms.small };
    index::blocks_needed(&lens, small, &|b| rooms.large(b))
}

/// Clusters a group reserves for the records it uses (a sixteenth spare,
/// as an MFT that grew holds free records).
pub fn fragment_clusters(records: u64) -> u64 {
    (records + records / 16 + 1).div_ceil(RECORDS_PER_CLUSTER)
}

/// The NTFS layout planner.
#[derive(Debug, Clone, Copy, Default)]
pub struct NtfsLayout;

impl FsLayout for NtfsLayout {
    fn max_groups(&self) -> u64 {
        MAX_GROUPS
    }

    fn resident_max(&self) -> u64 {
        RESIDENT_MAX
    }

    fn folders_at_group_start(&self) -> bool {
        false
    }

    /// What the folder's known children, the largest possible share of
    /// the skeleton's own files and every batch's folder need, with an
    /// eighth to spare (the own files' names are not known yet).
    fn skeleton_dir_clusters(&self, vol: &Volume, i: usize) -> Result<Option<u32>, CorpusError> {
        let d = &vol.skel[i];
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
            let s = &vol.skel[c];
            names.extend(names_of(&s.name, &s.form).into_iter().map(|(n, _)| n));
        }
        if d.leaf.is_some() {
            let longest = "x".repeat(LONGEST_OWN_NAME);
            for _ in 0..LEAF_CAP {
                names.push(longest.clone());
                names.push("XXXXXX~1.XXX".to_string());
            }
        }
        for f in vol.group_folders_in(i) {
            names.push(f.form.long.clone().unwrap_or_default());
            names.push(short_display(&f.form.short));
        }
        let own = if i == 0 {
            vec![(".".to_string(), record::NS_WIN32_AND_DOS)]
        } else {
            names_of(&d.name, &d.form)
        };
        let blocks = dir_blocks(&own, names.iter().map(|s| s.as_str()), true)
            .map_err(|e| CorpusError::Invalid(format!("skeleton folder {}: {e}", d.path)))?;
        Ok(Some((blocks + blocks / 8 + 1) as u32))
    }

    /// A deleted folder's children stay in their records (their parent
    /// reference names it): all are kept.
    fn deleted_dir_keeps(&self, children: &[&NameForm], _cluster: u64) -> Vec<bool> {
        vec![true; children.len()]
    }

    /// Index blocks for its live children's names: deleting a file removes
    /// its names from the index, and a deleted directory keeps an empty
    /// root.
    fn dir_clusters(&self, dirs: &[DirPlan], items: &[ItemPlan], d: usize, _cluster: u64) -> u32 {
        let dir = &dirs[d];
        if dir.deleted {
            return 0;
        }
        let mut names: Vec<String> = Vec::new();
        for c in &dir.children {
            let (name, form, deleted) = match *c {
                Child::Item(i) => (&items[i].name, &items[i].form, items[i].deleted),
                Child::Dir(x) => (&dirs[x].name, &dirs[x].form, dirs[x].deleted),
            };
            if !deleted {
                names.extend(names_of(name, form).into_iter().map(|(n, _)| n));
            }
        }
        let own = names_of(&dir.name, &dir.form);
        // The writer builds the same index and reports a mismatch.
        dir_blocks(&own, names.iter().map(|s| s.as_str()), false).unwrap_or(1) as u32
    }

    /// The group's `$MFT` fragment: a record per directory and per file
    /// with an entry.
    fn group_reserve(&self, dirs: &[DirPlan], items: &[ItemPlan]) -> u32 {
        let records = dirs.len() as u64 + items.iter().filter(|i| !i.residue).count() as u64;
        fragment_clusters(records) as u32
    }

    /// NTFS: store a share of the live text and log files compressed, as a
    /// user's "compress contents to save disk space" folders or an
    /// application's logs are, and a share of large containers sparse.
    /// Chosen from their own random stream (the rest of the plan is
    /// unchanged) once content is final (keywords planted); a compressed
    /// file's content is generated here to know each unit's stored size,
    /// which the layout needs.
    fn pack(&self, vol: &Volume, k: u32, items: &mut [ItemPlan]) {
        let share = vol.profile.compressed_share;
        let mut rng = Rng::derive(vol.seed, &[0x4C5A_4E54, k as u64]);
        let cluster = CLUSTER as u64;
        for it in items.iter_mut() {
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
            let Some(bytes) = crate::content::generate_without_pool(&it.spec) else {
                continue;
            };
            let stored = lznt1::store(&bytes);
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
        let share = vol.profile.sparse_share;
        if share <= 0.0 {
            return;
        }
        crate::plan::choose_sparse(&mut rng, items, share, lznt1::UNIT_BYTES as u64);
    }
}
