//! Where an item's bytes are on the media: `files.extents`,
//! `carved_items.extents` and `files.slack`, with their one encoder and
//! decoder.
//!
//! Stored as JSON text, `[[offset, len], ...]` with a sparse run as
//! `[null, len]`: readable in any SQL client, identical on both engines.

pub use caseload_fs::Run;

/// An item's runs on the media, in content order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extents(pub Vec<Run>);

/// A stored extents value that is not what [`Extents::encode`] writes.
#[derive(Debug, Clone, thiserror::Error)]
#[error("malformed extents `{text}`: {reason}")]
pub struct ExtentsError {
    /// The start of the stored text.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Extents {
    /// `(offset, len)` of the runs stored on the media, in order (sparse
    /// and zeroed runs have no place).
    pub fn data_runs(&self) -> Vec<(u64, u64)> {
        self.0
            .iter()
            .filter_map(|r| match r {
                Run::Data { offset, len } => Some((*offset, *len)),
                _ => None,
            })
            .collect()
    }

    /// One run of `len` bytes at `offset`.
    pub fn single(offset: u64, len: u64) -> Self {
        Extents(vec![Run::Data { offset, len }])
    }

    /// The stored text.
    pub fn encode(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|r| match *r {
                Run::Data { offset, len } => format!("[{offset},{len}]"),
                Run::Zeros { len } => format!("[null,{len}]"),
            })
            .collect();
        format!("[{}]", parts.join(","))
    }

    /// Parse stored text.
    pub fn decode(text: &str) -> Result<Self, ExtentsError> {
        let runs: Vec<(Option<u64>, u64)> =
            serde_json::from_str(text).map_err(|e| ExtentsError {
                text: text.chars().take(80).collect(),
                reason: e.to_string(),
            })?;
        Ok(Extents(
            runs.into_iter()
                .map(|(offset, len)| match offset {
                    Some(offset) => Run::Data { offset, len },
                    None => Run::Zeros { len },
                })
                .collect(),
        ))
    }

    /// The media offset of the first byte of data, if any run has data.
    pub fn first_offset(&self) -> Option<u64> {
        self.0.iter().find_map(|r| match *r {
            Run::Data { offset, .. } => Some(offset),
            Run::Zeros { .. } => None,
        })
    }

    /// Bytes over all runs.
    pub fn len(&self) -> u64 {
        self.0
            .iter()
            .map(|r| match *r {
                Run::Data { len, .. } | Run::Zeros { len } => len,
            })
            .sum()
    }

    /// No runs at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `(Some(offset), len)` for data, `(None, len)` for a sparse run.
    pub fn pairs(&self) -> Vec<(Option<u64>, u64)> {
        self.0
            .iter()
            .map(|r| match *r {
                Run::Data { offset, len } => (Some(offset), len),
                Run::Zeros { len } => (None, len),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_round_trip_and_refuse_what_they_did_not_write() {
        let e = Extents(vec![
            Run::Data {
                offset: 4096,
                len: 512,
            },
            Run::Zeros { len: 8192 },
            Run::Data {
                offset: 1 << 40,
                len: 1,
            },
        ]);
        let text = e.encode();
        assert_eq!(text, "[[4096,512],[null,8192],[1099511627776,1]]");
        assert_eq!(Extents::decode(&text).unwrap(), e);
        assert_eq!(e.first_offset(), Some(4096));
        assert_eq!(e.len(), 512 + 8192 + 1);
        assert_eq!(Extents::decode("[]").unwrap(), Extents::default());
        for bad in ["", "[[1]]", "[[-1,2]]", "{\"a\":1}", "[[1,2],"] {
            assert!(Extents::decode(bad).is_err(), "{bad}");
        }
    }
}
