//! The ext walk: directories parsed as TSK parses them, one record per
//! name with the metadata of the inode it names, `$OrphanFiles` and the
//! orphan inodes.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::sync::Arc;

use super::dir::{self, FT_DIR};
use super::inode::{self, Inode};
use super::{ExtFs, ROOT_INODE};
use crate::clusters::{MAX_DEPTH, structure_record};
use crate::error::{ErrorKind, ProcessingError};
use crate::name::hostile_reason;
use crate::read::{ReadAt, read_full};
use crate::record::{Content, FileKind, FileRecord, MetaAddr, Recovery, Run, TimeBase, Times};
use crate::walk::{Sink, WalkSummary};

/// Most names kept for one directory.
const MAX_DIR_NAMES: usize = 1 << 20;
/// Most inode numbers remembered for the orphan search.
const MAX_TRACKED: usize = 1 << 20;
/// Directory blocks are read in chunks of at most this many bytes.
const DIR_CHUNK: u64 = 64 * 1024;
/// Inode tables are scanned in chunks of this many bytes.
const SCAN_CHUNK: u64 = 256 * 1024;

pub(super) fn walk<R: ReadAt, F: FnMut(FileRecord) -> ControlFlow<()>>(
    fs: &ExtFs<R>,
    visit: F,
) -> WalkSummary {
    let volume = fs.sb.blocks_count.saturating_mul(fs.sb.block_size);
    let mut w = Walker {
        fs,
        sink: Sink::new(visit, &fs.open_errors),
        named: HashSet::new(),
        stack: Vec::new(),
        dir_bytes: volume.saturating_mul(4).saturating_add(256 << 20),
        dirs_left: u64::from(fs.sb.inodes_count) + 1024,
        limit_reported: false,
    };
    let root: Arc<[String]> = Arc::from(Vec::new());
    let flow = w.walk_root(&root);
    let flow = match flow {
        ControlFlow::Continue(()) => w.orphans(&root),
        b => b,
    };
    w.sink.finish(flow)
}

/// A name of a directory, kept until the directory is listed.
struct Name {
    inode: u32,
    /// The name up to its first NUL (what TSK compares and shows).
    short: Vec<u8>,
    raw: Vec<u8>,
    file_type: u8,
    deleted: bool,
    abs: u64,
}

/// What a name's inode says.
struct Meta {
    raw: Vec<u8>,
    inode: Inode,
    allocated: bool,
}

struct Walker<'a, R, F> {
    fs: &'a ExtFs<R>,
    sink: Sink<F>,
    /// Unallocated inodes some name reaches: not orphans.
    named: HashSet<u32>,
    /// Inodes of the directories on the current path.
    stack: Vec<u32>,
    dir_bytes: u64,
    dirs_left: u64,
    limit_reported: bool,
}

impl<R: ReadAt, F: FnMut(FileRecord) -> ControlFlow<()>> Walker<'_, R, F> {
    fn error(&mut self, e: ProcessingError) {
        self.sink.error(e);
    }

    fn note_named(&mut self, ino: u32) {
        if self.named.len() < MAX_TRACKED {
            self.named.insert(ino);
        } else if !self.limit_reported {
            self.limit_reported = true;
            self.error(ProcessingError::new(
                ErrorKind::WalkLimit,
                format!("more than {MAX_TRACKED} deleted names: the orphan search may list some inodes already listed"),
            ));
        }
    }

    /// The inode a name points at, if it can be read.
    fn meta(&mut self, ino: u32, errors: &mut Vec<ProcessingError>) -> Option<Meta> {
        let fs = self.fs;
        if ino == 0 {
            return None;
        }
        let raw = match fs.read_inode_raw(ino) {
            Ok(r) => r,
            Err(e) => {
                errors.push(e);
                return None;
            }
        };
        let inode = Inode::parse(&raw)?;
        let allocated = match fs.inode_allocated(ino) {
            Ok(a) => a,
            Err(e) => {
                errors.push(e);
                true
            }
        };
        Some(Meta {
            raw,
            inode,
            allocated,
        })
    }

    // ------------------------------------------------------- directories

    fn walk_root(&mut self, root: &Arc<[String]>) -> ControlFlow<()> {
        let mut errors = Vec::new();
        let Some(meta) = self.meta(ROOT_INODE, &mut errors) else {
            for e in errors {
                self.error(e);
            }
            self.error(ProcessingError::new(
                ErrorKind::CorruptFileSystem,
                "root directory inode unreadable: nothing listed",
            ));
            return ControlFlow::Continue(());
        };
        if !meta.inode.is_dir() {
            self.error(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                self.fs.inode_offset(ROOT_INODE),
                format!(
                    "root inode has mode {:#o}, not a directory",
                    meta.inode.mode
                ),
            ));
        }
        let names = self.read_dir(ROOT_INODE, &meta, !meta.allocated, &mut errors);
        for e in errors {
            self.error(e);
        }
        self.stack.push(ROOT_INODE);
        let flow = self.list(names, root, 0);
        self.stack.pop();
        flow
    }

    /// Reads a directory's names: every block parsed as TSK parses it,
    /// duplicates (same name and inode) listed once, the live copy kept.
    fn read_dir(
        &mut self,
        ino: u32,
        meta: &Meta,
        deleted_dir: bool,
        errors: &mut Vec<ProcessingError>,
    ) -> Vec<Name> {
        let fs = self.fs;
        let mut inode_errors = Vec::new();
        let c = fs.inode_content(ino, &meta.raw, &meta.inode, &mut inode_errors);
        errors.extend(inode_errors);
        let typed = fs.sb.has_incompat(super::superblock::INCOMPAT_FILETYPE);
        let last = u64::from(fs.sb.inodes_count) + 1;
        let check = fs.sb.metadata_csum() && meta.allocated;
        let seed = fs.inode_seed(ino, meta.inode.generation);
        let mut names: Vec<Name> = Vec::new();
        let mut index: HashMap<(u32, Vec<u8>), usize> = HashMap::new();
        let mut full = false;
        let mut add = |e: dir::DirEntry, abs: u64, names: &mut Vec<Name>| {
            let end = e.name.iter().position(|&b| b == 0).unwrap_or(e.name.len());
            let short = e.name[..end].to_vec();
            let key = (e.inode, short.clone());
            if let Some(&i) = index.get(&key) {
                if names[i].deleted && !e.deleted {
                    names[i] = Name {
                        inode: e.inode,
                        short,
                        raw: e.name,
                        file_type: e.file_type,
                        deleted: false,
                        abs,
                    };
                }
                return;
            }
            if names.len() >= MAX_DIR_NAMES {
                full = true;
                return;
            }
            index.insert(key, names.len());
            names.push(Name {
                inode: e.inode,
                short,
                raw: e.name,
                file_type: e.file_type,
                deleted: e.deleted,
                abs,
            });
        };
        match &c.stored {
            Content::None
            | Content::Compressed { .. }
            | Content::Decmpfs { .. }
            | Content::Encoded { .. } => {}
            Content::Resident(bytes) => {
                let at = fs.inode_offset(ino) + 0x28;
                dir::parse_block(bytes, typed, last, deleted_dir, |e| {
                    let abs = at + e.offset as u64;
                    add(e, abs, &mut names)
                });
            }
            Content::Runs(runs) => {
                let bs = fs.sb.block_size;
                let indexed = meta.inode.flags & inode::FL_INDEX != 0;
                let mut block_no = 0u64;
                let mut buf = Vec::new();
                for run in runs {
                    let Run::Data { offset, len } = *run else {
                        block_no += run.len() / bs;
                        continue;
                    };
                    let mut pos = 0;
                    while pos < len {
                        let n = DIR_CHUNK.max(bs).min(len - pos);
                        if self.dir_bytes < n {
                            errors.push(ProcessingError::at(
                                ErrorKind::WalkLimit,
                                offset + pos,
                                "the walk has read four times the volume in directories; the rest is not read",
                            ));
                            return names;
                        }
                        self.dir_bytes -= n;
                        buf.clear();
                        buf.resize(usize::try_from(n).unwrap_or(0), 0);
                        let at = offset + pos;
                        let got = match read_full(&fs.src, &mut buf, at) {
                            Ok(g) => g,
                            Err(e) => {
                                errors.push(ProcessingError::at(ErrorKind::Io, at, e.to_string()));
                                0
                            }
                        };
                        let bsz = usize::try_from(bs).unwrap_or(1024);
                        for (k, block) in buf[..got].chunks_exact(bsz).enumerate() {
                            let babs = at + (k * bsz) as u64;
                            let first = block_no == 0;
                            block_no += 1;
                            if indexed && dir::is_htree_node(block, first) {
                                if check
                                    && let Some(Some((stored, computed))) =
                                        dir::node_checksum(block, first, seed)
                                {
                                    errors.push(ProcessingError::at(
                                        ErrorKind::ChecksumMismatch,
                                        babs,
                                        format!(
                                            "htree index block checksum {computed:#010x} does not match the stored {stored:#010x}"
                                        ),
                                    ));
                                }
                                continue;
                            }
                            if check
                                && let Some(Some((stored, computed))) =
                                    dir::leaf_checksum(block, seed)
                            {
                                errors.push(ProcessingError::at(
                                    ErrorKind::ChecksumMismatch,
                                    babs,
                                    format!(
                                        "directory block checksum {computed:#010x} does not match the stored {stored:#010x}"
                                    ),
                                ));
                            }
                            dir::parse_block(block, typed, last, deleted_dir, |e| {
                                let abs = babs + e.offset as u64;
                                add(e, abs, &mut names)
                            });
                        }
                        if got < buf.len() {
                            errors.push(ProcessingError::at(
                                ErrorKind::Io,
                                at + got as u64,
                                "directory runs past the end of the source",
                            ));
                            return names;
                        }
                        pos += n;
                    }
                }
            }
        }
        if full {
            errors.push(ProcessingError::at(
                ErrorKind::WalkLimit,
                fs.inode_offset(ino),
                format!(
                    "directory {ino} holds more than {MAX_DIR_NAMES} names: the rest are not listed"
                ),
            ));
        }
        names
    }

    /// Lists a directory's names, walking into subdirectories after their
    /// names.
    fn list(&mut self, names: Vec<Name>, path: &Arc<[String]>, depth: usize) -> ControlFlow<()> {
        for n in names {
            if n.short == b"." || n.short == b".." {
                // Not listed, but they name their inodes for the orphan
                // search as TSK's walk does.
                if n.inode != 0
                    && n.inode <= self.fs.sb.inodes_count
                    && matches!(self.fs.inode_allocated(n.inode), Ok(false))
                {
                    self.note_named(n.inode);
                }
                continue;
            }
            self.name(n, path, depth)?;
        }
        ControlFlow::Continue(())
    }

    /// One name: its record, then (for a directory) what it holds.
    fn name(&mut self, n: Name, path: &Arc<[String]>, depth: usize) -> ControlFlow<()> {
        let mut errors = Vec::new();
        let name = self.name_string(&n, &mut errors);
        // TSK loads metadata for a nonzero inode, or a live name.
        let meta = if n.inode != 0 {
            self.meta(n.inode, &mut errors)
        } else {
            None
        };
        if let Some(m) = &meta
            && !m.allocated
        {
            self.note_named(n.inode);
        }
        let (mut rec, descend) = self.record(&n, name, meta.as_ref(), path, errors, None);
        let mut children = None;
        if descend && let Some(m) = &meta {
            if self.stack.contains(&n.inode) {
                rec.errors.push(ProcessingError::at(
                    ErrorKind::DirectoryLoop,
                    n.abs,
                    format!(
                        "directory inode {} contains itself or an ancestor: not entered",
                        n.inode
                    ),
                ));
            } else if depth + 1 >= MAX_DEPTH || self.dirs_left == 0 {
                rec.errors.push(ProcessingError::at(
                    ErrorKind::WalkLimit,
                    n.abs,
                    "the depth or directory budget is reached: not entered",
                ));
            } else {
                self.dirs_left -= 1;
                let mut errs = Vec::new();
                children = Some(self.read_dir(n.inode, m, !m.allocated, &mut errs));
                rec.errors.extend(errs);
            }
        }
        let child_path: Option<Arc<[String]>> = children.as_ref().map(|_| {
            let mut p = path.to_vec();
            p.push(rec.name.clone());
            Arc::from(p)
        });
        self.sink.emit(rec)?;
        if let (Some(children), Some(p)) = (children, child_path) {
            self.stack.push(n.inode);
            let flow = self.list(children, &p, depth + 1);
            self.stack.pop();
            flow?;
        }
        ControlFlow::Continue(())
    }

    fn name_string(&self, n: &Name, errors: &mut Vec<ProcessingError>) -> String {
        if n.short.len() < n.raw.len() {
            errors.push(ProcessingError::at(
                ErrorKind::NameEncoding,
                n.abs,
                "name continues after a NUL byte; the rest is not shown",
            ));
        }
        let name = match std::str::from_utf8(&n.short) {
            Ok(s) => s.to_string(),
            Err(_) => {
                errors.push(ProcessingError::at(
                    ErrorKind::NameEncoding,
                    n.abs,
                    "name is not UTF-8 (invalid bytes shown as U+FFFD)",
                ));
                String::from_utf8_lossy(&n.short).into_owned()
            }
        };
        if let Some(why) = hostile_reason(&name) {
            errors.push(ProcessingError::at(ErrorKind::HostileName, n.abs, why));
        }
        name
    }

    /// A name's record, and whether TSK walks into it.
    fn record(
        &mut self,
        n: &Name,
        name: String,
        meta: Option<&Meta>,
        path: &Arc<[String]>,
        mut errors: Vec<ProcessingError>,
        orphan: Option<()>,
    ) -> (FileRecord, bool) {
        let fs = self.fs;
        let mut rec = FileRecord {
            parent: path.clone(),
            name,
            raw_name: n.raw.clone(),
            short_name: None,
            stream: None,
            meta: MetaAddr {
                inode: u64::from(n.inode),
                attr: None,
            },
            kind: if n.file_type == FT_DIR {
                FileKind::Directory
            } else {
                FileKind::File
            },
            size: 0,
            times: Times::default(),
            name_times: None,
            time_base: TimeBase::Utc,
            allocated: !n.deleted,
            attributes: 0,
            owner: crate::record::Owner::default(),
            content: Content::None,
            slack: Vec::new(),
            recovery: if n.deleted {
                Recovery::Unrecoverable
            } else {
                Recovery::Allocated
            },
            errors: Vec::new(),
        };
        let Some(m) = meta else {
            rec.errors = errors;
            return (rec, false);
        };
        let i = &m.inode;
        if fs.sb.metadata_csum()
            && m.allocated
            && let Some((stored, computed)) =
                inode::checksum_mismatch(&m.raw, n.inode, fs.csum_seed)
        {
            errors.push(ProcessingError::at(
                ErrorKind::ChecksumMismatch,
                fs.inode_offset(n.inode),
                format!(
                    "inode {} checksum {computed:#010x} does not match the stored {stored:#010x}",
                    n.inode
                ),
            ));
        }
        rec.kind = if i.is_dir() {
            FileKind::Directory
        } else {
            FileKind::File
        };
        rec.attributes = u32::from(i.mode);
        rec.owner = crate::record::Owner {
            mode: i.mode,
            uid: i.uid,
            gid: i.gid,
        };
        rec.size = i.size(fs.large_file());
        let x = fs.tsk_ext4();
        rec.times = Times {
            modified: Inode::time(i.mtime, i.extra[2], x),
            accessed: Inode::time(i.atime, i.extra[0], x),
            changed: Inode::time(i.ctime, i.extra[1], x),
            created: if x {
                Inode::time(i.crtime, i.extra[3], true)
            } else {
                None
            },
        };
        let c = fs.inode_content(n.inode, &m.raw, i, &mut errors);
        rec.content = c.content;
        rec.slack = c.slack;
        if n.deleted || orphan.is_some() {
            rec.recovery = if m.allocated {
                Recovery::Overwritten
            } else if rec.content.is_empty() {
                if rec.size == 0 {
                    Recovery::Unallocated
                } else {
                    Recovery::Unrecoverable
                }
            } else {
                let mut any = false;
                for e in rec.content.extents() {
                    let bs = fs.sb.block_size;
                    let first = (e.offset - fs.base) / bs;
                    match fs.any_block_allocated(first, e.len.div_ceil(bs)) {
                        Ok(true) => {
                            any = true;
                            break;
                        }
                        Ok(false) => {}
                        Err(err) => errors.push(err),
                    }
                }
                if any {
                    Recovery::Overwritten
                } else {
                    Recovery::Unallocated
                }
            };
        }
        rec.errors = errors;
        // TSK walks into a name typed as a directory (or untyped) whose
        // inode is a directory, when the name is live or both are deleted.
        let descend = (n.file_type == FT_DIR || n.file_type == 0)
            && i.is_dir()
            && (!n.deleted || !m.allocated);
        (rec, descend)
    }

    // ----------------------------------------------------------- orphans

    /// `$OrphanFiles` and what TSK lists under it.
    fn orphans(&mut self, root: &Arc<[String]>) -> ControlFlow<()> {
        let fs = self.fs;
        let name = "$OrphanFiles".to_string();
        let rec = structure_record(
            root,
            name.clone(),
            name.as_bytes().to_vec(),
            fs.orphan_dir_inode(),
            FileKind::VirtualDirectory,
            0,
            Content::None,
            Vec::new(),
        );
        self.sink.emit(rec)?;
        if !fs.find_orphans {
            return ControlFlow::Continue(());
        }
        let candidates = self.scan_inodes();
        // What orphan directories hold is listed under them only.
        let mut inside: HashSet<u32> = HashSet::new();
        for &ino in &candidates {
            if inside.contains(&ino) {
                continue;
            }
            let mut errors = Vec::new();
            if let Some(m) = self.meta(ino, &mut errors)
                && m.inode.is_dir()
            {
                self.stack.clear();
                self.stack.push(ino);
                self.mark_inside(ino, &m, &mut inside, 0);
                self.stack.clear();
            }
        }
        let parent: Arc<[String]> = Arc::from(vec![name]);
        for ino in candidates {
            if inside.contains(&ino) {
                continue;
            }
            let mut errors = Vec::new();
            let meta = self.meta(ino, &mut errors);
            let n = Name {
                inode: ino,
                short: Vec::new(),
                raw: Vec::new(),
                file_type: 0,
                deleted: true,
                abs: fs.inode_offset(ino),
            };
            let label = format!("OrphanFile-{ino}");
            let (mut rec, descend) =
                self.record(&n, label.clone(), meta.as_ref(), &parent, errors, Some(()));
            rec.raw_name = label.into_bytes();
            let mut children = None;
            if descend && let Some(m) = &meta {
                let mut errs = Vec::new();
                children = Some(self.read_dir(ino, m, true, &mut errs));
                rec.errors.extend(errs);
            }
            let child_path: Arc<[String]> = {
                let mut p = parent.to_vec();
                p.push(rec.name.clone());
                Arc::from(p)
            };
            self.sink.emit(rec)?;
            if let Some(children) = children {
                self.stack.clear();
                self.stack.push(ino);
                let flow = self.list(children, &child_path, 1);
                self.stack.clear();
                flow?;
            }
        }
        ControlFlow::Continue(())
    }

    /// Marks everything an orphan directory reaches as inside it (TSK's
    /// `load_orphan_dir_walk_cb`). Returns false where TSK stops: at a name
    /// whose inode is allocated.
    fn mark_inside(&mut self, ino: u32, m: &Meta, inside: &mut HashSet<u32>, depth: usize) -> bool {
        if depth + 1 >= MAX_DEPTH || self.dirs_left == 0 {
            return false;
        }
        self.dirs_left -= 1;
        let mut errors = Vec::new();
        let names = self.read_dir(ino, m, true, &mut errors);
        for n in names {
            if n.short == b"." || n.short == b".." || n.inode == 0 {
                continue;
            }
            let mut errs = Vec::new();
            let Some(cm) = self.meta(n.inode, &mut errs) else {
                continue;
            };
            if cm.allocated {
                return false;
            }
            if inside.len() < MAX_TRACKED {
                inside.insert(n.inode);
            }
            let descend = (n.file_type == FT_DIR || n.file_type == 0) && cm.inode.is_dir();
            if descend && !self.stack.contains(&n.inode) {
                self.stack.push(n.inode);
                let go_on = self.mark_inside(n.inode, &cm, inside, depth + 1);
                self.stack.pop();
                if !go_on {
                    return false;
                }
            }
        }
        true
    }

    /// Unallocated inodes with a change time that no name reached, in
    /// inode order (TSK's inode walk for orphans). Groups whose inode
    /// table was never initialized are skipped.
    fn scan_inodes(&mut self) -> Vec<u32> {
        let fs = self.fs;
        let sb = &fs.sb;
        let ipg = u64::from(sb.inodes_per_group);
        let isz = u64::from(sb.inode_size);
        let mut found = Vec::new();
        let mut buf = Vec::new();
        for g in 0..sb.group_count {
            let first_ino = g * ipg + 1;
            if first_ino > u64::from(sb.inodes_count) {
                break;
            }
            let gd = match fs.group_desc(g) {
                Ok(gd) => gd,
                Err(e) => {
                    self.error(e);
                    continue;
                }
            };
            if gd.flags & super::BG_INODE_UNINIT != 0 {
                continue;
            }
            let bits = match fs.inode_bitmap(g) {
                Ok(b) => b,
                Err(e) => {
                    self.error(e);
                    continue;
                }
            };
            let count = ipg.min(u64::from(sb.inodes_count) + 1 - first_ino);
            let per_chunk = (SCAN_CHUNK / isz).max(1);
            let mut k = 0u64;
            while k < count {
                let n = per_chunk.min(count - k);
                let free = |j: u64| {
                    let i = usize::try_from(j).unwrap_or(0);
                    bits.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) == 0)
                };
                if !(k..k + n).any(free) {
                    k += n;
                    continue;
                }
                let at = fs.block_offset(gd.inode_table) + k * isz;
                buf.clear();
                buf.resize(usize::try_from(n * isz).unwrap_or(0), 0);
                let got = match read_full(&fs.src, &mut buf, at) {
                    Ok(g) => g,
                    Err(e) => {
                        self.error(ProcessingError::at(ErrorKind::Io, at, e.to_string()));
                        break;
                    }
                };
                for j in 0..n {
                    let off = usize::try_from(j * isz).unwrap_or(usize::MAX);
                    let Some(ctime) = crate::bytes::u32_at(&buf[..got], off + 0x0C) else {
                        break;
                    };
                    let ino = u32::try_from(first_ino + k + j).unwrap_or(u32::MAX);
                    if free(k + j) && ctime != 0 && !self.named.contains(&ino) {
                        if found.len() >= MAX_TRACKED {
                            self.error(ProcessingError::at(
                                ErrorKind::WalkLimit,
                                at,
                                format!(
                                    "more than {MAX_TRACKED} orphan inodes: the rest are not listed"
                                ),
                            ));
                            return found;
                        }
                        found.push(ino);
                    }
                }
                k += n;
            }
        }
        found
    }
}
