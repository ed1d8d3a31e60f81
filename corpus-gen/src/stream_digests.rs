//! The image's digests, computed beside the writer.
//!
//! MD5 is one dependency chain per 64-byte block, so the image's MD5 runs
//! exactly as fast as one core and is the largest single cost of
//! generation (a profile of a 4 GiB corpus: 55% of all CPU time). Hashing
//! each buffer in place, the writer waited for it before filling the next
//! one, and generation used 1.3 of 2 cores. Here full buffers go through
//! short bounded queues to one thread for MD5 and one for SHA-1 and
//! SHA-256 (when asked for), so the writer fills the next buffer while the
//! last is hashed. Memory: at most [`DEPTH`] queued buffers per thread
//! (the image writer's thread included), plus the one being hashed, plus
//! up to `SPARE` buffers kept for reuse. On this 2-core test machine the
//! gain was within noise (4 GiB, `--digests md5`: 13.3 s either way),
//! since the generator's own threads already fill the second core; on
//! more cores the MD5 chain no longer stalls the writer.
//!
//! A buffer every reader is done with comes back for the next fill
//! ([`StreamDigests::buffer`]): a fresh 8 MiB buffer per fill was an
//! `mmap`, a page fault per page while filling it and an `munmap` (1.5k
//! pairs for a 4 GiB corpus).

use crate::CorpusError;
use crate::content::hex;
use caseload_digests::Digest;
use crossbeam_channel::{Receiver, Sender, bounded};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Buffers queued per digest thread.
pub const DEPTH: usize = 2;

type Queue = Sender<Arc<Vec<u8>>>;

/// SHA-1 and SHA-256 as hex, each where asked for.
type ShaPair = (Option<String>, Option<String>);

/// Buffers kept for reuse.
const SPARE: usize = 2 * DEPTH + 4;

/// Running digests of one byte stream.
pub struct StreamDigests {
    md5: (Queue, JoinHandle<String>),
    others: Option<(Queue, JoinHandle<ShaPair>)>,
    spare: (Sender<Vec<u8>>, Receiver<Vec<u8>>),
}

/// Hand `buf` back for reuse if this was its last reader (of several
/// finishing at once exactly one gets it).
pub fn recycle(spare: &Sender<Vec<u8>>, buf: Arc<Vec<u8>>) {
    if let Some(v) = Arc::into_inner(buf) {
        let _ = spare.try_send(v);
    }
}

/// Final digests (lower-case hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    /// MD5.
    pub md5: String,
    /// SHA-1, if asked for.
    pub sha1: Option<String>,
    /// SHA-256, if asked for.
    pub sha256: Option<String>,
}

fn spawn<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, CorpusError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(work)
        .map_err(|e| CorpusError::Worker(format!("starting the {name} thread: {e}")))
}

impl StreamDigests {
    /// Start the threads: MD5 always, SHA-1 and SHA-256 as asked.
    pub fn start(sha1: bool, sha256: bool) -> Result<StreamDigests, CorpusError> {
        let spare = bounded::<Vec<u8>>(SPARE);
        let (tx, rx) = bounded::<Arc<Vec<u8>>>(DEPTH);
        let back = spare.0.clone();
        let md5 = spawn("image-md5", move || {
            let mut h = caseload_digests::Md5::new();
            for b in rx {
                h.update(&b[..]);
                recycle(&back, b);
            }
            hex(&h.finalize())
        })?;
        let others = if sha1 || sha256 {
            let (tx2, rx2) = bounded::<Arc<Vec<u8>>>(DEPTH);
            let back = spare.0.clone();
            let handle = spawn("image-sha", move || {
                let mut h1 = sha1.then(caseload_digests::Sha1::new);
                let mut h2 = sha256.then(caseload_digests::Sha256::new);
                for b in rx2 {
                    if let Some(h) = &mut h1 {
                        h.update(&b[..]);
                    }
                    if let Some(h) = &mut h2 {
                        h.update(&b[..]);
                    }
                    recycle(&back, b);
                }
                (
                    h1.map(|h| hex(&h.finalize())),
                    h2.map(|h| hex(&h.finalize())),
                )
            })?;
            Some((tx2, handle))
        } else {
            None
        };
        Ok(StreamDigests {
            md5: (tx, md5),
            others,
            spare,
        })
    }

    /// An empty buffer of at least `capacity` bytes: one every reader has
    /// handed back, or a new one.
    pub fn buffer(&self, capacity: usize) -> Vec<u8> {
        match self.spare.1.try_recv() {
            Ok(mut v) => {
                v.clear();
                v.reserve(capacity);
                v
            }
            Err(_) => Vec::with_capacity(capacity),
        }
    }

    /// Where another reader of the stream's buffers hands them back
    /// ([`recycle`]).
    pub fn recycler(&self) -> Sender<Vec<u8>> {
        self.spare.0.clone()
    }

    /// Hand the next bytes of the stream over (blocks while the queues are
    /// full).
    pub fn feed(&self, buf: Arc<Vec<u8>>) -> Result<(), CorpusError> {
        let gone = || CorpusError::Worker("an image digest thread stopped".into());
        if let Some((tx, _)) = &self.others {
            tx.send(Arc::clone(&buf)).map_err(|_| gone())?;
        }
        self.md5.0.send(buf).map_err(|_| gone())
    }

    /// Wait for the threads and return the digests.
    pub fn finish(self) -> Result<Digests, CorpusError> {
        let died = || CorpusError::Worker("an image digest thread panicked".into());
        let (tx, handle) = self.md5;
        drop(tx);
        let md5 = handle.join().map_err(|_| died())?;
        let (sha1, sha256) = match self.others {
            Some((tx, handle)) => {
                drop(tx);
                handle.join().map_err(|_| died())?
            }
            None => (None, None),
        };
        Ok(Digests { md5, sha1, sha256 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_equal_one_shot_hashes_of_the_stream() {
        let mut data = vec![0u8; 5_000_000];
        crate::rng::Rng::new(3).fill(&mut data);
        let d = StreamDigests::start(true, true).expect("start");
        for part in data.chunks(777_777) {
            d.feed(Arc::new(part.to_vec())).expect("feed");
        }
        let got = d.finish().expect("finish");
        assert_eq!(got.md5, hex(&md5::Md5::digest(&data)));
        assert_eq!(got.sha1, Some(hex(&sha1::Sha1::digest(&data))));
        assert_eq!(got.sha256, Some(hex(&sha2::Sha256::digest(&data))));
        let only = StreamDigests::start(false, false).expect("start");
        only.feed(Arc::new(data.clone())).expect("feed");
        let got = only.finish().expect("finish");
        assert_eq!((got.sha1, got.sha256), (None, None));
    }
}
