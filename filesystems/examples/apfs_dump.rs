//! Prints what the APFS reader sees in an image (a development aid).
use std::ops::ControlFlow;

fn main() {
    let path = std::env::args().nth(1).expect("image path");
    let f = std::fs::File::open(&path).expect("open");
    let len = caseload_fs::ReadAt::len(&f);
    let fs = caseload_fs::ApfsFs::open(&f, 0, len).expect("apfs");
    println!(
        "checkpoint block {} xid {}",
        fs.checkpoint_block(),
        fs.superblock().xid
    );
    for v in fs.volumes() {
        println!(
            "volume {} {:?} apsb {:?} enc {} snaps {:?}",
            v.index,
            v.name(),
            v.apsb_block,
            v.encrypted(),
            v.snapshots
        );
    }
    for e in fs.open_errors() {
        println!("open error: {e}");
    }
    let s = fs
        .walk(|r| {
            println!(
                "{} {} {:?} size {} {:?} {:?}",
                r.meta,
                r.path(),
                r.kind,
                r.size,
                r.content,
                r.errors
            );
            ControlFlow::Continue(())
        })
        .expect("walk");
    for e in &s.errors.errors {
        println!("walk error: {e}");
    }
    fs.unallocated_runs(|e| {
        println!(
            "free {:#x}-{:#x}",
            e.offset / 4096,
            (e.offset + e.len) / 4096 - 1
        )
    })
    .expect("unalloc");
}
