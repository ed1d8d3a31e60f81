//! Labs: a lab file maps a layout's channels to modelled devices; `up`
//! builds them (backing files, the device server, loop devices, file
//! systems, cgroups) and writes a layout for `run` and `compare`; `down`
//! removes exactly what `up` made, from its record, also when `up` was
//! interrupted half way; `status` says what is there.
//!
//! The record (`state.json` in the lab's directory) is written before and
//! after every step, so a crash at any point leaves a record `down` can
//! clean from. Nothing is removed that the record does not name, and each
//! thing is checked to still be the lab's before it is undone.

use crate::crypt::{self, Encryption};
use crate::host::{self, Cgroup, CgroupVersion, HostError, LoopDevice};
use crate::model::{DeviceModel, Mechanism};
use crate::share::{self, ShareLink, ShareState};
use caseload_engine::units::parse_size;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The four channels a lab maps.
pub const CHANNELS: [&str; 4] = ["evidence", "database", "case", "temp"];

/// Errors of a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The lab file is wrong.
    #[error("lab `{origin}`: {message}")]
    Spec {
        /// File or name.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// The lab cannot be built or used here (not root, no loop devices,
    /// no controller, memory too small).
    #[error("lab `{lab}`: {message}")]
    Unavailable {
        /// Lab name.
        lab: String,
        /// Why.
        message: String,
    },
    /// The lab is not up (or its record is unreadable).
    #[error("lab `{lab}` is not up ({message})")]
    NotUp {
        /// Lab name.
        lab: String,
        /// Details.
        message: String,
    },
    /// A step on the host failed.
    #[error("lab `{lab}`: {source}")]
    Host {
        /// Lab name.
        lab: String,
        /// Cause.
        #[source]
        source: HostError,
    },
}

/// One device of a lab file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSpec {
    /// The model.
    pub model: DeviceModel,
    /// Size of the device.
    pub size: u64,
    /// File system made on it.
    pub fs: String,
    /// Mount options (`-o`).
    pub mount_options: String,
    /// Its encryption layer ([`crypt`]).
    #[serde(default)]
    pub encrypt: Encryption,
    /// Served by the device server even though neither its model nor its
    /// layer needs that: the plain baseline of an encrypted device whose
    /// model is a throttle or none, so that both take the same path.
    #[serde(default)]
    pub served: bool,
    /// The LUKS-like layer's cipher held to this many MB/s a core (a
    /// processor without AES-NI); none: as fast as this machine runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher_mb_s: Option<f64>,
    /// Reached over a network share ([`share`]): the device is the
    /// server's storage, its channels are on the share's mount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<ShareLink>,
}

impl DeviceSpec {
    /// Whether the device server carries this device.
    pub fn is_served(&self) -> bool {
        self.model.mechanism == Mechanism::Model || self.served || self.encrypt.on_host()
    }

    /// The bytes a file system gets: the device less its layer's header.
    pub fn payload_size(&self) -> u64 {
        self.size.saturating_sub(self.encrypt.header_bytes())
    }
}

/// Optional limits on the runs in the lab.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Memory (and so page cache) of the runs, bytes.
    pub memory: Option<u64>,
    /// CPUs the runs may use (`0-1`, `0,2`).
    pub cpus: Option<String>,
}

/// The workstation a lab models besides its drives (`[workstation]`):
/// its memory and processor. A run in the lab takes these unless its
/// command line says otherwise (`--ram`, `--cpus`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Workstation {
    /// RAM, bytes (`ram = "32GB"`: 32 GiB, as memory is sold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<u64>,
    /// Hardware threads of the modelled processor (the suite's memory is
    /// counted per thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processor_threads: Option<usize>,
    /// CPUs a run may use (its affinity: the first N of the machine's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<usize>,
    /// The processor's speed against this machine's: the runs' CPU time
    /// is limited to this share of their CPUs by a CPU quota on the lab's
    /// cgroup (0 < F <= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_scale: Option<f64>,
}

/// A lab file, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabSpec {
    /// Name (used for its directory, cgroups and loop backing files).
    pub name: String,
    /// For people.
    pub description: String,
    /// Devices by name.
    pub devices: BTreeMap<String, DeviceSpec>,
    /// Channel to device name (all four channels).
    pub channels: BTreeMap<String, String>,
    /// Limits on the runs.
    pub limits: Limits,
    /// The workstation besides its drives.
    #[serde(default)]
    pub workstation: Workstation,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    #[serde(default)]
    description: String,
    devices: BTreeMap<String, DeviceFile>,
    channels: BTreeMap<String, String>,
    #[serde(default)]
    limits: LimitsFile,
    #[serde(default)]
    workstation: WorkstationFile,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct WorkstationFile {
    ram: Option<String>,
    processor_threads: Option<usize>,
    cpus: Option<usize>,
    cpu_scale: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceFile {
    model: String,
    size: String,
    #[serde(default = "ext4")]
    fs: String,
    #[serde(default)]
    mount_options: String,
    encrypt: Option<String>,
    #[serde(default)]
    served: bool,
    share: Option<ShareFile>,
    cipher_mb_s: Option<f64>,
}

/// A share in a lab file: a preset's name or the figures.
#[derive(Deserialize)]
#[serde(untagged)]
enum ShareFile {
    Preset(String),
    Figures {
        link_mb_s: f64,
        rtt_us: f64,
        #[serde(default)]
        op_us: f64,
    },
}

impl ShareFile {
    /// The link it names or gives, checked.
    fn link(self) -> Result<ShareLink, String> {
        let link = match self {
            ShareFile::Preset(p) => ShareLink::preset(&p)?,
            ShareFile::Figures {
                link_mb_s,
                rtt_us,
                op_us,
            } => ShareLink {
                link_mb_s,
                rtt_us,
                op_us,
            },
        };
        link.check()?;
        Ok(link)
    }
}

fn ext4() -> String {
    "ext4".into()
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    memory: Option<String>,
    cpus: Option<String>,
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 40
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl LabSpec {
    /// The cgroup controllers `lab up` needs for this lab (v1 names):
    /// `blkio` for throttled devices, `memory` and `cpuset` for the runs'
    /// limits, `cpu` for a slower processor.
    pub fn cgroup_controllers(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self
            .devices
            .values()
            .any(|d| d.model.mechanism == Mechanism::Throttle)
        {
            out.push("blkio");
        }
        if self.limits.memory.is_some() {
            out.push("memory");
        }
        if self.limits.cpus.is_some() {
            out.push("cpuset");
        }
        if self.workstation.cpu_scale.is_some() {
            out.push("cpu");
        }
        out
    }

    /// Parse a lab file; `resolve` turns a model name into its model.
    pub fn parse(
        text: &str,
        origin: &str,
        resolve: &dyn Fn(&str) -> Result<DeviceModel, String>,
    ) -> Result<LabSpec, LabError> {
        let fail = |message: String| LabError::Spec {
            origin: origin.to_string(),
            message,
        };
        let f: File = toml::from_str(text).map_err(|e| fail(e.to_string()))?;
        if !valid_name(&f.name) {
            return Err(fail(format!(
                "name `{}` must be 1 to 40 letters, digits, `-` or `_`",
                f.name
            )));
        }
        if f.devices.is_empty() {
            return Err(fail("no [devices]".into()));
        }
        let mut devices = BTreeMap::new();
        for (name, d) in f.devices {
            if !valid_name(&name) {
                return Err(fail(format!(
                    "device name `{name}`: letters, digits, `-`, `_`"
                )));
            }
            let model = resolve(&d.model).map_err(|m| fail(format!("device `{name}`: {m}")))?;
            let size = parse_size(&d.size).map_err(|m| fail(format!("device `{name}`: {m}")))?;
            if !(64 << 20..=1 << 44).contains(&size) {
                return Err(fail(format!(
                    "device `{name}`: size {size} bytes; expected 64 MiB to 16 TiB"
                )));
            }
            if !d.fs.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(fail(format!("device `{name}`: file system `{}`", d.fs)));
            }
            if d.mount_options.contains(char::is_whitespace) {
                return Err(fail(format!(
                    "device `{name}`: mount_options must not contain spaces"
                )));
            }
            let encrypt = match &d.encrypt {
                Some(e) => {
                    Encryption::parse(e).map_err(|m| fail(format!("device `{name}`: {m}")))?
                }
                None => Encryption::None,
            };
            crypt::check_size(&name, size, encrypt).map_err(|e| fail(e.to_string()))?;
            if let Some(v) = d.cipher_mb_s
                && !(encrypt.on_host() && v.is_finite() && v > 0.0)
            {
                return Err(fail(format!(
                    "device `{name}`: cipher_mb_s {v} needs encrypt = \"luks-aes-xts\" and a positive speed"
                )));
            }
            let share = d
                .share
                .map(ShareFile::link)
                .transpose()
                .map_err(|m| fail(format!("device `{name}`: {m}")))?;
            devices.insert(
                name,
                DeviceSpec {
                    model,
                    size,
                    fs: d.fs,
                    mount_options: d.mount_options,
                    encrypt,
                    served: d.served,
                    share,
                    cipher_mb_s: d.cipher_mb_s,
                },
            );
        }
        for key in f.channels.keys() {
            if !CHANNELS.contains(&key.as_str()) {
                return Err(fail(format!(
                    "unknown channel `{key}` (channels: {})",
                    CHANNELS.join(", ")
                )));
            }
        }
        for c in CHANNELS {
            let Some(dev) = f.channels.get(c) else {
                return Err(fail(format!("channel `{c}` is not mapped to a device")));
            };
            if !devices.contains_key(dev) {
                return Err(fail(format!("channel `{c}`: no device `{dev}`")));
            }
        }
        let memory = match f.limits.memory {
            Some(m) => {
                let v = parse_size(&m).map_err(|e| fail(format!("limits.memory: {e}")))?;
                if v < 64 << 20 {
                    return Err(fail("limits.memory: at least 64 MiB".into()));
                }
                Some(v)
            }
            None => None,
        };
        if let Some(c) = &f.limits.cpus
            && (c.is_empty()
                || !c
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b == b',' || b == b'-'))
        {
            return Err(fail(format!(
                "limits.cpus `{c}`: a CPU list such as 0-1 or 0,2"
            )));
        }
        let w = f.workstation;
        let ram = w
            .ram
            .as_deref()
            .map(caseload_engine::workstation::parse_memory_size)
            .transpose()
            .map_err(|e| fail(format!("workstation.ram: {e}")))?;
        if w.processor_threads == Some(0) || w.cpus == Some(0) {
            return Err(fail(
                "workstation.processor_threads and workstation.cpus: at least 1".into(),
            ));
        }
        if let Some(x) = w.cpu_scale
            && !(x > 0.0 && x <= 1.0)
        {
            return Err(fail(format!(
                "workstation.cpu_scale {x}: a share of this machine's CPUs, above 0 and at most 1"
            )));
        }
        Ok(LabSpec {
            name: f.name,
            description: f.description,
            devices,
            channels: f.channels,
            limits: Limits {
                memory,
                cpus: f.limits.cpus,
            },
            workstation: Workstation {
                ram,
                processor_threads: w.processor_threads,
                cpus: w.cpus,
                cpu_scale: w.cpu_scale,
            },
        })
    }
}

/// Where a lab's device server runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Daemon {
    /// Its process.
    pub pid: u32,
    /// Its FUSE mount.
    pub mount: PathBuf,
}

/// What `up` made for one device.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceState {
    /// Device name.
    pub name: String,
    /// Backing file on fast storage.
    pub backing: Option<PathBuf>,
    /// The file the loop device is attached to (the backing file, or the
    /// device server's file for it).
    pub attached_file: Option<PathBuf>,
    /// The loop device.
    pub loop_device: Option<LoopDevice>,
    /// Whether its file system was made.
    pub formatted: bool,
    /// Where it is mounted.
    pub mount: Option<PathBuf>,
    /// The key of its encryption layer, if it has one on the host.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The network share in front of it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<ShareState>,
}

/// The record of a lab: what `up` made, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    /// The lab file, resolved.
    pub spec: LabSpec,
    /// The lab's directory (record, mounts, layout).
    pub dir: PathBuf,
    /// Directory of the backing files.
    pub backing_dir: PathBuf,
    /// Whether the backing directory was made.
    pub backing_dir_made: bool,
    /// The device server, if any device is modelled.
    pub daemon: Option<Daemon>,
    /// Devices.
    pub devices: Vec<DeviceState>,
    /// The cgroup interface used.
    pub cgroup_version: Option<CgroupVersion>,
    /// Cgroups made (runs join all of them).
    pub cgroups: Vec<Cgroup>,
    /// Channel directories.
    pub channel_dirs: BTreeMap<String, PathBuf>,
    /// The layout file written for runs.
    pub layout: Option<PathBuf>,
    /// Whether `up` finished.
    pub complete: bool,
}

/// The directory holding labs: `CASELOAD_LAB_DIR`, else `/run/caseload/lab`.
pub fn lab_root() -> PathBuf {
    std::env::var_os("CASELOAD_LAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/caseload/lab"))
}

/// The directory of backing files: `CASELOAD_LAB_BACKING`, else `/dev/shm`.
pub fn backing_root() -> PathBuf {
    std::env::var_os("CASELOAD_LAB_BACKING")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm"))
}

const STATE: &str = "state.json";

impl LabState {
    fn host(&self) -> impl Fn(HostError) -> LabError + '_ {
        |source| LabError::Host {
            lab: self.spec.name.clone(),
            source,
        }
    }

    fn unavailable(&self, message: impl Into<String>) -> LabError {
        LabError::Unavailable {
            lab: self.spec.name.clone(),
            message: message.into(),
        }
    }

    /// Write the record (atomically).
    fn save(&self) -> Result<(), LabError> {
        let path = self.dir.join(STATE);
        let tmp = self.dir.join("state.json.tmp");
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|source| {
                self.host()(HostError::Io {
                    what: "writing the lab record",
                    path,
                    source,
                })
            })
    }

    /// The record of lab `name`.
    pub fn load(name: &str) -> Result<LabState, LabError> {
        let dir = if valid_name(name) {
            lab_root().join(name)
        } else {
            // A path to a lab file or directory: take its name.
            return Err(LabError::NotUp {
                lab: name.to_string(),
                message: "not a lab name".into(),
            });
        };
        let text = std::fs::read_to_string(dir.join(STATE)).map_err(|e| LabError::NotUp {
            lab: name.to_string(),
            message: format!("no record in {}: {e}", dir.display()),
        })?;
        serde_json::from_str(&text).map_err(|e| LabError::NotUp {
            lab: name.to_string(),
            message: format!("unreadable record {}: {e}", dir.join(STATE).display()),
        })
    }

    /// The device server's control file.
    fn control(&self) -> Option<PathBuf> {
        self.daemon.as_ref().map(|d| d.mount.join(".control"))
    }

    /// Switch the device models on or off.
    pub fn set_modelled(&self, on: bool) -> Result<(), LabError> {
        if let Some(c) = self.control() {
            host::write_file(&c, if on { "on" } else { "off" }).map_err(self.host())?;
        }
        Ok(())
    }

    /// What the device server says it served (JSON), if it runs.
    pub fn served(&self) -> Option<serde_json::Value> {
        let d = self.daemon.as_ref()?;
        let text = std::fs::read_to_string(d.mount.join(".stats")).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Check that runs may use the lab: `up` finished, and every encrypted
    /// device's key is there and opens it (a lost key is an error, never
    /// plain text).
    pub fn ready(&self) -> Result<(), LabError> {
        let name = &self.spec.name;
        if !self.complete {
            return Err(self.unavailable(format!(
                "it was left half-built: `caseload lab down {name}`, then `up` again"
            )));
        }
        for d in &self.devices {
            self.check_key(d)?;
        }
        Ok(())
    }

    fn check_key(&self, d: &DeviceState) -> Result<(), LabError> {
        if !self.spec.devices[&d.name].encrypt.on_host() {
            return Ok(());
        }
        let (Some(backing), Some(key)) = (&d.backing, &d.key_file) else {
            return Err(self.unavailable(format!(
                "encrypted device `{}` has no key recorded (was `up` interrupted?)",
                d.name
            )));
        };
        let f = std::fs::File::open(backing).map_err(|source| {
            self.host()(HostError::Io {
                what: "opening backing file",
                path: backing.clone(),
                source,
            })
        })?;
        crypt::open(&d.name, &f, backing, key)
            .map(drop)
            .map_err(|e| self.unavailable(e.to_string()))
    }

    /// Channel directory.
    pub fn channel_dir(&self, channel: &str) -> Option<&Path> {
        self.channel_dirs.get(channel).map(PathBuf::as_path)
    }

    /// Cgroup membership files a run joins (`cgroup.procs` of each).
    pub fn join_files(&self) -> Vec<PathBuf> {
        self.cgroups
            .iter()
            .map(|c| c.path.join("cgroup.procs"))
            .collect()
    }
}

/// What `up` is given besides the lab file.
#[derive(Debug, Clone, Default)]
pub struct UpOptions {
    /// The caseload executable, for the device server.
    pub exe: PathBuf,
}

/// Build lab `spec`. On failure everything made so far is removed again.
pub fn up(spec: &LabSpec, options: &UpOptions) -> Result<LabState, LabError> {
    let unavailable = |message: String| LabError::Unavailable {
        lab: spec.name.clone(),
        message,
    };
    if !cfg!(target_os = "linux") {
        return Err(unavailable(format!(
            "building a lab needs Linux (loop devices, FUSE, cgroups, network namespaces); this is {}",
            std::env::consts::OS
        )));
    }
    if !host::is_root() {
        return Err(unavailable(
            "building a lab needs root (loop devices, mounts, cgroups)".into(),
        ));
    }
    let dir = lab_root().join(&spec.name);
    if dir.join(STATE).exists() {
        return Err(unavailable(format!(
            "it is already up or was left half-built ({}): `caseload lab down {}` first",
            dir.display(),
            spec.name
        )));
    }
    let backing_dir = backing_root().join(format!("caseload-lab-{}", spec.name));
    let need: u64 = spec.devices.values().map(|d| d.size).sum();
    if let Some(free) = host::free_bytes(&backing_root())
        && free < need
    {
        return Err(unavailable(format!(
            "{} has {} MiB free, the devices need {} MiB (make them smaller, or set CASELOAD_LAB_BACKING)",
            backing_root().display(),
            free >> 20,
            need >> 20
        )));
    }
    std::fs::create_dir_all(&dir).map_err(|source| LabError::Host {
        lab: spec.name.clone(),
        source: HostError::Io {
            what: "creating the lab directory",
            path: dir.clone(),
            source,
        },
    })?;
    let mut state = LabState {
        spec: spec.clone(),
        dir,
        backing_dir,
        backing_dir_made: false,
        daemon: None,
        devices: Vec::new(),
        cgroup_version: None,
        cgroups: Vec::new(),
        channel_dirs: BTreeMap::new(),
        layout: None,
        complete: false,
    };
    state.save()?;
    match build(&mut state, options) {
        Ok(()) => Ok(state),
        Err(e) => {
            // Undo what was made; the original error is what matters.
            let _ = down(&state);
            Err(e)
        }
    }
}

fn build(state: &mut LabState, options: &UpOptions) -> Result<(), LabError> {
    let lab_name = state.spec.name.clone();
    let io = |what: &'static str, path: &Path| {
        let lab = lab_name.clone();
        let path = path.to_path_buf();
        move |source| LabError::Host {
            lab,
            source: HostError::Io { what, path, source },
        }
    };
    if state.backing_dir.exists() {
        return Err(state.unavailable(format!(
            "{} exists (another lab of this name?)",
            state.backing_dir.display()
        )));
    }
    std::fs::create_dir(&state.backing_dir)
        .map_err(io("creating the backing directory", &state.backing_dir))?;
    state.backing_dir_made = true;
    state.save()?;
    // Backing files, sparse.
    let names: Vec<String> = state.spec.devices.keys().cloned().collect();
    for name in &names {
        let size = state.spec.devices[name].size;
        let path = state.backing_dir.join(format!("{name}.img"));
        state.devices.push(DeviceState {
            name: name.clone(),
            backing: Some(path.clone()),
            ..DeviceState::default()
        });
        state.save()?;
        let f = std::fs::File::create(&path).map_err(io("creating backing file", &path))?;
        f.set_len(size).map_err(io("sizing backing file", &path))?;
    }
    // Encryption layers: a key each, and the header on the device.
    for i in 0..state.devices.len() {
        let name = state.devices[i].name.clone();
        if !state.spec.devices[&name].encrypt.on_host() {
            continue;
        }
        let keys = state.dir.join("keys");
        if !keys.exists() {
            host::create_private_dir(&keys).map_err(io("creating the key directory", &keys))?;
        }
        let key = keys.join(format!("{name}.key"));
        state.devices[i].key_file = Some(key.clone());
        state.save()?;
        let backing = state.devices[i].backing.clone().unwrap_or_default();
        crypt::format(&name, &backing, &key).map_err(|e| state.unavailable(e.to_string()))?;
    }
    // The device server, for modelled devices.
    let modelled: Vec<String> = names
        .iter()
        .filter(|n| state.spec.devices[*n].is_served())
        .cloned()
        .collect();
    if !modelled.is_empty() {
        let mount = state.dir.join("served");
        std::fs::create_dir_all(&mount).map_err(io("creating", &mount))?;
        let pid = spawn_server(state, &options.exe, &mount)?;
        state.daemon = Some(Daemon {
            pid,
            mount: mount.clone(),
        });
        state.save()?;
        wait_served(state, &mount, &modelled)?;
    }
    // Loop devices, file systems, mounts, channel directories.
    for i in 0..state.devices.len() {
        let name = state.devices[i].name.clone();
        let spec = state.spec.devices[&name].clone();
        let file = match &state.daemon {
            Some(d) if spec.is_served() => d.mount.join(format!("{name}.img")),
            _ => state.devices[i].backing.clone().unwrap_or_default(),
        };
        state.devices[i].attached_file = Some(file.clone());
        state.save()?;
        let dev = host::loop_attach(&file).map_err(state.host())?;
        state.devices[i].loop_device = Some(dev.clone());
        state.save()?;
        host::mkfs(&spec.fs, &dev.path).map_err(state.host())?;
        state.devices[i].formatted = true;
        let point = state.dir.join("mnt").join(&name);
        std::fs::create_dir_all(&point).map_err(io("creating mount point", &point))?;
        state.devices[i].mount = Some(point.clone());
        state.save()?;
        host::mount(&dev.path, &spec.fs, &spec.mount_options, &point).map_err(state.host())?;
    }
    for i in 0..state.devices.len() {
        if let Some(link) = state.spec.devices[&state.devices[i].name].share {
            up_share(state, i, link, &options.exe)?;
        }
    }
    for c in CHANNELS {
        let device = &state.spec.channels[c];
        let on_share = state
            .devices
            .iter()
            .find(|d| &d.name == device)
            .and_then(|d| d.share.as_ref()?.mount.clone());
        let d = on_share
            .unwrap_or_else(|| state.dir.join("mnt").join(device))
            .join(c);
        std::fs::create_dir_all(&d).map_err(io("creating channel directory", &d))?;
        // Sticky and world-writable, as /tmp: a private PostgreSQL cluster
        // runs as an unprivileged user in the database channel.
        host::set_mode(&d, 0o1777).map_err(io("setting permissions of", &d))?;
        state.channel_dirs.insert(c.to_string(), d);
    }
    state.save()?;
    // Cgroups: throttles, memory, CPUs.
    let throttled: Vec<(String, String)> = state
        .devices
        .iter()
        .filter(|d| state.spec.devices[&d.name].model.mechanism == Mechanism::Throttle)
        .filter_map(|d| Some((d.name.clone(), d.loop_device.as_ref()?.majmin.clone())))
        .collect();
    let cg_name = format!("caseload-lab-{}", state.spec.name);
    if !throttled.is_empty() {
        let (version, cg) = host::cgroup_create("blkio", &cg_name).map_err(state.host())?;
        state.cgroup_version = Some(version);
        state.cgroups.push(cg.clone());
        state.save()?;
        for (name, majmin) in &throttled {
            if let Some(t) = &state.spec.devices[name].model.throttle {
                host::throttle(version, &cg, majmin, t).map_err(state.host())?;
            }
        }
    }
    if let Some(bytes) = state.spec.limits.memory {
        let cg = ensure_cgroup(state, "memory", &cg_name)?;
        let file = match state.cgroup_version {
            Some(CgroupVersion::V2) => "memory.max",
            _ => "memory.limit_in_bytes",
        };
        host::write_file(&cg.path.join(file), &bytes.to_string()).map_err(state.host())?;
    }
    if let Some(cpus) = state.spec.limits.cpus.clone() {
        let cg = ensure_cgroup(state, "cpuset", &cg_name)?;
        host::write_file(&cg.path.join("cpuset.cpus"), &cpus).map_err(state.host())?;
    }
    if let Some(scale) = state.spec.workstation.cpu_scale {
        let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpus = state.spec.workstation.cpus.unwrap_or(machine).min(machine);
        let cg = ensure_cgroup(state, "cpu", &cg_name)?;
        let version = state.cgroup_version.unwrap_or(CgroupVersion::V1);
        host::cpu_quota(version, &cg, scale * cpus as f64).map_err(state.host())?;
    }
    // A layout for runs.
    let layout = state.dir.join("layout.toml");
    let mut text = format!(
        "# Written by `caseload lab up {}`: the lab's channel directories.\nname = \"lab-{}\"\ndescription = \"{}\"\n\n[channels]\n",
        state.spec.name,
        state.spec.name,
        state.spec.description.replace(['"', '\\', '\n'], " ")
    );
    for c in CHANNELS {
        text.push_str(&format!(
            "{c} = \"{}\"\n",
            state.channel_dirs[c]
                .display()
                .to_string()
                .replace(['"', '\\'], "_")
        ));
    }
    std::fs::write(&layout, text).map_err(io("writing", &layout))?;
    state.layout = Some(layout);
    state.set_modelled(true)?;
    state.complete = true;
    state.save()
}

/// Put device `i` behind a network share: a namespace and veth pair for
/// the server, the link's rate on both ends, the relay serving the
/// device's file system from inside the namespace, and the share mounted
/// for the channels.
fn up_share(state: &mut LabState, i: usize, link: ShareLink, exe: &Path) -> Result<(), LabError> {
    let missing = share::missing_tools();
    if !missing.is_empty() {
        return Err(state.unavailable(format!("a network share needs {}", missing.join(", "))));
    }
    let name = state.devices[i].name.clone();
    let lab = state.spec.name.clone();
    let (host_if, ns_if) = share::interface_names(&lab, &name);
    let namespace = format!("caseload-{lab}-{name}");
    let (host_addr, server_addr) = share::free_addresses().map_err(state.host())?;
    let server = format!("{server_addr}:7070");
    state.devices[i].share = Some(ShareState {
        namespace: Some(namespace.clone()),
        host_if: host_if.clone(),
        server: server.clone(),
        ..ShareState::default()
    });
    state.save()?;
    let ns_run = |args: &[&str]| {
        let mut all = vec!["netns", "exec", &namespace];
        all.extend_from_slice(args);
        host::run("ip", &all)
    };
    let tbf = share::tbf_args(link.link_mb_s);
    let tbf: Vec<&str> = tbf.iter().map(String::as_str).collect();
    let steps = || -> Result<(), HostError> {
        host::run("ip", &["netns", "add", &namespace])?;
        host::run(
            "ip",
            &[
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
            ],
        )?;
        host::run("ip", &["link", "set", &ns_if, "netns", &namespace])?;
        host::run(
            "ip",
            &["addr", "add", &format!("{host_addr}/30"), "dev", &host_if],
        )?;
        host::run("ip", &["link", "set", &host_if, "up"])?;
        ns_run(&[
            "ip",
            "addr",
            "add",
            &format!("{server_addr}/30"),
            "dev",
            &ns_if,
        ])?;
        ns_run(&["ip", "link", "set", &ns_if, "up"])?;
        ns_run(&["ip", "link", "set", "lo", "up"])?;
        let mut t = vec!["qdisc", "add", "dev", &host_if, "root", "tbf"];
        t.extend_from_slice(&tbf);
        host::run("tc", &t)?;
        let mut t = vec!["tc", "qdisc", "add", "dev", &ns_if, "root", "tbf"];
        t.extend_from_slice(&tbf);
        ns_run(&t)?;
        Ok(())
    };
    steps().map_err(state.host())?;
    // The relay, detached, inside the namespace.
    let dir = state.dir.join("mnt").join(&name);
    let log = state.dir.join(format!("share-{name}.log"));
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &namespace])
        .arg(exe)
        .args(["lab", "share-serve", "--lab", &lab, "--listen", &server])
        .arg("--dir")
        .arg(&dir)
        .args(["--link-mb-s", &link.link_mb_s.to_string()])
        .args(["--rtt-us", &link.rtt_us.to_string()])
        .args(["--op-us", &link.op_us.to_string()]);
    let pid = spawn_detached(state, cmd, &log, "the share's server")?;
    if let Some(s) = state.devices[i].share.as_mut() {
        s.server_pid = Some(pid);
    }
    state.save()?;
    let start = std::time::Instant::now();
    while std::net::TcpStream::connect_timeout(
        &server
            .parse()
            .map_err(|_| state.unavailable(format!("bad share address {server}")))?,
        std::time::Duration::from_millis(200),
    )
    .is_err()
    {
        if start.elapsed() > std::time::Duration::from_secs(15) {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(state.unavailable(format!(
                "the share's server did not listen on {server} within 15 s: {}",
                text.trim()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let point = state.dir.join("mnt").join(format!("{name}-share"));
    std::fs::create_dir_all(&point).map_err(|source| {
        state.host()(HostError::Io {
            what: "creating mount point",
            path: point.clone(),
            source,
        })
    })?;
    if let Some(s) = state.devices[i].share.as_mut() {
        s.mount = Some(point.clone());
    }
    state.save()?;
    let port = server.rsplit(':').next().unwrap_or("7070");
    host::run(
        "sshfs",
        &[
            &format!("{server_addr}:"),
            &point.to_string_lossy(),
            "-o",
            &format!("directport={port},allow_other,idmap=none"),
        ],
    )
    .map_err(state.host())?;
    Ok(())
}

/// Undo [`up_share`]: unmount, stop the relay, delete the namespace (and
/// with it the veth pair), each only if it is still the lab's.
fn down_share(state: &LabState, s: &ShareState, r: &mut DownReport) -> Result<(), LabError> {
    if let Some(point) = &s.mount {
        let server_ip = s.server.rsplit_once(':').map_or("", |(ip, _)| ip);
        match host::mounted_at(point) {
            Some((source, _)) if source.starts_with(server_ip) && !server_ip.is_empty() => {
                host::run("umount", &[&point.to_string_lossy()]).map_err(state.host())?;
                r.removed.push(format!("share mount {}", point.display()));
            }
            _ => r
                .skipped
                .push(format!("share mount {} (not mounted)", point.display())),
        }
        let _ = std::fs::remove_dir(point);
    }
    if let Some(pid) = s.server_pid
        && is_share_server(pid, &state.spec.name)
    {
        // The pid was checked to be this lab's share server just above.
        host::end_process(pid, false);
        let start = std::time::Instant::now();
        while is_share_server(pid, &state.spec.name)
            && start.elapsed() < std::time::Duration::from_secs(5)
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if is_share_server(pid, &state.spec.name) {
            host::end_process(pid, true);
        }
        r.removed.push(format!("share server {pid}"));
    }
    if let Some(ns) = &s.namespace {
        let listed = host::run("ip", &["netns", "list"]).unwrap_or_default();
        if listed
            .lines()
            .any(|l| l.split_whitespace().next() == Some(ns))
        {
            host::run("ip", &["netns", "del", ns]).map_err(state.host())?;
            r.removed.push(format!("network namespace {ns}"));
        }
    }
    // The namespace took its veth end with it; the pair goes with it.
    if host::run("ip", &["link", "show", &s.host_if]).is_ok() {
        let _ = host::run("ip", &["link", "del", &s.host_if]);
    }
    Ok(())
}

/// Whether `pid` is this lab's share relay.
fn is_share_server(pid: u32, lab: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    args.contains(&b"share-serve".as_slice())
        && args
            .windows(2)
            .any(|w| w[0] == b"--lab" && w[1] == lab.as_bytes())
}

/// The lab's cgroup for `controller`: the one already made (v2 has one
/// for all controllers), or a new one.
fn ensure_cgroup(state: &mut LabState, controller: &str, name: &str) -> Result<Cgroup, LabError> {
    if state.cgroup_version == Some(CgroupVersion::V2)
        && let Some(cg) = state.cgroups.first()
    {
        let (_, parent) = host::cgroup_parent(controller).map_err(state.host())?;
        let wanted = controller;
        let control = parent.join("cgroup.subtree_control");
        let enabled = std::fs::read_to_string(&control).unwrap_or_default();
        if !enabled.split_whitespace().any(|c| c == wanted) {
            host::write_file(&control, &format!("+{wanted}")).map_err(state.host())?;
        }
        return Ok(cg.clone());
    }
    if let Some(cg) = state.cgroups.iter().find(|c| c.controller == controller) {
        return Ok(cg.clone());
    }
    let (version, cg) = host::cgroup_create(controller, name).map_err(state.host())?;
    state.cgroup_version.get_or_insert(version);
    state.cgroups.push(cg.clone());
    state.save()?;
    Ok(cg)
}

fn spawn_server(state: &LabState, exe: &Path, mount: &Path) -> Result<u32, LabError> {
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["lab", "serve", "--lab", &state.spec.name])
        .arg("--mount")
        .arg(mount);
    spawn_detached(
        state,
        cmd,
        &state.dir.join("server.log"),
        "the device server",
    )
}

/// Start `cmd` detached from `lab up` (its own session; output to `log`),
/// returning its process id.
fn spawn_detached(
    state: &LabState,
    mut cmd: std::process::Command,
    log: &Path,
    what: &str,
) -> Result<u32, LabError> {
    let file = |what: &'static str, f: std::io::Result<std::fs::File>| {
        f.map_err(|source| {
            state.host()(HostError::Io {
                what,
                path: log.to_path_buf(),
                source,
            })
        })
    };
    let out = file("creating", std::fs::File::create(log))?;
    let err = file("opening", out.try_clone())?;
    cmd.stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err);
    // Detached from the terminal and process group of `lab up`, which exits.
    host::detach_on_spawn(&mut cmd);
    let child = cmd
        .spawn()
        .map_err(|e| state.unavailable(format!("cannot start {what}: {e}")))?;
    Ok(child.id())
}

/// Wait until the device server's mount serves every modelled device.
fn wait_served(state: &LabState, mount: &Path, modelled: &[String]) -> Result<(), LabError> {
    let start = std::time::Instant::now();
    loop {
        let mounted = host::mounted_at(mount).is_some_and(|(_, fs)| fs.starts_with("fuse"));
        if mounted
            && modelled
                .iter()
                .all(|n| mount.join(format!("{n}.img")).exists())
        {
            return Ok(());
        }
        if let Some(d) = &state.daemon
            && !Path::new(&format!("/proc/{}", d.pid)).exists()
        {
            let log = std::fs::read_to_string(state.dir.join("server.log")).unwrap_or_default();
            return Err(state.unavailable(format!("the device server exited: {}", log.trim())));
        }
        if start.elapsed() > std::time::Duration::from_secs(15) {
            return Err(state.unavailable(format!(
                "the device server did not mount {} within 15 s (is FUSE available: /dev/fuse?)",
                mount.display()
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Whether `pid` is this lab's device server.
fn is_server(pid: u32, lab: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    args.windows(2).any(|w| w[0] == b"serve")
        && args
            .windows(2)
            .any(|w| w[0] == b"--lab" && w[1] == lab.as_bytes())
}

/// What `down` did.
#[derive(Debug, Default, Serialize)]
pub struct DownReport {
    /// Things removed, for people.
    pub removed: Vec<String>,
    /// Things the record named that were already gone or not the lab's.
    pub skipped: Vec<String>,
}

/// Remove everything the record of `state` names, in reverse order, and
/// the record itself. Stops at the first thing it cannot remove (a busy
/// mount, a cgroup with processes), leaving the record so that `down` can
/// be run again.
pub fn down(state: &LabState) -> Result<DownReport, LabError> {
    let mut r = DownReport::default();
    let lab = &state.spec.name;
    for cg in state.cgroups.iter().rev() {
        if host::cgroup_remove(cg).map_err(state.host())? {
            r.removed.push(format!("cgroup {}", cg.path.display()));
        } else {
            r.skipped
                .push(format!("cgroup {} (gone)", cg.path.display()));
        }
    }
    for d in state.devices.iter().rev() {
        if let Some(s) = &d.share {
            down_share(state, s, &mut r)?;
        }
    }
    for d in state.devices.iter().rev() {
        if let (Some(point), Some(dev)) = (&d.mount, &d.loop_device) {
            let source = dev.path.to_string_lossy();
            if host::umount_if(point, &source).map_err(state.host())? {
                r.removed.push(format!("mount {}", point.display()));
            } else {
                r.skipped
                    .push(format!("mount {} (not mounted)", point.display()));
            }
        }
        if let Some(dev) = &d.loop_device {
            if host::loop_detach(dev).map_err(state.host())? {
                r.removed
                    .push(format!("loop device {}", dev.path.display()));
            } else {
                r.skipped.push(format!(
                    "loop device {} (no longer attached to {})",
                    dev.path.display(),
                    dev.backing.display()
                ));
            }
        }
    }
    if let Some(daemon) = &state.daemon {
        if host::mounted_at(&daemon.mount).is_some_and(|(s, _)| s == "caseload-lab") {
            host::run("umount", &[&daemon.mount.to_string_lossy()]).map_err(state.host())?;
            r.removed
                .push(format!("device server mount {}", daemon.mount.display()));
        }
        // The server ends when its mount goes; make sure of it.
        let start = std::time::Instant::now();
        while is_server(daemon.pid, lab) && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if is_server(daemon.pid, lab) {
            // The pid was checked to be this lab's server just above.
            host::end_process(daemon.pid, true);
            r.removed
                .push(format!("device server {} (killed)", daemon.pid));
        }
    }
    for d in &state.devices {
        if let Some(b) = &d.backing
            && b.starts_with(&state.backing_dir)
            && std::fs::remove_file(b).is_ok()
        {
            r.removed.push(format!("backing file {}", b.display()));
        }
        if let Some(k) = &d.key_file
            && k.starts_with(&state.dir)
            && std::fs::remove_file(k).is_ok()
        {
            r.removed.push(format!("key file {}", k.display()));
        }
    }
    let _ = std::fs::remove_dir(state.dir.join("keys"));
    if state.backing_dir_made && std::fs::remove_dir(&state.backing_dir).is_ok() {
        r.removed.push(format!("{}", state.backing_dir.display()));
    }
    // The lab's own directory: mount points, channel layout, record.
    for d in &state.devices {
        if let Some(p) = &d.mount {
            let _ = std::fs::remove_dir(p);
        }
    }
    let _ = std::fs::remove_dir(state.dir.join("mnt"));
    if let Some(daemon) = &state.daemon {
        let _ = std::fs::remove_dir(&daemon.mount);
    }
    for f in ["layout.toml", "server.log", STATE, "state.json.tmp"] {
        let _ = std::fs::remove_file(state.dir.join(f));
    }
    for d in &state.devices {
        let _ = std::fs::remove_file(state.dir.join(format!("share-{}.log", d.name)));
    }
    if std::fs::remove_dir(&state.dir).is_ok() {
        r.removed.push(format!("{}", state.dir.display()));
    }
    Ok(r)
}

/// What is there of a lab, checked against the host.
#[derive(Debug, Serialize)]
pub struct Status {
    /// Lab name.
    pub name: String,
    /// Whether `up` finished and everything is in place.
    pub healthy: bool,
    /// Per device: model, mechanism, loop device, mount, whether each is there.
    pub devices: Vec<serde_json::Value>,
    /// Cgroups and whether they exist.
    pub cgroups: Vec<serde_json::Value>,
    /// The device server, if any: pid, alive, what it served.
    pub server: Option<serde_json::Value>,
    /// Channel directories.
    pub channels: BTreeMap<String, PathBuf>,
    /// The layout file for runs.
    pub layout: Option<PathBuf>,
    /// Problems found.
    pub problems: Vec<String>,
}

/// Check lab `state` against the host.
pub fn status(state: &LabState) -> Status {
    let mut problems = Vec::new();
    if !state.complete {
        problems.push("`lab up` did not finish: run `caseload lab down` to clean it".into());
    }
    let devices = state
        .devices
        .iter()
        .map(|d| {
            let spec = &state.spec.devices[&d.name];
            let attached = d
                .loop_device
                .as_ref()
                .is_some_and(|l| host::loop_backing(&l.path).as_ref() == Some(&l.backing));
            let mounted = match (&d.mount, &d.loop_device) {
                (Some(p), Some(l)) => {
                    host::mounted_at(p).is_some_and(|(s, _)| s == l.path.to_string_lossy())
                }
                _ => false,
            };
            if !attached || !mounted {
                problems.push(format!("device `{}`: loop attached {attached}, mounted {mounted}", d.name));
            }
            if let Err(e) = state.check_key(d) {
                problems.push(e.to_string());
            }
            if let Some(s) = &d.share {
                let alive = s.server_pid.is_some_and(|p| is_share_server(p, &state.spec.name));
                let mounted = s.mount.as_ref().is_some_and(|m| host::mounted_at(m).is_some());
                if !alive || !mounted {
                    problems.push(format!(
                        "share of device `{}` at {}: server running {alive}, mounted {mounted}",
                        d.name, s.server
                    ));
                }
            }
            serde_json::json!({
                "name": d.name, "model": spec.model.name, "mechanism": spec.model.mechanism.as_str(),
                "size": spec.size, "fs": spec.fs, "encrypt": spec.encrypt.as_str(),
                "share": d.share.as_ref().map(|s| serde_json::json!({"server": s.server, "mount": s.mount, "link": spec.share})),
                "loop_device": d.loop_device.as_ref().map(|l| l.path.clone()),
                "direct_io": d.loop_device.as_ref().map(|l| l.direct_io),
                "mount": d.mount, "attached": attached, "mounted": mounted,
            })
        })
        .collect();
    let cgroups = state
        .cgroups
        .iter()
        .map(|c| {
            let exists = c.path.exists();
            if !exists {
                problems.push(format!("cgroup {} is gone", c.path.display()));
            }
            serde_json::json!({"path": c.path, "controller": c.controller, "exists": exists,
                               "processes": host::cgroup_pids(c)})
        })
        .collect();
    let server = state.daemon.as_ref().map(|d| {
        let alive = is_server(d.pid, &state.spec.name);
        if !alive {
            problems.push(format!("device server {} is not running", d.pid));
        }
        serde_json::json!({"pid": d.pid, "mount": d.mount, "alive": alive, "served": state.served()})
    });
    Status {
        name: state.spec.name.clone(),
        healthy: problems.is_empty(),
        devices,
        cgroups,
        server,
        channels: state.channel_dirs.clone(),
        layout: state.layout.clone(),
        problems,
    }
}

/// Make `cmd`, when spawned, join the lab's cgroups before it runs (as
/// `cgexec` does): only the new process moves, from the cgroup caseload
/// runs in into the lab's, which lies beneath it.
pub fn enter(state: &LabState, cmd: &mut std::process::Command) -> Result<(), LabError> {
    host::join_on_exec(cmd, &state.join_files()).map_err(state.host())
}

/// Copy `files` into the lab's evidence channel with the device models
/// off (so loading evidence does not take modelled time), then flush them
/// to the devices and switch the models on. Returns the copies' paths.
pub fn load_evidence(state: &LabState, files: &[PathBuf]) -> Result<Vec<PathBuf>, LabError> {
    let Some(dir) = state.channel_dir("evidence").map(Path::to_path_buf) else {
        return Err(state.unavailable("no evidence channel"));
    };
    state.set_modelled(false)?;
    let mut out = Vec::new();
    let result = (|| {
        for f in files {
            let name = f
                .file_name()
                .ok_or_else(|| state.unavailable(format!("`{}` is not a file", f.display())))?;
            let to = dir.join(name);
            std::fs::copy(f, &to).map_err(|source| {
                state.host()(HostError::Io {
                    what: "copying evidence to",
                    path: to.clone(),
                    source,
                })
            })?;
            // Read-only, as evidence is.
            let _ = host::set_mode(&to, 0o444);
            out.push(to);
        }
        caseload_engine::os::sync_everything();
        Ok(out)
    })();
    state.set_modelled(true)?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(name: &str) -> Result<DeviceModel, String> {
        let text = format!(
            "name = \"{name}\"\ndescription = \"x\"\nmechanism = \"none\"\n[expect]\nseq_read_mb_s = 1000\nseq_write_mb_s = 1000\nrandom_read_iops_qd1 = 10000\nsources = [\"test\"]\n"
        );
        if name == "missing" {
            return Err("no model `missing`".into());
        }
        DeviceModel::parse(&text, name).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"
name = "base"
description = "everything on one disk"
[devices.disk]
model = "fast"
size = "1GiB"
[channels]
evidence = "disk"
database = "disk"
case = "disk"
temp = "disk"
[limits]
memory = "2GiB"
cpus = "0-1"
"#;

    #[test]
    fn a_lab_file_maps_every_channel_to_a_device() {
        let s = LabSpec::parse(GOOD, "base.toml", &model).unwrap();
        assert_eq!(s.devices["disk"].size, 1 << 30);
        assert_eq!(s.devices["disk"].fs, "ext4");
        assert_eq!(s.limits.memory, Some(2 << 30));
        assert_eq!(s.workstation, Workstation::default());
        let w = LabSpec::parse(
            &format!(
                "{GOOD}[workstation]\nram = \"32GB\"\nprocessor_threads = 8\ncpu_scale = 0.71\n"
            ),
            "w.toml",
            &model,
        )
        .unwrap()
        .workstation;
        assert_eq!(w.ram, Some(32 << 30));
        assert_eq!((w.processor_threads, w.cpu_scale), (Some(8), Some(0.71)));
        let e = LabSpec::parse(
            &GOOD.replace(
                "size = \"1GiB\"",
                "size = \"1GiB\"\nencrypt = \"luks-aes-xts\"",
            ),
            "e.toml",
            &model,
        )
        .unwrap();
        let disk = &e.devices["disk"];
        assert!(disk.is_served(), "the host's layer needs the device server");
        assert_eq!(disk.payload_size(), (1 << 30) - crypt::HEADER_BYTES);
        for (bad, says) in [
            (
                GOOD.replace("temp = \"disk\"\n", ""),
                "`temp` is not mapped",
            ),
            (
                GOOD.replace("temp = \"disk\"", "temp = \"nope\""),
                "no device `nope`",
            ),
            (GOOD.replace("temp =", "tmp ="), "unknown channel `tmp`"),
            (
                GOOD.replace("model = \"fast\"", "model = \"missing\""),
                "no model `missing`",
            ),
            (GOOD.replace("1GiB", "1MiB"), "64 MiB to 16 TiB"),
            (
                GOOD.replace("name = \"base\"", "name = \"a b\""),
                "letters, digits",
            ),
            (GOOD.replace("cpus = \"0-1\"", "cpus = \"all\""), "CPU list"),
            (
                GOOD.replace("[limits]", "[limits]\nswap = 1"),
                "unknown field `swap`",
            ),
            (
                format!("{GOOD}[workstation]\nram = \"lots\"\n"),
                "workstation.ram",
            ),
            (
                format!("{GOOD}[workstation]\ncpu_scale = 1.5\n"),
                "above 0 and at most 1",
            ),
            (format!("{GOOD}[workstation]\ncpus = 0\n"), "at least 1"),
            (
                GOOD.replace(
                    "size = \"1GiB\"",
                    "size = \"64MiB\"\nencrypt = \"luks-aes-xts\"",
                ),
                "too small for the luks-aes-xts layer",
            ),
            (
                GOOD.replace(
                    "size = \"1GiB\"",
                    "size = \"1GiB\"\nencrypt = \"bitlocker\"",
                ),
                "one of none, luks-aes-xts, sed",
            ),
            (
                GOOD.replace("size = \"1GiB\"", "size = \"1GiB\"\nshare = \"token-ring\""),
                "1gbe, 10gbe",
            ),
            (
                GOOD.replace(
                    "size = \"1GiB\"",
                    "size = \"1GiB\"\nshare = { link_mb_s = 0, rtt_us = 100 }",
                ),
                "link_mb_s 0",
            ),
            (
                format!("{GOOD}[workstation]\nswap = \"1GB\"\n"),
                "unknown field `swap`",
            ),
        ] {
            let e = LabSpec::parse(&bad, "bad.toml", &model)
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{e}");
            assert!(e.contains("bad.toml"), "{e}");
        }
    }
}
