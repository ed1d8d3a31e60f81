//! Lists the partitions of a raw image and walks every parsed file system,
//! printing one line per record (meta address, flags, size, escaped path)
//! and the processing errors: a quick way to compare with `mmls`/`fls`.
//!
//! `cargo run -p caseload-fs --example fswalk -- IMAGE.dd`

use std::ops::ControlFlow;

use caseload_fs::{FileSystem, open_filesystem, open_volume_system};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: fswalk IMAGE")?;
    let src = std::fs::File::open(&path)?;
    let vs = open_volume_system(&src)?;
    println!("scheme {:?}, sector size {}", vs.scheme, vs.sector_size);
    for e in &vs.errors {
        println!("  volume error: {e}");
    }
    for p in &vs.partitions {
        println!(
            "{} start {} count {} {} fs {}",
            p.mmls_slot(),
            p.start_sector,
            p.sector_count,
            p.description,
            p.filesystem
        );
        for e in &p.errors {
            println!("  partition error: {e}");
        }
        if !p.filesystem.is_parsed() {
            continue;
        }
        let fs = open_filesystem(&src, p.offset, p.length)?;
        if let FileSystem::Unsupported(k) = fs {
            println!("  {k}: not parsed");
            continue;
        }
        let summary = fs.walk(|r| {
            println!(
                "  {:<14} {} {:?} {:>9} {} [{:?}]",
                r.meta.to_string(),
                if r.allocated { " " } else { "*" },
                r.kind,
                r.size,
                r.display_path(),
                r.recovery
            );
            for e in &r.errors {
                println!("      error: {e}");
            }
            if std::env::var_os("FSWALK_RUNS").is_some() {
                println!("      content: {:?}", r.content);
            }
            ControlFlow::Continue(())
        })?;
        for e in &summary.errors.errors {
            println!("  walk error: {e}");
        }
    }
    Ok(())
}
