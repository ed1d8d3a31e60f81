//! Criterion benches for the E01 chunk kernel: `ChunkEncoder::encode` (the
//! compress-or-store decision with its Adler-32 trailer) on 32 KiB chunks of
//! text-like, incompressible, zero and mixed media at the three levels, and
//! the same chunks through flate2 with the zlib-rs backend at the nominal
//! zlib levels, the alternative the writer was measured against (see
//! `ewf-writer/src/chunk.rs`). Throughput is media bytes per second on one
//! core.

use caseload_ewf_writer::{ChunkEncoder, Compression};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

#[path = "../ewf-writer/tests/support/shared.rs"]
#[allow(dead_code)]
mod shared;

const CHUNK: usize = 32 * 1024;
const CHUNKS: usize = 256;

/// 8 MiB of each kind of content, as whole chunks.
fn inputs() -> Vec<(&'static str, Vec<u8>)> {
    let len = CHUNK * CHUNKS;
    let text: Vec<u8> = b"the evidence disk holds sectors, clusters and deleted files\n"
        .iter()
        .cycle()
        .enumerate()
        .map(|(i, &b)| {
            if i % 97 == 0 {
                b'0' + (i % 10) as u8
            } else {
                b
            }
        })
        .take(len)
        .collect();
    let mut x = 0x2545_F491_4F6C_DD1D_u64;
    let noise: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect();
    vec![
        ("text", text),
        ("noise", noise),
        ("zeros", vec![0u8; len]),
        ("mixed", shared::mixed_media(len, 1)),
    ]
}

fn bench_encoder(c: &mut Criterion) {
    let inputs = inputs();
    let mut group = c.benchmark_group("ewf_chunk_encode");
    group.throughput(Throughput::Bytes((CHUNK * CHUNKS) as u64));
    group.sample_size(10);
    for level in [Compression::None, Compression::Fast, Compression::Best] {
        for (kind, data) in &inputs {
            let id = BenchmarkId::new(level.name(), kind);
            group.bench_with_input(id, data, |b, data| {
                let mut encoder = ChunkEncoder::new(level);
                let mut out = Vec::with_capacity(CHUNK * 2);
                b.iter(|| {
                    let mut stored = 0usize;
                    for chunk in data.chunks(CHUNK) {
                        encoder.encode(black_box(chunk), false, &mut out);
                        stored += out.len();
                    }
                    black_box(stored)
                });
            });
        }
    }
    group.finish();
}

fn bench_zlib_rs(c: &mut Criterion) {
    let inputs = inputs();
    let mut group = c.benchmark_group("ewf_chunk_flate2_zlib_rs");
    group.throughput(Throughput::Bytes((CHUNK * CHUNKS) as u64));
    group.sample_size(10);
    for (name, level) in [("fast", 1u32), ("best", 9)] {
        for (kind, data) in &inputs {
            let id = BenchmarkId::new(name, kind);
            group.bench_with_input(id, data, |b, data| {
                let mut z = flate2::Compress::new(flate2::Compression::new(level), true);
                let mut out = Vec::with_capacity(CHUNK * 2);
                b.iter(|| {
                    let mut stored = 0usize;
                    for chunk in data.chunks(CHUNK) {
                        z.reset();
                        out.clear();
                        let done = z.compress_vec(
                            black_box(chunk),
                            &mut out,
                            flate2::FlushCompress::Finish,
                        );
                        stored += if done.is_ok() {
                            out.len().min(chunk.len() + 4)
                        } else {
                            chunk.len() + 4
                        };
                    }
                    black_box(stored)
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_encoder, bench_zlib_rs);
criterion_main!(benches);
