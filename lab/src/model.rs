//! Device models: what a modelled device is (a small TOML file each, in
//! `workloads/devices/`), checked on load so that a model with unknown
//! keys or impossible figures is refused with its file and the key named.
//!
//! A model names its mechanism:
//! - `model`: the userspace device model ([`crate::timing`]) charges every
//!   request by the device's mechanics (seek, rotation, transfer at the
//!   zone's rate, caches; RAID members; a network link). For rotating
//!   disks, arrays and network storage, where a per-request throttle would
//!   cap a sequential stream far below the device's bandwidth.
//! - `throttle`: the block-I/O controller (cgroup v2 `io.max`, v1
//!   `blkio.throttle.*`) caps bytes and requests per second on a loop
//!   device. Enough for flash, whose cost is nearly flat per request;
//!   it does not add latency (queue-depth-1 latency stays the host's).
//! - `none`: a loop device on memory, unthrottled (a device faster than
//!   anything the workload can ask of it).

use caseload_engine::units::parse_size;
use serde::{Deserialize, Serialize};

/// Errors in a device model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The TOML does not parse or has unknown keys.
    #[error("device model `{name}`: {message}")]
    Syntax {
        /// Model file or name.
        name: String,
        /// The parser's message (with line and key).
        message: String,
    },
    /// A figure is impossible (zero, negative, out of range).
    #[error("device model `{name}`: `{key}` {message}")]
    Figure {
        /// Model file or name.
        name: String,
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// How a model is put into effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mechanism {
    /// The userspace device model over FUSE.
    Model,
    /// The cgroup block-I/O throttle.
    Throttle,
    /// Unthrottled memory-backed loop device.
    None,
}

impl Mechanism {
    /// Name as in model files.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::Model => "model",
            Mechanism::Throttle => "throttle",
            Mechanism::None => "none",
        }
    }
}

/// A device model, as loaded and checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceModel {
    /// Short name (`hdd-7200`).
    pub name: String,
    /// One line for people.
    pub description: String,
    /// How it is put into effect.
    pub mechanism: Mechanism,
    /// What it is expected to do, with where the figures come from.
    pub expect: Expect,
    /// The mechanics, for [`Mechanism::Model`].
    pub timing: Option<Timing>,
    /// The limits, for [`Mechanism::Throttle`].
    pub throttle: Option<Throttle>,
    /// What the mechanism cannot model (said in reports).
    pub limitations: Vec<String>,
}

/// What a device is expected to do, as its sources give it: the figures a
/// probe of the modelled device is checked against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expect {
    /// Sequential read MB/s (a stream of 128 KiB reads or larger).
    pub seq_read_mb_s: f64,
    /// Sequential write MB/s.
    pub seq_write_mb_s: f64,
    /// 4 KiB random reads per second at queue depth 1 over the lab
    /// device's span.
    pub random_read_iops_qd1: f64,
    /// Where the figures come from (datasheets, published measurements).
    pub sources: Vec<String>,
}

/// The mechanics of a [`Mechanism::Model`] device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Timing {
    /// One rotating disk.
    Rotating(Rotating),
    /// RAID-5 over identical rotating disks.
    Raid5(Raid5),
    /// Storage behind a network link.
    Network(Network),
    /// A flash drive (SSD).
    Flash(Flash),
}

/// A flash drive: a fixed access latency per request, several requests
/// served at once, one shared transfer rate; sequential reads prefetched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flash {
    /// Access latency of a read, µs.
    pub read_latency_us: f64,
    /// Latency of a write into the drive's cache, µs.
    pub write_latency_us: f64,
    /// A cache flush, µs.
    pub flush_us: f64,
    /// Read transfer rate, MB/s.
    pub read_mb_s: f64,
    /// Write transfer rate, MB/s.
    pub write_mb_s: f64,
    /// Requests the drive works on at once.
    pub channels: u32,
}

/// A rotating disk's mechanics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rotating {
    /// Spindle speed.
    pub rpm: f64,
    /// Media rate at the outer edge (where the lab's device lies), MB/s.
    pub outer_mb_s: f64,
    /// Media rate at the inner edge, MB/s.
    pub inner_mb_s: f64,
    /// The whole disk's capacity, bytes (the lab's device is its first
    /// bytes: seeks within it are short, as on a partition at the start).
    pub capacity: u64,
    /// Seek to the next track, ms.
    pub track_to_track_ms: f64,
    /// Seek across the whole disk, ms.
    pub full_stroke_ms: f64,
    /// Fixed cost of each command (controller, bus), µs.
    pub command_overhead_us: f64,
    /// Host interface rate, MB/s: cache hits move at this rate, and media
    /// transfers at no more than it (a USB bridge slower than the
    /// platters caps them).
    pub interface_mb_s: f64,
    /// Read-ahead buffer: after a read the disk goes on reading this far
    /// while idle, and serves later reads inside it from the buffer.
    pub read_cache: u64,
    /// Write-back cache; 0 writes through (every write waits for the media).
    pub write_cache: u64,
}

/// RAID-5 (left-symmetric, rotating parity) over identical disks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Raid5 {
    /// Member disks (at least 3).
    pub disks: u32,
    /// Chunk (stripe unit) per disk, bytes.
    pub chunk: u64,
    /// Each member's mechanics.
    pub member: Rotating,
    /// The controller's write-back cache, bytes (0: none): writes are
    /// taken into it at once and written out gathered into whole stripes
    /// where they run on, as a hardware RAID controller with a
    /// battery-backed cache does.
    #[serde(default)]
    pub controller_cache: u64,
}

/// Storage reached over a network link (NFS/SMB share): each request pays
/// a round trip, and data crosses one shared link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// Payload rate of the link, MB/s.
    pub link_mb_s: f64,
    /// Round trip per request, µs.
    pub rtt_us: f64,
    /// Largest request the protocol moves at once (bigger ones are split).
    pub max_request: u64,
    /// Extra cost of a commit (sync write or flush) on the server, µs.
    pub commit_us: f64,
    /// The server's storage (none: its cache absorbs everything).
    pub backend: Option<Box<Timing>>,
}

/// Limits of a [`Mechanism::Throttle`] device (0: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Throttle {
    /// Read bytes per second.
    pub read_bps: u64,
    /// Write bytes per second.
    pub write_bps: u64,
    /// Read requests per second.
    pub read_iops: u64,
    /// Write requests per second.
    pub write_iops: u64,
}

/// The model file as written (sizes as strings).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    description: String,
    mechanism: Mechanism,
    expect: ExpectFile,
    rotating: Option<RotatingFile>,
    raid5: Option<Raid5File>,
    network: Option<NetworkFile>,
    flash: Option<FlashFile>,
    throttle: Option<ThrottleFile>,
    #[serde(default)]
    limitations: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    seq_read_mb_s: f64,
    seq_write_mb_s: f64,
    random_read_iops_qd1: f64,
    sources: Vec<String>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct RotatingFile {
    rpm: f64,
    outer_mb_s: f64,
    inner_mb_s: f64,
    capacity: String,
    track_to_track_ms: f64,
    full_stroke_ms: f64,
    command_overhead_us: f64,
    interface_mb_s: f64,
    read_cache: String,
    write_cache: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raid5File {
    disks: u32,
    chunk: String,
    member: RotatingFile,
    #[serde(default)]
    controller_cache: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkFile {
    link_mb_s: f64,
    rtt_us: f64,
    max_request: String,
    commit_us: f64,
    rotating: Option<RotatingFile>,
    raid5: Option<Raid5File>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FlashFile {
    read_latency_us: f64,
    write_latency_us: f64,
    flush_us: f64,
    read_mb_s: f64,
    write_mb_s: f64,
    channels: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThrottleFile {
    #[serde(default)]
    read_mb_s: f64,
    #[serde(default)]
    write_mb_s: f64,
    #[serde(default)]
    read_iops: u64,
    #[serde(default)]
    write_iops: u64,
}

struct Check<'a> {
    name: &'a str,
}

impl Check<'_> {
    fn fail(&self, key: &str, message: impl Into<String>) -> ModelError {
        ModelError::Figure {
            name: self.name.to_string(),
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// A finite figure within `lo..=hi`.
    fn range(&self, key: &str, v: f64, lo: f64, hi: f64) -> Result<f64, ModelError> {
        if v.is_finite() && (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(self.fail(key, format!("is {v}; expected {lo} to {hi}")))
        }
    }

    fn size(&self, key: &str, text: &str, lo: u64, hi: u64) -> Result<u64, ModelError> {
        let v = parse_size(text).map_err(|m| self.fail(key, m))?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(self.fail(key, format!("is {v} bytes; expected {lo} to {hi}")))
        }
    }

    fn rotating(&self, prefix: &str, r: &RotatingFile) -> Result<Rotating, ModelError> {
        let k = |s: &str| format!("{prefix}.{s}");
        let outer = self.range(&k("outer_mb_s"), r.outer_mb_s, 1.0, 10_000.0)?;
        let inner = self.range(&k("inner_mb_s"), r.inner_mb_s, 1.0, outer)?;
        let t2t = self.range(&k("track_to_track_ms"), r.track_to_track_ms, 0.0, 100.0)?;
        Ok(Rotating {
            rpm: self.range(&k("rpm"), r.rpm, 1000.0, 30_000.0)?,
            outer_mb_s: outer,
            inner_mb_s: inner,
            capacity: self.size(&k("capacity"), &r.capacity, 1 << 30, 1 << 50)?,
            track_to_track_ms: t2t,
            full_stroke_ms: self.range(&k("full_stroke_ms"), r.full_stroke_ms, t2t, 200.0)?,
            command_overhead_us: self.range(
                &k("command_overhead_us"),
                r.command_overhead_us,
                0.0,
                100_000.0,
            )?,
            interface_mb_s: self.range(&k("interface_mb_s"), r.interface_mb_s, 1.0, 100_000.0)?,
            read_cache: self.size(&k("read_cache"), &r.read_cache, 0, 1 << 30)?,
            write_cache: self.size(&k("write_cache"), &r.write_cache, 0, 1 << 30)?,
        })
    }
}

impl Check<'_> {
    fn raid5(&self, prefix: &str, r: &Raid5File) -> Result<Raid5, ModelError> {
        if !(3..=32).contains(&r.disks) {
            return Err(self.fail(
                &format!("{prefix}.disks"),
                format!("is {}; expected 3 to 32", r.disks),
            ));
        }
        let chunk = self.size(&format!("{prefix}.chunk"), &r.chunk, 4096, 16 << 20)?;
        if chunk % 4096 != 0 {
            return Err(self.fail(&format!("{prefix}.chunk"), "must be a multiple of 4 KiB"));
        }
        let controller_cache = match &r.controller_cache {
            Some(c) => self.size(&format!("{prefix}.controller_cache"), c, 0, 64 << 30)?,
            None => 0,
        };
        Ok(Raid5 {
            disks: r.disks,
            chunk,
            member: self.rotating(&format!("{prefix}.member"), &r.member)?,
            controller_cache,
        })
    }
}

impl DeviceModel {
    /// Parse and check a model file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<DeviceModel, ModelError> {
        let f: File = toml::from_str(text).map_err(|e| ModelError::Syntax {
            name: origin.to_string(),
            message: e.to_string(),
        })?;
        let c = Check { name: origin };
        let expect = Expect {
            seq_read_mb_s: c.range("expect.seq_read_mb_s", f.expect.seq_read_mb_s, 0.1, 1e6)?,
            seq_write_mb_s: c.range("expect.seq_write_mb_s", f.expect.seq_write_mb_s, 0.1, 1e6)?,
            random_read_iops_qd1: c.range(
                "expect.random_read_iops_qd1",
                f.expect.random_read_iops_qd1,
                1.0,
                1e8,
            )?,
            sources: f.expect.sources,
        };
        if expect.sources.is_empty() {
            return Err(c.fail(
                "expect.sources",
                "is empty: say where the figures come from",
            ));
        }
        let sections = [
            ("rotating", f.rotating.is_some()),
            ("raid5", f.raid5.is_some()),
            ("network", f.network.is_some()),
            ("flash", f.flash.is_some()),
        ];
        let timing_sections: Vec<&str> = sections
            .iter()
            .filter(|(_, present)| *present)
            .map(|(n, _)| *n)
            .collect();
        let (timing, throttle) = match f.mechanism {
            Mechanism::Model => {
                if f.throttle.is_some() {
                    return Err(c.fail("throttle", "is for `mechanism = \"throttle\"` only"));
                }
                if timing_sections.len() != 1 {
                    return Err(c.fail(
                        "mechanism",
                        format!(
                            "`model` needs exactly one of [rotating], [raid5], [network], [flash] (found {})",
                            if timing_sections.is_empty() {
                                "none".to_string()
                            } else {
                                timing_sections.join(", ")
                            }
                        ),
                    ));
                }
                let timing = if let Some(r) = &f.rotating {
                    Timing::Rotating(c.rotating("rotating", r)?)
                } else if let Some(r) = &f.raid5 {
                    Timing::Raid5(c.raid5("raid5", r)?)
                } else if let Some(fl) = &f.flash {
                    if !(1..=1024).contains(&fl.channels) {
                        return Err(c.fail(
                            "flash.channels",
                            format!("is {}; expected 1 to 1024", fl.channels),
                        ));
                    }
                    Timing::Flash(Flash {
                        read_latency_us: c.range(
                            "flash.read_latency_us",
                            fl.read_latency_us,
                            0.0,
                            1e6,
                        )?,
                        write_latency_us: c.range(
                            "flash.write_latency_us",
                            fl.write_latency_us,
                            0.0,
                            1e6,
                        )?,
                        flush_us: c.range("flash.flush_us", fl.flush_us, 0.0, 1e7)?,
                        read_mb_s: c.range("flash.read_mb_s", fl.read_mb_s, 1.0, 1e6)?,
                        write_mb_s: c.range("flash.write_mb_s", fl.write_mb_s, 1.0, 1e6)?,
                        channels: fl.channels,
                    })
                } else if let Some(n) = &f.network {
                    let backend = match (&n.rotating, &n.raid5) {
                        (Some(_), Some(_)) => {
                            return Err(c.fail(
                                "network",
                                "one server backend at most ([network.rotating] or [network.raid5])",
                            ));
                        }
                        (Some(r), None) => Some(Box::new(Timing::Rotating(
                            c.rotating("network.rotating", r)?,
                        ))),
                        (None, Some(r)) => {
                            Some(Box::new(Timing::Raid5(c.raid5("network.raid5", r)?)))
                        }
                        (None, None) => None,
                    };
                    Timing::Network(Network {
                        link_mb_s: c.range("network.link_mb_s", n.link_mb_s, 0.1, 1e6)?,
                        rtt_us: c.range("network.rtt_us", n.rtt_us, 0.0, 10_000_000.0)?,
                        max_request: c.size(
                            "network.max_request",
                            &n.max_request,
                            4096,
                            64 << 20,
                        )?,
                        commit_us: c.range("network.commit_us", n.commit_us, 0.0, 10_000_000.0)?,
                        backend,
                    })
                } else {
                    unreachable!("one timing section is present")
                };
                (Some(timing), None)
            }
            Mechanism::Throttle => {
                if let Some(s) = timing_sections.first() {
                    return Err(c.fail(s, "is for `mechanism = \"model\"` only"));
                }
                let Some(t) = f.throttle else {
                    return Err(c.fail("throttle", "is missing (`mechanism = \"throttle\"`)"));
                };
                let bps = |key: &str, v: f64| -> Result<u64, ModelError> {
                    Ok((c.range(key, v, 0.0, 1e6)? * 1e6).round() as u64)
                };
                let throttle = Throttle {
                    read_bps: bps("throttle.read_mb_s", t.read_mb_s)?,
                    write_bps: bps("throttle.write_mb_s", t.write_mb_s)?,
                    read_iops: t.read_iops,
                    write_iops: t.write_iops,
                };
                if throttle
                    == (Throttle {
                        read_bps: 0,
                        write_bps: 0,
                        read_iops: 0,
                        write_iops: 0,
                    })
                {
                    return Err(c.fail("throttle", "sets no limit (use `mechanism = \"none\"`)"));
                }
                (None, Some(throttle))
            }
            Mechanism::None => {
                if let Some(s) = timing_sections.first() {
                    return Err(c.fail(s, "is for `mechanism = \"model\"` only"));
                }
                if f.throttle.is_some() {
                    return Err(c.fail("throttle", "is for `mechanism = \"throttle\"` only"));
                }
                (None, None)
            }
        };
        Ok(DeviceModel {
            name: f.name,
            description: f.description,
            mechanism: f.mechanism,
            expect,
            timing,
            throttle,
            limitations: f.limitations,
        })
    }
}
