//! Which implementation of each hot kernel runs on this machine, and why:
//! run.json's `system.kernels` and `caseload doctor`.
//!
//! The digests and the many-message lanes are chosen by measurement at
//! first use (`caseload-digests`, `caseload-lanes`); whole-unit inflation
//! (`caseload-inflate`) and the rest follow a
//! rule, stated here with the measurement or reason behind it, so a report
//! says what ran whichever CPU it came from.

pub use caseload_digests::select::{Candidate, How, KernelChoice};

/// Every kernel's choice. Measures those not chosen yet (a millisecond or
/// so each), so a run calls it before its first stage, keeping the
/// measurement out of the stages' times.
pub fn all() -> Vec<KernelChoice> {
    let mut all = caseload_digests::kernels();
    all.extend(caseload_lanes::kernels());
    all.extend(caseload_inflate::kernels());
    all.extend(rules());
    all
}

/// Refuse a `CASELOAD_KERNEL_*` variable naming an implementation this
/// CPU or build cannot run, listing what can (never an illegal
/// instruction later).
pub fn check_environment() -> Result<(), String> {
    caseload_digests::select::check_forced(&all())
}

/// A kernel with one implementation in this build, or whose crate chooses
/// by CPU feature itself.
fn rule(kernel: &str, chosen: &str, others: &[(&str, &str)], note: &str) -> KernelChoice {
    let mut candidates = vec![Candidate {
        name: chosen.into(),
        available: true,
        mb_s: None,
        note: None,
    }];
    candidates.extend(others.iter().map(|(name, why)| Candidate {
        name: (*name).into(),
        available: false,
        mb_s: None,
        note: Some((*why).into()),
    }));
    KernelChoice {
        kernel: kernel.into(),
        chosen: chosen.into(),
        how: How::Rule,
        candidates,
        env: None,
        note: Some(note.into()),
    }
}

/// Whether this CPU has the x86 features named (false elsewhere).
fn x86_has(features: &[&str]) -> bool {
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    {
        features.iter().all(|f| match *f {
            "pclmulqdq" => std::is_x86_feature_detected!("pclmulqdq"),
            "sse4.1" => std::is_x86_feature_detected!("sse4.1"),
            "ssse3" => std::is_x86_feature_detected!("ssse3"),
            "avx2" => std::is_x86_feature_detected!("avx2"),
            _ => false,
        })
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "x86")))]
    {
        let _ = features;
        false
    }
}

fn rules() -> Vec<KernelChoice> {
    let crc = if x86_has(&["pclmulqdq", "sse4.1"]) {
        "crc32fast-pclmulqdq"
    } else {
        "crc32fast-table"
    };
    let teddy = if x86_has(&["avx2"]) {
        "aho-corasick-teddy-avx2"
    } else if x86_has(&["ssse3"]) {
        "aho-corasick-teddy-ssse3"
    } else {
        "aho-corasick-dfa"
    };
    vec![
        rule(
            "crc32",
            crc,
            &[],
            "crc32fast chooses by CPU feature: carry-less multiplication folding where the CPU has \
             PCLMULQDQ and SSE4.1 (several times the table code everywhere it exists), else 16-byte tables",
        ),
        rule(
            "inflate-stream",
            "zlib-rs",
            &[],
            "ZIP members, gzip and PDF streams through flate2 with zlib-rs, which picks its SIMD paths by CPU feature \
             (libdeflate inflates whole buffers only)",
        ),
        rule(
            "deflate",
            "libdeflate",
            &[(
                "zlib-rs",
                "3 times slower at the size libewf writes (ewf-writer/src/chunk.rs)",
            )],
            "one backend by rule, never by measurement: the bytes of an E01 must not depend on the CPU that wrote it",
        ),
        rule(
            "carve-scan",
            teddy,
            &[],
            "carving's header search: aho-corasick's packed (Teddy) searcher where the CPU has SSSE3/AVX2, \
             its DFA elsewhere, chosen by the crate; memchr's SIMD for single bytes and footers",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_the_issue_names_is_recorded_once() {
        let all = all();
        let names: Vec<&str> = all.iter().map(|k| k.kernel.as_str()).collect();
        for want in [
            "md5",
            "sha1",
            "sha256",
            "adler32",
            "md5-lanes",
            "sha1-lanes",
            "crc32",
            "inflate",
            "inflate-container",
            "inflate-stream",
            "deflate",
            "carve-scan",
        ] {
            assert_eq!(
                names.iter().filter(|n| **n == want).count(),
                1,
                "{want} in {names:?}"
            );
        }
        for k in &all {
            assert!(
                k.candidates
                    .iter()
                    .any(|c| c.name == k.chosen && c.available),
                "{k:?}"
            );
        }
    }
}
