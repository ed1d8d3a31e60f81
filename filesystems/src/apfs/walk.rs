//! The record walk over a container's volumes: directories from the root
//! down in `fls -r` order (a directory's names in key order, each
//! subdirectory entered right after its own record), an explicit stack
//! rather than recursion, each directory entered once.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::error::{ErrorKind, FsError, ProcessingError};
use crate::name::hostile_reason;
use crate::read::ReadAt;
use crate::record::{
    Content, Encoding, FileKind, FileRecord, Owner, Run, Times, Timestamp, clip_runs, push_run,
};
use crate::walk::{Sink, WalkSummary};

use super::btree::Scan;
use super::container::{INCOMPAT_CASE_INSENSITIVE, INCOMPAT_NORMALIZATION_INSENSITIVE};
use super::decmpfs::{self, Decoded};
use super::fstree::{
    self, DT_DIR, DirRec, FileExtent, InodeVal, ROOT_DIR, S_IFDIR, S_IFMT, TYPE_DIR_REC,
    TYPE_FILE_EXTENT, TYPE_INODE, TYPE_XATTR, Xattr, XattrData,
};
use super::{ApfsFs, VolumeInfo};

/// Most names read from one directory.
const MAX_NAMES_PER_DIR: usize = 1 << 20;
/// Most extents read for one stream.
const MAX_EXTENTS: usize = 1 << 20;
/// Most directories entered in one volume.
const MAX_DIRS: usize = 1 << 22;
/// Deepest directory nesting followed.
const MAX_DEPTH: usize = 4096;
/// Decmpfs attribute name.
const DECMPFS: &str = "com.apple.decmpfs";
/// Resource-fork attribute name.
const RESOURCE_FORK: &str = "com.apple.ResourceFork";

/// One volume being walked: its object map and tree root.
pub(super) struct Vol<'a, R> {
    fs: &'a ApfsFs<R>,
    omap_tree: u64,
    /// Oid of the file-system tree's root.
    root_tree: u64,
    /// Whether the tree's pointers are block addresses (sealed volumes).
    physical: bool,
    /// A sealed volume's file-extent tree (physical), where extents are.
    fext_tree: Option<u64>,
    hashed: bool,
}

impl<R: ReadAt> Vol<'_, R> {
    /// Every record of `oid` with a type from `from` to `to`, in key order.
    fn records(
        &self,
        oid: u64,
        from: u8,
        to: u8,
        errors: &mut Vec<ProcessingError>,
        mut each: impl FnMut(u8, &[u8], &[u8]) -> ControlFlow<()>,
    ) {
        let fs = self.fs;
        let xid = fs.nx.xid;
        let omap = self.omap_tree;
        let physical = self.physical;
        let load = |v: u64| {
            if physical {
                return fs.node(v);
            }
            let mut errs = Vec::new();
            match fs.omap_lookup(omap, v, xid, &mut errs) {
                Some(p) => fs.node(p),
                None => Err(errs.into_iter().next().unwrap_or_else(|| {
                    ProcessingError::new(
                        ErrorKind::CorruptFileSystem,
                        format!("file-system tree node {v:#x} is not in the volume's object map"),
                    )
                })),
            }
        };
        let lower = |k: &[u8]| fstree::cmp_header(k, oid, from);
        let mut scan = Scan::new(&load, &lower, errors);
        let _ = scan.run(self.root_tree, &mut |k, v| match fstree::key_header(k) {
            Some((o, t)) if o == oid && (from..=to).contains(&t) => each(t, k, v),
            Some(h) if h.cmp(&(oid, to)) == Ordering::Greater => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        });
    }

    /// The physical runs of the stream whose extents are keyed `id`, in
    /// file order (holes as zeros), cut at the container's end.
    fn stream_runs(&self, id: u64, errors: &mut Vec<ProcessingError>) -> Vec<Run> {
        let fs = self.fs;
        let bs = fs.nx.block_size;
        let total = fs.nx.block_count;
        let mut runs = Vec::new();
        let mut pos = 0u64;
        let mut n = 0usize;
        let mut errs = Vec::new();
        let mut add = |e: Option<FileExtent>| {
            n += 1;
            if n > MAX_EXTENTS {
                errs.push(ProcessingError::new(
                    ErrorKind::WalkLimit,
                    format!("stream {id:#x}: more than {MAX_EXTENTS} extents; the rest ignored"),
                ));
                return ControlFlow::Break(());
            }
            let Some(e) = e else {
                errs.push(ProcessingError::new(
                    ErrorKind::CorruptFileSystem,
                    format!("stream {id:#x}: a file extent record too short"),
                ));
                return ControlFlow::Continue(());
            };
            if e.logical < pos {
                errs.push(ProcessingError::new(
                    ErrorKind::CorruptFileSystem,
                    format!(
                        "stream {id:#x}: extent at {} overlaps the one before",
                        e.logical
                    ),
                ));
                return ControlFlow::Continue(());
            }
            push_run(
                &mut runs,
                Run::Zeros {
                    len: e.logical - pos,
                },
            );
            let mut len = e.len;
            if e.phys_block == 0 {
                push_run(&mut runs, Run::Zeros { len });
            } else {
                let room = total.saturating_sub(e.phys_block).saturating_mul(bs);
                if len > room {
                    errs.push(ProcessingError::at(
                        ErrorKind::CorruptFileSystem,
                        fs.block_offset(e.phys_block),
                        format!(
                            "stream {id:#x}: extent of {} bytes at block {} runs past the container's {total} blocks; cut there",
                            e.len, e.phys_block
                        ),
                    ));
                    len = room;
                }
                push_run(
                    &mut runs,
                    Run::Data {
                        offset: fs.block_offset(e.phys_block),
                        len,
                    },
                );
                push_run(&mut runs, Run::Zeros { len: e.len - len });
            }
            pos = e.logical.saturating_add(e.len);
            ControlFlow::Continue(())
        };
        match self.fext_tree {
            // Sealed volumes keep extents in their own physical tree.
            Some(tree) => {
                let load = |p: u64| fs.node(p);
                let lower =
                    |k: &[u8]| crate::bytes::u64_at(k, 0).map_or(Ordering::Less, |p| p.cmp(&id));
                let _ = Scan::new(&load, &lower, errors).run(tree, &mut |k, v| {
                    match crate::bytes::u64_at(k, 0) {
                        Some(p) if p == id => add(fstree::parse_fext(k, v)),
                        Some(p) if p > id => ControlFlow::Break(()),
                        _ => ControlFlow::Continue(()),
                    }
                });
            }
            None => {
                self.records(id, TYPE_FILE_EXTENT, TYPE_FILE_EXTENT, errors, |_, k, v| {
                    add(fstree::parse_extent(k, v))
                });
            }
        }
        errors.extend(errs);
        runs
    }
}

/// What one directory record's inode gives.
struct Item {
    rec: FileRecord,
    dir: bool,
}

fn ts(ns: u64) -> Option<Timestamp> {
    let t = ns as i64;
    Some(Timestamp {
        secs: t.div_euclid(1_000_000_000),
        nanos: t.rem_euclid(1_000_000_000) as u32,
    })
}

pub(super) fn walk<R: ReadAt, F>(fs: &ApfsFs<R>, visit: F) -> Result<WalkSummary, FsError>
where
    F: FnMut(FileRecord) -> ControlFlow<()>,
{
    let mut sink = Sink::new(visit, fs.open_errors());
    let mut noted = fs.open_noted;
    let several = fs.volumes.len() > 1;
    let mut flow = ControlFlow::Continue(());
    for vol in &fs.volumes {
        let prefix: Arc<[String]> = if several {
            let name = format!("$Volume{}", vol.index);
            let rec = virtual_dir(Arc::from(Vec::new()), name.clone(), vol);
            flow = sink.emit(rec);
            if flow.is_break() {
                break;
            }
            Arc::from(vec![name])
        } else {
            Arc::from(Vec::new())
        };
        flow = walk_volume(fs, vol, prefix, &mut sink, &mut noted);
        for e in fs.noted_since(&mut noted) {
            sink.error(e);
        }
        if flow.is_break() {
            break;
        }
    }
    Ok(sink.finish(flow))
}

fn virtual_dir(parent: Arc<[String]>, name: String, vol: &VolumeInfo) -> FileRecord {
    let raw = name.as_bytes().to_vec();
    FileRecord::named(
        parent,
        name,
        raw,
        vol.apsb_block.unwrap_or(0),
        FileKind::VirtualDirectory,
    )
}

fn walk_volume<R: ReadAt, F>(
    fs: &ApfsFs<R>,
    vol: &VolumeInfo,
    prefix: Arc<[String]>,
    sink: &mut Sink<F>,
    noted: &mut usize,
) -> ControlFlow<()>
where
    F: FnMut(FileRecord) -> ControlFlow<()>,
{
    let at = vol.apsb_block.map(|b| fs.block_offset(b));
    let err = |kind, detail: String| ProcessingError {
        kind,
        detail,
        offset: at,
    };
    let Some(sb) = &vol.superblock else {
        sink.error(err(
            ErrorKind::CorruptFileSystem,
            format!("volume {}: superblock unreadable; not walked", vol.index),
        ));
        return ControlFlow::Continue(());
    };
    if sb.encrypted() {
        sink.error(err(
            ErrorKind::EncryptedVolume,
            format!(
                "volume {} \"{}\" is encrypted; it is listed and not walked",
                vol.index, sb.name
            ),
        ));
        return ControlFlow::Continue(());
    }
    if !vol.snapshots.is_empty() || sb.num_snapshots > 0 {
        let names: Vec<String> = vol
            .snapshots
            .iter()
            .map(|s| format!("\"{}\" (transaction {})", s.name, s.xid))
            .collect();
        sink.error(err(
            ErrorKind::Snapshot,
            format!(
                "volume {} \"{}\" has {} snapshot(s): {}; only the live tree is walked",
                vol.index,
                sb.name,
                sb.num_snapshots.max(vol.snapshots.len() as u64),
                names.join(", ")
            ),
        ));
    }
    let Some(omap_tree) = vol.omap_tree else {
        sink.error(err(
            ErrorKind::CorruptFileSystem,
            format!("volume {}: no object map; not walked", vol.index),
        ));
        return ControlFlow::Continue(());
    };
    let mut errs = Vec::new();
    if !sb.physical_tree()
        && fs
            .omap_lookup(omap_tree, sb.root_tree_oid, fs.nx.xid, &mut errs)
            .is_none()
    {
        for e in errs {
            sink.error(e);
        }
        sink.error(err(
            ErrorKind::CorruptFileSystem,
            format!(
                "volume {}: file-system tree root {:#x} not in its object map; not walked",
                vol.index, sb.root_tree_oid
            ),
        ));
        return ControlFlow::Continue(());
    }
    let v = Vol {
        fs,
        omap_tree,
        root_tree: sb.root_tree_oid,
        physical: sb.physical_tree(),
        fext_tree: sb.sealed_extent_tree(),
        hashed: sb.incompat & (INCOMPAT_CASE_INSENSITIVE | INCOMPAT_NORMALIZATION_INSENSITIVE) != 0,
    };
    let mut entered: HashSet<u64> = HashSet::new();
    entered.insert(ROOT_DIR);
    // The stack: each level's names, the next to take, and their path.
    let mut stack: Vec<(Vec<DirRec>, usize, Arc<[String]>)> = Vec::new();
    let root_names = read_dir(&v, ROOT_DIR, sink);
    stack.push((root_names, 0, prefix));
    while let Some(top) = stack.last_mut() {
        let Some(d) = top.0.get(top.1).cloned() else {
            stack.pop();
            continue;
        };
        top.1 += 1;
        let parent = top.2.clone();
        let item = build(&v, &d, parent.clone());
        let name = item.rec.name.clone();
        let dir = item.dir;
        let flow = sink.emit(item.rec);
        if flow.is_break() {
            return flow;
        }
        for e in fs.noted_since(noted) {
            sink.error(e);
        }
        if !dir {
            continue;
        }
        if !entered.insert(d.file_id) {
            sink.error(ProcessingError::new(
                ErrorKind::DirectoryLoop,
                format!(
                    "directory {} is reached again (as \"{name}\"); not re-entered",
                    d.file_id
                ),
            ));
            continue;
        }
        if entered.len() > MAX_DIRS || stack.len() >= MAX_DEPTH {
            sink.error(ProcessingError::new(
                ErrorKind::WalkLimit,
                format!("more than {MAX_DIRS} directories or deeper than {MAX_DEPTH}: directory {} not entered", d.file_id),
            ));
            continue;
        }
        let names = read_dir(&v, d.file_id, sink);
        let mut path = parent.to_vec();
        path.push(name);
        stack.push((names, 0, Arc::from(path)));
    }
    ControlFlow::Continue(())
}

fn read_dir<R: ReadAt, F>(v: &Vol<'_, R>, dir: u64, sink: &mut Sink<F>) -> Vec<DirRec>
where
    F: FnMut(FileRecord) -> ControlFlow<()>,
{
    let mut errs = Vec::new();
    let mut names = Vec::new();
    let mut bad = 0u64;
    v.records(dir, TYPE_DIR_REC, TYPE_DIR_REC, &mut errs, |_, k, val| {
        match fstree::parse_dir_rec(k, val, v.hashed) {
            Some(d) => names.push(d),
            None => bad += 1,
        }
        if names.len() >= MAX_NAMES_PER_DIR {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    if bad > 0 {
        errs.push(ProcessingError::new(
            ErrorKind::CorruptIndex,
            format!("directory {dir}: {bad} directory record(s) too short or malformed"),
        ));
    }
    for e in errs {
        sink.error(e);
    }
    names
}

fn build<R: ReadAt>(v: &Vol<'_, R>, d: &DirRec, parent: Arc<[String]>) -> Item {
    let mut errors = Vec::new();
    let name = match std::str::from_utf8(&d.raw_name) {
        Ok(s) => s.to_string(),
        Err(_) => {
            errors.push(ProcessingError::new(
                ErrorKind::NameEncoding,
                format!("name of inode {} is not UTF-8", d.file_id),
            ));
            String::from_utf8_lossy(&d.raw_name).into_owned()
        }
    };
    if let Some(why) = hostile_reason(&name) {
        errors.push(ProcessingError::new(ErrorKind::HostileName, why));
    }
    let mut inode: Option<InodeVal> = None;
    let mut xattrs: Vec<Xattr> = Vec::new();
    v.records(
        d.file_id,
        TYPE_INODE,
        TYPE_XATTR,
        &mut errors,
        |t, k, val| {
            if t == TYPE_INODE {
                inode = InodeVal::parse(val);
            } else if t == TYPE_XATTR
                && let Some(x) = fstree::parse_xattr(k, val)
                && xattrs.len() < 1024
            {
                xattrs.push(x);
            }
            ControlFlow::Continue(())
        },
    );
    let kind = if d.dtype == DT_DIR {
        FileKind::Directory
    } else {
        FileKind::File
    };
    let mut rec = FileRecord::named(parent, name, d.raw_name.clone(), d.file_id, kind);
    let Some(ino) = inode else {
        errors.push(ProcessingError::new(
            ErrorKind::CorruptFileSystem,
            format!("no inode record for object {}", d.file_id),
        ));
        rec.errors = errors;
        return Item { rec, dir: false };
    };
    let dir = ino.mode & S_IFMT == S_IFDIR;
    rec.kind = if dir {
        FileKind::Directory
    } else {
        FileKind::File
    };
    rec.times = Times {
        modified: ts(ino.mod_time),
        accessed: ts(ino.access_time),
        changed: ts(ino.change_time),
        created: ts(ino.create_time),
    };
    rec.attributes = u32::from(ino.mode);
    rec.owner = Owner {
        mode: ino.mode,
        uid: ino.uid,
        gid: ino.gid,
    };
    let size = ino.dstream.map_or(0, |s| s.size);
    rec.size = size;
    let bs = v.fs.nx.block_size;
    if let Some(cmp) = xattrs.iter().find(|x| x.name == DECMPFS) {
        content_decmpfs(v, cmp, &xattrs, &mut rec, &mut errors);
    } else if size > 0 {
        let runs = v.stream_runs(ino.private_id, &mut errors);
        let stored: u64 = runs.iter().map(Run::len).sum();
        let mut content = clip_runs(&runs, 0, size);
        if stored < size {
            push_run(&mut content, Run::Zeros { len: size - stored });
        }
        rec.slack = clip_runs(&runs, size, size.div_ceil(bs).saturating_mul(bs))
            .into_iter()
            .filter_map(|r| match r {
                Run::Data { offset, len } => Some(crate::record::Extent { offset, len }),
                Run::Zeros { .. } => None,
            })
            .collect();
        rec.content = Content::Runs(content);
    }
    rec.errors = errors;
    Item { rec, dir }
}

fn content_decmpfs<R: ReadAt>(
    v: &Vol<'_, R>,
    cmp: &Xattr,
    xattrs: &[Xattr],
    rec: &mut FileRecord,
    errors: &mut Vec<ProcessingError>,
) {
    let XattrData::Embedded(raw) = &cmp.data else {
        errors.push(ProcessingError::new(
            ErrorKind::ContentEncoded,
            "the decmpfs attribute is a data stream, not read (TSK reads it inline)",
        ));
        return;
    };
    let Some(h) = decmpfs::header(raw) else {
        errors.push(ProcessingError::new(
            ErrorKind::ContentEncoded,
            "the decmpfs attribute has no fpmc header; content not read",
        ));
        return;
    };
    rec.size = h.size;
    let limit = v.fs.decode_limit;
    match decmpfs::decode_inline(raw, &h, limit) {
        Decoded::Bytes(b) => rec.content = Content::Resident(b),
        Decoded::ResourceFork(codec) => {
            let fork = xattrs.iter().find_map(|x| match (&x.name[..], &x.data) {
                (RESOURCE_FORK, XattrData::Stream { oid, dstream }) => Some((*oid, dstream.size)),
                _ => None,
            });
            let Some((oid, fsize)) = fork else {
                errors.push(ProcessingError::new(
                    ErrorKind::ContentEncoded,
                    format!(
                        "compression type {} keeps the data in a resource fork, and there is none",
                        h.kind
                    ),
                ));
                rec.content = Content::Encoded {
                    encoding: Encoding::ApfsCompressed,
                    runs: Vec::new(),
                };
                return;
            };
            let runs = clip_runs(&v.stream_runs(oid, errors), 0, fsize);
            // Decoded a block at a time as it is read (ContentReader).
            rec.content = Content::Decmpfs {
                runs,
                codec,
                size: h.size,
            };
        }
        Decoded::NotDecoded(why) => {
            errors.push(ProcessingError::new(ErrorKind::ContentEncoded, why));
            rec.content = Content::Encoded {
                encoding: Encoding::ApfsCompressed,
                runs: Vec::new(),
            };
        }
    }
}
