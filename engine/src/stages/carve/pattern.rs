//! Byte patterns with single-byte wildcards and optional ASCII case folding
//! (the header and footer syntax of scalpel and foremost), and the
//! multi-pattern header search over a block.
//!
//! Unaligned search runs one Aho-Corasick automaton over every byte for the
//! longest literal run ("anchor") of each pattern and verifies the whole
//! pattern around each anchor hit; aligned search only looks at sector
//! starts, through a table indexed by the first byte.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

/// A pattern: literal bytes where `wild` is false, any byte where it is true.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    bytes: Vec<u8>,
    wild: Vec<bool>,
    case_insensitive: bool,
}

impl Pattern {
    /// A pattern from bytes; positions in `wild` match any byte.
    /// `bytes` and `wild` have the same length (shorter `wild` is padded
    /// with literals).
    pub fn new(bytes: Vec<u8>, mut wild: Vec<bool>, case_insensitive: bool) -> Self {
        wild.resize(bytes.len(), false);
        Pattern {
            bytes,
            wild,
            case_insensitive,
        }
    }

    /// A literal (no wildcards).
    pub fn literal(bytes: &[u8], case_insensitive: bool) -> Self {
        Pattern::new(bytes.to_vec(), vec![false; bytes.len()], case_insensitive)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the pattern is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Whether every position is a wildcard (such a pattern matches
    /// everywhere and is refused by the signature-file parser).
    pub fn all_wild(&self) -> bool {
        self.wild.iter().all(|&w| w)
    }

    /// Whether ASCII letters match in either case.
    pub fn case_insensitive(&self) -> bool {
        self.case_insensitive
    }

    /// Whether the pattern matches at the start of `data` (which must hold
    /// at least [`len`](Self::len) bytes; shorter data never matches).
    pub fn matches_at(&self, data: &[u8]) -> bool {
        if data.len() < self.bytes.len() {
            return false;
        }
        self.bytes
            .iter()
            .zip(&self.wild)
            .zip(data)
            .all(|((&p, &w), &d)| {
                w || p == d || (self.case_insensitive && p.eq_ignore_ascii_case(&d))
            })
    }

    /// The longest run of literal bytes: (offset in the pattern, bytes).
    /// Used to search; the rest is verified around each hit.
    pub fn anchor(&self) -> (usize, &[u8]) {
        let mut best = (0usize, 0usize);
        let mut start = 0usize;
        for i in 0..=self.bytes.len() {
            let literal = i < self.bytes.len() && !self.wild[i];
            if !literal {
                if i - start > best.1 {
                    best = (start, i - start);
                }
                start = i + 1;
            }
        }
        (best.0, &self.bytes[best.0..best.0 + best.1])
    }

    /// The first byte's possible values, or `None` when it is a wildcard.
    fn first_bytes(&self) -> Option<Vec<u8>> {
        let (&b, &w) = self.bytes.first().zip(self.wild.first())?;
        if w {
            return None;
        }
        let mut v = vec![b];
        if self.case_insensitive && b.is_ascii_alphabetic() {
            v.push(b ^ 0x20);
        }
        Some(v)
    }
}

/// Finds every start of every header pattern in a block, aligned or not.
pub struct HeaderSearch {
    patterns: Vec<Pattern>,
    /// Longest pattern: hits can need this many bytes past a block's end.
    max_len: usize,
    /// Unaligned: automata over anchors, case-sensitive and -insensitive,
    /// each with the pattern index and anchor offset of its anchors.
    sensitive: Option<Automaton>,
    insensitive: Option<Automaton>,
    /// Aligned: patterns to try for each first byte, and those whose first
    /// byte is a wildcard (tried everywhere).
    by_first: Vec<Vec<usize>>,
    any_first: Vec<usize>,
    /// Sector size for aligned search; `None` for unaligned.
    align: Option<u64>,
}

impl std::fmt::Debug for HeaderSearch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaderSearch")
            .field("patterns", &self.patterns.len())
            .field("align", &self.align)
            .finish_non_exhaustive()
    }
}

/// An automaton over anchors, with each anchor's pattern index and offset.
type Automaton = (AhoCorasick, Vec<(usize, usize)>);

fn automaton(patterns: &[Pattern], case_insensitive: bool) -> Result<Option<Automaton>, String> {
    let mut anchors = Vec::new();
    let mut index = Vec::new();
    for (i, p) in patterns.iter().enumerate() {
        if p.case_insensitive() != case_insensitive {
            continue;
        }
        let (offset, bytes) = p.anchor();
        if bytes.is_empty() {
            continue;
        }
        anchors.push(bytes.to_vec());
        index.push((i, offset));
    }
    if anchors.is_empty() {
        return Ok(None);
    }
    let ac = AhoCorasickBuilder::new()
        .match_kind(MatchKind::Standard)
        .ascii_case_insensitive(case_insensitive)
        .build(&anchors)
        .map_err(|e| e.to_string())?;
    Ok(Some((ac, index)))
}

impl HeaderSearch {
    /// A search for `patterns` (none may be empty or all wildcards); `align`
    /// restricts hits to multiples of that many bytes on the media.
    pub fn new(patterns: Vec<Pattern>, align: Option<u64>) -> Result<Self, String> {
        if let Some(p) = patterns.iter().find(|p| p.is_empty() || p.all_wild()) {
            return Err(format!("header pattern {p:?} has no literal byte"));
        }
        let max_len = patterns.iter().map(Pattern::len).max().unwrap_or(0);
        let mut by_first = vec![Vec::new(); 256];
        let mut any_first = Vec::new();
        for (i, p) in patterns.iter().enumerate() {
            match p.first_bytes() {
                Some(bytes) => {
                    for b in bytes {
                        by_first[usize::from(b)].push(i);
                    }
                }
                None => any_first.push(i),
            }
        }
        let (sensitive, insensitive) = if align.is_none() {
            (automaton(&patterns, false)?, automaton(&patterns, true)?)
        } else {
            (None, None)
        };
        Ok(HeaderSearch {
            patterns,
            max_len,
            sensitive,
            insensitive,
            by_first,
            any_first,
            align: align.filter(|&a| a > 1),
        })
    }

    /// The longest pattern's length.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Calls `hit(position, pattern index)` for every pattern matching at a
    /// position in `starts` of `data`, where `data[0]` is at media offset
    /// `base`. Only the bytes of `data` are looked at, so a pattern whose end
    /// lies past `data` is not reported (the caller searches block
    /// junctions separately). Hits come unordered.
    pub fn find(
        &self,
        data: &[u8],
        base: u64,
        starts: std::ops::Range<usize>,
        mut hit: impl FnMut(usize, usize),
    ) {
        let starts = starts.start.min(data.len())..starts.end.min(data.len());
        if starts.is_empty() {
            return;
        }
        if let Some(align) = self.align {
            let first = base + starts.start as u64;
            let mut pos = (first.div_ceil(align) * align - base) as usize;
            while pos < starts.end {
                let candidates = self.by_first[usize::from(data[pos])]
                    .iter()
                    .chain(&self.any_first);
                for &i in candidates {
                    if self.patterns[i].matches_at(&data[pos..]) {
                        hit(pos, i);
                    }
                }
                pos = match usize::try_from(align).ok().and_then(|a| pos.checked_add(a)) {
                    Some(p) => p,
                    None => break,
                };
            }
            return;
        }
        for (ac, index) in [&self.sensitive, &self.insensitive].into_iter().flatten() {
            // Anchors sit `offset` bytes into their pattern: search the
            // window where such anchors can start.
            let lo = starts.start;
            let hi = (starts.end + self.max_len).min(data.len());
            for m in ac.find_overlapping_iter(&data[lo..hi]) {
                let (i, offset) = index[m.pattern().as_usize()];
                let at = lo + m.start();
                let Some(start) = at.checked_sub(offset) else {
                    continue;
                };
                if start < starts.start || start >= starts.end {
                    continue;
                }
                if self.patterns[i].matches_at(&data[start..]) {
                    hit(start, i);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wild(s: &[u8]) -> Pattern {
        let w = s.iter().map(|&b| b == b'?').collect();
        Pattern::new(s.to_vec(), w, false)
    }

    #[test]
    fn anchors_are_the_longest_literal_run() {
        assert_eq!(wild(b"????moov").anchor(), (4, &b"moov"[..]));
        assert_eq!(wild(b"BM??\0\0\0").anchor(), (4, &b"\0\0\0"[..]));
        assert_eq!(wild(b"ab?cde?f").anchor(), (3, &b"cde"[..]));
        assert!(wild(b"???").all_wild());
    }

    #[test]
    fn wildcards_and_case_folding_match() {
        let p = wild(b"RIFF????AVI");
        assert!(p.matches_at(b"RIFF\x01\x02\x03\x04AVI LIST"));
        assert!(!p.matches_at(b"RIFF\x01\x02\x03\x04AVX"));
        assert!(!p.matches_at(b"RIFF"));
        let c = Pattern::literal(b"<html", true);
        assert!(c.matches_at(b"<HTML>"));
        assert!(!Pattern::literal(b"<html", false).matches_at(b"<HTML>"));
    }

    fn all_hits(s: &HeaderSearch, data: &[u8], base: u64) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        s.find(data, base, 0..data.len(), |p, i| v.push((p, i)));
        v.sort_unstable();
        v
    }

    #[test]
    fn unaligned_search_finds_overlapping_and_wildcard_hits() {
        let pats = vec![
            Pattern::literal(b"\xFF\xD8\xFF", false),
            Pattern::literal(b"\xFF\xD8", false),
            wild(b"??moov"),
            Pattern::literal(b"<html", true),
        ];
        let s = HeaderSearch::new(pats, None).unwrap();
        let data = b"xx\xFF\xD8\xFF\xD8\xFFab12moov<HtMl";
        assert_eq!(
            all_hits(&s, data, 0),
            vec![(2, 0), (2, 1), (4, 0), (4, 1), (9, 2), (15, 3)]
        );
        // A wildcard prefix reaching before the data is not a hit.
        assert_eq!(all_hits(&s, b"moov", 0), vec![]);
    }

    #[test]
    fn aligned_search_looks_at_sector_starts_only() {
        let pats = vec![Pattern::literal(b"%PDF-", false), wild(b"?ELF")];
        let s = HeaderSearch::new(pats, Some(512)).unwrap();
        let mut data = vec![0u8; 2048];
        data[100..105].copy_from_slice(b"%PDF-");
        data[512..517].copy_from_slice(b"%PDF-");
        data[1024..1028].copy_from_slice(b"\x7fELF");
        // Media offset 512: data[0] is a sector start.
        assert_eq!(all_hits(&s, &data, 512), vec![(512, 0), (1024, 1)]);
        // Media offset 100: data[412] is the first sector start.
        let hits = all_hits(&s, &data, 100);
        assert!(hits.iter().all(|(p, _)| (p + 100) % 512 == 0));
    }

    #[test]
    fn empty_or_all_wild_patterns_are_refused() {
        assert!(HeaderSearch::new(vec![wild(b"??")], None).is_err());
        assert!(HeaderSearch::new(vec![Pattern::literal(b"", false)], None).is_err());
    }
}
