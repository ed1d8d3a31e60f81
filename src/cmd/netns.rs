//! Workers in network namespaces (`caseload cluster --netns`): each
//! worker reaches the case database over a veth pair of its own, as a
//! workstation reaches the server over its own link, and the link may be
//! shaped to a rate with `tc tbf`. Built with the system's `ip` and `tc`
//! (iproute2), as root; everything made here is removed when the
//! [`Links`] value is dropped (deleting a namespace deletes its veth
//! pair). Nothing that was not made here is touched: names carry this
//! process's id, and an address block already in use is skipped.

use anyhow::{Context, bail};
use caseload_engine::work::LinkFigures;
use std::process::Command;

/// One worker's link.
#[derive(Debug)]
pub struct Link {
    /// The network namespace the worker runs in.
    pub namespace: String,
    /// The veth end on the server's side.
    pub host_if: String,
    /// The server's address on this link (what the worker connects to).
    pub host_address: String,
}

/// The links of a cluster's workers.
#[derive(Debug)]
pub struct Links {
    /// One per worker, in order.
    pub links: Vec<Link>,
    /// The address block, `10.X.0.0/16`'s /24: `10.231.N.0/24`.
    pub network: String,
}

fn run(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("running `{}`", args.join(" ")))?;
    if !out.status.success() {
        bail!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Links {
    /// What `create` needs and would refuse: root, at most 63 workers, a
    /// positive rate, iproute2; every problem, for the command's check
    /// before anything starts.
    pub fn problems(workers: usize, rate_mb_s: Option<f64>) -> Vec<String> {
        let mut out = Vec::new();
        if !cfg!(target_os = "linux") {
            out.push("--netns needs Linux (network namespaces, veth pairs, tc)".into());
        }
        if !caseload_lab::host::is_root() {
            out.push("--netns needs root (it creates network namespaces and veth pairs)".into());
        }
        if workers > 63 {
            out.push("--netns gives each worker a /30 of one /24: at most 63 workers".into());
        }
        if let Some(r) = rate_mb_s
            && !(r.is_finite() && r > 0.0)
        {
            out.push("--link-mb-s must be a positive number of MB/s".into());
        }
        if let Err(e) = run(&["ip", "-V"]) {
            out.push(format!("--netns needs iproute2 (`ip`, `tc`): {e:#}"));
        }
        out
    }

    /// Namespaces, veth pairs and addresses for `workers` workers; with
    /// `rate_mb_s`, each link shaped to that rate both ways.
    pub fn create(workers: usize, rate_mb_s: Option<f64>) -> anyhow::Result<Links> {
        let problems = Self::problems(workers, rate_mb_s);
        if !problems.is_empty() {
            bail!("{}", problems.join("; "));
        }
        // A /24 nobody on this machine uses yet.
        let used = run(&["ip", "-o", "-4", "addr", "show"])?;
        let pid = std::process::id();
        let block = (0..200u32)
            .map(|i| (pid + i) % 200 + 20)
            .find(|b| !used.contains(&format!(" 10.231.{b}.")))
            .context("no free 10.231.X.0/24 for the workers' links")?;
        let mut links = Links {
            links: Vec::new(),
            network: format!("10.231.{block}.0/24"),
        };
        for i in 0..workers {
            let tag = format!("{}{i}", pid % 100_000);
            let link = Link {
                namespace: format!("caseload-{pid}-w{}", i + 1),
                host_if: format!("clh{tag}"),
                host_address: format!("10.231.{block}.{}", 4 * i + 1),
            };
            let peer_if = format!("clp{tag}");
            let peer_address = format!("10.231.{block}.{}/30", 4 * i + 2);
            run(&["ip", "netns", "add", &link.namespace])?;
            let ns = link.namespace.clone();
            links.links.push(link);
            let l = links.links.last().context("the link just added")?;
            run(&[
                "ip", "link", "add", &l.host_if, "type", "veth", "peer", "name", &peer_if, "netns",
                &ns,
            ])?;
            run(&[
                "ip",
                "addr",
                "add",
                &format!("{}/30", l.host_address),
                "dev",
                &l.host_if,
            ])?;
            run(&["ip", "link", "set", &l.host_if, "up"])?;
            run(&[
                "ip",
                "-n",
                &ns,
                "addr",
                "add",
                &peer_address,
                "dev",
                &peer_if,
            ])?;
            run(&["ip", "-n", &ns, "link", "set", &peer_if, "up"])?;
            run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
            if let Some(r) = rate_mb_s {
                let rate = format!("{}bit", (r * 8e6).round() as u64);
                // Bursts of 20 ms at the rate, at least 16 KiB (tbf needs
                // burst >= rate / HZ, and room for a full packet).
                let burst = format!("{}", ((r * 1e6 / 50.0) as u64).max(16 * 1024));
                for (dev, netns) in [(&l.host_if, None), (&peer_if, Some(&ns))] {
                    let mut args = vec!["tc"];
                    if let Some(n) = netns {
                        args.extend(["-n", n.as_str()]);
                    }
                    args.extend([
                        "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate, "burst", &burst,
                        "latency", "100ms",
                    ]);
                    run(&args)?;
                }
            }
        }
        // The server binds these addresses at its start: wait until the
        // kernel takes them (a fresh veth's local routes can lag).
        for l in &links.links {
            let since = std::time::Instant::now();
            while std::net::TcpListener::bind((l.host_address.as_str(), 0)).is_err() {
                if since.elapsed() > std::time::Duration::from_secs(10) {
                    bail!(
                        "address {} on {} never became usable",
                        l.host_address,
                        l.host_if
                    );
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        Ok(links)
    }

    /// The addresses the server must listen on, comma-separated.
    pub fn listen_addresses(&self) -> String {
        self.links
            .iter()
            .map(|l| l.host_address.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// What each link carried so far (read before the links are removed),
    /// shaped to `rate_mb_s`.
    pub fn carried(&self, rate_mb_s: Option<f64>) -> Vec<LinkFigures> {
        let read = |dev: &str, what: &str| -> u64 {
            std::fs::read_to_string(format!("/sys/class/net/{dev}/statistics/{what}"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0)
        };
        self.links
            .iter()
            .map(|l| LinkFigures {
                rate_mb_s,
                // The host end receives what the worker sends.
                to_server_bytes: read(&l.host_if, "rx_bytes"),
                from_server_bytes: read(&l.host_if, "tx_bytes"),
            })
            .collect()
    }
}

impl Drop for Links {
    fn drop(&mut self) {
        for l in &self.links {
            if let Err(e) = run(&["ip", "netns", "del", &l.namespace]) {
                eprintln!("caseload: removing network namespace {}: {e}", l.namespace);
            }
        }
    }
}
