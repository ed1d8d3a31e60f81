//! Inflating whole compressed units (an E01 chunk, a VMDK grain, a QCOW2
//! cluster) into a buffer of known size, through zlib-rs or libdeflate.
//!
//! # Why two backends, chosen by rule
//!
//! Two backends do this job well: flate2 over zlib-rs (a port of zlib-ng,
//! SIMD chosen by CPU feature) and libdeflate (whole buffers only). Which is
//! faster depends on the compressor that wrote the data more than on the
//! CPU. `image-hash` of a 1 GiB corpus (MD5+SHA-1, warm, medians of 5,
//! `benches/scripts/container-bench.sh` and `image-hash-bench.sh`), on an
//! Intel Xeon (family 6 model 207, 2 vCPUs), each backend forced with
//! [`ENV`]:
//!
//! | evidence | zlib-rs | libdeflate |
//! |---|---|---|
//! | E01 by `caseload convert` (libdeflate level 1) | 1646 ms, 2.89 CPU-s | 2130 ms, 4.04 CPU-s |
//! | E01 by `ewfacquirestream -c fast` (zlib) | 1742 ms, 3.16 CPU-s | 1688 ms, 3.01 CPU-s |
//! | stream-optimized VMDK by `qemu-img` | 1763 ms, 3.10 CPU-s | 1709 ms, 2.98 CPU-s |
//! | compressed QCOW2 by `qemu-img` | 1790 ms, 3.22 CPU-s | 1709 ms, 2.97 CPU-s |
//!
//! So E01 chunks go to zlib-rs (a few percent lost on libewf's E01 against
//! 29% risked on ours) and container grains and clusters to libdeflate
//! ([`Backend::for_unit`]). A measurement on the evidence itself was tried
//! and left: timing both backends (thread CPU time) on a source's first
//! units, then on one unit in 128, picked zlib-rs for the VMDK (its
//! sampled units inflated faster there), whose whole image hash is faster
//! with libdeflate; what a backend costs the hashing threads beside it
//! (caches) shows only in whole runs, which is what the rule rests on.
//!
//! # Damaged data
//!
//! libdeflate says only that a stream is bad. Where it fails, the unit is
//! inflated again with zlib-rs, so a damaged unit is judged by one backend
//! whatever the rule: how many bytes came out and whether the stream ended.
//!
//! `CASELOAD_KERNEL_INFLATE=zlib-rs` or `=libdeflate` forces a backend for
//! every unit; [`kernels`] reports the rules for run.json's `system.kernels`.

#![warn(missing_docs)]

use std::cell::RefCell;

use caseload_digests::select::{Candidate, How, KernelChoice};
use flate2::{Decompress, FlushDecompress, Status};

/// The environment variable that forces a backend.
pub const ENV: &str = "CASELOAD_KERNEL_INFLATE";

/// The wrapping of a compressed unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// zlib (RFC 1950: header, deflate, Adler-32): EWF chunks, VMDK grains.
    Zlib,
    /// Raw deflate (RFC 1951): QCOW2 clusters.
    Deflate,
}

/// An inflation backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// flate2 over zlib-rs.
    ZlibRs,
    /// libdeflate.
    Libdeflate,
}

impl Backend {
    /// The name run.json and the environment variable use.
    pub fn name(self) -> &'static str {
        match self {
            Backend::ZlibRs => "zlib-rs",
            Backend::Libdeflate => "libdeflate",
        }
    }

    /// The backend for a unit of `kind`: by rule (see the crate's
    /// measurements), or as [`ENV`] forces.
    pub fn for_unit(kind: Unit) -> Backend {
        if let Some(b) = caseload_digests::select::forced(ENV).and_then(|v| Backend::from_name(&v))
        {
            return b;
        }
        match kind {
            Unit::EwfChunk => Backend::ZlibRs,
            Unit::ContainerGrain => Backend::Libdeflate,
        }
    }

    fn from_name(name: &str) -> Option<Backend> {
        [Backend::ZlibRs, Backend::Libdeflate]
            .into_iter()
            .find(|b| b.name() == name)
    }
}

/// What a compressed unit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// An EWF (E01) chunk.
    EwfChunk,
    /// A VMDK grain or a QCOW2 cluster.
    ContainerGrain,
}

/// What inflating a unit gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inflated {
    /// Bytes written to the front of the output buffer.
    pub produced: usize,
    /// Whether the stream's end was reached (false: the output buffer
    /// filled first, or the input ran out).
    pub stream_end: bool,
}

/// A stream that does not inflate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InflateError(pub String);

/// Inflates one evidence source's units with the backend its kind's rule
/// names.
#[derive(Debug, Clone, Copy)]
pub struct Inflater {
    backend: Backend,
}

impl Inflater {
    /// The inflater for units of `kind`.
    pub fn new(kind: Unit) -> Self {
        Inflater {
            backend: Backend::for_unit(kind),
        }
    }

    /// The backend it uses.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Inflates `input` (one unit, possibly followed by padding) into
    /// `out`, whose length is the most the unit may give. Bytes of `out`
    /// past [`Inflated::produced`] are left as they were.
    pub fn inflate(
        &self,
        format: Format,
        input: &[u8],
        out: &mut [u8],
    ) -> Result<Inflated, InflateError> {
        inflate_with(self.backend, format, input, out)
    }
}

thread_local! {
    /// The thread's zlib-rs state, reset for each unit rather than made
    /// anew (setting up its state and window was a share of a 64 KiB
    /// grain's time).
    static ZLIB: RefCell<Option<Decompress>> = const { RefCell::new(None) };
    /// The thread's libdeflate decompressor.
    static LIBDEFLATE_D: RefCell<Option<libdeflater::Decompressor>> = const { RefCell::new(None) };
}

/// Inflates with one backend (libdeflate falling back to zlib-rs where it
/// finds the stream bad, so damage is judged by one backend).
pub fn inflate_with(
    backend: Backend,
    format: Format,
    input: &[u8],
    out: &mut [u8],
) -> Result<Inflated, InflateError> {
    if backend == Backend::Libdeflate {
        let done = LIBDEFLATE_D.with_borrow_mut(|slot| {
            let d = slot.get_or_insert_with(libdeflater::Decompressor::new);
            match format {
                Format::Zlib => d.zlib_decompress(input, out),
                Format::Deflate => d.deflate_decompress(input, out),
            }
        });
        if let Ok(produced) = done {
            return Ok(Inflated {
                produced,
                stream_end: true,
            });
        }
    }
    let zlib = format == Format::Zlib;
    let (status, total_out) = ZLIB.with_borrow_mut(|slot| {
        let z = match slot {
            Some(z) => {
                z.reset(zlib);
                z
            }
            None => slot.insert(Decompress::new(zlib)),
        };
        let status = z.decompress(input, out, FlushDecompress::Finish);
        (status, z.total_out())
    });
    let status = status.map_err(|e| InflateError(e.to_string()))?;
    Ok(Inflated {
        produced: usize::try_from(total_out)
            .unwrap_or(out.len())
            .min(out.len()),
        stream_end: status == Status::StreamEnd,
    })
}

/// The rules, for run.json's `system.kernels` and `caseload doctor`:
/// `inflate` (E01 chunks) and `inflate-container` (VMDK grains, QCOW2
/// clusters).
pub fn kernels() -> Vec<KernelChoice> {
    [
        (
            "inflate",
            Unit::EwfChunk,
            "E01 chunks, by rule from whole image hashes of a 1 GiB corpus (caseload-inflate): libdeflate took \
             40% more CPU than zlib-rs on caseload convert's E01 and 5% less on ewfacquirestream's",
        ),
        (
            "inflate-container",
            Unit::ContainerGrain,
            "VMDK grains and QCOW2 clusters, by rule from whole image hashes of a 1 GiB corpus \
             (caseload-inflate): libdeflate took 4% (VMDK) and 8% (QCOW2) less CPU than zlib-rs on qemu-img's",
        ),
    ]
    .into_iter()
    .map(|(kernel, unit, note)| {
        let chosen = Backend::for_unit(unit);
        let forced = caseload_digests::select::forced(ENV).is_some_and(|v| Backend::from_name(&v).is_some());
        KernelChoice {
            kernel: kernel.into(),
            chosen: chosen.name().into(),
            how: if forced { How::Forced } else { How::Rule },
            candidates: [Backend::ZlibRs, Backend::Libdeflate]
                .into_iter()
                .map(|b| Candidate {
                    name: b.name().into(),
                    available: true,
                    mb_s: None,
                    note: None,
                })
                .collect(),
            env: Some(ENV.into()),
            note: Some(note.into()),
        }
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(format: Format, data: &[u8]) -> Vec<u8> {
        let mut c = libdeflater::Compressor::new(libdeflater::CompressionLvl::default());
        // zlib's bound covers raw deflate's too (six bytes of wrapping).
        let mut out = vec![0u8; c.zlib_compress_bound(data.len())];
        let n = match format {
            Format::Zlib => c.zlib_compress(data, &mut out),
            Format::Deflate => c.deflate_compress(data, &mut out),
        }
        .expect("compress");
        out.truncate(n);
        out
    }

    fn sample(seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..65536u32)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if i % 7 < 4 {
                    b"forensic "[i as usize % 9]
                } else {
                    (x >> 59) as u8
                }
            })
            .collect()
    }

    #[test]
    fn both_backends_give_the_same_bytes_and_padding_is_ignored() {
        for format in [Format::Zlib, Format::Deflate] {
            let data = sample(3);
            let mut stored = packed(format, &data);
            // QCOW2 rounds a cluster's stored size up to whole sectors.
            stored.extend_from_slice(&[0xAA; 300]);
            for backend in [Backend::ZlibRs, Backend::Libdeflate] {
                let mut out = vec![0u8; data.len()];
                let r = inflate_with(backend, format, &stored, &mut out).expect("inflates");
                assert_eq!(
                    r,
                    Inflated {
                        produced: data.len(),
                        stream_end: true
                    },
                    "{backend:?}"
                );
                assert_eq!(out, data, "{backend:?} {format:?}");
            }
        }
    }

    #[test]
    fn each_kind_of_unit_has_its_backend_unless_forced() {
        if caseload_digests::select::forced(ENV).is_some() {
            return;
        }
        assert_eq!(Inflater::new(Unit::EwfChunk).backend(), Backend::ZlibRs);
        assert_eq!(
            Inflater::new(Unit::ContainerGrain).backend(),
            Backend::Libdeflate
        );
        let k = kernels();
        assert_eq!(k.len(), 2);
        assert!(
            k.iter()
                .all(|k| k.how == How::Rule && k.env.as_deref() == Some(ENV))
        );
    }

    #[test]
    fn damage_is_judged_as_zlib_rs_judges_it_whatever_the_backend() {
        let data = sample(9);
        let stored = packed(Format::Zlib, &data);
        let cases: Vec<(&str, Vec<u8>, usize)> = vec![
            ("truncated", stored[..stored.len() / 2].to_vec(), data.len()),
            (
                "bit flipped",
                {
                    let mut s = stored.clone();
                    s[40] ^= 0x55;
                    s
                },
                data.len(),
            ),
            ("output too small", stored.clone(), data.len() / 2),
            ("garbage", vec![0xFF; 500], data.len()),
        ];
        for (what, input, room) in cases {
            let mut a = vec![0u8; room];
            let mut b = vec![0u8; room];
            let za = inflate_with(Backend::ZlibRs, Format::Zlib, &input, &mut a);
            let lb = inflate_with(Backend::Libdeflate, Format::Zlib, &input, &mut b);
            assert_eq!(za, lb, "{what}");
            if let Ok(r) = za {
                assert_eq!(a[..r.produced], b[..r.produced], "{what}");
            }
            // Through a container's inflater, too.
            let inf = Inflater::new(Unit::ContainerGrain);
            let mut c = vec![0u8; room];
            assert_eq!(inf.inflate(Format::Zlib, &input, &mut c), za, "{what}");
        }
    }
}
