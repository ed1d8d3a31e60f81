//! Carved-item ids, and where an item's file goes in the case channel
//! (a folder per thousand ids), also when carving is split over workers.
//!
//! A single run numbers its items in scan order: the items of the
//! contiguous scan first, then the fragmented items followed along the
//! file system's map, in header order (`follow`). A part of a planned
//! case (a run of regions, `Scope::Part`) cannot know how many items
//! the parts before it will find, so it numbers its own items
//! *provisionally*: negative ids that encode the part, whether the item
//! was followed, and its place within the part. The stage's finish then
//! gives every item the id a single run would have given it, and moves
//! its file to the matching case path.
//!
//! That works because regions are independent (the scan closes every
//! open item at a region's end and starts each region afresh) and a part
//! is a contiguous run of the regions a single run scans, in the same
//! order: a single run's scan order is the parts' orders one after the
//! other. Followed items are ordered by header offset; two at one offset
//! share a region, so a part's own order breaks the tie as the single
//! run's does.

use std::path::{Path, PathBuf};

/// Items one part may number (2^32).
const PER_PART: u64 = 1 << 32;

/// How the scan and the follow-up number the items they store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ids {
    /// From this id on (a single run, or a stage run whole).
    From(i64),
    /// Provisional ids of part `part` of a split stage; `followed` for
    /// the items followed along fragmented files.
    Provisional {
        /// The part.
        part: u32,
        /// Followed items (numbered after the contiguous scan's).
        followed: bool,
    },
}

impl Ids {
    /// The id of the `n`th item (from 0), or `None` past what a part may
    /// number.
    pub fn at(self, n: u64) -> Option<i64> {
        match self {
            Ids::From(first) => i64::try_from(n).ok().and_then(|n| first.checked_add(n)),
            Ids::Provisional { part, followed } => {
                if n >= PER_PART {
                    return None;
                }
                let key = (u64::from(part) * 2 + u64::from(followed)) * PER_PART + n;
                i64::try_from(key).ok().map(|k| -1 - k)
            }
        }
    }
}

/// What a provisional id says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provisional {
    /// The part that numbered it.
    pub part: u32,
    /// Whether it was followed along a fragmented file.
    pub followed: bool,
    /// Its place in the part.
    pub n: u64,
}

/// Read a provisional id (`None` for a final one).
pub fn decode(id: i64) -> Option<Provisional> {
    if id >= 0 {
        return None;
    }
    let key = u64::try_from(-1 - id).ok()?;
    let n = key % PER_PART;
    let slot = key / PER_PART;
    Some(Provisional {
        part: u32::try_from(slot / 2).ok()?,
        followed: slot % 2 == 1,
        n,
    })
}

/// Final ids for the provisional items of a split stage.
///
/// A single run's counter advances for every item it accepts, also for
/// broken ones it then drops, so each part reports how many numbers it
/// used (`used`), and every item it followed, stored or not, as `(header
/// offset, provisional id)`. Followed items are numbered from one past
/// the highest id stored by the scan, as a single run's follow-up starts
/// from the table's highest id.
#[derive(Debug)]
pub struct Renumbering {
    /// Final id of each part's scan item 0.
    scan_base: Vec<i64>,
    /// Final ids of followed items, by provisional id.
    followed: std::collections::HashMap<i64, i64>,
}

impl Renumbering {
    /// The scan's numbering: part `p` used `used[p]` numbers, from
    /// `first` on.
    pub fn new(first: i64, used: &[u64]) -> Renumbering {
        let mut scan_base = Vec::with_capacity(used.len());
        let mut next = first;
        for &u in used {
            scan_base.push(next);
            next = next.saturating_add(i64::try_from(u).unwrap_or(i64::MAX));
        }
        Renumbering {
            scan_base,
            followed: std::collections::HashMap::new(),
        }
    }

    /// Number the followed items from `from` on, in header order (ties
    /// in one part keep the part's own order, `n`: the provisional id
    /// decreasing).
    pub fn follow(&mut self, from: i64, mut calls: Vec<(u64, i64)>) {
        calls.sort_by_key(|&(offset, id)| (offset, std::cmp::Reverse(id)));
        self.followed = calls
            .into_iter()
            .enumerate()
            .map(|(i, (_, id))| (id, from.saturating_add(i as i64)))
            .collect();
    }

    /// The final id of a provisional one.
    pub fn final_id(&self, id: i64) -> Option<i64> {
        let p = decode(id)?;
        if p.followed {
            return self.followed.get(&id).copied();
        }
        let base = *self.scan_base.get(p.part as usize)?;
        base.checked_add(i64::try_from(p.n).ok()?)
    }
}

/// Scan order of ids of one numbering: ascending final ids, or a part's
/// provisional ids from its first on.
pub fn rank(id: i64) -> u64 {
    id.unsigned_abs()
}

/// The case path an item's file moves to when its id changes: the same
/// type directory and extension, the folder and name of the new id.
pub fn moved_path(old: &str, id: i64) -> PathBuf {
    let old = Path::new(old);
    let type_dir = old
        .iter()
        .nth(1)
        .and_then(|s| s.to_str())
        .unwrap_or("unknown");
    let ext = old.extension().and_then(|e| e.to_str()).unwrap_or("");
    case_path(id, type_dir, ext)
}

/// Files per folder of the case channel at most (folders are id / this).
pub const PER_FOLDER: u64 = 1000;

/// Relative case path of an item.
pub fn case_path(id: i64, type_dir: &str, ext: &str) -> PathBuf {
    let folder = folder(id);
    let name = if ext.is_empty() {
        id.to_string()
    } else {
        format!("{id}.{ext}")
    };
    ["carved", type_dir, &folder, &name].iter().collect()
}

/// The folder of an id's file: a thousand per folder; provisional ids
/// keep theirs apart until the finish moves them.
pub fn folder(id: i64) -> String {
    match u64::try_from(id) {
        Ok(id) => format!("{:03}", id / PER_FOLDER),
        Err(_) => "provisional".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisional_ids_say_their_part_kind_and_place() {
        for (part, followed, n) in [(0, false, 0), (0, true, 5), (7, false, 123), (900, true, 0)] {
            let id = Ids::Provisional { part, followed }.at(n).unwrap();
            assert!(id < 0);
            assert_eq!(
                decode(id),
                Some(Provisional { part, followed, n }),
                "{part} {followed} {n}"
            );
        }
        assert_eq!(decode(5), None);
        assert_eq!(
            Ids::Provisional {
                part: 0,
                followed: false
            }
            .at(PER_PART),
            None
        );
        assert_eq!(Ids::From(10).at(3), Some(13));
    }

    #[test]
    fn renumbering_gives_the_single_runs_order() {
        let p = |part, followed, n| Ids::Provisional { part, followed }.at(n).unwrap();
        // Part 0 used 3 numbers, part 1 used 2; followed items at offsets
        // 900 (part 1), 100 (part 0) and two at 500 (part 0, n 1 and 2),
        // numbered from 15.
        let mut r = Renumbering::new(10, &[3, 2]);
        r.follow(
            15,
            vec![
                (900, p(1, true, 0)),
                (500, p(0, true, 2)),
                (100, p(0, true, 0)),
                (500, p(0, true, 1)),
            ],
        );
        assert_eq!(r.final_id(p(0, false, 0)), Some(10));
        assert_eq!(r.final_id(p(0, false, 2)), Some(12));
        assert_eq!(r.final_id(p(1, false, 0)), Some(13));
        assert_eq!(r.final_id(p(1, false, 1)), Some(14));
        assert_eq!(r.final_id(p(0, true, 0)), Some(15));
        assert_eq!(r.final_id(p(0, true, 1)), Some(16));
        assert_eq!(r.final_id(p(0, true, 2)), Some(17));
        assert_eq!(r.final_id(p(1, true, 0)), Some(18));
        assert_eq!(r.final_id(3), None);
    }

    #[test]
    fn a_moved_file_keeps_its_type_and_extension() {
        assert_eq!(
            moved_path("carved/jpg/provisional/-4294967297.jpg", 1234),
            PathBuf::from("carved/jpg/001/1234.jpg")
        );
    }
}
