//! Criterion benches for caseload-fs's file-system walks over in-memory
//! images: FAT32 and NTFS volumes of 10,000 files in 100 directories, built
//! with the crate's test-image builders. Measures the walk alone (metadata
//! parsing, records) and the walk plus reading every file's content through
//! its runs.

use std::io::Read;
use std::ops::ControlFlow;

use caseload_fs::{ContentReader, open_filesystem};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

#[allow(dead_code, clippy::all)]
#[path = "../filesystems/tests/support/synth.rs"]
mod synth;

const DIRS: usize = 100;
const FILES_PER_DIR: usize = 100;

fn content(i: usize) -> Vec<u8> {
    (0..(700 + (i * 37) % 3000))
        .map(|j| (i + j) as u8)
        .collect()
}

fn fat32_image() -> Vec<u8> {
    let mut f = synth::Fat::new(synth::FatType::Fat32, 262_144, 1);
    let root = f.root();
    for d in 0..DIRS {
        let name = format!("Directory number {d:03}");
        let mut short = *b"DIR        ";
        short[3..6].copy_from_slice(format!("{d:03}").as_bytes());
        let dir = f.add_dir(root, Some(&name), &short);
        for i in 0..FILES_PER_DIR {
            let n = d * FILES_PER_DIR + i;
            let mut short = *b"F          ";
            short[1..6].copy_from_slice(format!("{n:05}").as_bytes());
            short[8..11].copy_from_slice(b"TXT");
            f.add_file(
                dir,
                Some(&format!("a long file name {n:05}.txt")),
                &short,
                &content(n),
            );
        }
    }
    f.finish()
}

fn ntfs_image() -> Vec<u8> {
    let mut n = synth::Ntfs::new(120_000, 10_300);
    for d in 0..DIRS {
        let dir = n.add_dir(synth::NTFS_ROOT, &format!("Directory number {d:03}"));
        for i in 0..FILES_PER_DIR {
            let k = d * FILES_PER_DIR + i;
            let data = content(k);
            // A third resident, the rest in clusters.
            let data = if k.is_multiple_of(3) {
                synth::NtfsData::Resident(data[..data.len().min(400)].to_vec())
            } else {
                synth::NtfsData::NonResident(data)
            };
            n.add_file(dir, &format!("a long file name {k:05}.txt"), data, vec![]);
        }
    }
    n.finish()
}

fn bench_walks(c: &mut Criterion) {
    for (name, img) in [("fat32", fat32_image()), ("ntfs", ntfs_image())] {
        let fs = open_filesystem(&img[..], 0, img.len() as u64).expect("open");
        let mut records = 0u64;
        fs.walk(|_| {
            records += 1;
            ControlFlow::Continue(())
        })
        .expect("walk");
        let mut group = c.benchmark_group(format!("{name}_walk"));
        group.throughput(Throughput::Elements(records));
        group.bench_function("records", |b| {
            b.iter(|| {
                let fs = open_filesystem(&img[..], 0, img.len() as u64).expect("open");
                let mut n = 0u64;
                fs.walk(|r| {
                    n += r.size;
                    ControlFlow::Continue(())
                })
                .expect("walk");
                n
            })
        });
        group.bench_function("records_and_content", |b| {
            let mut buf = vec![0u8; 64 * 1024];
            b.iter(|| {
                let fs = open_filesystem(&img[..], 0, img.len() as u64).expect("open");
                let mut n = 0u64;
                fs.walk(|r| {
                    let mut reader = ContentReader::new(&img[..], &r.content);
                    while let Ok(k) = reader.read(&mut buf) {
                        if k == 0 {
                            break;
                        }
                        n += k as u64;
                    }
                    ControlFlow::Continue(())
                })
                .expect("walk");
                n
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench_walks);
criterion_main!(benches);
