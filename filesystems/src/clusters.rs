//! What FAT and exFAT share: a heap of numbered clusters (cluster 2
//! first), byte runs and slack for cluster runs, TSK's recovery of deleted
//! files, the wording of cluster-chain faults, and TSK's virtual files
//! (`$MBR`, `$FAT1`.., `$OrphanFiles`).

use std::collections::HashSet;
use std::io;
use std::sync::Arc;

use crate::error::{ErrorKind, ProcessingError};
use crate::fat::table::{ChainStop, Link};
use crate::name::escape_component;
use crate::record::{Content, Extent, FileKind, FileRecord, Recovery, Run, TimeBase, push_run};

/// Where a volume's clusters are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heap {
    /// Absolute offset of cluster 2.
    pub(crate) start: u64,
    /// Bytes per cluster.
    pub(crate) cluster_size: u64,
    /// Absolute end of the volume's bytes present on the source.
    pub(crate) end: u64,
    /// Highest valid cluster number.
    pub(crate) last_cluster: u64,
}

impl Heap {
    /// Absolute offset of cluster `c`.
    pub(crate) fn offset(&self, c: u64) -> u64 {
        self.start + c.saturating_sub(2) * self.cluster_size
    }

    /// Byte runs for cluster runs `(first, count)`, clipped to `size` and
    /// to the volume.
    pub(crate) fn runs(&self, clusters: &[(u64, u64)], size: u64) -> Vec<Run> {
        let mut left = size;
        let mut runs = Vec::new();
        for &(c, n) in clusters {
            if left == 0 {
                break;
            }
            let offset = self.offset(c);
            let len = n
                .saturating_mul(self.cluster_size)
                .min(left)
                .min(self.end.saturating_sub(offset));
            if len == 0 {
                break;
            }
            push_run(&mut runs, Run::Data { offset, len });
            left -= len;
        }
        runs
    }

    /// The slack after `size` bytes in the last cluster used.
    pub(crate) fn slack(&self, clusters: &[(u64, u64)], size: u64) -> Vec<Extent> {
        let cs = self.cluster_size;
        let total: u64 = clusters.iter().map(|&(_, n)| n.saturating_mul(cs)).sum();
        if total < size || size.is_multiple_of(cs) {
            return Vec::new();
        }
        let mut pos = 0u64;
        for &(c, n) in clusters {
            let run = n * cs;
            if size < pos + run {
                let within = size - pos;
                let end_of_cluster = within.div_ceil(cs) * cs;
                let offset = self.offset(c) + within;
                let len = (end_of_cluster - within).min(self.end.saturating_sub(offset));
                return if len > 0 {
                    vec![Extent { offset, len }]
                } else {
                    Vec::new()
                };
            }
            pos += run;
        }
        Vec::new()
    }

    /// TSK's recovery of a deleted file of `needed` clusters from `start`:
    /// if the first cluster is allocated the content is overwritten (TSK
    /// then shows that one cluster); otherwise the unallocated clusters
    /// from the first one on, skipping allocated ones, until the size is
    /// covered. Each cluster looked at costs a unit of `budget`, which a
    /// walk shares so crafted entries cannot make it quadratic.
    pub(crate) fn recover(
        &self,
        start: u64,
        needed: u64,
        abs: u64,
        budget: &mut u64,
        mut allocated: impl FnMut(u64) -> io::Result<bool>,
        errors: &mut Vec<ProcessingError>,
    ) -> (Vec<(u64, u64)>, Recovery) {
        match allocated(start) {
            Err(e) => {
                errors.push(ProcessingError::at(ErrorKind::Io, abs, e.to_string()));
                return (Vec::new(), Recovery::Unrecoverable);
            }
            Ok(true) => {
                errors.push(ProcessingError::at(
                    ErrorKind::Recovery,
                    abs,
                    format!(
                        "first cluster {start} is allocated to another file: content overwritten"
                    ),
                ));
                return (vec![(start, 1)], Recovery::Overwritten);
            }
            Ok(false) => {}
        }
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut got = 0u64;
        let mut skipped = false;
        let mut c = start;
        while got < needed {
            let why = if *budget == 0 {
                Some((
                    ErrorKind::WalkLimit,
                    "the walk's recovery budget is spent: not recovered".to_string(),
                ))
            } else if c > self.last_cluster {
                Some((
                    ErrorKind::Recovery,
                    format!(
                        "only {got} of {needed} unallocated clusters follow cluster {start}: not recoverable"
                    ),
                ))
            } else {
                None
            };
            if let Some((kind, why)) = why {
                errors.push(ProcessingError::at(kind, abs, why));
                return (vec![(start, 1)], Recovery::Unrecoverable);
            }
            *budget -= 1;
            match allocated(c) {
                Ok(true) => skipped = true,
                Ok(false) => {
                    match runs.last_mut() {
                        Some((s, n)) if *s + *n == c => *n += 1,
                        _ => runs.push((c, 1)),
                    }
                    got += 1;
                }
                Err(e) => {
                    errors.push(ProcessingError::at(ErrorKind::Io, abs, e.to_string()));
                    return (runs, Recovery::Unrecoverable);
                }
            }
            c += 1;
        }
        let rec = if skipped {
            Recovery::SkippedAllocated
        } else {
            Recovery::Unallocated
        };
        (runs, rec)
    }
}

/// Deepest directory nesting a walk follows.
pub(crate) const MAX_DEPTH: usize = 256;

/// What keeps a directory walk from going round or too deep: the first
/// clusters of the directories on the current path, those of allocated
/// directories already walked, and a budget of directory walks.
pub(crate) struct DirGuard {
    stack: Vec<u64>,
    walked: HashSet<u64>,
    budget: u64,
}

impl DirGuard {
    pub(crate) fn new(budget: u64) -> Self {
        Self {
            stack: Vec::new(),
            walked: HashSet::new(),
            budget,
        }
    }

    /// Enters the directory at `start` (depth `depth + 1`), or says why
    /// not as an error at `abs`. `ancestor` marks a directory known to
    /// contain this one (a FAT32 root). Call [`DirGuard::leave`] after.
    pub(crate) fn enter(
        &mut self,
        start: u64,
        allocated: bool,
        ancestor: bool,
        depth: usize,
        name: &str,
        abs: u64,
    ) -> Result<(), ProcessingError> {
        let refusal = if ancestor || self.stack.contains(&start) {
            Some((
                ErrorKind::DirectoryLoop,
                "it contains itself or an ancestor",
            ))
        } else if allocated && !self.walked.insert(start) {
            Some((
                ErrorKind::DirectoryLoop,
                "it was already walked through another entry",
            ))
        } else if depth + 1 >= MAX_DEPTH || self.budget == 0 {
            Some((
                ErrorKind::WalkLimit,
                "the depth or directory budget is reached",
            ))
        } else {
            None
        };
        if let Some((kind, why)) = refusal {
            return Err(ProcessingError::at(
                kind,
                abs,
                format!(
                    "directory `{}` (cluster {start}, depth {}) not entered: {why}",
                    escape_component(name),
                    depth + 1
                ),
            ));
        }
        self.budget -= 1;
        self.stack.push(start);
        Ok(())
    }

    /// Enters the root directory at `start` unconditionally.
    pub(crate) fn enter_root(&mut self, start: u64) {
        self.stack.push(start);
        self.walked.insert(start);
    }

    /// Leaves the directory entered last.
    pub(crate) fn leave(&mut self) {
        self.stack.pop();
    }
}

/// Cluster runs with 32-bit numbers (as chains are walked) widened.
pub(crate) fn widen(runs: &[(u32, u32)]) -> Vec<(u64, u64)> {
    runs.iter()
        .map(|&(c, n)| (u64::from(c), u64::from(n)))
        .collect()
}

/// The processing error for a chain walk that stopped on a fault.
pub(crate) fn chain_error(at: u64, stop: &ChainStop, last: u64, what: &str) -> ProcessingError {
    match *stop {
        ChainStop::Loop { at: c, to } => ProcessingError::at(
            ErrorKind::ChainLoop,
            at,
            format!("{what} cluster chain loops: cluster {c} links back to {to}"),
        ),
        ChainStop::OutOfRange { at: c, value } => ProcessingError::at(
            ErrorKind::ChainOutOfRange,
            at,
            format!("{what} cluster chain: cluster {c} links to {value}, outside 2..={last}"),
        ),
        ChainStop::Broken { at: c, link } => ProcessingError::at(
            ErrorKind::ChainBroken,
            at,
            format!(
                "{what} cluster chain: cluster {c} is {}",
                match link {
                    Link::Free => "free",
                    Link::Bad => "marked bad",
                    _ => "invalid",
                }
            ),
        ),
        ChainStop::Io(ref e) => ProcessingError::at(ErrorKind::Io, at, e.clone()),
        ChainStop::Eof | ChainStop::Enough => ProcessingError::at(
            ErrorKind::ChainTooShort,
            at,
            format!("{what} chain ended early"),
        ),
    }
}

/// A record for something the file system holds but no user wrote (a
/// virtual file, a label, a metadata entry): live, without times.
#[allow(clippy::too_many_arguments)]
pub(crate) fn structure_record(
    parent: &Arc<[String]>,
    name: String,
    raw_name: Vec<u8>,
    inode: u64,
    kind: FileKind,
    size: u64,
    content: Content,
    errors: Vec<ProcessingError>,
) -> FileRecord {
    FileRecord {
        size,
        time_base: TimeBase::LocalWallClock,
        content,
        errors,
        ..FileRecord::named(parent.clone(), name, raw_name, inode, kind)
    }
}

/// TSK's virtual files for a FAT-family volume, numbered from `mbr_inode`
/// (the first number after the last directory-entry inode): `$MBR` (512
/// bytes at `mbr_offset`), `$FAT1`.. (each FAT's `(offset, length)`) and
/// `$OrphanFiles`.
pub(crate) fn tsk_virtual_files(
    root: &Arc<[String]>,
    mbr_inode: u64,
    mbr_offset: u64,
    fats: &[(u64, u64)],
) -> Vec<FileRecord> {
    let mut files = vec![(
        "$MBR".to_string(),
        mbr_inode,
        mbr_offset,
        512u64,
        FileKind::Virtual,
    )];
    for (i, &(offset, len)) in fats.iter().enumerate() {
        files.push((
            format!("$FAT{}", i + 1),
            mbr_inode + 1 + i as u64,
            offset,
            len,
            FileKind::Virtual,
        ));
    }
    files.push((
        "$OrphanFiles".to_string(),
        mbr_inode + 1 + fats.len() as u64,
        0,
        0,
        FileKind::VirtualDirectory,
    ));
    files
        .into_iter()
        .map(|(name, inode, offset, len, kind)| {
            let content = if len > 0 {
                Content::Runs(vec![Run::Data { offset, len }])
            } else {
                Content::None
            };
            let raw = name.as_bytes().to_vec();
            structure_record(root, name, raw, inode, kind, len, content, Vec::new())
        })
        .collect()
}
