//! The device server: a FUSE file system holding one file per modelled
//! device (`<device>.img`), each backed by a file on fast storage
//! (`/dev/shm`). A loop device is attached to each, and the channel's file
//! system lives on the loop device, so every request the kernel sends to
//! that block device reaches this server as a read, write or fsync of the
//! file. The server does the request on the backing file at once and
//! replies when the device's [`timing`](crate::timing) says it completes,
//! from a timer thread, so requests queue and overlap as they would on the
//! device.
//!
//! A device with an encryption layer ([`crypt`](crate::crypt)) is
//! encrypted here, sector by sector, on the way to its backing file and
//! decrypted on the way back, its payload after the layer's header; the
//! cipher's time delays the reply as dm-crypt's would (a write is
//! encrypted before the device sees it, a read decrypted after the
//! device returns it), and `.stats` gives the CPU seconds it took.
//!
//! A control file (`.control`) switches the model off while the lab is
//! being built (file systems made, evidence copied) and on for runs;
//! `.stats` reports what each device served.

use crate::crypt::{SECTOR, XtsCipher};
use crate::timing::{DeviceTiming, Nanos, Op};
use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, WriteFlags,
};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// One device the server holds.
pub struct ServedDevice {
    /// File name under the mount (`<name>.img`).
    pub name: String,
    /// The backing file, opened read-write.
    pub backing: File,
    /// Size of the device as served (its payload).
    pub size: u64,
    /// Its timing (none: each request completes at once, for a device
    /// served only for its encryption layer).
    pub timing: Option<Box<dyn DeviceTiming>>,
    /// Its encryption layer on the host, and where the payload starts in
    /// the backing file.
    pub cipher: Option<(XtsCipher, u64)>,
}

/// Counts of what one device served while modelled.
#[derive(Debug, Default)]
struct Served {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    flushes: AtomicU64,
    /// Sum of (completion - arrival) over requests, ns.
    latency_ns: AtomicU64,
    /// CPU time the encryption layer took, ns.
    cipher_ns: AtomicU64,
}

struct Device {
    name: String,
    backing: File,
    size: u64,
    timing: Option<Mutex<Box<dyn DeviceTiming>>>,
    cipher: Option<(XtsCipher, u64)>,
    /// Held while a write that covers part of a sector reads, patches and
    /// rewrites it.
    patch: Mutex<()>,
    served: Served,
}

fn read_full(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            // Sparse tail of the backing file reads as zeros.
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Device {
    /// Read `len` bytes at `offset` of the payload, decrypted; and the
    /// cipher's CPU time, ns.
    fn read(&self, offset: u64, len: u64) -> std::io::Result<(Vec<u8>, u64)> {
        let Some((cipher, base)) = &self.cipher else {
            let mut buf = vec![0u8; len as usize];
            read_full(&self.backing, &mut buf, offset)?;
            return Ok((buf, 0));
        };
        let s = SECTOR as u64;
        let first = offset / s;
        let end = (offset + len).div_ceil(s);
        let mut buf = vec![0u8; ((end - first) * s) as usize];
        read_full(&self.backing, &mut buf, base + first * s)?;
        let spent = cipher.decrypt(&mut buf, first, SECTOR);
        let from = (offset - first * s) as usize;
        buf.drain(..from);
        buf.truncate(len as usize);
        Ok((buf, spent))
    }

    /// Write `data` at `offset` of the payload, encrypted; returns the
    /// cipher's CPU time, ns.
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<u64> {
        let Some((cipher, base)) = &self.cipher else {
            self.backing.write_all_at(data, offset)?;
            return Ok(0);
        };
        let s = SECTOR as u64;
        let len = data.len() as u64;
        if offset.is_multiple_of(s) && len.is_multiple_of(s) {
            let mut buf = data.to_vec();
            let spent = cipher.encrypt(&mut buf, offset / s, SECTOR);
            self.backing.write_all_at(&buf, base + offset)?;
            return Ok(spent);
        }
        // Part of a sector: read, decrypt, patch, encrypt, write back.
        let _held = self.patch.lock().unwrap_or_else(PoisonError::into_inner);
        let first = offset / s;
        let (mut buf, mut spent) =
            self.read(first * s, (offset + len).div_ceil(s) * s - first * s)?;
        let from = (offset - first * s) as usize;
        buf[from..from + data.len()].copy_from_slice(data);
        spent += cipher.encrypt(&mut buf, first, SECTOR);
        self.backing.write_all_at(&buf, base + first * s)?;
        Ok(spent)
    }
}

type Deliver = Box<dyn FnOnce() + Send>;

/// Replies by due time (and arrival, to keep equal times apart), the next
/// sequence number, and whether the server is stopping.
type Queue = (BTreeMap<(Instant, u64), Deliver>, u64, bool);

/// Replies waiting for their completion time.
struct Pending {
    queue: Mutex<Queue>,
    wake: Condvar,
}

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn at(&self, when: Instant, send: Deliver) {
        let mut q = self.lock();
        let seq = q.1;
        q.1 += 1;
        q.0.insert((when, seq), send);
        drop(q);
        self.wake.notify_one();
    }

    /// Send each reply at its time, until stopped.
    fn run(&self) {
        let mut q = self.lock();
        loop {
            if q.2 && q.0.is_empty() {
                return;
            }
            let Some((&(when, seq), _)) = q.0.iter().next() else {
                q = self.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
                continue;
            };
            let now = Instant::now();
            if when <= now {
                if let Some(send) = q.0.remove(&(when, seq)) {
                    drop(q);
                    send();
                    q = self.lock();
                }
                continue;
            }
            let left = when - now;
            if left > Duration::from_micros(200) {
                // Wake a little early; the rest is spun below.
                q = self
                    .wake
                    .wait_timeout(q, left - Duration::from_micros(100))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            } else {
                drop(q);
                std::thread::yield_now();
                q = self.lock();
            }
        }
    }
}

const ROOT: u64 = 1;
const CONTROL: u64 = 2;
const STATS: u64 = 3;
const FIRST_DEVICE: u64 = 16;
const TTL: Duration = Duration::from_secs(1);

struct Server {
    devices: Vec<Device>,
    modelled: AtomicBool,
    clock: Instant,
    pending: Arc<Pending>,
    started: SystemTime,
}

impl Server {
    fn device(&self, ino: INodeNo) -> Option<&Device> {
        ino.0
            .checked_sub(FIRST_DEVICE)
            .and_then(|i| self.devices.get(usize::try_from(i).ok()?))
    }

    fn now(&self) -> Nanos {
        u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, size, perm) = match ino {
            ROOT => (FileType::Directory, 0, 0o755),
            CONTROL => (FileType::RegularFile, 4, 0o600),
            STATS => (FileType::RegularFile, self.stats().len() as u64, 0o400),
            _ => (
                FileType::RegularFile,
                self.device(INodeNo(ino))?.size,
                0o600,
            ),
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: self.started,
            mtime: self.started,
            ctime: self.started,
            crtime: self.started,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn entries(&self) -> Vec<(u64, String)> {
        let mut out = vec![
            (CONTROL, ".control".to_string()),
            (STATS, ".stats".to_string()),
        ];
        for (i, d) in self.devices.iter().enumerate() {
            out.push((FIRST_DEVICE + i as u64, d.name.clone()));
        }
        out
    }

    fn stats(&self) -> String {
        let devices: serde_json::Map<String, serde_json::Value> = self
            .devices
            .iter()
            .map(|d| {
                let s = &d.served;
                let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
                (
                    d.name.clone(),
                    serde_json::json!({
                        "reads": load(&s.reads), "read_bytes": load(&s.read_bytes),
                        "writes": load(&s.writes), "write_bytes": load(&s.write_bytes),
                        "flushes": load(&s.flushes),
                        "latency_seconds": load(&s.latency_ns) as f64 / 1e9,
                        "cipher_cpu_seconds": load(&s.cipher_ns) as f64 / 1e9,
                    }),
                )
            })
            .collect();
        serde_json::json!({
            "modelled": self.modelled.load(Ordering::Relaxed),
            "devices": devices,
        })
        .to_string()
            + "\n"
    }

    /// Send `reply` when `dev` completes the request that reached it at
    /// `arrival`, `after` ns later (the cipher's work on what it read),
    /// or at once when the model is off.
    #[allow(clippy::too_many_arguments)]
    fn complete(
        &self,
        dev: &Device,
        op: Op,
        offset: u64,
        len: u64,
        arrival: Nanos,
        after: Nanos,
        reply: Deliver,
    ) {
        if !self.modelled.load(Ordering::Relaxed) {
            reply();
            return;
        }
        let done = match &dev.timing {
            Some(t) => t
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .submit(op, offset, len, arrival)
                .max(arrival),
            None => arrival,
        } + after;
        let s = &dev.served;
        match op {
            Op::Read => {
                s.reads.fetch_add(1, Ordering::Relaxed);
                s.read_bytes.fetch_add(len, Ordering::Relaxed);
            }
            Op::Write => {
                s.writes.fetch_add(1, Ordering::Relaxed);
                s.write_bytes.fetch_add(len, Ordering::Relaxed);
            }
            Op::Flush => {
                s.flushes.fetch_add(1, Ordering::Relaxed);
            }
        }
        s.latency_ns
            .fetch_add(done.saturating_sub(arrival), Ordering::Relaxed);
        s.cipher_ns.fetch_add(after, Ordering::Relaxed);
        self.pending
            .at(self.clock + Duration::from_nanos(done), reply);
    }
}

fn errno(e: &std::io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

impl Filesystem for Server {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Requests of up to 1 MiB, as a block device would get them.
        let _ = config.set_max_write(1 << 20);
        let _ = config.set_max_readahead(1 << 20);
        let _ = config.set_max_background(64);
        Ok(())
    }

    fn destroy(&mut self) {
        let mut q = self.pending.lock();
        q.2 = true;
        drop(q);
        self.pending.wake.notify_all();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 != ROOT {
            return reply.error(Errno::ENOENT);
        }
        match self
            .entries()
            .into_iter()
            .find(|(_, n)| OsStr::new(n) == name)
            .and_then(|(ino, _)| self.attr(ino))
        {
            Some(attr) => reply.entry(&TTL, &attr, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let Some(attr) = self.attr(ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        // A device's size is fixed; truncating the control file on open
        // for writing is fine.
        if size.is_some_and(|s| s != attr.size) && ino.0 != CONTROL {
            return reply.error(Errno::EPERM);
        }
        reply.attr(&TTL, &attr);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.attr(ino.0).is_none() {
            return reply.error(Errno::ENOENT);
        }
        // No page cache in between: every request is the device's.
        reply.opened(
            FileHandle(0),
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES,
        );
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let text = match ino.0 {
            CONTROL => Some(
                if self.modelled.load(Ordering::Relaxed) {
                    "on\n"
                } else {
                    "off\n"
                }
                .to_string(),
            ),
            STATS => Some(self.stats()),
            _ => None,
        };
        if let Some(text) = text {
            let bytes = text.as_bytes();
            let from = usize::try_from(offset)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            let to = from.saturating_add(size as usize).min(bytes.len());
            return reply.data(&bytes[from..to]);
        }
        let Some(dev) = self.device(ino) else {
            return reply.error(Errno::ENOENT);
        };
        let len = u64::from(size).min(dev.size.saturating_sub(offset));
        let arrival = self.now();
        let (buf, spent) = match dev.read(offset, len) {
            Ok(r) => r,
            Err(e) => return reply.error(errno(&e)),
        };
        self.complete(
            dev,
            Op::Read,
            offset,
            len,
            arrival,
            spent,
            Box::new(move || reply.data(&buf)),
        );
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let n = u32::try_from(data.len()).unwrap_or(u32::MAX);
        if ino.0 == CONTROL {
            match std::str::from_utf8(data).map(str::trim) {
                Ok("on") => self.modelled.store(true, Ordering::Relaxed),
                Ok("off") => self.modelled.store(false, Ordering::Relaxed),
                _ => return reply.error(Errno::EINVAL),
            }
            return reply.written(n);
        }
        let Some(dev) = self.device(ino) else {
            return reply.error(Errno::ENOENT);
        };
        if offset.saturating_add(data.len() as u64) > dev.size {
            return reply.error(Errno::ENOSPC);
        }
        // The cipher works before the device sees the write: its time is
        // in the arrival.
        let spent = match dev.write(offset, data) {
            Ok(spent) => spent,
            Err(e) => return reply.error(errno(&e)),
        };
        if self.modelled.load(Ordering::Relaxed) {
            dev.served.cipher_ns.fetch_add(spent, Ordering::Relaxed);
        }
        let arrival = self.now();
        self.complete(
            dev,
            Op::Write,
            offset,
            data.len() as u64,
            arrival,
            0,
            Box::new(move || reply.written(n)),
        );
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.device(ino) {
            Some(dev) => {
                let now = self.now();
                self.complete(dev, Op::Flush, 0, 0, now, 0, Box::new(move || reply.ok()))
            }
            None => reply.ok(),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino.0 != ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let mut all = vec![(ROOT, ".".to_string()), (ROOT, "..".to_string())];
        all.extend(self.entries());
        for (i, (ino, name)) in all.into_iter().enumerate().skip(offset as usize) {
            let kind = if ino == ROOT {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            if reply.add(INodeNo(ino), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let blocks: u64 = self.devices.iter().map(|d| d.size / 4096).sum();
        reply.statfs(
            blocks,
            0,
            0,
            self.devices.len() as u64 + 3,
            0,
            4096,
            255,
            4096,
        );
    }
}

/// Mount the device server at `mount_point` and serve until it is
/// unmounted (by `lab down`, or `umount`). The model starts off.
pub fn serve(mount_point: &Path, devices: Vec<ServedDevice>) -> std::io::Result<()> {
    let pending = Arc::new(Pending {
        queue: Mutex::new((BTreeMap::new(), 0, false)),
        wake: Condvar::new(),
    });
    let timer = {
        let pending = Arc::clone(&pending);
        std::thread::Builder::new()
            .name("lab-replies".into())
            .spawn(move || pending.run())?
    };
    let server = Server {
        devices: devices
            .into_iter()
            .map(|d| Device {
                name: d.name,
                backing: d.backing,
                size: d.size,
                timing: d.timing.map(Mutex::new),
                cipher: d.cipher,
                patch: Mutex::new(()),
                served: Served::default(),
            })
            .collect(),
        modelled: AtomicBool::new(false),
        clock: Instant::now(),
        pending: Arc::clone(&pending),
        started: SystemTime::now(),
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("caseload-lab".into()),
        MountOption::Subtype("caseload-lab".into()),
        MountOption::RW,
        MountOption::NoAtime,
    ];
    // Two threads take requests: while one does a read of the backing
    // file the other takes the next request.
    config.n_threads = Some(2);
    let result = fuser::mount(server, mount_point, &config);
    {
        let mut q = pending.lock();
        q.2 = true;
    }
    pending.wake.notify_all();
    let _ = timer.join();
    result
}
