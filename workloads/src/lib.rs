//! Workload and layout files, the comparison runner and its reports.
//!
//! A workload is a small TOML file naming stages in order with their
//! options (`workloads/*.toml`, also built into the binary by name); a
//! layout maps channels to directories (`workloads/layouts/*.toml`). The
//! comparison runner runs workloads over a matrix of evidence and layouts.

pub mod advise;
pub mod bench_storage;
pub mod compare;
pub mod devices;
pub mod instances;
pub mod job;
pub mod layouts;
pub mod model;
pub mod predict;
pub mod report;
pub mod study;
pub mod study_tables;
pub mod workload;

pub use compare::{Baseline, CompareError, CompareSpec, StageSelection, run_compare};
pub use job::{JobSpec, JobStages};
pub use report::CompareReport;
pub use workload::{Workload, WorkloadError};
