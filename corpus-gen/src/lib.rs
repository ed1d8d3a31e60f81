//! corpus-gen: deterministic synthetic evidence disks with exact ground truth.
