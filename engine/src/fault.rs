//! Channel faults: the first error a writable channel met, and faults
//! injected into a channel for the reliability tests.
//!
//! A real full disk, failing disk or vanished directory is hard to arrange
//! at a chosen point of a stage; an injected fault is exact. It trips once
//! the channel has written a set number of bytes since the first stage
//! began (the set-up before it, creating the case, is not counted) and
//! from then on the channel behaves as a broken device would: `enospc`
//! and `erofs` refuse every later write and create (ENOSPC, EROFS), `eio`
//! fails every later write, create and sync (EIO), and `gone` removes the
//! channel's directory (the files already open stay writable, as on a real
//! unlink, and new files can no longer be made). Faults are given to `run`
//! in the `CASELOAD_INJECT_FAULT` environment variable, as
//! `CHANNEL:ERROR:AFTER[,...]` (`case:enospc:4MiB`); see DEVELOPERS.md.
//!
//! Whether injected or real, the first write-side error of a channel is
//! kept here, so that the run can stop at the end of the stage and say
//! which channel failed and how.

use crate::channel::kind::ChannelKind;
use crate::units;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// The environment variable that injects faults into `run`.
pub const INJECT_ENV: &str = "CASELOAD_INJECT_FAULT";

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultError {
    /// The device is full: writes and creates fail with ENOSPC.
    Enospc,
    /// The device fails: writes, creates and syncs fail with EIO.
    Eio,
    /// The file system went read-only: writes and creates fail with EROFS.
    Erofs,
    /// The channel's directory is removed.
    Gone,
}

impl FaultError {
    /// The name used in `CASELOAD_INJECT_FAULT`.
    pub fn name(self) -> &'static str {
        match self {
            FaultError::Enospc => "enospc",
            FaultError::Eio => "eio",
            FaultError::Erofs => "erofs",
            FaultError::Gone => "gone",
        }
    }

    /// The OS error code the fault raises: errno on Unix, the Win32 error
    /// that Windows gives for the same condition (`ERROR_DISK_FULL`,
    /// `ERROR_IO_DEVICE`, `ERROR_WRITE_PROTECT`).
    fn errno(self) -> Option<i32> {
        #[cfg(not(windows))]
        let codes = [libc::ENOSPC, libc::EIO, libc::EROFS];
        #[cfg(windows)]
        let codes = [112, 1117, 19];
        match self {
            FaultError::Enospc => Some(codes[0]),
            FaultError::Eio => Some(codes[1]),
            FaultError::Erofs => Some(codes[2]),
            FaultError::Gone => None,
        }
    }
}

/// A fault to inject into one channel of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedFault {
    /// The channel (database, case or temp).
    pub channel: ChannelKind,
    /// What happens.
    pub error: FaultError,
    /// Bytes the channel writes (from the start of the first stage) before
    /// it trips.
    pub after_bytes: u64,
}

/// A fault specification that does not parse.
#[derive(Debug, thiserror::Error)]
#[error(
    "{INJECT_ENV}: `{spec}`: {reason} (expected CHANNEL:ERROR:AFTER, e.g. case:enospc:4MiB; CHANNEL database, case or temp; ERROR enospc, eio, erofs or gone)"
)]
pub struct FaultSpecError {
    /// The specification.
    pub spec: String,
    /// What is wrong.
    pub reason: String,
}

impl std::str::FromStr for InjectedFault {
    type Err = FaultSpecError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| FaultSpecError {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let mut parts = spec.trim().splitn(3, ':');
        let (Some(channel), Some(error), Some(after)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(err("three fields are needed"));
        };
        let channel = match channel {
            "database" => ChannelKind::Database,
            "case" => ChannelKind::Case,
            "temp" => ChannelKind::Temp,
            _ => return Err(err("unknown or read-only channel")),
        };
        let error = match error {
            "enospc" => FaultError::Enospc,
            "eio" => FaultError::Eio,
            "erofs" => FaultError::Erofs,
            "gone" => FaultError::Gone,
            _ => return Err(err("unknown error")),
        };
        let after_bytes = units::parse_size(after).map_err(|e| err(&e))?;
        Ok(InjectedFault {
            channel,
            error,
            after_bytes,
        })
    }
}

/// The faults a comma-separated specification names (empty for none).
pub fn parse_faults(specs: &str) -> Result<Vec<InjectedFault>, FaultSpecError> {
    specs
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(str::parse)
        .collect()
}

/// A fault armed on a channel.
#[derive(Debug)]
struct Armed {
    error: FaultError,
    /// The channel, for the noted error.
    channel: ChannelKind,
    /// Whether the directory may be removed (it holds no evidence).
    removable: bool,
    /// The channel's bytes written when it trips.
    trip_at: u64,
    /// The directory `gone` removes.
    root: PathBuf,
}

/// A channel's fault state: the armed fault, if any, and the first error.
#[derive(Debug, Default)]
pub(crate) struct FaultState {
    armed: OnceLock<Armed>,
    tripped: AtomicBool,
    /// The first write-side error, as a message naming the channel.
    first: Mutex<Option<String>>,
    /// Write-side errors in all.
    errors: AtomicU64,
}

impl FaultState {
    /// Arm `error` to trip when the channel has written `trip_at` bytes.
    /// A channel takes one fault; a second is ignored.
    pub(crate) fn arm(
        &self,
        channel: ChannelKind,
        error: FaultError,
        trip_at: u64,
        root: PathBuf,
        removable: bool,
    ) {
        let _ = self.armed.set(Armed {
            error,
            channel,
            removable,
            trip_at,
            root,
        });
    }

    /// Before a write of `len` bytes when the channel has written
    /// `written`: the injected error, if the fault trips or has tripped.
    pub(crate) fn before_write(&self, written: u64, len: u64) -> io::Result<()> {
        let Some(a) = self.armed.get() else {
            return Ok(());
        };
        if !self.tripped.load(Ordering::Relaxed) && written.saturating_add(len) <= a.trip_at {
            return Ok(());
        }
        self.trip(a)
    }

    /// Before a file or directory is created: the injected error once
    /// tripped.
    pub(crate) fn before_create(&self) -> io::Result<()> {
        match self.armed.get() {
            Some(a) if self.tripped.load(Ordering::Relaxed) => self.trip(a),
            _ => Ok(()),
        }
    }

    /// Before a sync: EIO once an `eio` fault tripped.
    pub(crate) fn before_sync(&self) -> io::Result<()> {
        match self.armed.get() {
            Some(a) if a.error == FaultError::Eio && self.tripped.load(Ordering::Relaxed) => {
                self.trip(a)
            }
            _ => Ok(()),
        }
    }

    fn trip(&self, a: &Armed) -> io::Result<()> {
        let first = !self.tripped.swap(true, Ordering::Relaxed);
        match a.error.errno() {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => {
                if first {
                    // The directory goes at once, as an unmount would (a
                    // tree removed in place races with files being made
                    // in it): renamed away, then removed unless it holds
                    // evidence. The write that tripped it goes on to its
                    // unlinked file. Noted here, so that a directory made
                    // again by a racing create cannot hide it.
                    let mut away = a.root.clone().into_os_string();
                    away.push(format!(".gone-{}", std::process::id()));
                    if std::fs::rename(&a.root, &away).is_ok() && a.removable {
                        let _ = std::fs::remove_dir_all(&away);
                    }
                    self.note(format!(
                        "{} channel: the directory `{}` is gone (removed or unmounted during the run)",
                        a.channel,
                        a.root.display()
                    ));
                }
                Ok(())
            }
        }
    }

    /// Keep `what` as the channel's first error (later ones are counted).
    pub(crate) fn note(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut first) = self.first.lock()
            && first.is_none()
        {
            *first = Some(what);
        }
    }

    /// The first error noted, if any.
    pub(crate) fn first(&self) -> Option<String> {
        self.first.lock().ok().and_then(|f| f.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specifications_parse_and_bad_ones_say_why() {
        let f = parse_faults("case:enospc:4MiB, temp:gone:0").unwrap();
        assert_eq!(
            f,
            vec![
                InjectedFault {
                    channel: ChannelKind::Case,
                    error: FaultError::Enospc,
                    after_bytes: 4 << 20
                },
                InjectedFault {
                    channel: ChannelKind::Temp,
                    error: FaultError::Gone,
                    after_bytes: 0
                }
            ]
        );
        assert!(parse_faults("").unwrap().is_empty());
        for bad in ["evidence:eio:1", "case:full:1", "case:eio", "case:eio:lots"] {
            let e = parse_faults(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn a_fault_trips_at_its_byte_and_stays_tripped() {
        let s = FaultState::default();
        s.arm(
            ChannelKind::Case,
            FaultError::Enospc,
            100,
            PathBuf::from("/nonexistent"),
            false,
        );
        assert!(s.before_write(0, 100).is_ok());
        assert!(s.before_create().is_ok());
        assert!(s.before_sync().is_ok());
        let e = s.before_write(100, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert!(s.before_write(0, 0).is_err(), "stays tripped");
        assert!(s.before_create().is_err());
        assert!(s.before_sync().is_ok(), "a full disk still syncs");
    }
}
