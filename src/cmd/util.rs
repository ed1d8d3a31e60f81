//! Small helpers shared by subcommands: byte-size arguments, the cache flag,
//! worker threads, Ctrl-C, progress bars and the end-of-run table.

use caseload_engine::cache::CacheMode;
use caseload_engine::channel::ChannelKind;
use caseload_engine::report::{RunReport, StageReport};
use caseload_engine::run::RunObserver;
use caseload_engine::stage::{Progress, ProgressUnit};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// `--cache`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CacheArg {
    /// Drop the page cache before every stage.
    Cold,
    /// Leave the page cache alone.
    Warm,
}

impl CacheArg {
    /// The engine's cache mode.
    pub fn mode(self) -> CacheMode {
        match self {
            CacheArg::Cold => CacheMode::Cold,
            CacheArg::Warm => CacheMode::Warm,
        }
    }
}

/// Default worker threads: every core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Set a flag on Ctrl-C so stages stop between items and the run reports
/// what finished.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    // One handler per process, one flag: a command that asks twice (a
    // study running comparison after comparison) gets the same flag.
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    Arc::clone(FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&flag);
        let _ = ctrlc::set_handler(move || f.store(true, std::sync::atomic::Ordering::Relaxed));
        flag
    }))
}

/// Progress bars for stages on the terminal.
pub struct TerminalObserver;

struct BarProgress(ProgressBar);

impl Progress for BarProgress {
    fn set_total(&self, total: u64, unit: ProgressUnit) {
        self.0.set_length(total);
        if unit == ProgressUnit::Items {
            self.0.set_style(count_style());
        }
    }
    fn advance(&self, amount: u64) {
        self.0.inc(amount);
    }
    fn message(&self, text: &str) {
        self.0.set_message(text.to_string());
    }
}

impl Drop for BarProgress {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

impl RunObserver for TerminalObserver {
    fn stage_started(&self, stage: &str) -> Box<dyn Progress> {
        Box::new(BarProgress(byte_progress(0, stage)))
    }
    fn stage_finished(&self, report: &StageReport) {
        if let Some(e) = &report.error {
            eprintln!("caseload: stage {} {}: {e}", report.name, report.status);
        }
    }
}

/// Print a finished run (as JSON, or its table, every column with
/// `wide`) and choose the exit code.
pub fn finish(report: &RunReport, json: bool, wide: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        let width = if wide {
            caseload_engine::report::TableWidth::Wide
        } else {
            caseload_engine::report::TableWidth::Default
        };
        print!(
            "{}",
            caseload_engine::report::render_table_as(report, width)
        );
        if let Some(case) = report.channels.get(&ChannelKind::Case) {
            println!("case: {}", case.dir.display());
        }
        println!("database: {}", report.database.path.display());
        if let Some(t) = &report.trace
            && t.error.is_none()
        {
            println!(
                "trace: {} records in {} ({} operations waited for the writer)",
                t.records, t.file, t.waits
            );
        }
    }
    if let Some(t) = &report.trace
        && let Some(e) = &t.error
    {
        eprintln!(
            "caseload: the trace is incomplete and was removed ({} operations not recorded): {e}",
            t.dropped
        );
    }
    if let Some(f) = &report.channel_fault {
        eprintln!(
            "caseload: the {} channel failed during stage {}: {}; the run stopped there, and what was written before stands (run.json records it)",
            f.channel, f.stage, f.error
        );
    }
    Ok(if report.status == "completed" {
        ExitCode::SUCCESS
    } else {
        eprintln!("caseload: run {}", report.status);
        ExitCode::FAILURE
    })
}

pub use caseload_engine::units::parse_size;

/// A byte-count progress bar on stderr, hidden when stderr is not a terminal
/// (so scripts and CI logs stay clean).
pub fn byte_progress(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), draw_target());
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>12} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// The style of item-count bars.
pub fn count_style() -> ProgressStyle {
    ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {per_sec} eta {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// Bars are drawn on stderr, and only when both stdout and stderr are a
/// terminal: piped or redirected runs stay quiet.
fn draw_target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() && std::io::stdout().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}
