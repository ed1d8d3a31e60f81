//! Lowering the scheduling priority of helper threads so that a stage's
//! critical-path thread keeps a core to itself.
//!
//! Why: the image hash runs exactly as fast as one core does MD5, while
//! inflating E01 chunks and the other hashes fill the second core. With
//! more runnable threads than cores the scheduler shares time fairly, and
//! the MD5 thread loses slices it never makes up; helpers at a lower
//! priority only take what the critical thread leaves. A process may always
//! make its own threads nicer, so this needs no privilege; where it fails
//! (another OS, a sandbox) the thread keeps the default priority.

/// How much nicer than normal a helper thread runs: at nice 5 a helper has
/// about a third of a normal thread's weight on a shared core.
const HELPER_NICENESS: libc::c_int = 5;

/// Make the calling thread a helper that runs nicer than the critical path.
/// Linux keeps nice values per thread, so only this thread changes.
pub(crate) fn become_helper() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions; getpriority/setpriority on
        // our own thread id read and change only that thread's nice value.
        unsafe {
            let tid = libc::gettid() as libc::id_t;
            let current = libc::getpriority(libc::PRIO_PROCESS, tid);
            let _ = libc::setpriority(libc::PRIO_PROCESS, tid, (current + HELPER_NICENESS).min(19));
        }
    }
}
