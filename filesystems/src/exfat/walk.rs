//! The exFAT walk: directories parsed slot by slot as TSK's
//! `exfatfs_dent_parse_buf` parses them, a record per listed name with its
//! metadata found as TSK's `exfatfs_inode_lookup` finds it, the virtual
//! files, and the orphan search of free clusters.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::entry::{self, Entry, UnitState};
use super::{ExfatFs, StreamInfo};
use crate::bytes::decode_utf16;
use crate::clusters::{DirGuard, chain_error, structure_record, tsk_virtual_files};
use crate::error::{ErrorKind, ProcessingError};
use crate::fat::table::walk_chain;
use crate::name::{escape_component, hostile_reason};
use crate::read::{ReadAt, read_full};
use crate::record::{Content, FileKind, FileRecord, MetaAddr, Recovery, Run, TimeBase, Times};
use crate::walk::{Sink, WalkSummary};

/// TSK's mode for exFAT's structure entries (label, bitmap, up-case
/// table): execute bits only.
const STRUCTURE_MODE: u16 = 0o111;

/// Largest directory read: the exFAT specification's 256 MiB.
const MAX_DIR_BYTES: u64 = 256 * 1024 * 1024;
/// Directories are read in chunks of this many bytes.
const DIR_CHUNK: u64 = 64 * 1024;
/// Free space is searched for orphan entries in chunks of this many bytes.
const SCAN_CHUNK: u64 = 1024 * 1024;
/// Most inode numbers remembered for the orphan search (named deleted
/// entries in free clusters, orphan candidates, entries inside orphan
/// directories): 8 MiB or so each.
const MAX_TRACKED: usize = 1 << 20;
/// Longest name assembled, in UTF-16 units (TSK's buffer).
const MAX_NAME_UNITS: usize = 255;

pub(super) fn walk<R: ReadAt, F: FnMut(FileRecord) -> ControlFlow<()>>(
    fs: &ExfatFs<R>,
    visit: F,
) -> WalkSummary {
    let mut w = Walker {
        fs,
        sink: Sink::new(visit, &fs.open_errors),
        guard: DirGuard::new(fs.boot.cluster_count + 1024),
        dir_bytes: 4 * fs.boot.cluster_count * fs.cluster_size() + MAX_DIR_BYTES,
        recover_budget: 16 * fs.boot.cluster_count + (1 << 20),
        named: HashSet::new(),
        collect: None,
        tracking: true,
        limit_reported: false,
    };
    let root: Arc<[String]> = Arc::from(Vec::new());
    let mut flow = w.walk_root(&root);
    if flow.is_continue() {
        flow = w.virtual_files(&root);
    }
    w.tracking = false;
    if flow.is_continue() && fs.find_orphans {
        flow = w.orphans();
    }
    w.sink.finish(flow)
}

/// One 32-byte slot of a directory.
#[derive(Clone, Copy)]
struct Slot {
    abs: u64,
    inode: u64,
    unit: UnitState,
    bytes: [u8; 32],
}

impl Slot {
    fn entry(&self) -> Entry<'_> {
        Entry(&self.bytes)
    }
}

/// The entry set being parsed (TSK's `EXFATFS_FS_NAME_INFO`).
#[derive(Default)]
struct SetState {
    file: Option<Slot>,
    stream: Option<Slot>,
    /// Type byte of the last entry taken (0: none).
    last_type: u8,
    expected: u8,
    actual: u8,
    name_len: u8,
    units: Vec<u16>,
    /// The set's entries as met, for the checksum.
    bytes: Vec<u8>,
}

impl SetState {
    fn last_kind(&self) -> u8 {
        self.last_type & 0x7F
    }
    fn last_in_use(&self) -> bool {
        self.last_type & entry::IN_USE != 0
    }
}

/// What is known of an entry set when its record is built.
struct SetView {
    file: Slot,
    /// The Stream entry met in the directory after the File entry.
    seq_stream: Option<Slot>,
    name_units: Vec<u16>,
    /// Secondary entries the File entry counts and those met.
    expected: u8,
    actual: u8,
    /// Whether the directory (or volume) ended before the set did.
    cut: bool,
    bytes: Vec<u8>,
}

struct Walker<'a, R, F> {
    fs: &'a ExfatFs<R>,
    sink: Sink<F>,
    /// Loops, depth and the directory budget.
    guard: DirGuard,
    /// Directory bytes left to read (four times the heap): deleted
    /// directories may be read more than once, but not without end.
    dir_bytes: u64,
    /// Clusters recovery may still look at (see `ExfatFs::recover`).
    recover_budget: u64,
    /// Inodes of deleted entries in free clusters that the tree reached:
    /// not orphans.
    named: HashSet<u64>,
    /// While marking what orphan directories hold: records go here, not to
    /// the visitor, and errors are left for the listing pass.
    collect: Option<HashSet<u64>>,
    /// Whether records reached go into `named` (the tree walk).
    tracking: bool,
    limit_reported: bool,
}

impl<R: ReadAt, F: FnMut(FileRecord) -> ControlFlow<()>> Walker<'_, R, F> {
    fn error(&mut self, e: ProcessingError) {
        if self.collect.is_none() {
            self.sink.error(e);
        }
    }

    fn limit(&mut self, at: u64, what: &str) {
        if !self.limit_reported {
            self.limit_reported = true;
            self.error(ProcessingError::at(
                ErrorKind::WalkLimit,
                at,
                format!(
                    "more than {MAX_TRACKED} {what}: the orphan search may list some entries twice"
                ),
            ));
        }
    }

    fn emit(&mut self, rec: FileRecord, unit: UnitState) -> ControlFlow<()> {
        if let Some(set) = self.collect.as_mut() {
            if set.len() < MAX_TRACKED {
                set.insert(rec.meta.inode);
            }
            return ControlFlow::Continue(());
        }
        if self.tracking && !rec.allocated && unit == UnitState::Unallocated {
            if self.named.len() < MAX_TRACKED {
                self.named.insert(rec.meta.inode);
            } else {
                self.limit(rec.meta.inode, "deleted entries in free clusters");
            }
        }
        self.sink.emit(rec)
    }

    fn unit_of(&mut self, abs: u64) -> UnitState {
        let fs = self.fs;
        let sector = (abs - fs.base) / fs.bps();
        match fs.sector_allocated(sector) {
            Ok(true) => UnitState::Allocated,
            Ok(false) => UnitState::Unallocated,
            Err(e) => {
                self.error(ProcessingError::at(
                    ErrorKind::Io,
                    abs,
                    format!("allocation bitmap unreadable: {e}"),
                ));
                UnitState::Allocated
            }
        }
    }

    fn bitmap_says(&self, c: u32) -> Option<bool> {
        if !self.fs.bitmap.present() {
            return None;
        }
        self.fs.bitmap.is_allocated(&self.fs.src, u64::from(c)).ok()
    }

    fn is_entry(&self, slot: &Slot) -> bool {
        let limits = self.fs.limits();
        entry::is_entry(&slot.entry(), slot.unit, &limits, &|c| self.bitmap_says(c))
    }

    // ------------------------------------------------------- directories

    fn walk_root(&mut self, root: &Arc<[String]>) -> ControlFlow<()> {
        let fs = self.fs;
        let start = u64::from(fs.boot.root_cluster);
        let max = (MAX_DIR_BYTES / fs.cluster_size()).max(1);
        let chain = walk_chain(&fs.fat, &fs.src, fs.boot.root_cluster, max);
        let at = fs.cluster_offset(start);
        match chain.stop {
            crate::fat::table::ChainStop::Eof => {}
            crate::fat::table::ChainStop::Enough => self.error(ProcessingError::at(
                ErrorKind::WalkLimit,
                at,
                "root directory larger than 256 MiB; the rest is not read",
            )),
            ref other => self.error(chain_error(
                at,
                other,
                fs.boot.last_cluster(),
                "root directory",
            )),
        }
        let clusters: Vec<(u64, u64)> = chain
            .runs
            .iter()
            .map(|&(c, n)| (u64::from(c), u64::from(n)))
            .collect();
        let runs = fs.heap().runs(&clusters, u64::MAX);
        self.guard.enter_root(start);
        let flow = self.walk_dir(&runs, root, 0);
        self.guard.leave();
        flow
    }

    /// Walks one directory whose stored bytes are `runs`: parses every slot
    /// and emits a record per listed name, descending into subdirectories
    /// right after their names. Reads one chunk at a time.
    fn walk_dir(&mut self, runs: &[Run], path: &Arc<[String]>, depth: usize) -> ControlFlow<()> {
        let fs = self.fs;
        let mut st = SetState::default();
        let mut buf = Vec::new();
        let mut last_sector = u64::MAX;
        let mut last_unit = UnitState::Allocated;
        let mut total = 0u64;
        for run in runs {
            let Run::Data { offset, len } = *run else {
                continue;
            };
            let len = (len / 32) * 32;
            let mut pos = 0u64;
            while pos < len {
                if total >= MAX_DIR_BYTES {
                    self.error(ProcessingError::at(
                        ErrorKind::WalkLimit,
                        offset + pos,
                        "directory larger than 256 MiB; the rest is not read",
                    ));
                    return self.flush(&mut st, path, depth, true);
                }
                let n = DIR_CHUNK.min(len - pos);
                if self.dir_bytes < n {
                    self.error(ProcessingError::at(
                        ErrorKind::WalkLimit,
                        offset + pos,
                        "the walk has read four times the heap in directories; the rest is not read",
                    ));
                    return self.flush(&mut st, path, depth, true);
                }
                self.dir_bytes -= n;
                buf.clear();
                buf.resize(usize::try_from(n).unwrap_or(0), 0);
                let at = offset + pos;
                let got = match read_full(&fs.src, &mut buf, at) {
                    Ok(got) => got,
                    Err(e) => {
                        self.error(ProcessingError::at(ErrorKind::Io, at, e.to_string()));
                        0
                    }
                };
                if got < buf.len() {
                    self.error(ProcessingError::at(
                        ErrorKind::Io,
                        at + got as u64,
                        "directory runs past the end of the source",
                    ));
                }
                for (i, b) in buf[..got].chunks_exact(32).enumerate() {
                    let abs = at + 32 * i as u64;
                    let sector = (abs - fs.base) / fs.bps();
                    if sector != last_sector {
                        last_sector = sector;
                        last_unit = self.unit_of(abs);
                    }
                    let mut bytes = [0u8; 32];
                    bytes.copy_from_slice(b);
                    let slot = Slot {
                        abs,
                        inode: fs.inode_at(abs),
                        unit: last_unit,
                        bytes,
                    };
                    self.step(&mut st, slot, path, depth)?;
                }
                if got < buf.len() {
                    return self.flush(&mut st, path, depth, true);
                }
                pos += n;
                total += n;
            }
        }
        self.flush(&mut st, path, depth, true)
    }

    /// One slot of TSK's directory parse.
    fn step(
        &mut self,
        st: &mut SetState,
        slot: Slot,
        path: &Arc<[String]>,
        depth: usize,
    ) -> ControlFlow<()> {
        let kind = if self.is_entry(&slot) {
            slot.entry().kind()
        } else {
            0
        };
        let e = slot.entry();
        match kind {
            entry::TYPE_FILE => {
                self.flush(st, path, depth, false)?;
                st.file = Some(slot);
                st.last_type = e.type_byte();
                st.expected = e.secondary_count();
                st.bytes.extend_from_slice(&slot.bytes);
            }
            entry::TYPE_STREAM => {
                if st.last_kind() != entry::TYPE_FILE || st.last_in_use() != e.in_use() {
                    return self.flush(st, path, depth, false);
                }
                st.stream = Some(slot);
                st.last_type = e.type_byte();
                st.name_len = e.name_length();
                st.actual += 1;
                st.bytes.extend_from_slice(&slot.bytes);
                if st.actual == st.expected {
                    return self.flush(st, path, depth, false);
                }
            }
            entry::TYPE_NAME => {
                let follows = matches!(st.last_kind(), entry::TYPE_STREAM | entry::TYPE_NAME);
                if !follows || st.last_in_use() != e.in_use() {
                    return self.flush(st, path, depth, false);
                }
                st.last_type = e.type_byte();
                let want = usize::from(st.name_len)
                    .saturating_sub(st.units.len())
                    .min(entry::NAME_CHARS_PER_ENTRY);
                if st.units.len() + want <= MAX_NAME_UNITS {
                    st.units.extend_from_slice(&e.name_units()[..want]);
                }
                st.actual += 1;
                st.bytes.extend_from_slice(&slot.bytes);
                if st.actual == st.expected {
                    return self.flush(st, path, depth, false);
                }
            }
            entry::TYPE_LABEL => {
                self.flush(st, path, depth, false)?;
                let rec = self.label_record(&slot, path);
                return self.emit(rec, slot.unit);
            }
            entry::TYPE_ALLOC_BITMAP
            | entry::TYPE_UPCASE
            | entry::TYPE_GUID
            | entry::TYPE_TEXFAT => {
                self.flush(st, path, depth, false)?;
                let rec = self.special_record(&slot, path);
                return self.emit(rec, slot.unit);
            }
            _ => return self.flush(st, path, depth, false),
        }
        ControlFlow::Continue(())
    }

    /// Ends the set being parsed: lists it if it has a name (TSK's
    /// `exfatfs_add_name_to_dir_and_reset_info`) and walks into it if it is
    /// a directory.
    fn flush(
        &mut self,
        st: &mut SetState,
        path: &Arc<[String]>,
        depth: usize,
        end_of_dir: bool,
    ) -> ControlFlow<()> {
        let st = std::mem::take(st);
        let Some(file) = st.file else {
            return ControlFlow::Continue(());
        };
        let live = file.unit == UnitState::Allocated && file.entry().in_use();
        if st.units.is_empty() {
            if live {
                self.error(ProcessingError::at(
                    ErrorKind::CorruptFileSystem,
                    file.abs,
                    format!(
                        "live entry set (inode {}) has no name entry: not listed",
                        file.inode
                    ),
                ));
            }
            return ControlFlow::Continue(());
        }
        let view = SetView {
            file,
            seq_stream: st.stream,
            name_units: st.units,
            expected: st.expected,
            actual: st.actual,
            cut: end_of_dir && st.actual < st.expected,
            bytes: st.bytes,
        };
        let (rec, walk_runs, first_cluster) = self.file_record(&view, live, path, None);
        self.emit_and_descend(rec, file.unit, walk_runs, first_cluster, path, depth)
    }

    fn emit_and_descend(
        &mut self,
        rec: FileRecord,
        unit: UnitState,
        walk_runs: Option<Vec<Run>>,
        first_cluster: u64,
        path: &Arc<[String]>,
        depth: usize,
    ) -> ControlFlow<()> {
        let name = rec.name.clone();
        let abs = self.fs.inode_offset(rec.meta.inode);
        let allocated = rec.allocated;
        self.emit(rec, unit)?;
        match walk_runs {
            Some(runs) => self.descend(&runs, first_cluster, allocated, name, path, depth, abs),
            None => ControlFlow::Continue(()),
        }
    }

    /// Walks into the subdirectory a just-emitted record names.
    #[allow(clippy::too_many_arguments)]
    fn descend(
        &mut self,
        runs: &[Run],
        start: u64,
        allocated: bool,
        name: String,
        path: &Arc<[String]>,
        depth: usize,
        abs: u64,
    ) -> ControlFlow<()> {
        if let Err(e) = self.guard.enter(start, allocated, false, depth, &name, abs) {
            self.error(e);
            return ControlFlow::Continue(());
        }
        let mut child: Vec<String> = path.to_vec();
        child.push(name);
        let child: Arc<[String]> = Arc::from(child);
        let flow = self.walk_dir(runs, &child, depth + 1);
        self.guard.leave();
        flow
    }

    // ----------------------------------------------------------- records

    /// The Stream entry TSK's inode lookup pairs with a File entry: the
    /// next slot if it is one, else (for a File entry ending an allocated
    /// cluster) the first slot of the next cluster in the FAT.
    fn find_stream(&self, file: &Slot, seq: Option<&Slot>) -> Option<Slot> {
        let fs = self.fs;
        let limits = fs.limits();
        let at = |inum: u64| -> Option<Slot> {
            if let Some(s) = seq.filter(|s| s.inode == inum) {
                return Some(*s);
            }
            let bytes = fs.read_entry(inum)?;
            Some(Slot {
                abs: fs.inode_offset(inum),
                inode: inum,
                unit: file.unit,
                bytes,
            })
        };
        let candidate = at(file.inode + 1)
            .filter(|s| entry::is_stream_entry(&s.entry(), &limits))
            .or_else(|| {
                if file.unit != UnitState::Allocated {
                    return None;
                }
                let cs = fs.cluster_size();
                let rel = file
                    .abs
                    .saturating_sub(fs.base + fs.boot.heap_offset * fs.bps());
                if rel % cs != cs - 32 {
                    return None;
                }
                let next = fs.next_cluster(2 + rel / cs)?;
                let inum = fs.inode_at(fs.cluster_offset(next));
                at(inum).filter(|s| entry::is_stream_entry(&s.entry(), &limits))
            })?;
        (candidate.entry().in_use() == file.entry().in_use()).then_some(candidate)
    }

    /// A record for an entry set, with the stored runs to walk if it is a
    /// directory TSK would enter, and its first cluster.
    fn file_record(
        &mut self,
        view: &SetView,
        name_allocated: bool,
        path: &Arc<[String]>,
        name_override: Option<String>,
    ) -> (FileRecord, Option<Vec<Run>>, u64) {
        let fs = self.fs;
        let file = view.file;
        let fe = file.entry();
        let abs = file.abs;
        let mut errors = Vec::new();
        let name = name_from_units(&view.name_units, abs, "name", &mut errors);
        let name = name_override.unwrap_or(name);
        if let Some(why) = hostile_reason(&name) {
            errors.push(ProcessingError::at(ErrorKind::HostileName, abs, why));
        }
        let raw_name: Vec<u8> = view
            .name_units
            .iter()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        // The set's own integrity: complete, summed right, name whole and
        // hashed right.
        let complete = view.actual == view.expected;
        if complete {
            let sum = entry::entry_set_checksum(&view.bytes);
            if sum != fe.set_checksum() {
                errors.push(ProcessingError::at(
                    ErrorKind::ChecksumMismatch,
                    abs,
                    format!(
                        "entry set checksum {sum:#06x} does not match the stored {:#06x}",
                        fe.set_checksum()
                    ),
                ));
            }
        } else {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                abs,
                format!(
                    "entry set has {} of the {} secondary entries its File entry counts{}",
                    view.actual,
                    view.expected,
                    if view.cut {
                        " (it runs past the end of the directory)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if let Some(s) = view.seq_stream {
            let se = s.entry();
            let want = usize::from(se.name_length());
            if complete && view.name_units.len() < want {
                errors.push(ProcessingError::at(
                    ErrorKind::LongName,
                    abs,
                    format!(
                        "name length {want} runs past the {} name entries of the set: {} units kept",
                        view.expected.saturating_sub(1),
                        view.name_units.len()
                    ),
                ));
            } else if complete {
                let hash = entry::name_hash(&fs.upcase.up_name(&view.name_units));
                if hash != se.name_hash() {
                    errors.push(ProcessingError::at(
                        ErrorKind::ChecksumMismatch,
                        s.abs,
                        format!(
                            "name hash {hash:#06x} of `{}` does not match the stored {:#06x}",
                            escape_component(&name),
                            se.name_hash()
                        ),
                    ));
                }
            }
        }
        let (times, time_base) = file_times(&fe);
        let attr = fe.attributes();
        let kind = if attr & entry::ATTR_DIRECTORY != 0 {
            FileKind::Directory
        } else {
            FileKind::File
        };
        let stream = self.find_stream(&file, view.seq_stream.as_ref());
        let mut size = 0;
        let mut content = Content::None;
        let mut slack = Vec::new();
        let mut recovery = if name_allocated {
            Recovery::Allocated
        } else {
            Recovery::Unrecoverable
        };
        let mut walk_runs = None;
        let mut first_cluster = 0;
        match stream {
            None => errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                abs,
                "no Stream Extension entry found for the set: size and content unknown",
            )),
            Some(s) => {
                let se = s.entry();
                let info = StreamInfo::of(&se);
                let meta_allocated =
                    file.unit == UnitState::Allocated && fe.in_use() && se.in_use();
                size = info.size;
                first_cluster = u64::from(info.first_cluster);
                let sc = fs.stream_content(
                    &info,
                    meta_allocated,
                    abs,
                    &mut self.recover_budget,
                    &mut errors,
                );
                recovery = sc.recovery;
                content = sc.content;
                slack = sc.slack;
                // TSK enters a directory whose name is live, or whose name
                // and metadata are both deleted; a deleted one whose first
                // cluster was reused is left (see the module notes).
                let enter = kind == FileKind::Directory
                    && (name_allocated || !meta_allocated)
                    && sc.recovery != Recovery::Overwritten
                    && !sc.stored.is_empty();
                if enter {
                    walk_runs = Some(sc.stored);
                }
            }
        }
        let rec = FileRecord {
            parent: path.clone(),
            name,
            raw_name,
            short_name: None,
            stream: None,
            meta: MetaAddr {
                inode: file.inode,
                attr: None,
            },
            kind,
            size,
            times,
            name_times: None,
            time_base,
            allocated: name_allocated,
            attributes: u32::from(attr),
            owner: crate::record::Owner::fat(attr & entry::ATTR_READ_ONLY != 0),
            content,
            slack,
            recovery,
            errors,
        };
        (rec, walk_runs, first_cluster)
    }

    /// A record for a volume label entry.
    fn label_record(&mut self, slot: &Slot, path: &Arc<[String]>) -> FileRecord {
        let e = slot.entry();
        let mut errors = Vec::new();
        let (name, raw) = if e.in_use() {
            let units = e.label_units(usize::from(e.label_length()));
            let name = name_from_units(&units, slot.abs, "volume label", &mut errors);
            (name, units.iter().flat_map(|u| u.to_le_bytes()).collect())
        } else {
            ("$EMPTY_VOLUME_LABEL".to_string(), Vec::new())
        };
        let mut rec = structure_record(
            path,
            name,
            raw,
            slot.inode,
            FileKind::VolumeLabel,
            0,
            Content::None,
            errors,
        );
        // TSK gives exFAT's structure entries execute bits only.
        rec.owner.mode = STRUCTURE_MODE;
        rec
    }

    /// A record for an allocation bitmap, up-case table, volume GUID or
    /// TexFAT entry, named as TSK names them.
    fn special_record(&mut self, slot: &Slot, path: &Arc<[String]>) -> FileRecord {
        let fs = self.fs;
        let e = slot.entry();
        let (name, size, content) = match e.kind() {
            entry::TYPE_ALLOC_BITMAP => {
                // TSK shows the bitmap it uses, whichever entry names it.
                let (c, len) = fs.bitmap_at.unwrap_or((e.first_cluster(), e.data_length()));
                (
                    "$ALLOC_BITMAP",
                    len,
                    fs.contiguous_content(u64::from(c), len),
                )
            }
            entry::TYPE_UPCASE => (
                "$UPCASE_TABLE",
                e.data_length(),
                fs.contiguous_content(u64::from(e.first_cluster()), e.data_length()),
            ),
            entry::TYPE_GUID => ("$VOLUME_GUID", 0, Content::None),
            _ => ("$TEX_FAT", 0, Content::None),
        };
        let raw = name.as_bytes().to_vec();
        let mut rec = structure_record(
            path,
            name.to_string(),
            raw,
            slot.inode,
            FileKind::File,
            size,
            content,
            Vec::new(),
        );
        rec.owner.mode = STRUCTURE_MODE;
        rec
    }

    /// TSK's virtual files: `$MBR`, `$FAT1` (`$FAT2`), `$OrphanFiles`,
    /// numbered after the last directory-entry inode.
    fn virtual_files(&mut self, root: &Arc<[String]>) -> ControlFlow<()> {
        let fs = self.fs;
        let bps = fs.bps();
        let fats: Vec<(u64, u64)> = (0..u64::from(fs.boot.fat_count))
            .map(|i| {
                (
                    fs.base + (fs.boot.fat_offset + i * fs.boot.fat_sectors) * bps,
                    fs.boot.fat_sectors * bps,
                )
            })
            .collect();
        for rec in tsk_virtual_files(root, fs.first_virtual_inode(), fs.base, &fats) {
            self.emit(rec, UnitState::Allocated)?;
        }
        ControlFlow::Continue(())
    }

    // ----------------------------------------------------------- orphans

    /// TSK's orphan search: File entries in free clusters (and after the
    /// heap) that the tree did not reach, listed under `$OrphanFiles`;
    /// orphan directories are walked and what they hold is listed under
    /// them only.
    fn orphans(&mut self) -> ControlFlow<()> {
        let candidates = self.scan_free_space();
        let mut inside: HashSet<u64> = HashSet::new();
        let none: Arc<[String]> = Arc::from(Vec::new());
        for &(inum, is_dir) in &candidates {
            if !is_dir || inside.contains(&inum) {
                continue;
            }
            let Some((_, Some(runs), first)) = self.orphan_record(inum, &none) else {
                continue;
            };
            self.collect = Some(std::mem::take(&mut inside));
            let flow = self.descend(&runs, first, false, String::new(), &none, 0, 0);
            inside = self.collect.take().unwrap_or_default();
            flow?;
        }
        if inside.len() >= MAX_TRACKED {
            self.limit(0, "entries inside orphan directories");
        }
        let parent: Arc<[String]> = Arc::from(vec!["$OrphanFiles".to_string()]);
        for &(inum, _) in &candidates {
            if inside.contains(&inum) {
                continue;
            }
            let Some((rec, runs, first)) = self.orphan_record(inum, &parent) else {
                continue;
            };
            self.emit_and_descend(rec, UnitState::Unallocated, runs, first, &parent, 0)?;
        }
        ControlFlow::Continue(())
    }

    /// Inode numbers (and whether each is a directory) of File entries in
    /// free space that the tree did not reach, in disk order. A sector is
    /// searched when its first slot is an entry, as TSK's inode walk does.
    fn scan_free_space(&mut self) -> Vec<(u64, bool)> {
        let fs = self.fs;
        let cs = fs.cluster_size();
        let bps = fs.bps();
        let end = fs.end();
        let mut found = Vec::new();
        let mut buf = Vec::new();
        let mut scan = |w: &mut Self, offset: u64, len: u64| {
            if found.len() >= MAX_TRACKED {
                return;
            }
            let mut pos = offset;
            while pos < offset + len {
                let n = SCAN_CHUNK.min(offset + len - pos);
                buf.clear();
                buf.resize(usize::try_from(n).unwrap_or(0), 0);
                let got = match read_full(&fs.src, &mut buf, pos) {
                    Ok(got) => got,
                    Err(e) => {
                        w.error(ProcessingError::at(ErrorKind::Io, pos, e.to_string()));
                        return;
                    }
                };
                for (si, sector) in buf[..got]
                    .chunks_exact(usize::try_from(bps).unwrap_or(512))
                    .enumerate()
                {
                    let sector_abs = pos + si as u64 * bps;
                    let first = slot_from(sector, sector_abs, fs, UnitState::Unallocated);
                    if !w.is_entry(&first) {
                        continue;
                    }
                    for (k, b) in sector.chunks_exact(32).enumerate() {
                        let slot =
                            slot_from(b, sector_abs + 32 * k as u64, fs, UnitState::Unallocated);
                        if !entry::is_file_entry(&slot.entry()) || w.named.contains(&slot.inode) {
                            continue;
                        }
                        if found.len() >= MAX_TRACKED {
                            w.limit(slot.abs, "orphan candidates");
                            return;
                        }
                        let dir = slot.entry().attributes() & entry::ATTR_DIRECTORY != 0;
                        found.push((slot.inode, dir));
                    }
                }
                if got < buf.len() {
                    return;
                }
                pos += n;
            }
        };
        let free = fs.bitmap.free_runs(&fs.src, |first, count| {
            let offset = fs.cluster_offset(first);
            let len = (count * cs).min(end.saturating_sub(offset));
            if len > 0 {
                scan(self, offset, len);
            }
        });
        if let Err(e) = free {
            self.error(ProcessingError::at(
                ErrorKind::Io,
                fs.base,
                format!("allocation bitmap unreadable: orphan search incomplete: {e}"),
            ));
        }
        let tail = fs.base + fs.boot.heap_end() * bps;
        if tail < end {
            scan(self, tail, end - tail);
        }
        found
    }

    /// The record of an orphan File entry, its metadata and name read as
    /// TSK's inode lookup reads them (the slots that follow it).
    fn orphan_record(
        &mut self,
        inum: u64,
        parent: &Arc<[String]>,
    ) -> Option<(FileRecord, Option<Vec<Run>>, u64)> {
        let fs = self.fs;
        let bytes = fs.read_entry(inum)?;
        let abs = fs.inode_offset(inum);
        let unit = self.unit_of(abs);
        let file = Slot {
            abs,
            inode: inum,
            unit,
            bytes,
        };
        let fe = file.entry();
        let expected = fe.secondary_count();
        let mut view = SetView {
            file,
            seq_stream: None,
            name_units: Vec::new(),
            expected,
            actual: 0,
            cut: false,
            bytes: bytes.to_vec(),
        };
        let stream = self.find_stream(&file, None);
        let mut name = None;
        if let Some(s) = stream.filter(|s| s.inode == inum + 1) {
            view.seq_stream = Some(s);
            view.actual = 1;
            view.bytes.extend_from_slice(&s.bytes);
            let want = usize::from(s.entry().name_length());
            for k in 2..=u64::from(expected) {
                let Some(b) = fs.read_entry(inum + k) else {
                    view.cut = true;
                    break;
                };
                let e = Entry(&b);
                if e.kind() != entry::TYPE_NAME {
                    break;
                }
                let take = want
                    .saturating_sub(view.name_units.len())
                    .min(entry::NAME_CHARS_PER_ENTRY);
                view.name_units.extend_from_slice(&e.name_units()[..take]);
                view.actual += 1;
                view.bytes.extend_from_slice(&b);
            }
        }
        if view.name_units.is_empty() {
            name = Some(format!("OrphanFile-{inum}"));
        }
        let (rec, runs, first) = self.file_record(&view, false, parent, name);
        Some((rec, runs, first))
    }
}

/// A name from its UTF-16 units: it ends at the first NUL unit (as TSK's
/// C strings and this crate's FAT long names end), unpaired surrogates
/// become U+FFFD; both are reported.
fn name_from_units(
    units: &[u16],
    abs: u64,
    what: &str,
    errors: &mut Vec<ProcessingError>,
) -> String {
    let end = units.iter().position(|&u| u == 0).unwrap_or(units.len());
    if units[end..].iter().any(|&u| u != 0) {
        errors.push(ProcessingError::at(
            ErrorKind::NameEncoding,
            abs,
            format!(
                "{what} continues after a NUL unit; the {} units after it are not shown",
                units.len() - end - 1
            ),
        ));
    }
    let (name, exact) = decode_utf16(&units[..end]);
    if !exact {
        errors.push(ProcessingError::at(
            ErrorKind::NameEncoding,
            abs,
            format!("{what} holds unpaired UTF-16 surrogates (shown as U+FFFD)"),
        ));
    }
    name
}

/// The slot whose 32 bytes start `b`, at absolute byte `abs`.
fn slot_from<R: ReadAt>(b: &[u8], abs: u64, fs: &ExfatFs<R>, unit: UnitState) -> Slot {
    let mut bytes = [0u8; 32];
    if let Some(s) = b.get(..32) {
        bytes.copy_from_slice(s);
    }
    Slot {
        abs,
        inode: fs.inode_at(abs),
        unit,
        bytes,
    }
}

/// A File entry's times: converted to UTC with the entry's offsets when all
/// of the present ones have a valid offset, else the wall clock as TSK
/// shows it.
fn file_times(fe: &Entry<'_>) -> (Times, TimeBase) {
    let [c, m, a] = fe
        .raw_times()
        .map(|(d, t, ms, utc)| entry::timestamp(d, t, ms, utc));
    let present = [c, m, a].iter().filter(|(t, _)| t.is_some()).count();
    let utc = present > 0
        && [c, m, a]
            .iter()
            .all(|(t, off)| t.is_none() || off.is_some());
    let adjust = |(t, off): (Option<crate::record::Timestamp>, Option<i64>)| {
        t.map(|mut t| {
            if utc {
                t.secs -= off.unwrap_or(0) * 60;
            }
            t
        })
    };
    let times = Times {
        modified: adjust(m),
        accessed: adjust(a),
        changed: None,
        created: adjust(c),
    };
    (
        times,
        if utc {
            TimeBase::Utc
        } else {
            TimeBase::LocalWallClock
        },
    )
}
