//! Device models (`workloads/devices/*.toml`) and lab files
//! (`workloads/labs/*.toml`: the FTK study's configurations), built in by
//! name; a path to a file of one's own works wherever a name does.

use caseload_lab::{DeviceModel, LabError, LabSpec};
use std::path::Path;

/// Built-in device models by name.
pub const DEVICES: &[(&str, &str)] = &[
    ("hdd-7200", include_str!("../devices/hdd-7200.toml")),
    ("hdd-10k", include_str!("../devices/hdd-10k.toml")),
    ("usb3-hdd", include_str!("../devices/usb3-hdd.toml")),
    (
        "usb3-sata-7200",
        include_str!("../devices/usb3-sata-7200.toml"),
    ),
    ("raid5-4x7200", include_str!("../devices/raid5-4x7200.toml")),
    ("nas-1gbe", include_str!("../devices/nas-1gbe.toml")),
    ("sata-ssd", include_str!("../devices/sata-ssd.toml")),
    ("pcie-ssd", include_str!("../devices/pcie-ssd.toml")),
    ("cloud-gp3", include_str!("../devices/cloud-gp3.toml")),
    ("usb-stick", include_str!("../devices/usb-stick.toml")),
];

/// Built-in labs by name.
pub const LABS: &[(&str, &str)] = &[
    ("ftk4-base", include_str!("../labs/ftk4-base.toml")),
    ("ftk4-ssd-db", include_str!("../labs/ftk4-ssd-db.toml")),
    ("ftk4-pcie-db", include_str!("../labs/ftk4-pcie-db.toml")),
    (
        "ftk4-raid5-data",
        include_str!("../labs/ftk4-raid5-data.toml"),
    ),
    (
        "ftk4-ssd-system",
        include_str!("../labs/ftk4-ssd-system.toml"),
    ),
    ("ftk4-high-end", include_str!("../labs/ftk4-high-end.toml")),
    (
        "ftk4-five-channel",
        include_str!("../labs/ftk4-five-channel.toml"),
    ),
    (
        "ftk4-tier-base",
        include_str!("../labs/ftk4-tier-base.toml"),
    ),
    (
        "ftk4-tier-economy",
        include_str!("../labs/ftk4-tier-economy.toml"),
    ),
    (
        "ftk4-tier-mid-dd",
        include_str!("../labs/ftk4-tier-mid-dd.toml"),
    ),
    (
        "ftk4-tier-mid-e01",
        include_str!("../labs/ftk4-tier-mid-e01.toml"),
    ),
    (
        "ftk4-tier-high-end",
        include_str!("../labs/ftk4-tier-high-end.toml"),
    ),
    (
        "enc-luks-database",
        include_str!("../labs/enc-luks-database.toml"),
    ),
    ("enc-luks-data", include_str!("../labs/enc-luks-data.toml")),
    (
        "enc-luks-system",
        include_str!("../labs/enc-luks-system.toml"),
    ),
    (
        "enc-sed-database",
        include_str!("../labs/enc-sed-database.toml"),
    ),
    ("enc-sed-data", include_str!("../labs/enc-sed-data.toml")),
    (
        "enc-sed-system",
        include_str!("../labs/enc-sed-system.toml"),
    ),
    ("enc-nas-data", include_str!("../labs/enc-nas-data.toml")),
];

/// A device model: a file if `arg` names one, else a built-in model.
pub fn device(arg: &str) -> Result<DeviceModel, String> {
    let path = Path::new(arg);
    if path.is_file() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read device model `{arg}`: {e}"))?;
        return DeviceModel::parse(&text, arg).map_err(|e| e.to_string());
    }
    match DEVICES.iter().find(|(n, _)| *n == arg) {
        Some((name, text)) => DeviceModel::parse(text, name).map_err(|e| e.to_string()),
        None => Err(format!(
            "no device model `{arg}` (built in: {}; or a path to a model file)",
            DEVICES
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// A lab file: a file if `arg` names one, else a built-in lab.
pub fn lab(arg: &str) -> Result<LabSpec, LabError> {
    let path = Path::new(arg);
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| LabError::Spec {
            origin: arg.to_string(),
            message: format!("cannot read: {e}"),
        })?;
        return LabSpec::parse(&text, arg, &device);
    }
    match LABS.iter().find(|(n, _)| *n == arg) {
        Some((name, text)) => LabSpec::parse(text, name, &device),
        None => Err(LabError::Spec {
            origin: arg.to_string(),
            message: format!(
                "no such file or built-in lab (built in: {})",
                LABS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_model_and_lab_loads() {
        for (name, _) in DEVICES {
            let m = device(name).unwrap();
            assert_eq!(m.name, *name);
            assert!(!m.expect.sources.is_empty());
        }
        for (name, _) in LABS {
            let l = lab(name).unwrap();
            assert_eq!(l.name, *name);
        }
        assert!(device("floppy").unwrap_err().contains("hdd-7200"));
        assert!(lab("nope").unwrap_err().to_string().contains("ftk4-base"));
    }

    #[test]
    fn impossible_models_are_refused_with_the_key() {
        let good = DEVICES[0].1;
        for (bad, key) in [
            (good.replace("rpm = 7200", "rpm = 0"), "rotating.rpm"),
            (
                good.replace("inner_mb_s = 80", "inner_mb_s = 900"),
                "rotating.inner_mb_s",
            ),
            (
                good.replace("full_stroke_ms = 16.0", "full_stroke_ms = 0.1"),
                "rotating.full_stroke_ms",
            ),
            (
                good.replace("capacity = \"1TB\"", "capacity = \"1MiB\""),
                "rotating.capacity",
            ),
            (
                good.replace("mechanism = \"model\"", "mechanism = \"throttle\""),
                "rotating",
            ),
            (good.replace("[rotating]", "[rotating]\nheads = 4"), "heads"),
            (good.replace("sources = [", "sources = [] \nx = ["), "x"),
        ] {
            let e = DeviceModel::parse(&bad, "bad.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{key}: {e}");
            assert!(e.contains("bad.toml"), "{e}");
        }
    }
}
