//! corpus-gen: deterministic synthetic evidence disks with exact ground
//! truth.
//!
//! [`generate()`] writes `image.dd` (an MBR or GPT disk holding one FAT or
//! NTFS partition shaped like a Windows user's disk; [`generate_exfat()`],
//! [`generate_apfs()`] and [`generate_ext4()`] place the same plan on
//! exFAT, APFS and ext4), `manifest.json` (every file, deleted entry,
//! carvable item and planted keyword, schema in `docs/manifest.md`, types
//! in [`manifest`]) and the known/notable hash sets. The same seed and options always give byte-identical output,
//! whatever the thread count, and memory stays bounded whatever the size.

pub mod apfs;
pub mod boot;
pub mod calibrate;
pub mod content;
pub mod error;
pub mod exfat;
pub mod ext4;
pub mod fat;
pub mod generate;
pub mod geometry;
pub mod hashsets;
pub mod layouts;
pub mod manifest;
pub mod names;
pub mod ntfs;
pub mod plan;
pub mod profile;
pub mod rng;
pub mod stream_digests;
pub mod words;

pub use error::CorpusError;
pub use fat::FatType;
pub use generate::{
    IMAGE, ImageDigests, MANIFEST, NoProgress, Options, Progress, Report, generate, generate_apfs,
    generate_exfat, generate_ext4, generate_with_tee,
};
pub use geometry::TableKind;
pub use manifest::Manifest;
pub use profile::Profile;
