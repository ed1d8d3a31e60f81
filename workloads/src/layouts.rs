//! The layout presets of the FTK study (`workloads/layouts/*.toml`), built
//! in by name, and the one way commands take a layout: a file, or a preset.

use caseload_engine::layout::{Layout, LayoutError};
use std::path::Path;

/// Built-in layouts by name.
pub const BUILTIN: &[(&str, &str)] = &[
    ("five-channel", include_str!("../layouts/five-channel.toml")),
    (
        "three-channel",
        include_str!("../layouts/three-channel.toml"),
    ),
    ("single-disk", include_str!("../layouts/single-disk.toml")),
];

/// Load `arg` as a layout file if such a file exists, else as a preset
/// name (as workloads are taken).
pub fn resolve(arg: &str) -> Result<Layout, LayoutError> {
    let path = Path::new(arg);
    if path.is_file() {
        return Layout::load(path);
    }
    match BUILTIN.iter().find(|(name, _)| *name == arg) {
        // The preset's own paths are absolute (environment variables with
        // defaults); its source is its name, so a child run given it as
        // `--layout NAME` resolves it the same way.
        Some((name, text)) => Layout::parse(text, Path::new(name)),
        None => Err(LayoutError::NotFound {
            arg: arg.to_string(),
            presets: BUILTIN
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caseload_engine::channel::ChannelKind;

    #[test]
    fn presets_resolve_by_name_and_unknown_names_list_them() {
        for (name, _) in BUILTIN {
            let l = resolve(name).unwrap();
            assert_eq!(l.name, *name);
            assert!(l.dir(ChannelKind::Database).is_ok());
        }
        let e = resolve("no-such-layout").unwrap_err().to_string();
        assert!(e.contains("three-channel"), "{e}");
    }
}
