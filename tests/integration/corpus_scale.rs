//! Self-similar corpora: a GiB of a large corpus holds what a GiB of a
//! small one holds (issue 38). The default workstation profile (NTFS, the
//! fill that gives a 4:1 E01) at 1 and 4 GiB, three seeds each, compared
//! by the manifest's per-GiB figures; 16 GiB is left to
//! `benches/scripts/self-similar.sh`. Bytes are discarded (the figures
//! need only the plan and the content's sizes).

use crate::corpus_support::make;
use caseload_corpus::manifest::PerGib;

fn per_gib(size: &str, seed: u64) -> PerGib {
    let seed = seed.to_string();
    let c = make(&[
        "--size",
        size,
        "--seed",
        &seed,
        "--fs",
        "ntfs",
        "--target-e01-ratio",
        "4",
        "--decoys",
        "1000",
        "--discard-image",
    ]);
    c.manifest
        .summary
        .per_gib_used
        .unwrap_or_else(|| panic!("no per-GiB figures at {size}, seed {seed}"))
}

/// One per-GiB figure of a manifest.
type Figure = fn(&PerGib) -> f64;

fn mean(v: &[PerGib], f: Figure) -> f64 {
    v.iter().map(f).sum::<f64>() / v.len() as f64
}

#[test]
fn a_gib_holds_the_same_at_1_and_4_gib() {
    let small: Vec<PerGib> = (1..=3).map(|s| per_gib("1GiB", s)).collect();
    let large: Vec<PerGib> = (1..=3).map(|s| per_gib("4GiB", s)).collect();
    // Used space grows with the disk (the figures are per GiB of it).
    assert!(mean(&large, |p| p.used_bytes as f64) > 3.0 * mean(&small, |p| p.used_bytes as f64));
    let figures: [(&str, Figure); 6] = [
        ("files", |p| p.files),
        ("folders", |p| p.folders),
        ("messages", |p| p.messages),
        ("attachments", |p| p.attachments),
        ("members", |p| p.members),
        ("text bytes", |p| p.text_bytes),
    ];
    for (name, f) in figures {
        let (a, b) = (mean(&small, f), mean(&large, f));
        assert!(a > 0.0 && b > 0.0, "{name}: none per GiB ({a}, {b})");
        let ratio = a / b;
        assert!(
            (0.9..=1.1).contains(&ratio),
            "{name} per GiB used: {a:.1} at 1 GiB against {b:.1} at 4 GiB (ratio {ratio:.3})"
        );
    }
}
