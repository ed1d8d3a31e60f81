//! `image-hash`: hash the whole media (MD5, SHA-1, SHA-256 in any
//! combination, concurrently) and check the result against the hashes an
//! E01 stores. A mismatch is a recorded finding, not a failure.
//!
//! The media is read in order by a [`BlockStream`] (E01 chunks inflated in
//! parallel by its readers); each algorithm runs on its own thread, fed the
//! same blocks, so the slowest algorithm (MD5 here) sets the pace on one core
//! while the others and the inflaters use the rest.

use super::StageSpec;
use crate::casedb::{EvidenceHashes, ItemKind, Write};
use crate::digest::Algorithm;
use crate::source::{BlockStream, StreamOptions, hex};
use crate::stage::{
    Problem, ProgressUnit, Severity, Stage, StageContext, StageError, StageOptions, StageSummary,
    parse_options,
};
use caseload_digests::Digest;
use crossbeam_channel::bounded;
use serde::Deserialize;
use std::collections::VecDeque;
use std::sync::Arc;

pub(super) const SPEC: StageSpec = StageSpec {
    name: "image-hash",
    about: "hash the whole media (MD5/SHA-1/SHA-256) and verify against stored E01 hashes",
    build,
    needs: &[],
    default: super::Inclusion::Always,
    preflight: None,
    units: crate::stage::Units::Whole,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    #[serde(default = "default_algorithms")]
    algorithms: Vec<Algorithm>,
}

fn default_algorithms() -> Vec<Algorithm> {
    vec![Algorithm::Md5, Algorithm::Sha1]
}

fn build(options: &StageOptions) -> Result<Box<dyn Stage>, StageError> {
    let o: Options = parse_options("image-hash", options)?;
    if o.algorithms.is_empty() {
        return Err(StageError::Config {
            stage: "image-hash".into(),
            message: "`algorithms` must name at least one of md5, sha1, sha256".into(),
        });
    }
    let mut algorithms = o.algorithms;
    algorithms.dedup();
    Ok(Box::new(ImageHash { algorithms }))
}

/// The image-hash stage.
#[derive(Debug)]
pub struct ImageHash {
    algorithms: Vec<Algorithm>,
}

/// Feed blocks to a hasher on its own thread; returns the hex digest. The
/// hasher that sets the pace (`critical`) keeps normal priority, the others
/// run as helpers.
fn spawn_hasher(
    algorithm: Algorithm,
    critical: bool,
) -> (
    crossbeam_channel::Sender<Arc<Vec<u8>>>,
    std::thread::JoinHandle<String>,
) {
    let (tx, rx) = bounded::<Arc<Vec<u8>>>(8);
    let handle = std::thread::spawn(move || {
        if !critical {
            crate::thread_priority::become_helper();
        }
        fn drain<D: Digest>(mut d: D, rx: crossbeam_channel::Receiver<Arc<Vec<u8>>>) -> String {
            for block in rx {
                d.update(&block[..]);
            }
            hex(&d.finalize())
        }
        match algorithm {
            Algorithm::Md5 => drain(caseload_digests::Md5::new(), rx),
            Algorithm::Sha1 => drain(caseload_digests::Sha1::new(), rx),
            Algorithm::Sha256 => drain(caseload_digests::Sha256::new(), rx),
        }
    });
    (tx, handle)
}

impl Stage for ImageHash {
    fn name(&self) -> &'static str {
        "image-hash"
    }

    fn run(&self, ctx: &StageContext<'_>) -> Result<StageSummary, StageError> {
        let source = Arc::clone(ctx.evidence);
        let size = source.size();
        ctx.progress.set_total(size, ProgressUnit::Bytes);
        // One reader (inflater) per thread: readers run as helpers, at a
        // lower priority than the pace-setting hasher, so they fill the
        // time it leaves on every core rather than take it (on 2 cores and
        // an E01, 2 readers beat 1 by ~3%: 3.95 s vs 4.06 s median).
        let readers = ctx.threads.max(1);
        let options = StreamOptions::for_source(source.as_ref(), readers);
        for note in &source.info().notes {
            ctx.record(
                Severity::Error,
                Problem {
                    item_kind: Some(ItemKind::Evidence),
                    item_id: Some(ctx.evidence_id),
                    message: note.clone(),
                    ..Problem::default()
                },
            )?;
        }
        // Slowest per byte first: MD5 is a single dependency chain, the SHAs
        // run on SHA-NI where the CPU has it.
        let critical = [Algorithm::Md5, Algorithm::Sha256, Algorithm::Sha1]
            .into_iter()
            .find(|a| self.algorithms.contains(a));
        let hashers: Vec<_> = self
            .algorithms
            .iter()
            .map(|&a| (a, spawn_hasher(a, Some(a) == critical)))
            .collect();
        let mut bytes = 0u64;
        let mut damaged = 0u64;
        let mut interrupted = false;
        let mut stream = BlockStream::new(Arc::clone(&source), 0..size, options);
        // Blocks the hashers may still be reading, oldest first; once only
        // this list holds one, its buffer goes back to the stream.
        let mut in_use: VecDeque<Arc<Vec<u8>>> = VecDeque::new();
        while let Some(block) = stream.next() {
            if ctx.check_cancel().is_err() {
                interrupted = true;
                break;
            }
            for error in &block.errors {
                damaged += 1;
                ctx.record_source_error(error)?;
            }
            bytes += block.data.len() as u64;
            ctx.progress.advance(block.data.len() as u64);
            let shared = Arc::new(block.data);
            for (_, (tx, _)) in &hashers {
                // A hasher only goes away by panicking; the join reports it.
                let _ = tx.send(Arc::clone(&shared));
            }
            in_use.push_back(shared);
            while in_use.front().is_some_and(|b| Arc::strong_count(b) == 1) {
                if let Some(Ok(data)) = in_use.pop_front().map(Arc::try_unwrap) {
                    stream.recycle(data);
                }
            }
        }
        let mut digests = Vec::new();
        for (algorithm, (tx, handle)) in hashers {
            drop(tx);
            let digest = handle
                .join()
                .map_err(|_| StageError::Other(format!("{algorithm:?} hasher failed")))?;
            digests.push((algorithm, digest));
        }
        if interrupted {
            return Err(StageError::Interrupted);
        }
        let get = |a: Algorithm| {
            digests
                .iter()
                .find(|(x, _)| *x == a)
                .map(|(_, d)| d.clone())
        };
        let (md5, sha1, sha256) = (
            get(Algorithm::Md5),
            get(Algorithm::Sha1),
            get(Algorithm::Sha256),
        );
        let stored = source.info().stored_hashes.clone();
        let mut compared = Vec::new();
        let mut mismatched = Vec::new();
        for (name, stored, computed) in [("MD5", &stored.md5, &md5), ("SHA-1", &stored.sha1, &sha1)]
        {
            if let (Some(s), Some(c)) = (stored, computed) {
                compared.push(name);
                if s != c {
                    mismatched.push(format!("{name} stored {s}, computed {c}"));
                }
            }
        }
        let verified = if !mismatched.is_empty() {
            "mismatch"
        } else if !compared.is_empty() {
            "match"
        } else if damaged > 0 {
            "incomplete"
        } else {
            "not-stored"
        };
        if !mismatched.is_empty() {
            ctx.record(
                Severity::Finding,
                Problem {
                    item_kind: Some(ItemKind::Evidence),
                    item_id: Some(ctx.evidence_id),
                    message: format!(
                        "image hash does not match the hash stored in the evidence: {}",
                        mismatched.join("; ")
                    ),
                    ..Problem::default()
                },
            )?;
        }
        ctx.db.writer().exec(Write::EvidenceHashes(EvidenceHashes {
            evidence_id: ctx.evidence_id,
            md5: md5.clone(),
            sha1: sha1.clone(),
            sha256: sha256.clone(),
            verified,
        }))?;
        let mut summary = StageSummary {
            items: 1,
            bytes,
            ..StageSummary::default()
        };
        for (key, value) in [
            ("md5", md5),
            ("sha1", sha1),
            ("sha256", sha256),
            ("stored_md5", stored.md5),
            ("stored_sha1", stored.sha1),
        ] {
            if let Some(v) = value {
                summary.details.insert(key.into(), v.into());
            }
        }
        summary.details.insert("verified".into(), verified.into());
        summary
            .details
            .insert("damaged_units".into(), damaged.into());
        Ok(summary)
    }
}
