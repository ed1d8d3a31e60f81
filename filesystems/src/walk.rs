//! What a walk reports besides its records.

use crate::error::ErrorLog;

/// Totals and volume-level problems of one file-system walk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WalkSummary {
    /// Records passed to the visitor.
    pub records: u64,
    /// Processing errors attached to those records.
    pub record_errors: u64,
    /// Problems not tied to one record (unreadable directories, loops,
    /// orphan long-name pieces, limits reached), capped.
    pub errors: ErrorLog,
    /// Whether the visitor stopped the walk early.
    pub stopped: bool,
}

/// Where a walker sends records and walk-level errors: the visitor plus the
/// running summary.
pub(crate) struct Sink<F> {
    visit: F,
    pub(crate) summary: WalkSummary,
}

impl<F: FnMut(crate::FileRecord) -> std::ops::ControlFlow<()>> Sink<F> {
    /// A sink starting with the errors met when the file system was opened.
    pub(crate) fn new(visit: F, open_errors: &[crate::ProcessingError]) -> Self {
        let mut summary = WalkSummary::default();
        for e in open_errors {
            summary.errors.push(e.clone());
        }
        Self { visit, summary }
    }

    /// Counts and passes on one record.
    pub(crate) fn emit(&mut self, rec: crate::FileRecord) -> std::ops::ControlFlow<()> {
        self.summary.records += 1;
        self.summary.record_errors += rec.errors.len() as u64;
        (self.visit)(rec)
    }

    /// Records a problem not tied to one record.
    pub(crate) fn error(&mut self, e: crate::ProcessingError) {
        self.summary.errors.push(e);
    }

    /// The summary, marked stopped if the visitor broke off the walk.
    pub(crate) fn finish(mut self, flow: std::ops::ControlFlow<()>) -> WalkSummary {
        self.summary.stopped = flow.is_break();
        self.summary
    }
}
