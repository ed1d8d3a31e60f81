//! Network shares: a lab device reached over a network, as a NAS or file
//! server is (`share = "1gbe"` on a device in a lab file).
//!
//! The device is the server's own storage (its model: a RAID-5 array, a
//! disk); its file system is exported by a file server inside a network
//! namespace of its own, and the workstation mounts it over a veth pair
//! whose bandwidth `tc tbf` holds to the link's payload rate in each
//! direction. The file protocol is SFTP (OpenSSH's `sftp-server` serving,
//! the `sshfs` FUSE client mounting, without ssh's encryption: sshfs's
//! `directport`), so every open, stat, create, read and write the run does
//! on the share is a request and a reply over the link, as on SMB or NFS.
//! The server's side is caseload's relay ([`serve_share`]), which hands
//! each connection to `sftp-server` and delays every message by half the
//! round trip, and every request by the server's per-operation time too:
//! the kernel here may lack `netem`, and the relay's delay does not depend
//! on it.
//!
//! What differs from SMB and NFS: sshfs caches attributes and directory
//! entries for 20 s (NFS's `actimeo` is 3-60 s; SMB2 leases similar),
//! SFTP has no compound requests (SMB2 joins create, read and close) and
//! no server-side copy; the relay delays whole messages, not packets.

use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A share's link and server, as a lab file gives them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShareLink {
    /// Payload rate each way, MB/s.
    pub link_mb_s: f64,
    /// Round trip, µs.
    pub rtt_us: f64,
    /// The server's time per request, µs.
    pub op_us: f64,
}

impl ShareLink {
    /// A preset by name: `1gbe` or `10gbe`.
    pub fn preset(name: &str) -> Result<ShareLink, String> {
        match name {
            // 1000BASE-T: 125 MB/s on the wire, about 117 MB/s of TCP
            // payload; a switched LAN's round trip about 0.2 ms; a file
            // server's work per SMB2/NFS request some tens of µs.
            "1gbe" => Ok(ShareLink {
                link_mb_s: 117.0,
                rtt_us: 200.0,
                op_us: 50.0,
            }),
            // 10GBASE-T: about 1,170 MB/s of payload, a round trip of
            // about 60 µs through one switch.
            "10gbe" => Ok(ShareLink {
                link_mb_s: 1170.0,
                rtt_us: 60.0,
                op_us: 50.0,
            }),
            other => Err(format!(
                "share `{other}`: 1gbe, 10gbe, or {{ link_mb_s = .., rtt_us = .., op_us = .. }}"
            )),
        }
    }

    /// Check the figures.
    pub fn check(&self) -> Result<(), String> {
        let ok = |v: f64, lo: f64| v.is_finite() && v >= lo;
        if !ok(self.link_mb_s, 0.1) || !ok(self.rtt_us, 0.0) || !ok(self.op_us, 0.0) {
            return Err(format!(
                "share: link_mb_s {} (at least 0.1), rtt_us {} and op_us {} (at least 0)",
                self.link_mb_s, self.rtt_us, self.op_us
            ));
        }
        Ok(())
    }
}

/// The programs a share needs, missing ones named.
pub fn missing_tools() -> Vec<String> {
    let mut out = Vec::new();
    for (tool, package) in [("sshfs", "sshfs"), ("ip", "iproute2"), ("tc", "iproute2")] {
        if caseload_engine::system::program_on_path(tool).is_none() {
            out.push(format!("`{tool}` (package {package})"));
        }
    }
    if sftp_server().is_none() {
        out.push("`sftp-server` (package openssh-sftp-server)".into());
    }
    out
}

/// OpenSSH's SFTP server program.
pub fn sftp_server() -> Option<&'static Path> {
    [
        "/usr/lib/openssh/sftp-server",
        "/usr/libexec/openssh/sftp-server",
        "/usr/libexec/sftp-server",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.is_file())
}

/// Copy `from` to `to`, each chunk held until `delay` after it arrived
/// (and, with `op` set, each whole SFTP message a further `op`, one after
/// another, as one server thread works through them).
fn pump(
    mut from: impl Read + Send + 'static,
    mut to: impl Write + Send + 'static,
    delay: Duration,
    op: Option<Duration>,
) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 256 << 10];
        // SFTP frames: a 4-byte big-endian length, then the message.
        let mut pending: Vec<u8> = Vec::new();
        let mut busy_until = Instant::now();
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let now = Instant::now();
            let Some(op) = op else {
                if tx.send((now + delay, buf[..n].to_vec())).is_err() {
                    break;
                }
                continue;
            };
            pending.extend_from_slice(&buf[..n]);
            let mut at = 0;
            while pending.len() - at >= 4 {
                let len = u32::from_be_bytes([
                    pending[at],
                    pending[at + 1],
                    pending[at + 2],
                    pending[at + 3],
                ]) as usize;
                if pending.len() - at - 4 < len {
                    break;
                }
                busy_until = busy_until.max(now + delay) + op;
                let msg = pending[at..at + 4 + len].to_vec();
                at += 4 + len;
                if tx.send((busy_until, msg)).is_err() {
                    return;
                }
            }
            pending.drain(..at);
        }
    });
    std::thread::spawn(move || {
        for (due, bytes) in rx {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&bytes).and_then(|_| to.flush()).is_err() {
                break;
            }
        }
    });
}

fn serve_connection(conn: TcpStream, dir: &Path, link: ShareLink) -> std::io::Result<()> {
    let server = sftp_server().ok_or_else(|| std::io::Error::other("no sftp-server"))?;
    let _ = conn.set_nodelay(true);
    let mut child = Command::new(server)
        .arg("-d")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let half = Duration::from_nanos((link.rtt_us * 500.0) as u64);
    let op = Duration::from_nanos((link.op_us * 1000.0) as u64);
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other("sftp-server without pipes"));
    };
    pump(conn.try_clone()?, stdin, half, Some(op));
    pump(stdout, conn, half, None);
    // Reap it when it ends (the client hung up).
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// Serve `dir` over SFTP at `listen` with `link`'s delays, until killed
/// (the body of the hidden `caseload lab share-serve`, which `lab up`
/// starts inside the share's network namespace).
pub fn serve_share(listen: &str, dir: &Path, link: ShareLink) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen)?;
    for conn in listener.incoming() {
        match conn {
            Ok(c) => {
                if let Err(e) = serve_connection(c, dir, link) {
                    eprintln!("share-serve: {e}");
                }
            }
            Err(e) => eprintln!("share-serve: accept: {e}"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_bad_figures() {
        assert_eq!(ShareLink::preset("1gbe").unwrap().link_mb_s, 117.0);
        assert!(ShareLink::preset("10gbe").unwrap().rtt_us < 200.0);
        assert!(ShareLink::preset("token-ring").is_err());
        let bad = ShareLink {
            link_mb_s: 0.0,
            rtt_us: 10.0,
            op_us: 0.0,
        };
        assert!(bad.check().is_err());
    }

    /// The relay holds each message for its delay: a request and its
    /// reply take at least the round trip and the server's time.
    #[test]
    fn the_relay_delays_each_message() {
        let (a, b) = (
            TcpListener::bind("127.0.0.1:0").unwrap(),
            TcpListener::bind("127.0.0.1:0").unwrap(),
        );
        let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        // client -> [relay] -> echo server
        std::thread::spawn(move || {
            let (mut s, _) = b.accept().unwrap();
            let mut buf = [0u8; 64];
            loop {
                let n = s.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).unwrap();
            }
        });
        std::thread::spawn(move || {
            let (c, _) = a.accept().unwrap();
            let up = TcpStream::connect(b_addr).unwrap();
            pump(
                c.try_clone().unwrap(),
                up.try_clone().unwrap(),
                Duration::from_millis(5),
                Some(Duration::from_millis(3)),
            );
            pump(up, c, Duration::from_millis(5), None);
        });
        let mut c = TcpStream::connect(a_addr).unwrap();
        let msg = [0, 0, 0, 4, 1, 2, 3, 4];
        for _ in 0..3 {
            let t = Instant::now();
            c.write_all(&msg).unwrap();
            let mut back = [0u8; 8];
            c.read_exact(&mut back).unwrap();
            assert_eq!(back, msg);
            assert!(
                t.elapsed() >= Duration::from_millis(13),
                "{:?}",
                t.elapsed()
            );
        }
    }
}

/// What `lab up` made for a share, so `down` can remove exactly that.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShareState {
    /// The server's network namespace.
    pub namespace: Option<String>,
    /// The veth end in the lab's (the workstation's) namespace.
    pub host_if: String,
    /// The server's address and port.
    pub server: String,
    /// The relay's process.
    pub server_pid: Option<u32>,
    /// Where the share is mounted.
    pub mount: Option<std::path::PathBuf>,
}

/// Interface names: at most 15 bytes, from the lab's and device's names.
pub fn interface_names(lab: &str, device: &str) -> (String, String) {
    let mut h: u32 = 0x811c_9dc5;
    for b in lab.bytes().chain([0]).chain(device.bytes()) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (format!("cls{h:08x}h"), format!("cls{h:08x}n"))
}

/// An unused /30 of 10.234.0.0/16: the workstation's and the server's
/// addresses.
pub fn free_addresses() -> Result<(String, String), crate::host::HostError> {
    let used = crate::host::run("ip", &["-o", "-4", "addr", "show"])?;
    for k in 0..=255u32 {
        for q in 0..64u32 {
            let net = format!("10.234.{k}.{}", q * 4);
            let host = format!("10.234.{k}.{}", q * 4 + 1);
            if !used.contains(&format!("{host}/")) && !used.contains(&format!("{net}/")) {
                return Ok((host, format!("10.234.{k}.{}", q * 4 + 2)));
            }
        }
    }
    Err(crate::host::HostError::Unavailable(
        "no free /30 in 10.234.0.0/16 for a share".into(),
    ))
}

/// `tc tbf` arguments holding a link to `mb_s` each way.
pub fn tbf_args(mb_s: f64) -> Vec<String> {
    let bytes_s = mb_s * 1e6;
    // Bursts of 4 ms of traffic (at least 64 KiB), a queue of 4 MiB.
    let burst = ((bytes_s / 250.0) as u64).max(64 << 10);
    vec![
        "rate".into(),
        format!("{}bit", (bytes_s * 8.0) as u64),
        "burst".into(),
        burst.to_string(),
        "limit".into(),
        (4u64 << 20).to_string(),
    ]
}
