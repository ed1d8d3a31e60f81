//! Where each chunk goes: which segment file, which `sectors`/`table` group.
//!
//! The same placement rule serves the writer (one chunk at a time, with the
//! real stored sizes) and the up-front checks (bulk, with worst-case sizes),
//! so the checks can never disagree with what the writer does.
//!
//! The rule, for a chunk of `len` stored bytes:
//! - it joins the open group unless that group already has 65534 entries
//!   (EnCase 6's table limit) or the chunk would end past 2^31 - 1 bytes
//!   from the group's base (table entries are 31-bit offsets; the top bit is
//!   the compression flag);
//! - the segment must still be closable afterwards within the segment size:
//!   the group's `table` and `table2` for its entries plus the segment's
//!   closing sections (`next`, or for the image's last chunk the `data`
//!   section if this is the only segment, `digest`, `hash` and `done`);
//! - otherwise the segment is closed and the chunk opens the next one.

use crate::format::{
    DESCRIPTOR_LEN, DIGEST_SECTION_LEN, END_SECTION_LEN, HASH_SECTION_LEN, VOLUME_SECTION_LEN,
    table_section_len,
};

/// Most entries in one table (EnCase 6 and libewf start a new group then).
pub(crate) const MAX_GROUP_ENTRIES: u64 = 65534;
/// Largest chunk offset relative to a group's base that 31 bits hold.
pub(crate) const MAX_RELATIVE_OFFSET: u64 = 0x7FFF_FFFF;

/// Fixed sizes of one image's segments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    /// Largest size of a segment file.
    pub segment_size: u64,
    /// Bytes before the first chunk group in segment 1 (file header,
    /// `header2` twice, `header`, `volume`).
    pub first_prologue: u64,
    /// Bytes before the first group in later segments (file header, `data`).
    pub later_prologue: u64,
}

/// Where the writer is within the current segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// Segment number, 1-based.
    pub segment: u32,
    /// End of the bytes written so far in this segment.
    pub pos: u64,
    /// Offset of the open group's `sectors` section, if a group is open.
    pub base: Option<u64>,
    /// Entries in the open group.
    pub entries: u64,
}

/// Decision for the next chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Append to the open group.
    SameGroup,
    /// Close the open group (if any) and start a new one in this segment.
    NewGroup,
    /// Close this segment and continue in the next one.
    NewSegment,
}

impl Geometry {
    /// Bytes the segment needs after its last group when `is_last` says
    /// whether the image's final chunk is in it.
    pub(crate) fn trailer(&self, segment: u32, is_last: bool) -> u64 {
        if is_last {
            let data = if segment == 1 { VOLUME_SECTION_LEN } else { 0 };
            data + DIGEST_SECTION_LEN + HASH_SECTION_LEN + END_SECTION_LEN
        } else {
            END_SECTION_LEN
        }
    }

    /// A cursor at the start of segment `segment`, after its prologue.
    pub(crate) fn fresh(&self, segment: u32) -> Cursor {
        let pos = if segment == 1 {
            self.first_prologue
        } else {
            self.later_prologue
        };
        Cursor {
            segment,
            pos,
            base: None,
            entries: 0,
        }
    }

    /// Where a chunk of `len` stored bytes goes.
    pub(crate) fn place(&self, cur: &Cursor, len: u64, is_last: bool) -> Placement {
        let trailer = self.trailer(cur.segment, is_last);
        if let Some(base) = cur.base {
            let group_has_room =
                cur.entries < MAX_GROUP_ENTRIES && cur.pos + len - base <= MAX_RELATIVE_OFFSET;
            if group_has_room {
                let end = cur.pos + len + 2 * table_section_len(cur.entries + 1) + trailer;
                return if end <= self.segment_size {
                    Placement::SameGroup
                } else {
                    Placement::NewSegment
                };
            }
        }
        let close = cur.base.map_or(0, |_| 2 * table_section_len(cur.entries));
        let end = cur.pos + close + DESCRIPTOR_LEN + len + 2 * table_section_len(1) + trailer;
        if end <= self.segment_size {
            Placement::NewGroup
        } else {
            Placement::NewSegment
        }
    }

    /// Move `cur` as the writer does when it places a chunk of `len` bytes.
    pub(crate) fn apply(&self, cur: &mut Cursor, placement: Placement, len: u64) {
        match placement {
            Placement::SameGroup => {}
            Placement::NewGroup => {
                if cur.base.is_some() {
                    cur.pos += 2 * table_section_len(cur.entries);
                }
                cur.base = Some(cur.pos);
                cur.pos += DESCRIPTOR_LEN;
                cur.entries = 0;
            }
            Placement::NewSegment => {
                *cur = self.fresh(cur.segment + 1);
                cur.base = Some(cur.pos);
                cur.pos += DESCRIPTOR_LEN;
            }
        }
        cur.pos += len;
        cur.entries += 1;
    }

    /// Smallest segment size that holds one chunk of at most `max_len`
    /// stored bytes in any segment, with every closing section.
    pub(crate) fn minimum_segment_size(&self, max_len: u64) -> u64 {
        self.first_prologue.max(self.later_prologue)
            + DESCRIPTOR_LEN
            + max_len
            + 2 * table_section_len(1)
            + self.trailer(1, true)
    }

    /// How many segments `chunks` chunks need when every chunk but the last
    /// stores `full_len` bytes and the last `last_len` bytes. Stops counting
    /// once past `limit`. `None` when a chunk fits no segment at all.
    pub(crate) fn segments_needed(
        &self,
        chunks: u64,
        full_len: u64,
        last_len: u64,
        limit: u64,
    ) -> Option<u64> {
        if chunks == 0 {
            return Some(1);
        }
        let mut cur = self.fresh(1);
        let mut remaining = chunks - 1;
        while remaining > 0 {
            let placement = self.place(&cur, full_len, false);
            match placement {
                Placement::NewSegment
                    if cur.base.is_none()
                        || self.place(&self.fresh(cur.segment + 1), full_len, false)
                            == Placement::NewSegment =>
                {
                    return None;
                }
                Placement::NewSegment | Placement::NewGroup => {
                    self.apply(&mut cur, placement, full_len);
                    remaining -= 1;
                    if u64::from(cur.segment) > limit {
                        return Some(u64::from(cur.segment));
                    }
                }
                Placement::SameGroup => {
                    let k = self.same_group_run(&cur, full_len).clamp(1, remaining);
                    cur.pos += k * full_len;
                    cur.entries += k;
                    remaining -= k;
                }
            }
        }
        let placement = self.place(&cur, last_len, true);
        if placement == Placement::NewSegment {
            cur.base?;
            let next = self.fresh(cur.segment + 1);
            if self.place(&next, last_len, true) == Placement::NewSegment {
                return None;
            }
            cur = next;
        }
        Some(u64::from(cur.segment))
    }

    /// How many non-final chunks of `len` bytes in a row join the open
    /// group of `cur` before the rule says otherwise.
    fn same_group_run(&self, cur: &Cursor, len: u64) -> u64 {
        let Some(base) = cur.base else { return 0 };
        let by_entries = MAX_GROUP_ENTRIES.saturating_sub(cur.entries);
        let by_offset = MAX_RELATIVE_OFFSET.saturating_sub(cur.pos - base) / len;
        let fixed = cur.pos + 2 * table_section_len(cur.entries) + self.trailer(cur.segment, false);
        let by_size = self.segment_size.saturating_sub(fixed) / (len + 8);
        by_entries.min(by_offset).min(by_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slow reference: place every chunk one by one.
    fn one_by_one(g: &Geometry, chunks: u64, full: u64, last: u64) -> Option<u64> {
        let mut cur = g.fresh(1);
        for i in 0..chunks {
            let is_last = i + 1 == chunks;
            let len = if is_last { last } else { full };
            let mut placement = g.place(&cur, len, is_last);
            if placement == Placement::NewSegment && cur.base.is_none() {
                return None;
            }
            if placement == Placement::NewSegment {
                let fresh = g.fresh(cur.segment + 1);
                if g.place(&fresh, len, is_last) == Placement::NewSegment {
                    return None;
                }
                placement = Placement::NewSegment;
            }
            g.apply(&mut cur, placement, len);
        }
        Some(u64::from(cur.segment))
    }

    #[test]
    fn bulk_count_matches_chunk_by_chunk_placement() {
        let mut x = 12345u64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..300 {
            let full = 1 + rnd(40_000);
            let last = 1 + rnd(full + 100);
            let g = Geometry {
                segment_size: 2_000 + rnd(3_000_000),
                first_prologue: 13 + rnd(3_000),
                later_prologue: 13 + 1128,
            };
            let chunks = 1 + rnd(2_000);
            assert_eq!(
                g.segments_needed(chunks, full, last, u64::MAX),
                one_by_one(&g, chunks, full, last),
                "{g:?} chunks {chunks} full {full} last {last}"
            );
        }
    }

    #[test]
    fn groups_split_at_65534_entries() {
        let g = Geometry {
            segment_size: u64::MAX / 4,
            first_prologue: 2000,
            later_prologue: 1141,
        };
        let mut cur = g.fresh(1);
        for _ in 0..MAX_GROUP_ENTRIES {
            let p = g.place(&cur, 100, false);
            g.apply(&mut cur, p, 100);
        }
        assert_eq!(cur.entries, MAX_GROUP_ENTRIES);
        assert_eq!(g.place(&cur, 100, false), Placement::NewGroup);
    }

    #[test]
    fn groups_split_before_31_bit_offsets_overflow() {
        let g = Geometry {
            segment_size: u64::MAX / 4,
            first_prologue: 2000,
            later_prologue: 1141,
        };
        let mut cur = g.fresh(1);
        let len = 16 << 20;
        let mut groups = 0;
        for _ in 0..300 {
            let p = g.place(&cur, len, false);
            if p == Placement::NewGroup {
                groups += 1;
            }
            g.apply(&mut cur, p, len);
            let base = cur.base.unwrap();
            assert!(cur.pos - base <= MAX_RELATIVE_OFFSET);
        }
        // 127 chunks of 16 MiB fit below 2^31 after the 76-byte descriptor.
        assert_eq!(groups, 3);
    }

    #[test]
    fn a_segment_never_exceeds_its_size() {
        let g = Geometry {
            segment_size: 1 << 20,
            first_prologue: 1500,
            later_prologue: 1141,
        };
        let mut cur = g.fresh(1);
        let mut max_end = 0;
        for i in 0..1000u64 {
            let is_last = i == 999;
            let len = 1000 + (i * 7919) % 33_000;
            let p = g.place(&cur, len, is_last);
            g.apply(&mut cur, p, len);
            let end =
                cur.pos + 2 * table_section_len(cur.entries) + g.trailer(cur.segment, is_last);
            max_end = max_end.max(end);
            assert!(end <= g.segment_size);
        }
        assert!(cur.segment > 10);
        assert!(max_end > g.segment_size - 40_000);
    }
}
