//! `Lanes` must give the digests of md-5 and the sha1 crate for every
//! length around the padding's edges, in any mix, whatever the memory
//! bound and whichever digests are asked for.

use caseload_lanes::{Digests, Lanes};
use md5_soft::Digest;

/// Deterministic bytes that are not a repeating pattern.
fn sample(len: usize, seed: u64) -> Vec<u8> {
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

fn reference(m: &[u8], md5: bool, sha1: bool) -> Digests {
    Digests {
        md5: md5.then(|| md5_soft::Md5::digest(m).into()),
        sha1: sha1.then(|| sha1::Sha1::digest(m).into()),
    }
}

#[test]
fn lanes_match_the_reference() {
    let mut lens: Vec<usize> = (0..=200).collect();
    lens.extend([255, 256, 1000, 4095, 4096, 65_536 + 55, 300_001, 1 << 20]);
    lens.reverse();
    let messages: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| sample(n, i as u64 + 1))
        .collect();
    // Every way the work can be split between the lanes and one message
    // at a time (the measured choice is one of them; where the CPU lacks
    // AVX-512 every split runs one at a time).
    let splits = [(true, true), (true, false), (false, true), (false, false)];
    for (md5, sha1) in [(true, true), (true, false), (false, true)] {
        for (max_held, (lane_md5, lane_sha1)) in [0, 4096, 1 << 20, usize::MAX]
            .into_iter()
            .flat_map(|m| splits.map(|s| (m, s)))
        {
            let mut lanes = Lanes::with_lanes(max_held, md5, sha1, lane_md5, lane_sha1);
            let mut got = vec![None; messages.len()];
            let mut record = |done: Vec<(usize, Digests)>| {
                for (tag, digests) in done {
                    assert!(got[tag].is_none(), "tag {tag} handed back twice");
                    got[tag] = Some(digests);
                }
            };
            for (tag, m) in messages.iter().enumerate() {
                let mut b = lanes.buffer();
                assert!(b.is_empty());
                b.extend_from_slice(m);
                record(lanes.push(tag, b));
            }
            record(lanes.finish());
            for (tag, m) in messages.iter().enumerate() {
                assert_eq!(
                    got[tag],
                    Some(reference(m, md5, sha1)),
                    "length {}, max_held {max_held}, md5 {md5}, sha1 {sha1}, lanes {lane_md5}/{lane_sha1}",
                    m.len()
                );
            }
        }
    }
}

/// Fewer messages than lanes, and none at all.
#[test]
fn lanes_with_few_messages() {
    let mut lanes = Lanes::new(usize::MAX, true, true);
    assert!(lanes.finish().is_empty());
    for n in [0usize, 3, 64] {
        let m = sample(n, 5);
        let mut done = lanes.push(n, m.clone());
        done.extend(lanes.finish());
        assert_eq!(done, vec![(n, reference(&m, true, true))]);
    }
}
