//! What the file-system test binaries share: tool lookup and hex.

use std::process::Command;

/// Whether `tool` is on the PATH; prints `SKIPPED: <tool>` when not, and
/// the check that needs it passes.
pub fn have(tool: &str) -> bool {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        println!("SKIPPED: {tool}");
    }
    found
}

/// Lower-case hex of a digest.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
