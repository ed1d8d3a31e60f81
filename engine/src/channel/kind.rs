//! The channels' names: what a layout file and a report call them.
//! Apart from the door (`channel`) so that what only needs the names
//! (faults, traces, reports) does not depend on the door.

use serde::{Deserialize, Serialize};

/// The role of a channel. The names are part of the layout-file interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    /// Where evidence is read from (read-only).
    Evidence,
    /// The case database.
    Database,
    /// Carved and exported files, index segments, the run report.
    Case,
    /// Spills, sort runs, staging copies.
    Temp,
}

impl ChannelKind {
    /// All channels, in report order.
    pub const ALL: [ChannelKind; 4] = [
        ChannelKind::Evidence,
        ChannelKind::Database,
        ChannelKind::Case,
        ChannelKind::Temp,
    ];

    /// The channel a name written in layout files and reports names.
    pub fn from_name(name: &str) -> Option<ChannelKind> {
        ChannelKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The channel's name as written in layout files and reports.
    pub fn name(self) -> &'static str {
        match self {
            ChannelKind::Evidence => "evidence",
            ChannelKind::Database => "database",
            ChannelKind::Case => "case",
            ChannelKind::Temp => "temp",
        }
    }
}

impl std::fmt::Display for ChannelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
