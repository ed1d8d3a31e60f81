//! Workload and layout files, the comparison runner and its reports.
