//! Choosing one implementation of a kernel by measuring them all, once per
//! process, on data in cache.
//!
//! Why measure instead of testing CPU features: which implementation is
//! fastest depends on the micro-architecture, not on the feature list. The
//! AVX-512 MD5 was 18% faster than the assembly routine on the Xeon it was
//! written on, and 1.8 times slower than OpenSSL's on an AMD EPYC that has
//! AVX-512 too. A few milliseconds at first use settle it on whatever CPU
//! a lab has, and the choice is recorded ([`KernelChoice`]) so a report
//! says what ran.
//!
//! Every implementation is checked against the reference on the same data
//! before it is timed; one that disagrees is never used (a wrong digest is
//! worse than a slow one).

use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How the implementation that runs was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum How {
    /// The fastest of those measured at first use.
    Measured,
    /// Named by the kernel's environment variable.
    Forced,
    /// A fixed rule, with the reason in the choice's note.
    Rule,
    /// The only implementation this build and CPU have.
    Only,
}

/// One implementation of a kernel, as measured (or why it could not run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Its name, as the kernel's environment variable takes it.
    pub name: String,
    /// Whether it can run here (this build, this CPU, the libraries found).
    pub available: bool,
    /// Its speed in the first-use measurement, MB/s (10^6 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mb_s: Option<f64>,
    /// Why it is not available, or anything else worth saying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Which implementation of one kernel this process runs, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelChoice {
    /// The kernel (`md5`, `sha1`, `sha256`, `md5-lanes`, ...).
    pub kernel: String,
    /// The implementation that runs.
    pub chosen: String,
    /// How it was chosen.
    pub how: How,
    /// Every implementation considered.
    pub candidates: Vec<Candidate>,
    /// The environment variable that forces a choice, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// The rule, or anything else a reader needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A compression function over whole 64-byte blocks.
pub(crate) type Compress<S> = fn(&mut S, &[[u8; 64]]);

/// An implementation of a block kernel, or why this build or CPU lacks it.
pub(crate) struct Implementation<S> {
    pub(crate) name: &'static str,
    pub(crate) run: Result<Compress<S>, String>,
}

/// The implementation a process runs, with its record.
pub(crate) struct Chosen<S> {
    pub(crate) compress: Compress<S>,
    pub(crate) record: KernelChoice,
}

/// Bytes each implementation hashes per timed round: large enough that the
/// clock's resolution does not matter, small enough to stay in L2.
const SAMPLE_BYTES: usize = 32 << 10;
/// Timed rounds per implementation, interleaved; the best counts (other
/// load only slows a round).
const ROUNDS: usize = 5;

/// `len` deterministic bytes that are not a repeating pattern
/// (xorshift64 from `seed`, made odd): what measurements hash, since
/// constant data can flatter a kernel (the E01 writer's constant-chunk
/// shortcut, for one).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Deterministic, patternless blocks for the measurement and the check.
fn sample() -> &'static [[u8; 64]] {
    static SAMPLE: OnceLock<Vec<[u8; 64]>> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        noise(SAMPLE_BYTES, 0x9e37_79b9_7f4a_7c15)
            .as_chunks::<64>()
            .0
            .to_vec()
    })
}

/// How long one call of `f` takes (callers time several rounds,
/// interleaved between the implementations compared, and keep the best).
pub fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// The value of a kernel's environment variable, if set and not empty.
pub fn forced(env: &str) -> Option<String> {
    std::env::var(env)
        .ok()
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty())
}

/// Why a forced name cannot be used, where it cannot: `None` when the
/// variable is unset or names an implementation that runs here.
pub fn forced_problem(env: &str, candidates: &[Candidate]) -> Option<String> {
    let want = forced(env)?;
    let available: Vec<&str> = candidates
        .iter()
        .filter(|c| c.available)
        .map(|c| c.name.as_str())
        .collect();
    match candidates.iter().find(|c| c.name == want) {
        Some(c) if c.available => None,
        Some(c) => Some(format!(
            "{env}={want}: not available here ({}); available: {}",
            c.note.as_deref().unwrap_or("this CPU or build lacks it"),
            available.join(", ")
        )),
        None => Some(format!(
            "{env}={want}: no such implementation; known: {}; available here: {}",
            candidates
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            available.join(", ")
        )),
    }
}

/// Choose among `impls` of a block kernel: each is checked against
/// `reference` on the sample, then timed; the fastest runs unless `env`
/// forces an available one. A forced name that is not available is ignored
/// here (the command line refuses it first: [`check_forced`]).
pub(crate) fn choose_block<S: Copy + PartialEq>(
    kernel: &'static str,
    env: &'static str,
    init: S,
    reference: Compress<S>,
    impls: Vec<Implementation<S>>,
) -> Chosen<S> {
    let blocks = sample();
    let mut want = init;
    reference(&mut want, blocks);
    let mut candidates: Vec<Candidate> = Vec::with_capacity(impls.len());
    let mut runnable: Vec<(usize, Compress<S>)> = Vec::new();
    for (i, imp) in impls.iter().enumerate() {
        let mut candidate = Candidate {
            name: imp.name.to_string(),
            available: false,
            mb_s: None,
            note: None,
        };
        match imp.run {
            Ok(f) => {
                let mut got = init;
                f(&mut got, blocks);
                if got == want {
                    candidate.available = true;
                    runnable.push((i, f));
                } else {
                    candidate.note = Some("gave a wrong result on the check; never used".into());
                }
            }
            Err(ref why) => candidate.note = Some(why.clone()),
        }
        candidates.push(candidate);
    }
    let mut best = vec![Duration::MAX; impls.len()];
    for _ in 0..ROUNDS {
        for &(i, f) in &runnable {
            let mut state = init;
            let t = time(|| f(black_box(&mut state), black_box(blocks)));
            black_box(state);
            best[i] = best[i].min(t);
        }
    }
    for &(i, _) in &runnable {
        let secs = best[i].as_secs_f64().max(1e-9);
        candidates[i].mb_s = Some((SAMPLE_BYTES as f64 / secs / 1e6 * 10.0).round() / 10.0);
    }
    let forced_index = forced(env).and_then(|name| {
        runnable
            .iter()
            .find(|(i, _)| impls[*i].name == name)
            .map(|&(i, _)| i)
    });
    // The list is in order of preference, so a tie keeps the earlier one.
    let fastest = runnable
        .iter()
        .map(|&(i, _)| i)
        .reduce(|a, b| if best[b] < best[a] { b } else { a });
    let (index, how) = match (forced_index, fastest) {
        (Some(i), _) => (i, How::Forced),
        (None, Some(i)) if runnable.len() == 1 => (i, How::Only),
        (None, Some(i)) => (i, How::Measured),
        // Nothing ran correctly: the reference itself is always right.
        (None, None) => {
            return Chosen {
                compress: reference,
                record: KernelChoice {
                    kernel: kernel.into(),
                    chosen: "reference".into(),
                    how: How::Only,
                    candidates,
                    env: Some(env.into()),
                    note: Some("no implementation passed the check; the reference runs".into()),
                },
            };
        }
    };
    let compress = runnable
        .iter()
        .find(|(i, _)| *i == index)
        .map_or(reference, |&(_, f)| f);
    Chosen {
        compress,
        record: KernelChoice {
            kernel: kernel.into(),
            chosen: impls[index].name.into(),
            how,
            candidates,
            env: Some(env.into()),
            note: None,
        },
    }
}

/// Refuse a kernel's environment variable that names an implementation
/// this CPU or build cannot run (or none at all): the message lists what
/// can. Commands call this before any work, so a forced choice never
/// reaches an illegal instruction.
pub fn check_forced(kernels: &[KernelChoice]) -> Result<(), String> {
    let problems: Vec<String> = kernels
        .iter()
        .filter_map(|k| forced_problem(k.env.as_deref()?, &k.candidates))
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
