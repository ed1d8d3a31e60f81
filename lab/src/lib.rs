//! caseload's emulated storage lab: the devices a lab does not own yet,
//! modelled on one machine, so a layout can be measured on them.
//!
//! A lab file (`workloads/labs/*.toml`) maps the four channels to devices,
//! each of a model (`workloads/devices/*.toml`, [`model`]). `caseload lab
//! up` ([`lab::up`]) gives each device a backing file on fast storage
//! (`/dev/shm`), a loop device and a file system, and puts the model into
//! effect: a rotating disk, array or network share through the userspace
//! device model ([`timing`], served over FUSE by [`serve`]), flash through
//! the cgroup block-I/O throttle ([`host`]). It writes a layout whose
//! channel directories are on those devices; `run --lab` runs inside the
//! lab's cgroups. `caseload lab down` ([`lab::down`]) removes what `up`
//! made, and only that.
//!
//! Needs root, loop devices, and FUSE or a block-I/O controller; each
//! missing piece is a plain error saying which.

pub mod crypt;
pub mod host;
pub mod lab;
pub mod model;
#[cfg(target_os = "linux")]
pub mod serve;
pub mod share;
pub mod timing;

pub use lab::{LabError, LabSpec, LabState};
pub use model::{DeviceModel, Mechanism, ModelError};

/// The lab's device server needs Linux (FUSE): refused elsewhere.
#[cfg(not(target_os = "linux"))]
pub fn serve_lab(name: &str, _mount: &std::path::Path) -> Result<(), LabError> {
    Err(LabError::Unavailable {
        lab: name.to_string(),
        message: "the lab's device server needs Linux (FUSE)".into(),
    })
}

/// Serve the modelled devices of lab `name` at `mount` until unmounted
/// (the body of the hidden `caseload lab serve`, started by `lab up`).
#[cfg(target_os = "linux")]
pub fn serve_lab(name: &str, mount: &std::path::Path) -> Result<(), LabError> {
    let state = LabState::load(name)?;
    let mut devices = Vec::new();
    for d in &state.devices {
        let spec = &state.spec.devices[&d.name];
        let Some(backing) = d.backing.as_ref().filter(|_| spec.is_served()) else {
            continue;
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(backing)
            .map_err(|source| LabError::Host {
                lab: name.to_string(),
                source: host::HostError::Io {
                    what: "opening backing file",
                    path: backing.clone(),
                    source,
                },
            })?;
        // Never serve an encrypted device without its key.
        let cipher = match (&d.key_file, spec.encrypt.on_host()) {
            (Some(key), true) => Some((
                crypt::open(&d.name, &file, backing, key)
                    .map_err(|e| LabError::Unavailable {
                        lab: name.to_string(),
                        message: e.to_string(),
                    })?
                    .held_for(spec.cipher_mb_s, state.spec.workstation.cpu_scale),
                spec.encrypt.header_bytes(),
            )),
            (None, true) => {
                return Err(LabError::Unavailable {
                    lab: name.to_string(),
                    message: format!("encrypted device `{}` has no key recorded", d.name),
                });
            }
            _ => None,
        };
        if let Some(mb_s) = cipher.as_ref().and_then(|(c, _)| c.held_mb_s()) {
            // The server's log says what the layer stands for.
            eprintln!("device `{}`: AES-XTS held to {mb_s:.0} MB/s a core", d.name);
        }
        devices.push(serve::ServedDevice {
            name: format!("{}.img", d.name),
            backing: file,
            size: spec.payload_size(),
            timing: spec.model.timing.as_ref().map(timing::build),
            cipher,
        });
    }
    serve::serve(mount, devices).map_err(|e| LabError::Unavailable {
        lab: name.to_string(),
        message: format!("device server at {}: {e}", mount.display()),
    })
}
