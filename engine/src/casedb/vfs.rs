//! A counting SQLite VFS: the case database's own file I/O, charged to the
//! database channel.
//!
//! SQLite does its I/O through a VFS. This shim wraps the platform default
//! (`unix`) and forwards every call unchanged, but counts `xRead`, `xWrite`
//! and `xSync` (bytes, operations, time inside the call) on a channel's
//! counters. That covers the main database file, its rollback journal or WAL,
//! and statement journals: everything SQLite reads or writes. Memory-mapped
//! I/O would bypass `xRead`, so connections set `mmap_size = 0`.
//!
//! Why not `/proc/thread-self/io`? It gives bytes but neither fsync counts nor
//! time blocked, and it would also charge any other I/O done by the writer
//! thread. A VFS sees exactly SQLite's file calls and nothing else.
//!
//! Each registered VFS lives for the rest of the process (SQLite keeps a raw
//! pointer to it); one is registered per database channel, which is a few
//! hundred bytes per run.

use crate::cache::model::CachedFile;
use crate::channel::{ChannelCounters, ChannelKind};
use crate::trace::TraceOp;
use rusqlite::ffi;
use std::ffi::{CString, c_int, c_void};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Per-VFS data: the wrapped VFS and where to count.
struct VfsData {
    real: *mut ffi::sqlite3_vfs,
    counters: Arc<ChannelCounters>,
    kind: ChannelKind,
}

/// Our file object: SQLite allocates `szOsFile` bytes for it; the real VFS's
/// file object follows directly after this header.
#[repr(C)]
struct ShimFile {
    base: ffi::sqlite3_file,
    counters: *const ChannelCounters,
    real: *mut ffi::sqlite3_file,
    /// The file's number in the run's trace (0: not traced).
    trace_id: u32,
    kind: ChannelKind,
    /// The file in the modelled page cache (`--ram`), if any.
    cached: Option<CachedFile>,
}

/// Errors registering the VFS.
#[derive(Debug, thiserror::Error)]
pub enum VfsError {
    /// SQLite has no default VFS (cannot happen with the bundled build).
    #[error("SQLite has no default VFS to wrap")]
    NoDefault,
    /// Registration failed.
    #[error("registering the counting SQLite VFS failed with code {0}")]
    Register(c_int),
}

/// Register a counting VFS that charges to `counters` (of a channel of
/// `kind`, for the trace); returns its name, to pass when opening
/// connections.
pub fn register(counters: Arc<ChannelCounters>, kind: ChannelKind) -> Result<String, VfsError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("caseload-counting-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS or NULL; the
    // default VFS is static for the life of the process.
    let real = unsafe { ffi::sqlite3_vfs_find(std::ptr::null()) };
    if real.is_null() {
        return Err(VfsError::NoDefault);
    }
    // SAFETY: `real` is a valid, initialised VFS (checked non-null above).
    let mut vfs: ffi::sqlite3_vfs = unsafe { *real };
    let header = c_int::try_from(std::mem::size_of::<ShimFile>()).unwrap_or(c_int::MAX);
    vfs.szOsFile = vfs.szOsFile.saturating_add(header);
    vfs.pNext = std::ptr::null_mut();
    // The name and data must outlive every connection: leaked on purpose.
    let c_name = CString::new(name.clone()).unwrap_or_default();
    vfs.zName = c_name.into_raw();
    vfs.pAppData = Box::into_raw(Box::new(VfsData {
        real,
        counters,
        kind,
    }))
    .cast::<c_void>();
    vfs.xOpen = Some(shim_open);
    vfs.xDelete = Some(shim_delete);
    let vfs = Box::into_raw(Box::new(vfs));
    // SAFETY: `vfs` is a fully initialised VFS that is never freed.
    let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
    if rc != ffi::SQLITE_OK {
        return Err(VfsError::Register(rc));
    }
    Ok(name)
}

unsafe extern "C" fn shim_open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite passes our VFS (whose pAppData is a VfsData) and a file
    // buffer of szOsFile bytes, which we laid out as ShimFile + real file.
    unsafe {
        let data = &*((*vfs).pAppData as *const VfsData);
        let shim = file.cast::<ShimFile>();
        let real_file = file
            .cast::<u8>()
            .add(std::mem::size_of::<ShimFile>())
            .cast::<ffi::sqlite3_file>();
        (*shim).base.pMethods = std::ptr::null();
        (*shim).counters = Arc::as_ptr(&data.counters);
        (*shim).real = real_file;
        (*shim).kind = data.kind;
        (*shim).trace_id = match data.counters.trace() {
            Some(t) => {
                // SQLite's temporary files have no name.
                let path = if name.is_null() {
                    std::path::PathBuf::from("(sqlite temporary file)")
                } else {
                    c_path(name)
                };
                t.file(data.kind, &path, false)
            }
            None => 0,
        };
        let Some(open) = (*data.real).xOpen else {
            return ffi::SQLITE_CANTOPEN;
        };
        let rc = open(data.real, name, real_file, flags, out_flags);
        (*shim).cached = None;
        if rc == ffi::SQLITE_OK && !(*real_file).pMethods.is_null() {
            (*shim).base.pMethods = methods_for((*(*real_file).pMethods).iVersion);
            if let (Some(model), false) = (data.counters.page_cache(), name.is_null()) {
                let path = c_path(name);
                if let (Ok(meta), Ok(id)) =
                    (std::fs::metadata(&path), crate::os::path_identity(&path))
                {
                    let counters = data.counters.clone();
                    (*shim).cached = Some(model.register(&path, id, meta.len(), counters));
                }
            }
        }
        rc
    }
}

/// A file name SQLite passes, as a path.
///
/// # Safety
/// `name` must be a valid NUL-terminated string.
unsafe fn c_path(name: *const std::ffi::c_char) -> std::path::PathBuf {
    // SAFETY: guaranteed by the caller.
    let bytes = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
    crate::os::path_from_bytes(bytes)
}

/// Delete a file (a rollback journal at the end of a transaction): the
/// modelled page cache forgets its pages, which went with it.
unsafe extern "C" fn shim_delete(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const std::ffi::c_char,
    sync_dir: c_int,
) -> c_int {
    // SAFETY: SQLite passes our VFS and a valid file name.
    unsafe {
        let data = &*((*vfs).pAppData as *const VfsData);
        let Some(delete) = (*data.real).xDelete else {
            return ffi::SQLITE_IOERR_DELETE;
        };
        let rc = delete(data.real, name, sync_dir);
        if let (Some(model), false) = (data.counters.page_cache(), name.is_null()) {
            model.removed_file(&c_path(name));
        }
        rc
    }
}

/// The modelled page cache and the file in it, if the run models one.
///
/// # Safety
/// `file` must be a ShimFile opened by `shim_open`.
unsafe fn cached(
    file: *mut ffi::sqlite3_file,
) -> Option<(&'static crate::cache::model::PageCacheModel, CachedFile)> {
    // SAFETY: guaranteed by the caller; see `real`.
    unsafe {
        let shim = file.cast::<ShimFile>();
        let id = (*shim).cached?;
        let model = (*(*shim).counters).page_cache()?;
        Some((&**model, id))
    }
}

fn methods_for(version: c_int) -> *const ffi::sqlite3_io_methods {
    match version {
        ..=1 => &METHODS_V1,
        2 => &METHODS_V2,
        _ => &METHODS_V3,
    }
}

/// The real file and its methods behind our file.
///
/// # Safety
/// `file` must be a ShimFile opened by `shim_open`.
unsafe fn real(
    file: *mut ffi::sqlite3_file,
) -> (
    *mut ffi::sqlite3_file,
    &'static ffi::sqlite3_io_methods,
    &'static ChannelCounters,
) {
    // SAFETY: guaranteed by the caller; the real methods are static tables of
    // the wrapped VFS, and the counters outlive the VFS (leaked Arc inside).
    unsafe {
        let shim = file.cast::<ShimFile>();
        let real = (*shim).real;
        (real, &*(*real).pMethods, &*(*shim).counters)
    }
}

/// Record an operation on `file` in the run's trace, if it is traced.
///
/// # Safety
/// `file` must be a ShimFile opened by `shim_open`.
unsafe fn trace(
    file: *mut ffi::sqlite3_file,
    op: TraceOp,
    offset: u64,
    len: u64,
    took: std::time::Duration,
) {
    // SAFETY: guaranteed by the caller; see `real`.
    unsafe {
        let shim = file.cast::<ShimFile>();
        if (*shim).trace_id != 0
            && let Some(t) = (*(*shim).counters).trace()
        {
            t.op((*shim).kind, (*shim).trace_id, op, offset, len, took);
        }
    }
}

macro_rules! forward {
    ($name:ident, $field:ident, ($($arg:ident : $ty:ty),*) -> $ret:ty, $missing:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> $ret {
            // SAFETY: SQLite only calls these on files opened by shim_open.
            unsafe {
                let (real, methods, _) = real(file);
                match methods.$field {
                    Some(f) => f(real $(, $arg)*),
                    None => $missing,
                }
            }
        }
    };
}

unsafe extern "C" fn shim_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: see `forward!`.
    unsafe {
        let (real, methods, _) = real(file);
        let rc = methods.xClose.map_or(ffi::SQLITE_OK, |f| f(real));
        trace(file, TraceOp::Close, 0, 0, std::time::Duration::ZERO);
        (*file).pMethods = std::ptr::null();
        rc
    }
}

unsafe extern "C" fn shim_read(
    file: *mut ffi::sqlite3_file,
    buf: *mut c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: see `forward!`.
    unsafe {
        let (real, methods, counters) = real(file);
        let Some(read) = methods.xRead else {
            return ffi::SQLITE_IOERR_READ;
        };
        let start = Instant::now();
        let rc = read(real, buf, amount, offset);
        let mut amount = u64::try_from(amount).unwrap_or(0);
        let took = start.elapsed();
        // A read past the end fills the rest with zeros and says only
        // that it was short: count the bytes that were there, as the
        // system counts them (the file's size tells; rare, at opens).
        if rc == ffi::SQLITE_IOERR_SHORT_READ
            && let Some(size_of) = methods.xFileSize
        {
            let mut size: ffi::sqlite3_int64 = 0;
            if size_of(real, &mut size) == ffi::SQLITE_OK {
                let there = u64::try_from(size.saturating_sub(offset)).unwrap_or(0);
                amount = amount.min(there);
            }
        }
        counters.record_read(amount, took);
        let offset = u64::try_from(offset).unwrap_or(0);
        trace(file, TraceOp::Read, offset, amount, took);
        if let Some((model, id)) = cached(file) {
            model.read(id, offset, amount);
        }
        rc
    }
}

/// How the database's files are named in a channel error (SQLite does not
/// say which of the database, journal or WAL a call is for).
const SQLITE_FILES: &str = "case database (SQLite)";

/// The SQLite result for an injected I/O error: a full disk is
/// `SQLITE_FULL`, as SQLite's own VFS reports ENOSPC; anything else is
/// `otherwise`.
fn sqlite_code(e: &std::io::Error, otherwise: c_int) -> c_int {
    if e.raw_os_error() == Some(libc::ENOSPC) {
        ffi::SQLITE_FULL
    } else {
        otherwise
    }
}

/// SQLite's words for a result code.
fn rc_text(rc: c_int) -> String {
    // SAFETY: sqlite3_errstr returns a static string for any code.
    let text = unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errstr(rc)) };
    format!("{} (SQLite code {rc})", text.to_string_lossy())
}

unsafe extern "C" fn shim_write(
    file: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amount: c_int,
    offset: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: see `forward!`.
    unsafe {
        let (real, methods, counters) = real(file);
        let Some(write) = methods.xWrite else {
            return ffi::SQLITE_IOERR_WRITE;
        };
        let bytes = u64::try_from(amount).unwrap_or(0);
        let kind = (*file.cast::<ShimFile>()).kind;
        if let Err(e) = counters.check_write(kind, Path::new(SQLITE_FILES), bytes) {
            return sqlite_code(&e, ffi::SQLITE_IOERR_WRITE);
        }
        let start = Instant::now();
        let rc = write(real, buf, amount, offset);
        if rc != ffi::SQLITE_OK {
            counters.note_error(kind, "write", Path::new(SQLITE_FILES), &rc_text(rc));
        }
        let took = start.elapsed();
        counters.record_write(bytes, took);
        let offset = u64::try_from(offset).unwrap_or(0);
        trace(file, TraceOp::Write, offset, bytes, took);
        if let Some((model, id)) = cached(file) {
            model.write(id, offset, bytes);
        }
        rc
    }
}

unsafe extern "C" fn shim_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    // SAFETY: see `forward!`.
    unsafe {
        let (real, methods, counters) = real(file);
        let Some(sync) = methods.xSync else {
            return ffi::SQLITE_IOERR_FSYNC;
        };
        let kind = (*file.cast::<ShimFile>()).kind;
        if let Err(e) = counters.check_sync(kind, Path::new(SQLITE_FILES)) {
            return sqlite_code(&e, ffi::SQLITE_IOERR_FSYNC);
        }
        let start = Instant::now();
        let rc = sync(real, flags);
        if rc != ffi::SQLITE_OK {
            counters.note_error(kind, "sync", Path::new(SQLITE_FILES), &rc_text(rc));
        }
        let took = start.elapsed();
        counters.record_sync(took);
        trace(file, TraceOp::Sync, 0, 0, took);
        if rc == ffi::SQLITE_OK
            && let Some((model, id)) = cached(file)
        {
            model.synced(id);
        }
        rc
    }
}

unsafe extern "C" fn shim_truncate(
    file: *mut ffi::sqlite3_file,
    size: ffi::sqlite3_int64,
) -> c_int {
    // SAFETY: see `forward!`.
    unsafe {
        let (real, methods, _) = real(file);
        let Some(truncate) = methods.xTruncate else {
            return ffi::SQLITE_IOERR_TRUNCATE;
        };
        let rc = truncate(real, size);
        if rc == ffi::SQLITE_OK
            && let Some((model, id)) = cached(file)
        {
            model.truncated(id, u64::try_from(size).unwrap_or(0));
        }
        rc
    }
}

forward!(shim_file_size, xFileSize, (size: *mut ffi::sqlite3_int64) -> c_int, ffi::SQLITE_IOERR_FSTAT);
forward!(shim_lock, xLock, (level: c_int) -> c_int, ffi::SQLITE_OK);
forward!(shim_unlock, xUnlock, (level: c_int) -> c_int, ffi::SQLITE_OK);
forward!(shim_check_reserved, xCheckReservedLock, (out: *mut c_int) -> c_int, ffi::SQLITE_OK);
forward!(shim_file_control, xFileControl, (op: c_int, arg: *mut c_void) -> c_int, ffi::SQLITE_NOTFOUND);
forward!(shim_sector_size, xSectorSize, () -> c_int, 4096);
forward!(shim_device_characteristics, xDeviceCharacteristics, () -> c_int, 0);
forward!(shim_shm_map, xShmMap, (page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int, ffi::SQLITE_IOERR_SHMMAP);
forward!(shim_shm_lock, xShmLock, (offset: c_int, n: c_int, flags: c_int) -> c_int, ffi::SQLITE_IOERR_SHMLOCK);
forward!(shim_shm_unmap, xShmUnmap, (delete: c_int) -> c_int, ffi::SQLITE_OK);
forward!(shim_fetch, xFetch, (offset: ffi::sqlite3_int64, amount: c_int, out: *mut *mut c_void) -> c_int, {
    // SQLite passes a valid out-pointer (inside the macro's unsafe block).
    *out = std::ptr::null_mut();
    ffi::SQLITE_OK
});
forward!(shim_unfetch, xUnfetch, (offset: ffi::sqlite3_int64, page: *mut c_void) -> c_int, ffi::SQLITE_OK);

unsafe extern "C" fn shim_shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: see `forward!`.
    unsafe {
        let (real, methods, _) = real(file);
        if let Some(f) = methods.xShmBarrier {
            f(real);
        }
    }
}

const fn methods(version: c_int) -> ffi::sqlite3_io_methods {
    ffi::sqlite3_io_methods {
        iVersion: version,
        xClose: Some(shim_close),
        xRead: Some(shim_read),
        xWrite: Some(shim_write),
        xTruncate: Some(shim_truncate),
        xSync: Some(shim_sync),
        xFileSize: Some(shim_file_size),
        xLock: Some(shim_lock),
        xUnlock: Some(shim_unlock),
        xCheckReservedLock: Some(shim_check_reserved),
        xFileControl: Some(shim_file_control),
        xSectorSize: Some(shim_sector_size),
        xDeviceCharacteristics: Some(shim_device_characteristics),
        xShmMap: if version >= 2 {
            Some(shim_shm_map)
        } else {
            None
        },
        xShmLock: if version >= 2 {
            Some(shim_shm_lock)
        } else {
            None
        },
        xShmBarrier: if version >= 2 {
            Some(shim_shm_barrier)
        } else {
            None
        },
        xShmUnmap: if version >= 2 {
            Some(shim_shm_unmap)
        } else {
            None
        },
        xFetch: if version >= 3 { Some(shim_fetch) } else { None },
        xUnfetch: if version >= 3 {
            Some(shim_unfetch)
        } else {
            None
        },
    }
}

static METHODS_V1: ffi::sqlite3_io_methods = methods(1);
static METHODS_V2: ffi::sqlite3_io_methods = methods(2);
static METHODS_V3: ffi::sqlite3_io_methods = methods(3);
