//! Shared by the container tests: a patterned raw disk, qemu-img, and
//! comparisons of a container's media against bytes known to be right.

#![allow(dead_code)]

use caseload_containers::{Backing, Container, ContainerError, FileBacking};
use md5::{Digest, Md5};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Whether `tool` is on the PATH; prints the skip line when it is not.
pub fn have_tool(tool: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()));
    if !found {
        println!("SKIPPED: {tool} not installed");
    }
    found
}

/// Deterministic pseudo-random bytes (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn fill(&mut self, b: &mut [u8]) {
        for c in b.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

/// Size of the test disk: 6 MiB and three sectors, so the last 64 KiB
/// grain, QCOW2 cluster and VHD/VHDX block are partial.
pub const RAW_SIZE: usize = (6 << 20) + 3 * 512;

/// A raw disk of random runs, zero runs (whole grains, clusters and
/// blocks left unallocated by sparse formats), a repeating pattern, odd
/// islands of data inside zeros, and data in its last partial grain.
pub fn raw_disk() -> Vec<u8> {
    let mut d = vec![0u8; RAW_SIZE];
    let mut r = Rng(0x5eed_c0de);
    r.fill(&mut d[..1 << 20]);
    // 1-2 MiB zeros; 2-2.5 MiB pattern.
    for (i, b) in d[2 << 20..(2 << 20) + (512 << 10)].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    // 2.5-5 MiB zeros with islands at odd places.
    for &at in &[
        (2 << 20) + (700 << 10) + 13,
        (3 << 20) + 65535,
        (4 << 20) + 4097,
    ] {
        r.fill(&mut d[at..at + 777]);
    }
    // 5 MiB - end: random, including the partial last grain.
    let tail = 5 << 20;
    r.fill(&mut d[tail..]);
    d
}

pub fn md5_hex(b: &[u8]) -> String {
    Md5::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

/// Runs a command; panics with its output when it fails.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `qemu-img convert -f raw -O FORMAT [-c] -o OPTIONS raw out`.
pub fn qemu_convert(raw: &Path, out: &Path, format: &str, options: &[&str], compress: bool) {
    let mut c = Command::new("qemu-img");
    c.args(["convert", "-q", "-f", "raw", "-O", format]);
    if compress {
        c.arg("-c");
    }
    for o in options {
        c.args(["-o", o]);
    }
    c.arg(raw).arg(out);
    run(&mut c);
}

/// The oracle: qemu-img's own raw conversion of the container.
pub fn qemu_raw(container: &Path, dir: &Path) -> Vec<u8> {
    let out = dir.join("oracle.raw");
    run(Command::new("qemu-img")
        .args(["convert", "-q", "-O", "raw"])
        .arg(container)
        .arg(&out));
    std::fs::read(&out).expect("read oracle")
}

/// A backing that counts the bytes read through it, as the engine's
/// evidence channel does.
pub struct Counted {
    pub inner: FileBacking,
    pub bytes: Arc<AtomicU64>,
}

impl Backing for Counted {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let n = self.inner.read_at(buf, offset)?;
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

/// Opens `path` with a counting opener; returns the container, the files
/// the opener was asked for, and the byte counter.
pub fn open_counted(
    path: &Path,
) -> (
    Result<Container, ContainerError>,
    Vec<PathBuf>,
    Arc<AtomicU64>,
) {
    let bytes = Arc::new(AtomicU64::new(0));
    let asked = std::sync::Mutex::new(Vec::new());
    let opener = |p: &Path| -> std::io::Result<Box<dyn Backing>> {
        asked.lock().unwrap().push(p.to_path_buf());
        Ok(Box::new(Counted {
            inner: FileBacking::open(p)?,
            bytes: Arc::clone(&bytes),
        }))
    };
    let c = Container::open_path(path, &opener);
    let asked = asked.into_inner().unwrap();
    (c, asked, bytes)
}

/// Every media byte read in 1 MiB steps.
pub fn read_all(c: &Container) -> Vec<u8> {
    let mut out = vec![0u8; usize::try_from(c.media_size()).unwrap()];
    let mut at = 0;
    while at < out.len() {
        let end = (at + (1 << 20)).min(out.len());
        let n = c.read_at(&mut out[at..end], at as u64).unwrap();
        assert_eq!(n, end - at, "short read at {at}");
        at = end;
    }
    out
}

/// The container's media equals `want`: size, MD5 of every byte, random
/// positioned reads at odd offsets and lengths (across grain, cluster and
/// block boundaries), reads running past the end, and from several
/// threads at once.
pub fn check_media(c: &Container, want: &[u8]) {
    assert_eq!(c.media_size(), want.len() as u64, "media size");
    let all = read_all(c);
    assert_eq!(md5_hex(&all), md5_hex(want), "MD5 of the media");
    let mut r = Rng(77);
    let mut buf = vec![0u8; 300_000];
    for _ in 0..300 {
        let off = r.below(want.len() as u64 + 10);
        let max = if r.below(4) == 0 { 300_000 } else { 70_000 };
        let len = 1 + r.below(max) as usize;
        let n = c.read_at(&mut buf[..len], off).unwrap();
        let expect = want.len().saturating_sub(off as usize).min(len);
        assert_eq!(n, expect, "read of {len} at {off}");
        assert_eq!(
            &buf[..n],
            &want[off as usize..off as usize + n],
            "bytes at {off}+{len}"
        );
    }
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                let mut r = Rng(1000 + t);
                let mut buf = vec![0u8; 100_000];
                for _ in 0..100 {
                    let off = r.below(want.len() as u64);
                    let len = 1 + r.below(100_000) as usize;
                    let n = c.read_at(&mut buf[..len], off).unwrap();
                    assert_eq!(&buf[..n], &want[off as usize..off as usize + n]);
                }
            });
        }
    });
    // Regions tile the media, and every unstored byte reads as zero.
    let mut at = 0u64;
    let mut pieces = 0;
    while let Some(reg) = c.region(at).unwrap() {
        assert_eq!(reg.offset, at);
        assert!(reg.len > 0);
        if !reg.stored {
            let s = usize::try_from(at).unwrap();
            let e = s + usize::try_from(reg.len).unwrap();
            assert!(
                want[s..e].iter().all(|&b| b == 0),
                "unstored region {s}..{e} not zero"
            );
        }
        at += reg.len;
        pieces += 1;
    }
    assert_eq!(at, want.len() as u64);
    assert!(pieces > 0);
}
