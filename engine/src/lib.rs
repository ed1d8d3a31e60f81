//! caseload's engine: evidence sources, I/O channels, storage layouts,
//! stages, the case database and run reports.
//!
//! Data flows one way: an [`EvidenceSource`](source) is read by stages, and
//! every byte a stage moves goes through a counted channel to one of the
//! sinks (case database, case directory, temp directory).
