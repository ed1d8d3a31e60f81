//! The fast MD5 must equal RFC 1321 and the md-5 crate for every length and
//! every way of splitting the input into `update` calls.

use caseload_md5::{Digest, Lanes, Md5};

fn reference(data: &[u8]) -> [u8; 16] {
    md5_soft::Md5::digest(data).into()
}

fn ours(data: &[u8]) -> [u8; 16] {
    Md5::digest(data).into()
}

/// Deterministic bytes that are not a repeating pattern.
fn sample(len: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn rfc1321_test_suite() {
    let suite: [(&str, &str); 7] = [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        (
            "abcdefghijklmnopqrstuvwxyz",
            "c3fcd3d76192e4007dfb496cca67e13b",
        ),
        (
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
            "d174ab98d277d9f5a5611c2c9f419d9f",
        ),
        (
            "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
            "57edf4a22be3c955ac49da2e2107b67a",
        ),
    ];
    for (input, want) in suite {
        assert_eq!(hex(&ours(input.as_bytes())), want, "MD5({input:?})");
    }
}

#[test]
fn every_length_around_the_padding_boundaries() {
    let data = sample(1100);
    for len in 0..=data.len() {
        assert_eq!(ours(&data[..len]), reference(&data[..len]), "length {len}");
    }
}

#[test]
fn every_split_point_gives_the_same_digest() {
    for len in [55usize, 56, 63, 64, 65, 127, 128, 129, 300] {
        let data = sample(len);
        let want = reference(&data);
        for a in 0..=len {
            for b in a..=len.min(a + 70) {
                let mut h = Md5::new();
                h.update(&data[..a]);
                h.update(&data[a..b]);
                h.update(&data[b..]);
                assert_eq!(
                    <[u8; 16]>::from(h.finalize()),
                    want,
                    "len {len} split {a}/{b}"
                );
            }
        }
    }
}

#[test]
fn large_input_in_uneven_pieces_and_reset() {
    let data = sample(3 << 20);
    let want = reference(&data);
    let mut h = Md5::new();
    let mut at = 0;
    let mut step = 1;
    while at < data.len() {
        let end = (at + step).min(data.len());
        h.update(&data[at..end]);
        at = end;
        step = step * 7 % 100_003 + 1;
    }
    let clone = h.clone();
    assert_eq!(<[u8; 16]>::from(h.finalize_reset()), want);
    assert_eq!(<[u8; 16]>::from(clone.finalize()), want);
    // After a reset the hasher starts over.
    h.update(b"abc");
    assert_eq!(hex(&h.finalize()), "900150983cd24fb0d6963f7d28e17f72");
}

/// `Lanes`: every length around the padding's edges and some long ones,
/// pushed in an order that mixes short and long, give md-5's digests, each
/// tag exactly once, whatever the memory bound.
#[test]
fn lanes_match_the_reference() {
    let mut lens: Vec<usize> = (0..=200).collect();
    lens.extend([255, 256, 1000, 4095, 4096, 65_536 + 55, 300_001, 1 << 20]);
    lens.reverse();
    let messages: Vec<Vec<u8>> = lens.iter().map(|&n| sample(n)).collect();
    for max_held in [0, 4096, 1 << 20, usize::MAX] {
        let mut lanes = Lanes::new(max_held);
        let mut got = vec![None; messages.len()];
        let mut record = |done: Vec<(usize, [u8; 16])>| {
            for (tag, digest) in done {
                assert!(got[tag].is_none(), "tag {tag} handed back twice");
                got[tag] = Some(digest);
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
                Some(reference(m)),
                "length {}, max_held {max_held}",
                m.len()
            );
        }
    }
}

/// `Lanes` with fewer messages than lanes, and with none.
#[test]
fn lanes_with_few_messages() {
    let mut lanes = Lanes::new(usize::MAX);
    assert!(lanes.finish().is_empty());
    for n in [0usize, 3, 64] {
        let m = sample(n);
        let mut done = lanes.push(n, m.clone());
        done.extend(lanes.finish());
        assert_eq!(done, vec![(n, reference(&m))]);
    }
}
