//! The layout planners, one per file system: which one places a volume's
//! plan. Adding a file system adds a planner here (and its writer); the
//! planner and the other file systems do not change.

use crate::apfs::layout::ApfsLayout;
use crate::exfat::layout::ExfatLayout;
use crate::ext4::layout::Ext4Layout;
use crate::fat::layout::FatLayout;
use crate::geometry::Geometry;
use crate::ntfs::layout::NtfsLayout;
use crate::plan::FsLayout;
use std::sync::Arc;

/// The layout planner of the file system `geo` describes.
pub fn for_geometry(geo: &Geometry) -> Arc<dyn FsLayout> {
    if geo.apfs.is_some() {
        Arc::new(ApfsLayout)
    } else if let Some(p) = geo.ext4 {
        Arc::new(Ext4Layout {
            key: p.ids.hash_seed,
        })
    } else if geo.exfat.is_some() {
        Arc::new(ExfatLayout)
    } else if geo.ntfs {
        Arc::new(NtfsLayout)
    } else {
        Arc::new(FatLayout)
    }
}
