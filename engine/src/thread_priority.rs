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

/// Make the calling thread a helper that runs below the critical path:
/// nice + 5 on Linux (about a third of a normal thread's weight on a shared
/// core; Linux keeps nice values per thread, so only this thread changes),
/// one step below normal on Windows.
pub(crate) fn become_helper() {
    let _ = crate::os::lower_thread_priority();
}
