//! For the engine's unit tests: deterministic bytes that are not a
//! repeating pattern (xorshift64), and the engine's own sources for the
//! tests that check rules over the code (no SQL in stages, no file access
//! behind the channels).

/// `len` bytes from `seed` (any value; zero is made odd): the digests
/// crate's, which its kernel measurements hash.
pub(crate) use caseload_digests::select::noise;

/// Every `.rs` file under `dir`.
pub(crate) fn rust_sources(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A source file without its `#[cfg(test)]` part.
pub(crate) fn product_code(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// A temporary directory on a disk-backed file system (not tmpfs, whose
/// pages are the files and cannot be dropped from the page cache): the
/// system's, unless it is in memory, else under the workspace's target.
pub(crate) fn disk_tempdir() -> tempfile::TempDir {
    let system = std::env::temp_dir();
    if !crate::cache::residency::on_memory_fs(&system) {
        return tempfile::tempdir().unwrap();
    }
    let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-tmp");
    std::fs::create_dir_all(&target).unwrap();
    tempfile::tempdir_in(target).unwrap()
}
