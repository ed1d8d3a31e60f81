//! What a request costs on a modelled device: given a request (read, write
//! or flush, its offset and length) and the time it arrives, when it
//! completes. Time is nanoseconds on the device's own clock (since it was
//! started); the device server replies to each request at its completion
//! time, so everything above the device (file system, page cache, the
//! workload) sees the modelled device.
//!
//! The rotating disk is a simplified DiskSim-style model: a head that
//! seeks (track-to-track to full stroke, growing with the square root of
//! the distance), waits for its sector to come round (the platter's angle
//! is a function of time, so back-to-back sequential transfers never wait
//! and a request that just misses its sector waits almost a revolution),
//! transfers at its zone's media rate, and has a read-ahead buffer and a
//! write-back cache. Requests are served in arrival order (no command
//! reordering). RAID-5 and network storage are built on it or beside it.
//! None of it is calibrated against one drive's firmware: the figures each
//! model is expected to produce are in its file, with their sources, and a
//! test probes the modelled device against them.

use crate::model::{Flash, Network, Raid5, Rotating, Timing};
use std::collections::VecDeque;

/// Nanoseconds on a device's clock.
pub type Nanos = u64;

/// What a request asks of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Read bytes.
    Read,
    /// Write bytes.
    Write,
    /// Make every accepted write durable (cache flush).
    Flush,
}

/// A device's timing: the completion time of each request.
pub trait DeviceTiming: Send {
    /// Charge a request of `len` bytes at `offset` arriving at `now`;
    /// returns when it completes (never before `now`).
    fn submit(&mut self, op: Op, offset: u64, len: u64, now: Nanos) -> Nanos;
}

/// The timing of a model's mechanics.
pub fn build(timing: &Timing) -> Box<dyn DeviceTiming> {
    match timing {
        Timing::Rotating(r) => Box::new(Disk::new(r)),
        Timing::Raid5(r) => Box::new(Raid5Array::new(r)),
        Timing::Network(n) => Box::new(NetworkLink::new(n)),
        Timing::Flash(f) => Box::new(FlashDrive::new(f)),
    }
}

/// Mean seconds one commit of a database's commit chain takes on a device
/// of these mechanics: an 8 KiB write appended after the last (a log
/// block), then a flush that waits for it to be on the media, the next
/// commit issued `gap_s` after the last one completed (the work between
/// two commits). On a rotating disk this is about a revolution: the
/// sector after the last write has just passed the head when the next
/// write arrives. `caseload predict` scales a run's commit time with it
/// (docs/predict.md); a probe measures the same chain on a real device.
pub fn commit_chain_s(timing: &Timing, gap_s: f64) -> f64 {
    const COMMITS: u64 = 200;
    const BLOCK: u64 = 8192;
    // A log well into the device, away from its first blocks.
    const LOG_AT: u64 = 64 << 20;
    let mut device = build(timing);
    let gap = (gap_s.max(0.0) * 1e9) as Nanos;
    let mut now: Nanos = 0;
    let mut total: Nanos = 0;
    for i in 0..COMMITS {
        let written = device.submit(Op::Write, LOG_AT + i * BLOCK, BLOCK, now);
        let done = device.submit(Op::Flush, 0, 0, written);
        total += done.saturating_sub(now);
        now = done + gap;
    }
    total as f64 / COMMITS as f64 / 1e9
}

/// A flash drive: each request takes one of the drive's channels for its
/// access latency, then crosses the drive's one transfer path; a read
/// that continues the last one was prefetched (no access latency); a
/// flush waits for everything accepted and then the drive's own flush.
#[derive(Debug)]
pub struct FlashDrive {
    p: Flash,
    channels: Vec<f64>,
    bus_free: f64,
    last_read_end: Option<u64>,
}

impl FlashDrive {
    /// An idle drive.
    pub fn new(p: &Flash) -> Self {
        FlashDrive {
            p: p.clone(),
            channels: vec![0.0; p.channels.max(1) as usize],
            bus_free: 0.0,
            last_read_end: None,
        }
    }
}

impl DeviceTiming for FlashDrive {
    fn submit(&mut self, op: Op, offset: u64, len: u64, now: Nanos) -> Nanos {
        let now_f = now as f64;
        if op == Op::Flush {
            let busy = self.channels.iter().copied().fold(self.bus_free, f64::max);
            return ns(now_f.max(busy) + self.p.flush_us * US).max(now);
        }
        let (latency, rate) = match op {
            Op::Read => {
                let prefetched = self.last_read_end == Some(offset);
                self.last_read_end = Some(offset.saturating_add(len));
                let l = if prefetched {
                    0.0
                } else {
                    self.p.read_latency_us
                };
                (l, self.p.read_mb_s)
            }
            _ => (self.p.write_latency_us, self.p.write_mb_s),
        };
        let (i, free) = self
            .channels
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, 0.0));
        let accessed = now_f.max(free) + latency * US;
        let start = accessed.max(self.bus_free);
        self.bus_free = start + len as f64 / per_ns(rate);
        if let Some(c) = self.channels.get_mut(i) {
            *c = self.bus_free;
        }
        ns(self.bus_free).max(now)
    }
}

const MS: f64 = 1e6;
const US: f64 = 1e3;

/// Bytes per nanosecond of a rate in MB/s.
fn per_ns(mb_s: f64) -> f64 {
    mb_s * 1e6 / 1e9
}

fn ns(x: f64) -> Nanos {
    if x.is_finite() && x > 0.0 {
        x.round() as Nanos
    } else {
        0
    }
}

/// Recording zones: within one the track holds a constant number of bytes.
const ZONES: u64 = 16;

/// What the read-ahead buffer holds: the media goes on reading from
/// `base` at `since` while the disk is idle, up to `limit`.
#[derive(Debug, Clone, Copy)]
struct ReadAhead {
    /// First byte of the last read (the buffer keeps it while it fits).
    lo: u64,
    /// Where reading ahead started.
    base: u64,
    /// When it started.
    since: Nanos,
    /// Where it stops.
    limit: u64,
}

/// One rotating disk.
#[derive(Debug)]
pub struct Disk {
    p: Rotating,
    rev_ns: f64,
    /// When the media (head) is free.
    busy_until: Nanos,
    /// Byte offset under the head after its last transfer, and when.
    head: u64,
    head_time: Nanos,
    read_ahead: Option<ReadAhead>,
    /// Cached writes not yet on the media: (time it will be, bytes).
    destage: VecDeque<(Nanos, u64)>,
}

impl Disk {
    /// A disk at rest, head at offset 0.
    pub fn new(p: &Rotating) -> Self {
        Disk {
            p: p.clone(),
            rev_ns: 60.0 / p.rpm * 1e9,
            busy_until: 0,
            head: 0,
            head_time: 0,
            read_ahead: None,
            destage: VecDeque::new(),
        }
    }

    /// Zone of `offset` (0 outermost).
    fn zone(&self, offset: u64) -> u64 {
        (offset.min(self.p.capacity.saturating_sub(1)) as u128 * ZONES as u128
            / self.p.capacity.max(1) as u128) as u64
    }

    /// Media rate at `offset`, bytes per ns (constant within a zone).
    fn rate(&self, offset: u64) -> f64 {
        let z = self.zone(offset) as f64 / (ZONES - 1) as f64;
        per_ns(self.p.outer_mb_s - (self.p.outer_mb_s - self.p.inner_mb_s) * z)
    }

    /// Bytes on one track at `offset`.
    fn track_bytes(&self, offset: u64) -> f64 {
        self.rate(offset) * self.rev_ns
    }

    /// Angular position (0..1) of `offset` on its track.
    fn angle(&self, offset: u64) -> f64 {
        (offset as f64 / self.track_bytes(offset)).fract()
    }

    fn seek_ns(&self, from: u64, to: u64) -> f64 {
        let d = from.abs_diff(to) as f64;
        if d < self.track_bytes(to) {
            return 0.0;
        }
        let frac = (d / self.p.capacity as f64).min(1.0);
        (self.p.track_to_track_ms
            + (self.p.full_stroke_ms - self.p.track_to_track_ms) * frac.sqrt())
            * MS
    }

    /// Move the head to `offset` starting at `start` and transfer `len`
    /// bytes; returns when the transfer ends.
    fn media(&mut self, start: Nanos, offset: u64, len: u64) -> Nanos {
        let continuing = offset == self.head && start == self.head_time;
        let mut t = start as f64;
        if !continuing {
            t += self.seek_ns(self.head, offset);
            // The platter's angle under the head at time t is t / rev.
            let now_angle = (t / self.rev_ns).fract();
            let mut wait = (self.angle(offset) - now_angle).rem_euclid(1.0) * self.rev_ns;
            // Rounding on a transfer that really does continue.
            if offset == self.head && wait > self.rev_ns - 1000.0 {
                wait = 0.0;
            }
            t += wait;
        }
        // The host side caps the transfer where it is the slower (a USB
        // bridge); otherwise the zone's rate.
        t += len as f64 / self.rate(offset).min(per_ns(self.p.interface_mb_s));
        let done = ns(t).max(start);
        self.head = offset + len;
        self.head_time = done;
        done
    }

    /// Where read-ahead has got to at `t`.
    fn read_ahead_end(&self, ra: &ReadAhead, t: Nanos) -> u64 {
        let progressed = t.saturating_sub(ra.since) as f64 * self.rate(ra.base);
        ra.base.saturating_add(progressed as u64).min(ra.limit)
    }

    fn overhead(&self) -> Nanos {
        ns(self.p.command_overhead_us * US)
    }

    fn interface(&self, len: u64) -> Nanos {
        ns(len as f64 / per_ns(self.p.interface_mb_s))
    }

    fn read(&mut self, offset: u64, len: u64, now: Nanos) -> Nanos {
        let start = now.max(self.busy_until);
        let end = offset.saturating_add(len);
        if let Some(ra) = self.read_ahead {
            let hi = self.read_ahead_end(&ra, start);
            let lo = ra.lo.max(hi.saturating_sub(self.p.read_cache));
            if offset >= lo && end <= hi {
                // In the buffer: only the interface moves it. Taking data
                // out makes room: a read-ahead still going goes on; one that
                // stopped with the buffer full starts again when its next
                // sector comes round under the head.
                let limit = ra.limit.max(end.saturating_add(self.p.read_cache));
                self.read_ahead = Some(if hi < ra.limit {
                    ReadAhead { limit, ..ra }
                } else {
                    let now_angle = (start as f64 / self.rev_ns).fract();
                    let wait = (self.angle(hi) - now_angle).rem_euclid(1.0) * self.rev_ns;
                    ReadAhead {
                        lo: ra.lo,
                        base: hi,
                        since: start + ns(wait),
                        limit,
                    }
                });
                return start + self.overhead() + self.interface(len);
            }
            if hi < ra.limit && offset >= lo && offset <= ra.limit {
                // Just ahead of a read-ahead still going: the media streams
                // on to it.
                let reached =
                    ra.since as f64 + end.saturating_sub(ra.base) as f64 / self.rate(ra.base);
                let done = ns(reached).max(start + self.overhead() + self.interface(len));
                self.read_ahead = Some(ReadAhead {
                    limit: ra.limit.max(end.saturating_add(self.p.read_cache)),
                    ..ra
                });
                // The head is where the stream is; a later miss seeks from there.
                self.head = end;
                self.head_time = done;
                return done;
            }
            // A miss: reading ahead stops where it got to.
            self.head = hi.max(self.head);
            self.head_time = start;
        }
        let done = self.media(start + self.overhead(), offset, len);
        self.busy_until = done;
        self.read_ahead = (self.p.read_cache > 0).then_some(ReadAhead {
            lo: offset,
            base: end,
            since: done,
            limit: end.saturating_add(self.p.read_cache),
        });
        done
    }

    fn write(&mut self, offset: u64, len: u64, now: Nanos) -> Nanos {
        // The head leaves the read-ahead stream.
        if let Some(ra) = self.read_ahead.take() {
            let start = now.max(self.busy_until);
            self.head = self.read_ahead_end(&ra, start).max(self.head);
            self.head_time = start;
        }
        if self.p.write_cache == 0 {
            let done = self.media(now.max(self.busy_until) + self.overhead(), offset, len);
            self.busy_until = done;
            return done;
        }
        while self.destage.front().is_some_and(|&(t, _)| t <= now) {
            self.destage.pop_front();
        }
        let dirty: u64 = self.destage.iter().map(|&(_, n)| n).sum();
        // The cache takes it now; the media writes it when it is free.
        let on_media = self.media(now.max(self.busy_until), offset, len);
        self.busy_until = on_media;
        let accepted = now + self.overhead() + self.interface(len);
        let done = if dirty + len <= self.p.write_cache {
            accepted
        } else {
            // Full: wait until enough has reached the media.
            let mut freed = 0u64;
            let mut when = accepted;
            for &(t, n) in &self.destage {
                freed += n;
                when = t;
                if dirty - freed + len <= self.p.write_cache {
                    break;
                }
            }
            when.max(accepted)
        };
        self.destage.push_back((on_media, len));
        done
    }

    fn flush(&mut self, now: Nanos) -> Nanos {
        let done = now.max(self.busy_until) + self.overhead();
        self.destage.clear();
        done
    }
}

impl DeviceTiming for Disk {
    fn submit(&mut self, op: Op, offset: u64, len: u64, now: Nanos) -> Nanos {
        match op {
            Op::Read => self.read(offset, len, now),
            Op::Write => self.write(offset, len, now),
            Op::Flush => self.flush(now),
        }
    }
}

/// RAID-5, left-symmetric: in stripe `s` the parity is on disk
/// `n - 1 - s % n` and the data chunks follow it round the array.
#[derive(Debug)]
pub struct Raid5Array {
    members: Vec<Disk>,
    chunk: u64,
    /// The controller's write-back cache, bytes (0: none).
    cache: u64,
    /// The runs of writes the controller is gathering, not yet sent to
    /// the members, `[start, end)`, oldest first: each less than a
    /// stripe once its whole stripes have gone.
    gathering: std::collections::VecDeque<(u64, u64)>,
    /// Writes sent to the members from the cache: when each is on them,
    /// and its bytes (what still holds cache space).
    destage: std::collections::VecDeque<(Nanos, u64)>,
}

/// What taking a write into the controller's cache costs.
const CONTROLLER_US: f64 = 20.0;
/// Runs the controller gathers at once (streams written side by side);
/// past it the oldest is sent out as it is.
const GATHERED_RUNS: usize = 64;

/// One chunk-sized piece of a request on one member.
#[derive(Debug, Clone, Copy)]
struct Piece {
    stripe: u64,
    disk: usize,
    parity: usize,
    /// Offset on the member.
    offset: u64,
    len: u64,
}

impl Raid5Array {
    /// An array of idle members.
    pub fn new(r: &Raid5) -> Self {
        Raid5Array {
            members: (0..r.disks).map(|_| Disk::new(&r.member)).collect(),
            chunk: r.chunk,
            cache: r.controller_cache,
            gathering: std::collections::VecDeque::new(),
            destage: std::collections::VecDeque::new(),
        }
    }

    /// Send `[offset, offset + len)` to the members, whole stripes at once
    /// and the rest read-modify-write, from `now`; when it is on them.
    fn write_members(&mut self, offset: u64, len: u64, now: Nanos) -> Nanos {
        let pieces = self.pieces(offset, len);
        let data = self.chunk * (self.n() - 1);
        let mut done = now;
        let mut i = 0;
        while i < pieces.len() {
            let stripe = pieces[i].stripe;
            let j = pieces[i..]
                .iter()
                .position(|p| p.stripe != stripe)
                .map_or(pieces.len(), |k| i + k);
            let group = &pieces[i..j];
            let covered: u64 = group.iter().map(|p| p.len).sum();
            let parity = group[0].parity;
            if covered == data {
                // Full stripe: data and parity written at once.
                for p in group {
                    done = done.max(self.members[p.disk].write(p.offset, p.len, now));
                }
                done = done.max(self.members[parity].write(stripe * self.chunk, self.chunk, now));
            } else {
                // Read-modify-write: old data and old parity first.
                let lo = group.iter().map(|p| p.offset).min().unwrap_or(0);
                let hi = group.iter().map(|p| p.offset + p.len).max().unwrap_or(0);
                let mut read = now;
                for p in group {
                    read = read.max(self.members[p.disk].read(p.offset, p.len, now));
                }
                read = read.max(self.members[parity].read(lo, hi - lo, now));
                for p in group {
                    done = done.max(self.members[p.disk].write(p.offset, p.len, read));
                }
                done = done.max(self.members[parity].write(lo, hi - lo, read));
            }
            i = j;
        }
        done
    }

    fn n(&self) -> u64 {
        self.members.len() as u64
    }

    fn pieces(&self, offset: u64, len: u64) -> Vec<Piece> {
        let n = self.n();
        let data = self.chunk * (n - 1);
        let mut out = Vec::new();
        let mut pos = offset;
        let end = offset.saturating_add(len);
        while pos < end {
            let stripe = pos / data;
            let within = pos % data;
            let k = within / self.chunk;
            let in_chunk = within % self.chunk;
            let take = (self.chunk - in_chunk).min(end - pos);
            let parity = (n - 1 - stripe % n) as usize;
            let disk = ((parity as u64 + 1 + k) % n) as usize;
            out.push(Piece {
                stripe,
                disk,
                parity,
                offset: stripe * self.chunk + in_chunk,
                len: take,
            });
            pos += take;
        }
        out
    }

    /// Send a gathered run to the members.
    fn write_out(&mut self, (start, end): (u64, u64), now: Nanos) {
        let on = self.write_members(start, end - start, now);
        self.destage.push_back((on, end - start));
    }

    /// A write into the controller's cache: it extends the run it
    /// continues (else starts one), the run's whole stripes go to the
    /// members as they fill, and the write completes when the cache has
    /// room for it.
    fn cached_write(&mut self, offset: u64, len: u64, now: Nanos) -> Nanos {
        while self.destage.front().is_some_and(|&(t, _)| t <= now) {
            self.destage.pop_front();
        }
        let (start, end) = match self.gathering.iter().position(|&(_, e)| e == offset) {
            Some(i) => {
                let (s, _) = self.gathering.remove(i).unwrap_or((offset, offset));
                (s, offset + len)
            }
            None => (offset, offset + len),
        };
        let data = self.chunk * (self.n() - 1);
        let whole_end = end / data * data;
        if whole_end > start {
            // Up to the last whole stripe goes now (a partial first stripe
            // read-modify-write, the rest whole).
            self.write_out((start, whole_end), now);
        }
        if end > whole_end.max(start) {
            self.gathering.push_back((whole_end.max(start), end));
        }
        while self.gathering.len() > GATHERED_RUNS {
            if let Some(run) = self.gathering.pop_front() {
                self.write_out(run, now);
            }
        }
        let accepted = now + ns(CONTROLLER_US * US);
        let gathered: u64 = self.gathering.iter().map(|&(s, e)| e - s).sum();
        let held: u64 = self.destage.iter().map(|&(_, n)| n).sum::<u64>() + gathered;
        if held <= self.cache {
            return accepted;
        }
        // Full: wait until enough has reached the members.
        let mut left = held;
        let mut when = accepted;
        for &(t, n) in &self.destage {
            left -= n;
            when = t;
            if left <= self.cache {
                break;
            }
        }
        when.max(accepted)
    }
}

impl DeviceTiming for Raid5Array {
    fn submit(&mut self, op: Op, offset: u64, len: u64, now: Nanos) -> Nanos {
        match op {
            Op::Flush => {
                // The controller writes out what it holds, then the
                // members their own caches.
                while let Some(run) = self.gathering.pop_front() {
                    self.write_out(run, now);
                }
                let on = self.destage.iter().map(|&(t, _)| t).max().unwrap_or(now);
                self.destage.clear();
                self.members
                    .iter_mut()
                    .map(|d| d.flush(now))
                    .max()
                    .unwrap_or(now)
                    .max(on)
            }
            Op::Read
                if self
                    .gathering
                    .iter()
                    .any(|&(s, e)| offset >= s && offset + len <= e) =>
            {
                // Still in the controller's cache.
                now + ns(CONTROLLER_US * US)
            }
            Op::Read => self
                .pieces(offset, len)
                .into_iter()
                .map(|p| self.members[p.disk].read(p.offset, p.len, now))
                .max()
                .unwrap_or(now),
            Op::Write if self.cache > 0 => self.cached_write(offset, len, now),
            Op::Write => self.write_members(offset, len, now),
        }
    }
}

/// Storage behind a network link (a file share): each request pays a
/// round trip; data crosses one shared link (reads on the way back, writes
/// on the way there), split at the protocol's largest request; the server's
/// storage (a disk or array model, or none: its cache absorbs everything)
/// serves the request in between; a flush pays the server's commit.
pub struct NetworkLink {
    p: Network,
    link_free: f64,
    backend: Option<Box<dyn DeviceTiming>>,
    /// Where the last read ended: a read that continues it was read ahead
    /// (as an NFS or SMB client keeps several reads in flight), so its
    /// data follows the last without a round trip.
    last_read_end: Option<u64>,
}

impl std::fmt::Debug for NetworkLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkLink")
            .field("p", &self.p)
            .finish_non_exhaustive()
    }
}

impl NetworkLink {
    /// An idle link (and server).
    pub fn new(p: &Network) -> Self {
        NetworkLink {
            p: p.clone(),
            link_free: 0.0,
            backend: p.backend.as_deref().map(build),
            last_read_end: None,
        }
    }

    /// Move `len` bytes over the link, starting no earlier than `from`;
    /// returns when the last byte is across.
    fn cross(&mut self, len: u64, from: f64) -> f64 {
        let rate = per_ns(self.p.link_mb_s);
        let mut left = len;
        let mut end = from;
        while left > 0 {
            let piece = left.min(self.p.max_request);
            let start = from.max(self.link_free);
            self.link_free = start + piece as f64 / rate;
            end = self.link_free;
            left -= piece;
        }
        end
    }

    fn server(&mut self, op: Op, offset: u64, len: u64, at: f64) -> f64 {
        match &mut self.backend {
            Some(b) => b.submit(op, offset, len, ns(at)) as f64,
            None => at,
        }
    }
}

impl DeviceTiming for NetworkLink {
    fn submit(&mut self, op: Op, offset: u64, len: u64, now: Nanos) -> Nanos {
        let half = self.p.rtt_us * US / 2.0;
        let now_f = now as f64;
        let done = match op {
            Op::Read => {
                let ahead = self.last_read_end == Some(offset);
                self.last_read_end = Some(offset.saturating_add(len));
                if ahead {
                    // Asked for while the last read's data was crossing.
                    let served = self.server(op, offset, len, self.link_free.min(now_f));
                    self.cross(len, served.max(self.link_free))
                } else {
                    let served = self.server(op, offset, len, now_f + half);
                    self.cross(len, served) + half
                }
            }
            Op::Write => {
                let arrived = self.cross(len, now_f) + half;
                self.server(op, offset, len, arrived) + half
            }
            Op::Flush => {
                // The commit waits for writes still crossing the link.
                let at = (now_f + half).max(self.link_free);
                self.server(op, offset, len, at) + self.p.commit_us * US + half
            }
        };
        ns(done).max(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdd() -> Rotating {
        Rotating {
            rpm: 7200.0,
            outer_mb_s: 160.0,
            inner_mb_s: 80.0,
            capacity: 1_000_000_000_000,
            track_to_track_ms: 1.0,
            full_stroke_ms: 16.0,
            command_overhead_us: 50.0,
            interface_mb_s: 600.0,
            read_cache: 1 << 20,
            write_cache: 8 << 20,
        }
    }

    /// Queue depth 1: each request arrives when the previous completes
    /// (plus `think` ns); returns MB/s and ops/s.
    fn qd1(t: &mut dyn DeviceTiming, reqs: &[(Op, u64, u64)], think: Nanos) -> (f64, f64) {
        let mut now = 0;
        let mut bytes = 0;
        for &(op, off, len) in reqs {
            now = t.submit(op, off, len, now) + think;
            bytes += len;
        }
        let secs = now as f64 / 1e9;
        (bytes as f64 / 1e6 / secs, reqs.len() as f64 / secs)
    }

    fn lcg(state: &mut u64) -> u64 {
        *state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *state >> 11
    }

    #[test]
    fn a_disk_streams_at_its_media_rate_whatever_the_request_size() {
        for size in [64u64 << 10, 128 << 10, 1 << 20] {
            let mut d = Disk::new(&hdd());
            let reqs: Vec<_> = (0..(256 << 20) / size)
                .map(|i| (Op::Read, i * size, size))
                .collect();
            // 20 µs of host time between requests: the read-ahead covers it.
            let (mb_s, _) = qd1(&mut d, &reqs, 20_000);
            assert!((140.0..=165.0).contains(&mb_s), "{size}: {mb_s} MB/s");
        }
    }

    #[test]
    fn a_commit_chain_waits_about_a_revolution_on_a_disk_and_more_on_raid5() {
        // 7200 rpm: 8.33 ms a revolution. Each commit's write lands just
        // after the last, whose end has just passed the head.
        let disk = commit_chain_s(&Timing::Rotating(hdd()), 0.0002);
        assert!((0.0075..=0.0090).contains(&disk), "{disk} s");
        // More work between commits: less of the revolution to wait.
        let slower = commit_chain_s(&Timing::Rotating(hdd()), 0.004);
        assert!(slower < disk - 0.003, "{slower} s against {disk} s");
        // The array's flush sends what its controller holds to the
        // members: a partial stripe is read-modify-write (old data and
        // parity read, then both written), more than a revolution.
        let array = commit_chain_s(
            &Timing::Raid5(Raid5 {
                disks: 4,
                chunk: 64 << 10,
                controller_cache: 512 << 20,
                member: hdd(),
            }),
            0.0002,
        );
        assert!(array > disk * 1.5, "{array} s against {disk} s");
    }

    #[test]
    fn random_reads_pay_seek_and_rotation() {
        let mut d = Disk::new(&hdd());
        let mut s = 7;
        let span = 4u64 << 30;
        let reqs: Vec<_> = (0..2000)
            .map(|_| (Op::Read, (lcg(&mut s) % (span / 4096)) * 4096, 4096))
            .collect();
        let (_, iops) = qd1(&mut d, &reqs, 10_000);
        // Short seeks within 4 GiB (~1.5 ms) and half a revolution (4.2 ms).
        assert!((150.0..=200.0).contains(&iops), "{iops} IOPS");
        // The whole disk: long seeks.
        let mut d = Disk::new(&hdd());
        let reqs: Vec<_> = (0..2000)
            .map(|_| {
                (
                    Op::Read,
                    (lcg(&mut s) % (1_000_000_000_000 / 4096)) * 4096,
                    4096,
                )
            })
            .collect();
        let (_, iops) = qd1(&mut d, &reqs, 10_000);
        assert!((60.0..=110.0).contains(&iops), "{iops} IOPS full stroke");
    }

    #[test]
    fn write_cache_absorbs_bursts_and_flush_waits_for_the_media() {
        let mut d = Disk::new(&hdd());
        let mut s = 3;
        // 100 random 4 KiB writes fit in the cache: accepted at interface speed.
        let mut now = 0;
        for _ in 0..100 {
            now = d.submit(Op::Write, (lcg(&mut s) % 1_000_000) * 4096, 4096, now);
        }
        assert!(now < 20_000_000, "writes took {now} ns");
        // The flush waits for 100 seeks and rotations.
        let flushed = d.submit(Op::Flush, 0, 0, now);
        assert!(
            flushed - now > 300_000_000,
            "flush after {} ns",
            flushed - now
        );
        // Write-through: each write waits for the media.
        let mut p = hdd();
        p.write_cache = 0;
        let mut d = Disk::new(&p);
        let mut now = 0;
        for _ in 0..100 {
            now = d.submit(Op::Write, (lcg(&mut s) % 1_000_000) * 4096, 4096, now);
        }
        assert!(now > 300_000_000, "write-through took {now} ns");
    }

    #[test]
    fn raid5_reads_stripe_across_members_and_small_writes_cost_more() {
        let r = Raid5 {
            disks: 4,
            chunk: 64 << 10,
            member: hdd(),
            controller_cache: 0,
        };
        // Sequential reads at queue depth 1, 128 KiB at a time: the members'
        // read-ahead keeps every spindle streaming.
        for size in [128u64 << 10, 1 << 20] {
            let mut a = Raid5Array::new(&r);
            let reqs: Vec<_> = (0..(256 << 20) / size)
                .map(|i| (Op::Read, i * size, size))
                .collect();
            let (mb_s, _) = qd1(&mut a, &reqs, 20_000);
            assert!(mb_s > 2.8 * 150.0, "{size}: {mb_s} MB/s");
        }
        // Every member is used, parity rotates.
        let a = Raid5Array::new(&r);
        let disks: std::collections::BTreeSet<usize> = a
            .pieces(0, 12 * (64 << 10))
            .iter()
            .map(|p| p.disk)
            .collect();
        assert_eq!(disks.len(), 4);
        let parities: std::collections::BTreeSet<usize> = a
            .pieces(0, 12 * (64 << 10))
            .iter()
            .map(|p| p.parity)
            .collect();
        assert_eq!(parities.len(), 4);
        // A lone small write reads old data and parity first.
        let mut a = Raid5Array::new(&r);
        let w = a.submit(Op::Write, 10 << 30, 4096, 0);
        let mut d = Disk::new(&hdd());
        let single = d.submit(Op::Write, 10 << 30, 4096, 0);
        assert!(w > single + 1_000_000, "raid {w} ns, disk {single} ns");
    }

    #[test]
    fn a_controller_cache_gathers_small_sequential_writes_into_whole_stripes() {
        let plain = Raid5 {
            disks: 4,
            chunk: 64 << 10,
            member: hdd(),
            controller_cache: 0,
        };
        let cached = Raid5 {
            controller_cache: 512 << 20,
            ..plain.clone()
        };
        // 64 MiB in 64 KiB writes, one after another, then a flush.
        let run = |r: &Raid5| {
            let mut a = Raid5Array::new(r);
            let mut t = 0;
            let mut first = 0;
            for i in 0..1024u64 {
                t = a.submit(Op::Write, i * (64 << 10), 64 << 10, t);
                if i == 0 {
                    first = t;
                }
            }
            (first, a.submit(Op::Flush, 0, 0, t))
        };
        let (plain_first, plain_done) = run(&plain);
        let (cached_first, cached_done) = run(&cached);
        // Taken into the cache at once, against a read-modify-write.
        assert!(cached_first < 100_000, "{cached_first} ns");
        assert!(plain_first > 1_000_000, "{plain_first} ns");
        // Written out as whole stripes: at the three data disks' rate, far
        // faster than read-modify-write of every piece.
        let mb_s = 64.0 * 1.048576 / (cached_done as f64 / 1e9);
        assert!(mb_s > 2.5 * 150.0, "{mb_s} MB/s");
        assert!(
            cached_done * 2 < plain_done,
            "{cached_done} against {plain_done}"
        );
        // What is still gathered reads from the cache.
        let mut a = Raid5Array::new(&cached);
        a.submit(Op::Write, 1 << 30, 4096, 0);
        assert!(a.submit(Op::Read, 1 << 30, 4096, 1000) < 100_000);
    }

    #[test]
    fn a_flash_drive_pays_latency_at_depth_one_and_overlaps_at_depth() {
        let f = Flash {
            read_latency_us: 90.0,
            write_latency_us: 20.0,
            flush_us: 500.0,
            read_mb_s: 550.0,
            write_mb_s: 520.0,
            channels: 8,
        };
        let mut d = FlashDrive::new(&f);
        let mut s = 5;
        let reqs: Vec<_> = (0..2000)
            .map(|_| (Op::Read, (lcg(&mut s) % 1_000_000) * 4096, 4096))
            .collect();
        let (_, iops) = qd1(&mut d, &reqs, 0);
        assert!((9_500.0..=10_500.0).contains(&iops), "{iops}");
        // Sequential 128 KiB reads stream near the transfer rate.
        let mut d = FlashDrive::new(&f);
        let reqs: Vec<_> = (0..1000)
            .map(|i| (Op::Read, i * (128 << 10), 128 << 10))
            .collect();
        let (mb_s, _) = qd1(&mut d, &reqs, 0);
        assert!((500.0..=550.0).contains(&mb_s), "{mb_s}");
        // Sixteen random reads at once: the channels overlap them.
        let mut d = FlashDrive::new(&f);
        let done = (0..16)
            .map(|i| d.submit(Op::Read, i * 1_000_000, 4096, 0))
            .max()
            .unwrap();
        assert!(done < 3 * 90_000, "{done}");
        // A flush waits for accepted writes, then the drive's flush.
        let mut d = FlashDrive::new(&f);
        let w = d.submit(Op::Write, 0, 1 << 20, 0);
        assert!(d.submit(Op::Flush, 0, 0, 0) >= w + 500_000);
    }

    #[test]
    fn a_network_link_charges_round_trips_and_bandwidth() {
        let n = Network {
            link_mb_s: 110.0,
            rtt_us: 200.0,
            max_request: 1 << 20,
            commit_us: 500.0,
            backend: None,
        };
        let mut l = NetworkLink::new(&n);
        let (_, iops) = qd1(&mut l, &vec![(Op::Read, 0, 4096); 1000], 0);
        assert!((3500.0..=4500.0).contains(&iops), "{iops}");
        let mut l = NetworkLink::new(&n);
        let (mb_s, _) = qd1(&mut l, &vec![(Op::Read, 0, 4 << 20); 50], 0);
        assert!((100.0..=110.0).contains(&mb_s), "{mb_s}");
        // A sequential stream of 128 KiB reads is read ahead: link speed.
        let mut l = NetworkLink::new(&n);
        let reqs: Vec<_> = (0..400)
            .map(|i| (Op::Read, i * (128 << 10), 128 << 10))
            .collect();
        let (mb_s, _) = qd1(&mut l, &reqs, 20_000);
        assert!((100.0..=110.0).contains(&mb_s), "{mb_s}");
        let mut l = NetworkLink::new(&n);
        let f = l.submit(Op::Flush, 0, 0, 0);
        assert_eq!(f, 700_000);
        // With a disk behind it, random reads pay the disk's seeks too.
        let with_disk = Network {
            backend: Some(Box::new(Timing::Rotating(hdd()))),
            ..n
        };
        let mut l = NetworkLink::new(&with_disk);
        let mut s = 11;
        let reqs: Vec<_> = (0..500)
            .map(|_| (Op::Read, (lcg(&mut s) % (1 << 20)) * 4096, 4096))
            .collect();
        let (_, iops) = qd1(&mut l, &reqs, 0);
        assert!((140.0..=200.0).contains(&iops), "{iops}");
    }
}
