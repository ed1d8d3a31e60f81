//! The stages, and the one list that names them.
//!
//! Adding a stage: write its module (implementing [`Stage`]) and add one
//! [`StageSpec`] line to [`REGISTRY`]. Nothing else changes.

pub mod carve;
mod file_hash;
mod filesystem;
mod image_hash;
pub mod index;
mod kff;

use crate::stage::{Stage, StageError, StageOptions};

/// How to build a stage from its options.
pub struct StageSpec {
    /// Stable stage name.
    pub name: &'static str,
    /// One line for `--help` and reports.
    pub about: &'static str,
    /// Build the stage from its options.
    pub build: fn(&StageOptions) -> Result<Box<dyn Stage>, StageError>,
}

/// Every stage this build has, in pipeline order.
pub const REGISTRY: &[StageSpec] = &[
    image_hash::SPEC,
    filesystem::SPEC,
    file_hash::SPEC,
    index::SPEC,
    carve::SPEC,
    kff::SPEC,
];

/// Every stage name of the design, built or not, in pipeline order.
pub const DESIGN_STAGES: &[&str] = &[
    "image-hash",
    "filesystem",
    "file-hash",
    "index",
    "carve",
    "kff",
];

/// Build a stage by name, refusing unknown names and stages that this build
/// does not have yet (rather than skipping them silently).
pub fn build(name: &str, options: &StageOptions) -> Result<Box<dyn Stage>, StageError> {
    if let Some(spec) = REGISTRY.iter().find(|s| s.name == name) {
        return (spec.build)(options);
    }
    let message = if DESIGN_STAGES.contains(&name) {
        format!(
            "stage `{name}` is not built in this version of caseload (available: {})",
            available()
        )
    } else {
        format!("unknown stage `{name}` (available: {})", available())
    };
    Err(StageError::Config {
        stage: name.to_string(),
        message,
    })
}

/// Names of the stages this build has, comma-separated.
pub fn available() -> String {
    REGISTRY
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}
