//! Items of user signatures (scalpel/foremost files): a header, then a
//! footer found forward (first), in reverse (last within the maximum
//! size) or as a stop before which the item ends (NEXT); without a footer
//! the maximum size is carved. Nothing inside can be checked, so complete
//! items are `unchecked`.

use super::super::conf::FooterMode;
use super::super::pattern::Pattern;
use super::{Cut, Delimiter, Step, Validation, Verdict};

/// Streaming search for a pattern (wildcards, case folding) across feeds.
#[derive(Debug)]
pub(crate) struct PatternFind {
    pattern: Pattern,
    carry: Vec<u8>,
    /// Bytes before which no occurrence may start (the header).
    skip: u64,
    pos: u64,
}

impl PatternFind {
    /// Search for `pattern`, ignoring occurrences starting before `skip`.
    pub(crate) fn new(pattern: Pattern, skip: u64) -> Self {
        PatternFind {
            pattern,
            carry: Vec::new(),
            skip,
            pos: 0,
        }
    }

    /// Start offsets (absolute) of occurrences completed by `data`, in
    /// order; `stop` ends the search early when it returns true.
    pub(crate) fn find(&mut self, data: &[u8], mut stop: impl FnMut(u64) -> bool) {
        let n = self.pattern.len();
        let keep = n.saturating_sub(1);
        let carried = self.carry.len();
        let carry_start = self.pos - carried as u64;
        // Occurrences starting in the carry and ending in `data`.
        if carried > 0 {
            let mut joint = std::mem::take(&mut self.carry);
            joint.extend_from_slice(&data[..keep.min(data.len())]);
            for s in 0..carried {
                let abs = carry_start + s as u64;
                if abs >= self.skip && self.pattern.matches_at(&joint[s..]) && stop(abs) {
                    joint.truncate(carried);
                    self.carry = joint;
                    return;
                }
            }
            joint.truncate(carried);
            self.carry = joint;
        }
        let (anchor_at, anchor) = self.pattern.anchor();
        let anchor = anchor.to_vec();
        let folded = self.pattern.case_insensitive();
        let mut s = 0usize;
        while s + n <= data.len() {
            // Jump to the next anchor occurrence.
            let from = s + anchor_at;
            let next = if folded {
                data[from..]
                    .windows(anchor.len())
                    .position(|w| w.eq_ignore_ascii_case(&anchor))
            } else {
                memchr::memmem::find(&data[from..], &anchor)
            };
            let Some(p) = next else { break };
            s = from + p - anchor_at;
            if s + n > data.len() {
                break;
            }
            let abs = self.pos + s as u64;
            if abs >= self.skip && self.pattern.matches_at(&data[s..]) && stop(abs) {
                return;
            }
            s += 1;
        }
        // Remember the tail for occurrences straddling into the next feed.
        let mut tail = std::mem::take(&mut self.carry);
        tail.extend_from_slice(&data[data.len().saturating_sub(keep)..]);
        let excess = tail.len().saturating_sub(keep);
        tail.drain(..excess);
        self.carry = tail;
        self.pos += data.len() as u64;
    }
}

/// The delimiter of a user signature.
#[derive(Debug)]
pub struct UserDelimiter {
    footer: Option<PatternFind>,
    footer_len: u64,
    mode: FooterMode,
    fed: u64,
    mark: Option<u64>,
}

impl UserDelimiter {
    /// A delimiter for an item whose header is `header_len` bytes.
    pub fn new(header_len: usize, footer: Option<Pattern>, mode: FooterMode) -> Self {
        let footer_len = footer.as_ref().map_or(0, |f| f.len() as u64);
        UserDelimiter {
            footer: footer.map(|f| PatternFind::new(f, header_len as u64)),
            footer_len,
            mode,
            fed: 0,
            mark: None,
        }
    }
}

impl Delimiter for UserDelimiter {
    fn feed(&mut self, data: &[u8]) -> Step {
        let Some(f) = self.footer.as_mut() else {
            self.fed += data.len() as u64;
            return Step::More;
        };
        let mut first: Option<u64> = None;
        let mode = self.mode;
        let flen = self.footer_len;
        let mut last_end = None;
        f.find(data, |start| match mode {
            FooterMode::Reverse => {
                last_end = Some(start + flen);
                false
            }
            FooterMode::Forward | FooterMode::Next => {
                first = Some(start);
                true
            }
        });
        self.fed += data.len() as u64;
        if let Some(e) = last_end {
            self.mark = Some(e);
        }
        match (mode, first) {
            (FooterMode::Forward, Some(s)) => Step::End {
                len: s + flen,
                verdict: Verdict::new(Validation::Unchecked, "header and footer found"),
            },
            (FooterMode::Next, Some(s)) => Step::End {
                len: s,
                verdict: Verdict::new(Validation::Unchecked, "ends before the next footer"),
            },
            _ => Step::More,
        }
    }

    fn finish(&mut self, cut: Cut, fed: u64) -> Step {
        if let Some(len) = self.mark {
            return Step::End {
                len,
                verdict: Verdict::new(Validation::Unchecked, "ends at the last footer"),
            };
        }
        let verdict = match (self.footer.is_some(), cut) {
            (false, Cut::MaxSize) => Verdict::new(
                Validation::Unchecked,
                "no footer defined: the maximum size is carved",
            ),
            (false, Cut::RangeEnd | Cut::NextHeader) => Verdict::new(
                Validation::Truncated,
                "the scanned range ends before the maximum size",
            ),
            (true, Cut::MaxSize) => {
                Verdict::new(Validation::Truncated, "no footer within the maximum size")
            }
            (true, Cut::RangeEnd | Cut::NextHeader) => Verdict::new(
                Validation::Truncated,
                "the scanned range ends before a footer",
            ),
        };
        Step::End { len: fed, verdict }
    }

    fn accepted(&self) -> bool {
        // A user signature has no structure to test: its header is all.
        true
    }

    fn mark(&self) -> Option<u64> {
        self.mark
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{delimit, end_of};
    use super::*;

    fn pat(s: &[u8], fold: bool) -> Pattern {
        let w = s.iter().map(|&b| b == b'?').collect();
        Pattern::new(s.to_vec(), w, fold)
    }

    #[test]
    fn forward_next_and_reverse_footers() {
        let data = b"HDR..aa..END..bb..END..cc";
        for chunk in [1, 2, 4, 100] {
            let mut d = UserDelimiter::new(3, Some(pat(b"END", false)), FooterMode::Forward);
            assert_eq!(end_of(&mut d, data, chunk), (12, Validation::Unchecked));
            let mut d = UserDelimiter::new(3, Some(pat(b"END", false)), FooterMode::Next);
            assert_eq!(end_of(&mut d, data, chunk), (9, Validation::Unchecked));
            let mut d = UserDelimiter::new(3, Some(pat(b"END", false)), FooterMode::Reverse);
            assert_eq!(end_of(&mut d, data, chunk), (21, Validation::Unchecked));
        }
    }

    #[test]
    fn wildcard_and_case_folded_footers_across_feeds() {
        let data = b"<html> body </HtMl> tail";
        for chunk in [1, 3, 5] {
            let mut d = UserDelimiter::new(6, Some(pat(b"</html>", true)), FooterMode::Forward);
            assert_eq!(end_of(&mut d, data, chunk).0, 19, "chunk {chunk}");
            let mut d = UserDelimiter::new(2, Some(pat(b"\xFF?\xD9", false)), FooterMode::Forward);
            assert_eq!(end_of(&mut d, b"\xFF\xD8xx\xFFQ\xD9yy", chunk).0, 7);
        }
    }

    #[test]
    fn a_footer_inside_the_header_does_not_count() {
        let mut d = UserDelimiter::new(4, Some(pat(b"AB", false)), FooterMode::Forward);
        assert_eq!(end_of(&mut d, b"ABAB..AB", 1).0, 8);
    }

    #[test]
    fn no_footer_carves_the_maximum() {
        let mut d = UserDelimiter::new(2, None, FooterMode::Forward);
        assert_eq!(d.feed(b"0123456789"), Step::More);
        match d.finish(Cut::MaxSize, 10) {
            Step::End { len, verdict } => {
                assert_eq!((len, verdict.validation), (10, Validation::Unchecked))
            }
            s => panic!("{s:?}"),
        }
        let mut d = UserDelimiter::new(2, Some(pat(b"zz", false)), FooterMode::Forward);
        let (step, accepted) = delimit(&mut d, b"hh no footer", 3);
        assert!(accepted);
        assert!(matches!(
            step,
            Step::End {
                len: 12,
                verdict: Verdict {
                    validation: Validation::Truncated,
                    ..
                }
            }
        ));
    }
}
