//! I/O traces of forensic tools: caseload's trace file (`format`), the
//! importers that read Process Monitor (CSV and PML) and strace output into
//! it (`import`), and the figures `caseload trace compare` sets side by side
//! (`analysis`).
//!
//! A crate apart from the engine because it parses untrusted files of
//! other tools' making and knows nothing of channels' directories, stages
//! or databases: the engine's recorder writes this format and its replay
//! reads it; the fuzz targets call the readers directly.

pub mod analysis;
pub mod event;
pub mod format;
pub mod import;
