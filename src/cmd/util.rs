//! Small helpers shared by subcommands: byte-size arguments, the cache flag,
//! worker threads, Ctrl-C, progress bars and the end-of-run table.

use caseload_engine::cache::CacheMode;
use caseload_engine::channel::ChannelKind;
use caseload_engine::report::{RunReport, StageReport, render_table};
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
    let flag = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flag);
    // Only one handler per process; a second registration just keeps the first.
    let _ = ctrlc::set_handler(move || f.store(true, std::sync::atomic::Ordering::Relaxed));
    flag
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

/// Print a finished run and choose the exit code.
pub fn finish(report: &RunReport, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", render_table(report));
        if let Some(case) = report.channels.get(&ChannelKind::Case) {
            println!("case: {}", case.dir.display());
        }
        println!("database: {}", report.database.path.display());
    }
    Ok(if report.status == "completed" {
        ExitCode::SUCCESS
    } else {
        eprintln!("caseload: run {}", report.status);
        ExitCode::FAILURE
    })
}

/// Parse a byte size such as `4GiB`, `1500MiB`, `32M`, `2TB`, `512` (bytes).
///
/// Binary suffixes (`KiB`, `MiB`, `GiB`, `TiB`, and the bare `K`, `M`, `G`,
/// `T` that forensic tools use) are powers of 1024; decimal ones (`kB`,
/// `MB`, `GB`, `TB`) are powers of 1000, as on a drive's label.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() {
        return Err(format!(
            "`{text}` is not a size (expected e.g. 4GiB, 1500MiB)"
        ));
    }
    let multiplier: u64 = match unit.trim() {
        "" | "B" | "b" => 1,
        "K" | "k" | "KiB" | "kiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => return Err(format!("unknown size unit `{other}` in `{text}`")),
    };
    let value = if number.contains('.') {
        let f: f64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a size"))?;
        let bytes = f * multiplier as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(format!("`{text}` is out of range"));
        }
        bytes.round() as u64
    } else {
        let n: u64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a size"))?;
        n.checked_mul(multiplier)
            .ok_or_else(|| format!("`{text}` is out of range"))?
    };
    Ok(value)
}

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

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("32MiB"), Ok(32 << 20));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("1500M"), Ok(1500 << 20));
        assert_eq!(parse_size("2TB"), Ok(2_000_000_000_000));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert!(parse_size("GiB").is_err());
        assert!(parse_size("4XB").is_err());
        assert!(parse_size("99999999999999TiB").is_err());
    }
}
