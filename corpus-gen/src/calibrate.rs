//! Choosing how full a volume is so that its E01 compresses by a wanted
//! ratio.
//!
//! An acquired disk's E01 size is set mostly by how much of it is used and
//! what the used space holds: free space that Windows left zeroed costs
//! almost nothing, media and archives cost their full size, text and
//! programs about half. The FTK study's Windows 7 workstation was 240 GB raw
//! and about 60 GB as E01 (4:1), which only a mostly empty disk gives with
//! real content mixes.
//!
//! The prediction walks planned groups (their extents say exactly which
//! clusters hold which content, zeros or random bytes) and weighs each byte
//! by [`Kind::deflate_share`](crate::content::Kind::deflate_share). Planning
//! is cheap next to generating, so the share of used space (`fill`) is found
//! by bisection on sampled groups before a byte is written. The result is
//! deterministic: it depends only on the geometry, seed and profile.

use crate::CorpusError;
use crate::content::Pool;
use crate::geometry::Geometry;
use crate::plan::{Fill, Volume};
use crate::profile::Profile;

/// Stored share of an all-zero 32 KiB chunk (a few dozen bytes of deflate
/// output plus the chunk's checksum).
const ZERO_SHARE: f64 = 0.003;
/// Stored share of directory clusters and `$MFT` fragments (mostly blank
/// records and short names).
const METADATA_SHARE: f64 = 0.15;
/// Groups sampled per prediction: all of a small volume's, else this many
/// spread over the volume.
const SAMPLE_GROUPS: u32 = 8;

/// A volume planned for estimates with one knob changed.
struct Trial<'a> {
    geo: &'a Geometry,
    seed: u64,
    profile: &'a Profile,
    pool: &'a Pool,
}

impl Trial<'_> {
    fn predict(
        &self,
        knob: impl FnOnce(&mut Profile),
        what: fn(&Volume) -> f64,
    ) -> Result<f64, CorpusError> {
        let mut p = self.profile.clone();
        knob(&mut p);
        let mut vol = Volume::new(
            self.geo.clone(),
            self.seed,
            p,
            self.pool,
            crate::layouts::for_geometry(self.geo),
        )?;
        vol.estimate_only = true;
        Ok(what(&vol))
    }
}

/// The groups a prediction plans: all of a small volume's, else
/// [`SAMPLE_GROUPS`] spread evenly over it.
fn sample_groups(vol: &Volume) -> Vec<u32> {
    if vol.groups <= SAMPLE_GROUPS {
        (0..vol.groups).collect()
    } else {
        (0..SAMPLE_GROUPS)
            .map(|i| (i as u64 * (vol.groups as u64 - 1) / (SAMPLE_GROUPS as u64 - 1)) as u32)
            .collect()
    }
}

/// Predicted live files per GiB of allocated space for `vol`: as `fsstat`
/// counts used clusters, the clusters before the first group (system
/// files, skeleton folders) plus, scaled from sampled groups, the
/// clusters of live files, live folders and `$MFT` fragments.
pub fn predicted_files_per_gib_used(vol: &Volume) -> f64 {
    let cluster = vol.geo.cluster_bytes();
    let picks = sample_groups(vol);
    let per_sample = vol.groups as f64 / picks.len().max(1) as f64;
    let (mut files, mut used) = (0u64, 0u64);
    for k in picks {
        let plan = vol.plan_group(k);
        for it in plan.items.iter().filter(|it| !it.deleted && !it.residue) {
            files += 1;
            used += it.clusters(cluster) as u64;
        }
        for d in plan.dirs.iter().filter(|d| !d.deleted) {
            used += d.runs.iter().map(|r| r.len as u64).sum::<u64>();
        }
        used += plan.mft as u64;
    }
    let used = vol.groups_start as f64 + used as f64 * per_sample;
    let gib = used * cluster as f64 / (1u64 << 30) as f64;
    if gib == 0.0 {
        0.0
    } else {
        files as f64 * per_sample / gib
    }
}

/// The `size_scale` that gives about `target` live files per GiB used.
/// Fails, naming the reachable range, when no scale in
/// [`crate::profile::SIZE_SCALE_RANGE`] can (the kinds' pool members bound sizes from
/// below, the volume's groups from above).
pub fn size_scale_for_files(
    geo: &Geometry,
    seed: u64,
    profile: &Profile,
    pool: &Pool,
    target: f64,
) -> Result<f64, CorpusError> {
    if !(target.is_finite() && target > 0.0) {
        return Err(CorpusError::Invalid(format!(
            "files per GiB used must be a positive number, got {target}"
        )));
    }
    let trial = Trial {
        geo,
        seed,
        profile,
        pool,
    };
    let at = |scale: f64| trial.predict(|p| p.size_scale = scale, predicted_files_per_gib_used);
    // Larger files, fewer of them per GiB: the count falls as the scale
    // grows. Bisect on the scale's logarithm.
    let (mut lo, mut hi) = (
        crate::profile::SIZE_SCALE_RANGE.0.ln(),
        crate::profile::SIZE_SCALE_RANGE.1.ln(),
    );
    let (mut f_lo, mut f_hi) = (at(lo.exp())?, at(hi.exp())?);
    if target > f_lo || target < f_hi {
        return Err(CorpusError::Invalid(format!(
            "{target} files per GiB used cannot be reached on this volume: \
             between {f_hi:.0} (size scale {}) and {f_lo:.0} (size scale {}) can",
            crate::profile::SIZE_SCALE_RANGE.1,
            crate::profile::SIZE_SCALE_RANGE.0
        )));
    }
    while hi - lo > 0.01 {
        let mid = (lo + hi) / 2.0;
        let f = at(mid.exp())?;
        if f > target {
            (lo, f_lo) = (mid, f);
        } else {
            (hi, f_hi) = (mid, f);
        }
    }
    let pick = if f_lo - target < target - f_hi {
        lo
    } else {
        hi
    };
    Ok(pick.exp())
}

/// Predicted E01 stored size over raw size for `vol` (sampled groups).
pub fn predicted_share(vol: &Volume) -> f64 {
    let cluster = vol.geo.cluster_bytes() as f64;
    let (mut stored, mut raw) = (0.0f64, 0.0f64);
    for k in sample_groups(vol) {
        let plan = vol.plan_group(k);
        let mut covered = 0u64;
        for e in &plan.extents {
            let share = match e.fill {
                Fill::Item(i, _) => plan
                    .items
                    .get(i)
                    .map_or(1.0, |it| it.spec.kind.deflate_share()),
                Fill::Dir(..) => METADATA_SHARE,
                Fill::Random(_) => 1.0,
                Fill::Zero => ZERO_SHARE,
            };
            stored += share * e.len as f64 * cluster;
            covered += e.len as u64;
        }
        let mft = plan.mft as u64;
        stored += METADATA_SHARE * mft as f64 * cluster;
        let zeros = (plan.n as u64).saturating_sub(covered + mft);
        stored += ZERO_SHARE * zeros as f64 * cluster;
        raw += plan.n as f64 * cluster;
    }
    if raw == 0.0 { 1.0 } else { stored / raw }
}

/// The `fill` that makes the volume's E01 about `target` times smaller than
/// the raw image. Fails, naming the reachable range, when the profile's
/// other knobs rule the target out (random free space caps the ratio; a
/// full disk of media floors it).
pub fn fill_for_ratio(
    geo: &Geometry,
    seed: u64,
    profile: &Profile,
    pool: &Pool,
    target: f64,
) -> Result<f64, CorpusError> {
    if !(target.is_finite() && target >= 1.0) {
        return Err(CorpusError::Invalid(format!(
            "the target E01 ratio must be at least 1 (stored size never exceeds the raw size), got {target}"
        )));
    }
    let want = 1.0 / target;
    let trial = Trial {
        geo,
        seed,
        profile,
        pool,
    };
    let share_at = |fill: f64| trial.predict(|p| p.fill = fill, predicted_share);
    // The stored share grows with fill, in steps (a file more or less) and
    // not strictly: a random free area drawn at one fill and not at the
    // next moves it both ways on a small disk. So the fills are sampled
    // first, the target bracketed between two neighbours where the share
    // crosses it, and the bracket bisected to a hundredth of a percent,
    // taking the side nearer the target.
    let (first, last) = crate::profile::FILL_RANGE;
    const SAMPLES: usize = 19;
    let mut grid = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let fill = first + (last - first) * i as f64 / (SAMPLES - 1) as f64;
        grid.push((fill, share_at(fill)?));
    }
    let Some(pair) = grid.windows(2).find(|w| w[0].1 <= want && want <= w[1].1) else {
        let (min, max) = grid
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), g| (a.min(g.1), b.max(g.1)));
        return Err(CorpusError::Invalid(format!(
            "an E01 ratio of {target}:1 cannot be reached with this profile: \
             between {:.1}:1 and {:.1}:1 can (fills {first} to {last}; random \
             free space and incompressible content set the bounds)",
            1.0 / max,
            1.0 / min
        )));
    };
    let ((mut lo, mut s_lo), (mut hi, mut s_hi)) = (pair[0], pair[1]);
    while hi - lo > 1e-4 {
        let mid = (lo + hi) / 2.0;
        let s = share_at(mid)?;
        if s < want {
            (lo, s_lo) = (mid, s);
        } else {
            (hi, s_hi) = (mid, s);
        }
    }
    let fill = if want - s_lo < s_hi - want { lo } else { hi };
    Ok(fill)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(size: u64, ntfs: bool) -> Geometry {
        if ntfs {
            Geometry::plan_ntfs(size, None).expect("geometry")
        } else {
            Geometry::plan(size, None, None).expect("geometry")
        }
    }

    #[test]
    fn fuller_volumes_compress_less_and_the_fill_found_hits_the_target() {
        let pool = Pool::build(5).expect("pool");
        let profile = Profile::by_name("workstation").expect("profile");
        for ntfs in [false, true] {
            let g = geo(256 << 20, ntfs);
            let at = |fill: f64| {
                let mut p = profile.clone();
                p.fill = fill;
                predicted_share(
                    &Volume::new(g.clone(), 5, p, &pool, crate::layouts::for_geometry(&g))
                        .expect("volume"),
                )
            };
            assert!(at(0.2) < at(0.5) && at(0.5) < at(0.9));
            let fill = fill_for_ratio(&g, 5, &profile, &pool, 4.0).expect("fill");
            assert!(
                (crate::profile::FILL_RANGE.0..crate::profile::FILL_RANGE.1).contains(&fill),
                "{fill}"
            );
            let ratio = 1.0 / at(fill);
            // Planning is discrete: on a 256 MiB disk one large file more
            // or less moves the ratio by up to 15%, so the fill found gives
            // the nearer side of that step, within 10% of the target.
            assert!(
                (ratio / 4.0 - 1.0).abs() < 0.1,
                "ntfs {ntfs}: {ratio} at fill {fill}"
            );
        }
    }

    /// Each kind's table entry against its generator: planned items of a
    /// volume generated and stored per 32 KiB chunk by the E01 writer's
    /// encoder at its fast level.
    #[test]
    fn deflate_shares_match_the_generators() {
        use crate::content::{Kind, generate};
        let mut encoder =
            caseload_ewf_writer::ChunkEncoder::new(caseload_ewf_writer::Compression::Fast);
        let mut out = Vec::new();
        let pool = Pool::build(9).expect("pool");
        let profile = Profile::by_name("workstation").expect("profile");
        let g = geo(1 << 30, true);
        let vol = Volume::new(
            g.clone(),
            9,
            profile,
            &pool,
            crate::layouts::for_geometry(&g),
        )
        .expect("volume");
        // Per kind: raw bytes, stored bytes, files.
        let mut tally: std::collections::HashMap<Kind, (u64, u64, u32)> = Default::default();
        const PER_KIND: u64 = 12 << 20;
        for k in 0..vol.groups {
            for it in vol.plan_group(k).items {
                let t = tally.entry(it.spec.kind).or_default();
                if t.0 >= PER_KIND || it.spec.size < 4096 {
                    continue;
                }
                let bytes = generate(&it.spec, &pool).expect("content").bytes;
                for chunk in bytes.chunks(32 << 10) {
                    encoder.encode(chunk, false, &mut out);
                    t.1 += out.len().min(chunk.len()) as u64;
                }
                t.0 += bytes.len() as u64;
                t.2 += 1;
            }
        }
        let mut seen = 0;
        for (kind, (raw, stored, files)) in tally {
            // A kind with a few files measures those files, not its
            // generator (the browser's one history database).
            if raw < 1 << 20 || files < 4 {
                continue;
            }
            seen += 1;
            let share = stored as f64 / raw as f64;
            assert!(
                (share - kind.deflate_share()).abs() < 0.12,
                "{kind:?}: measured {share:.3}, table {}",
                kind.deflate_share()
            );
        }
        assert!(seen >= 8, "only {seen} kinds had a MiB of content");
    }

    #[test]
    fn unreachable_targets_name_the_range() {
        let pool = Pool::build(5).expect("pool");
        let mut profile = Profile::by_name("workstation").expect("profile");
        let g = geo(128 << 20, true);
        for bad in [0.5, f64::NAN, 1000.0] {
            let e = fill_for_ratio(&g, 5, &profile, &pool, bad).expect_err("refused");
            assert!(e.to_string().contains("E01 ratio"), "{e}");
        }
        // Wiped (random) free space caps the ratio.
        profile.random_free_share = 0.9;
        let e = fill_for_ratio(&g, 5, &profile, &pool, 4.0).expect_err("refused");
        assert!(e.to_string().contains("between"), "{e}");
    }
}
