//! caseload's engine: evidence sources, I/O channels, storage layouts,
//! stages, the case database and run reports.
//!
//! Data flows one way: an [`EvidenceSource`](source::EvidenceSource) is read
//! by stages, and every byte a stage moves goes through a counted
//! [`Channel`](channel::Channel) to one of the sinks (case database, case
//! directory, temp directory).

pub mod cache;
pub mod casedb;
pub mod channel;
pub mod digest;
pub mod export;
pub mod extract;
pub mod fault;
pub mod hashset;
pub mod iolog;
pub mod kernels;
pub mod latency;
pub mod layout;
pub mod metrics;
#[cfg(test)]
mod noise;
pub mod os;
pub mod preflight;
pub mod probe;
pub mod replay;
pub mod report;
pub mod resume;
pub mod run;
pub mod sampler;
pub mod search;
pub mod signature;
pub mod source;
pub mod stage;
pub mod stages;
pub mod system;
pub mod textindex;
mod thread_priority;
pub mod trace;
pub mod units;
pub mod work;
pub mod workstation;
