//! The channels' names: what a layout file and a report call them.
//! Apart from the door (`channel`) so that what only needs the names
//! (faults, traces, reports) does not depend on the door. The type itself
//! is the trace format's (`caseload_traces::format::Channel`), so a trace
//! and a run name channels with one type.

/// The role of a channel. The names are part of the layout-file interface.
pub use caseload_traces::format::Channel as ChannelKind;
