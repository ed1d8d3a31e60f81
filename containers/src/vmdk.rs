//! VMDK: hosted sparse extents (`KDMV`, VMware's Virtual Disk Format 1.1,
//! including stream-optimized compressed grains) and text descriptors
//! naming FLAT, SPARSE and ZERO extents.

use crate::error::{ContainerError, format, unsupported};
use crate::io::Opener;
use crate::io::{Files, le16, le32, le64};
use crate::map::{Codec, Compressed, Layout, Mapping, Opened, Piece};
use std::path::{Component, Path, PathBuf};

const SECTOR: u64 = 512;
/// `gdOffset` of a stream-optimized extent whose grain directory is found
/// through the footer at the end of the file.
const GD_AT_END: u64 = u64::MAX;
const FLAG_COMPRESSED: u32 = 1 << 16;
const FLAG_MARKERS: u32 = 1 << 17;
/// Largest grain read (16 MiB; VMware and qemu write 64 KiB): an inflated
/// grain is held in memory.
const MAX_GRAIN_SECTORS: u64 = 1 << 15;
/// Largest grain table (entries); qemu refuses more than 512.
const MAX_GTES: u64 = 1 << 16;
/// Largest descriptor read, embedded or on its own.
const MAX_DESCRIPTOR: u64 = 1 << 20;
/// Most extents one descriptor may list.
const MAX_EXTENTS: usize = 1 << 16;

/// Whether `head` starts with a plausible hosted sparse extent header.
pub(crate) fn is_sparse_header(head: &[u8]) -> bool {
    if head.len() < 80 || !head.starts_with(b"KDMV") {
        return false;
    }
    let version = le32(head, 4);
    let grain = le64(head, 20);
    let gtes = u64::from(le32(head, 44));
    (1..=3).contains(&version)
        && grain.is_power_of_two()
        && grain <= MAX_GRAIN_SECTORS
        && (1..=MAX_GTES).contains(&gtes)
}

/// Whether `head` starts like a VMDK text descriptor.
pub(crate) fn is_descriptor(head: &[u8]) -> bool {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    head.starts_with(b"# Disk DescriptorFile")
}

/// One hosted sparse extent file.
#[derive(Debug, Clone, Copy)]
struct Sparse {
    file: usize,
    capacity: u64,
    grain: u64,
    gtes: u64,
    gd: u64,
    compressed: bool,
    markers: bool,
}

impl Sparse {
    fn open(files: &Files, file: usize) -> Result<(Sparse, u32, [u64; 2]), ContainerError> {
        let path = files.path(file);
        let mut h = [0u8; 512];
        files.read_exact(file, 0, &mut h, "sparse extent header")?;
        if !is_sparse_header(&h) {
            return Err(format(
                path,
                0,
                "not a VMDK sparse extent header (KDMV, version 1-3, grain a power of two up to 16 MiB)",
            ));
        }
        let mut flags = le32(&h, 8);
        let mut gd = le64(&h, 56);
        let descriptor = [le64(&h, 28), le64(&h, 36)];
        if gd == GD_AT_END {
            // Stream-optimized: the footer (a copy of the header with the real
            // grain directory) is the second-to-last sector.
            let at = files.len(file).checked_sub(2 * SECTOR).ok_or_else(|| {
                format(path, 0, "stream-optimized extent too short for its footer")
            })?;
            let mut f = [0u8; 512];
            files.read_exact(file, at, &mut f, "stream-optimized footer")?;
            if !is_sparse_header(&f) || le64(&f, 56) == GD_AT_END {
                return Err(format(
                    path,
                    at,
                    "stream-optimized footer missing or damaged (its grain directory is needed)",
                ));
            }
            flags = le32(&f, 8);
            gd = le64(&f, 56);
        }
        let algorithm = le16(&h, 77);
        let compressed = flags & FLAG_COMPRESSED != 0;
        if compressed && algorithm != 1 {
            return Err(unsupported(
                path,
                format!("VMDK compression algorithm {algorithm} (only deflate, 1, is known)"),
            ));
        }
        let capacity = le64(&h, 12)
            .checked_mul(SECTOR)
            .ok_or_else(|| format(path, 12, "capacity overflows"))?;
        let gd = gd
            .checked_mul(SECTOR)
            .filter(|&g| g < files.len(file))
            .ok_or_else(|| {
                format(
                    path,
                    56,
                    format!("grain directory offset {gd} sectors lies past the end of the file"),
                )
            })?;
        Ok((
            Sparse {
                file,
                capacity,
                grain: le64(&h, 20) * SECTOR,
                gtes: u64::from(le32(&h, 44)),
                gd,
                compressed,
                markers: flags & FLAG_MARKERS != 0,
            },
            le32(&h, 4),
            descriptor,
        ))
    }

    /// The run at `rel` bytes into this extent, whose first byte is media
    /// byte `base`.
    fn map(&self, files: &Files, rel: u64, base: u64) -> Result<Mapping, ContainerError> {
        let grain_start = rel - rel % self.grain;
        let unit = (
            base + grain_start,
            (base + grain_start).saturating_add(self.grain),
        );
        if rel >= self.capacity {
            return Ok(Mapping {
                len: self.grain - rel % self.grain,
                piece: Piece::Zero,
                unit,
            });
        }
        let span = self.grain * self.gtes;
        let err = |e: ContainerError| e.at_media(unit.0, unit.1);
        let gde_at = self.gd + (rel / span) * 4;
        // An unreadable grain directory entry or table loses every grain
        // the table maps.
        let table_start = rel - rel % span;
        let table_end = (table_start.saturating_add(span)).min(self.capacity);
        let table_err = |e: ContainerError| e.at_media(base + table_start, base + table_end);
        let gde = files
            .u32_le(self.file, gde_at, "grain directory entry")
            .map_err(table_err)?;
        if gde == 0 {
            return Ok(Mapping {
                len: span - rel % span,
                piece: Piece::Zero,
                unit: (
                    base + rel - rel % span,
                    (base + rel - rel % span).saturating_add(span),
                ),
            });
        }
        let gte_at = u64::from(gde) * SECTOR + ((rel % span) / self.grain) * 4;
        let gte = files
            .u32_le(self.file, gte_at, "grain table entry")
            .map_err(table_err)?;
        let within = rel - grain_start;
        let len = self.grain - within;
        // 0: never written; 1: written as zeros (VMDK 2's zeroed-grain entry).
        if gte <= 1 {
            return Ok(Mapping {
                len,
                piece: Piece::Zero,
                unit,
            });
        }
        let at = u64::from(gte) * SECTOR;
        if !self.compressed {
            return Ok(Mapping {
                len,
                piece: Piece::Data {
                    file: self.file,
                    offset: at + within,
                },
                unit,
            });
        }
        let (offset, stored) = if self.markers {
            let mut m = [0u8; 12];
            files
                .read_exact(self.file, at, &mut m, "grain marker")
                .map_err(err)?;
            let size = u64::from(le32(&m, 8));
            if size == 0 {
                return Err(ContainerError::Corrupt {
                    start: unit.0,
                    end: unit.1,
                    path: files.path(self.file).to_path_buf(),
                    offset: at,
                    what: "grain table entry points at a metadata marker, not a grain".into(),
                });
            }
            (at + 12, size)
        } else {
            (at, self.grain * 2)
        };
        Ok(Mapping {
            len,
            piece: Piece::Compressed(Compressed {
                file: self.file,
                offset,
                stored,
                codec: Codec::Zlib,
                out_len: self.grain,
                skip: within,
            }),
            unit,
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Zero,
    Flat { file: usize, offset: u64 },
    Sparse(Sparse),
}

#[derive(Debug, Clone, Copy)]
struct Extent {
    start: u64,
    len: u64,
    kind: Kind,
}

struct Vmdk {
    extents: Vec<Extent>,
}

impl Layout for Vmdk {
    fn map(&self, files: &Files, offset: u64) -> Result<Mapping, ContainerError> {
        let i = self
            .extents
            .partition_point(|e| e.start + e.len <= offset)
            .min(self.extents.len().saturating_sub(1));
        let Some(e) = self.extents.get(i).filter(|e| e.start <= offset) else {
            return Ok(Mapping {
                len: 1,
                piece: Piece::Zero,
                unit: (offset, offset + 1),
            });
        };
        let rel = offset - e.start;
        let left = e.len - rel;
        let sector = (
            offset - offset % SECTOR,
            (offset - offset % SECTOR).saturating_add(SECTOR),
        );
        let mut m = match e.kind {
            Kind::Zero => Mapping {
                len: left,
                piece: Piece::Zero,
                unit: sector,
            },
            Kind::Flat { file, offset: at } => Mapping {
                len: left,
                piece: Piece::Data {
                    file,
                    offset: at + rel,
                },
                unit: sector,
            },
            Kind::Sparse(s) => s.map(files, rel, e.start)?,
        };
        m.len = m.len.min(left);
        Ok(m)
    }
}

/// What a descriptor says.
#[derive(Debug, Default)]
struct Descriptor {
    create_type: Option<String>,
    parent_cid: Option<String>,
    parent_hint: Option<String>,
    extents: Vec<ExtentLine>,
}

#[derive(Debug)]
struct ExtentLine {
    sectors: u64,
    kind: String,
    file: Option<String>,
    offset: u64,
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
}

fn parse_descriptor(text: &str, path: &Path) -> Result<Descriptor, ContainerError> {
    let mut d = Descriptor::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim().trim_end_matches('\0');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        if matches!(first, "RW" | "RDONLY" | "NOACCESS") {
            if d.extents.len() >= MAX_EXTENTS {
                return Err(format(path, 0, "descriptor lists too many extents"));
            }
            d.extents.push(parse_extent(line).ok_or_else(|| {
                format(
                    path,
                    0,
                    format!("descriptor line {}: bad extent `{line}`", n + 1),
                )
            })?);
        } else if let Some((k, v)) = line.split_once('=') {
            let v = unquote(v).to_string();
            match k.trim() {
                "createType" => d.create_type = Some(v),
                "parentCID" => d.parent_cid = Some(v),
                "parentFileNameHint" => d.parent_hint = Some(v),
                _ => {}
            }
        }
    }
    Ok(d)
}

/// `ACCESS SECTORS TYPE ["FILE" [OFFSET]]`
fn parse_extent(line: &str) -> Option<ExtentLine> {
    let mut rest = line.split_once(char::is_whitespace)?.1.trim_start();
    let (sectors, r) = rest.split_once(char::is_whitespace)?;
    rest = r.trim_start();
    let (kind, r) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    rest = r.trim_start();
    let mut file = None;
    let mut offset = 0;
    if let Some(r) = rest.strip_prefix('"') {
        let (name, after) = r.split_once('"')?;
        file = Some(name.to_string());
        let after = after.trim();
        if !after.is_empty() {
            offset = after.split_whitespace().next()?.parse().ok()?;
        }
    } else if !rest.is_empty() {
        return None;
    }
    Some(ExtentLine {
        sectors: sectors.parse().ok()?,
        kind: kind.to_string(),
        file,
        offset,
    })
}

/// Refuses a descriptor with a parent.
fn refuse_parent(d: &Descriptor, path: &Path) -> Result<(), ContainerError> {
    if let Some(cid) = &d.parent_cid
        && !cid.eq_ignore_ascii_case("ffffffff")
    {
        return Err(unsupported(
            path,
            format!(
                "differencing disk: parent not supported (parentCID={cid}{})",
                d.parent_hint
                    .as_deref()
                    .map(|h| format!(", parent `{h}`"))
                    .unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// Where an extent named in the descriptor at `desc` lives: beside it.
/// Absolute names and names climbing out of the folder are taken by their
/// last component (as libvmdk does), so a descriptor cannot send the
/// reader elsewhere.
fn extent_path(desc: &Path, name: &str, notes: &mut Vec<String>) -> PathBuf {
    let dir = desc.parent().unwrap_or(Path::new(""));
    let p = Path::new(name);
    if p.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return dir.join(p);
    }
    let last = p.file_name().map(PathBuf::from).unwrap_or_default();
    notes.push(format!(
        "extent `{name}` is not a plain name beside the descriptor; read `{}` beside it",
        last.display()
    ));
    dir.join(last)
}

pub(crate) fn open(
    files: &mut Files,
    main: usize,
    opener: &Opener<'_>,
    notes: &mut Vec<String>,
) -> Result<Opened, ContainerError> {
    let mut head = [0u8; 512];
    let n = files.read_some(main, 0, &mut head)?;
    if is_sparse_header(&head[..n]) {
        return open_sparse(files, main, notes);
    }
    let path = files.path(main).to_path_buf();
    let len = files.len(main);
    if len > MAX_DESCRIPTOR {
        return Err(format(
            &path,
            0,
            format!("descriptor file of {len} bytes is too large (at most {MAX_DESCRIPTOR})"),
        ));
    }
    let mut text = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let got = files.read_some(main, 0, &mut text)?;
    text.truncate(got);
    let d = parse_descriptor(&String::from_utf8_lossy(&text), &path)?;
    refuse_parent(&d, &path)?;
    let variant = d.create_type.clone().unwrap_or_else(|| "custom".into());
    if matches!(
        variant.as_str(),
        "vmfsSparse"
            | "vmfsRaw"
            | "vmfsRDM"
            | "vmfsPassthroughRawDeviceMap"
            | "fullDevice"
            | "partitionedDevice"
            | "seSparse"
    ) {
        return Err(unsupported(
            &path,
            format!("VMDK createType `{variant}` is not supported"),
        ));
    }
    if d.extents.is_empty() {
        return Err(format(&path, 0, "descriptor lists no extents"));
    }
    let mut extents = Vec::with_capacity(d.extents.len().min(1024));
    let mut start = 0u64;
    let mut unit = SECTOR;
    for x in &d.extents {
        let bytes = x
            .sectors
            .checked_mul(SECTOR)
            .ok_or_else(|| format(&path, 0, "extent size overflows"))?;
        let kind = match x.kind.as_str() {
            "ZERO" => Kind::Zero,
            "FLAT" | "VMFS" | "SPARSE" => {
                let name = x
                    .file
                    .as_deref()
                    .ok_or_else(|| format(&path, 0, format!("{} extent names no file", x.kind)))?;
                let ep = extent_path(&path, name, notes);
                let file = match files.find(&ep) {
                    Some(f) => f,
                    None => {
                        let b = opener(&ep).map_err(|source| ContainerError::Open {
                            path: ep.clone(),
                            source,
                        })?;
                        files.add(ep.clone(), b)
                    }
                };
                if x.kind == "SPARSE" {
                    let (s, _, _) = Sparse::open(files, file)?;
                    if s.capacity < bytes {
                        notes.push(format!(
                            "sparse extent `{}` holds {} bytes, the descriptor gives it {bytes}; the rest reads as zeros",
                            ep.display(),
                            s.capacity
                        ));
                    }
                    unit = unit.max(s.grain);
                    Kind::Sparse(s)
                } else {
                    let offset = x
                        .offset
                        .checked_mul(SECTOR)
                        .ok_or_else(|| format(&path, 0, "extent offset overflows"))?;
                    let need = offset.saturating_add(bytes);
                    if files.len(file) < need {
                        notes.push(format!(
                            "flat extent `{}` is {} bytes, {need} needed: media bytes past its end are unreadable",
                            ep.display(),
                            files.len(file)
                        ));
                    }
                    Kind::Flat { file, offset }
                }
            }
            other => {
                return Err(unsupported(
                    &path,
                    format!("VMDK extent type `{other}` is not supported"),
                ));
            }
        };
        if bytes > 0 {
            extents.push(Extent {
                start,
                len: bytes,
                kind,
            });
        }
        start = start
            .checked_add(bytes)
            .ok_or_else(|| format(&path, 0, "media size overflows"))?;
    }
    Ok(Opened {
        variant,
        size: start,
        unit,
        layout: Box::new(Vmdk { extents }),
    })
}

fn open_sparse(
    files: &Files,
    main: usize,
    notes: &mut Vec<String>,
) -> Result<Opened, ContainerError> {
    let path = files.path(main).to_path_buf();
    let (s, version, [desc_at, desc_len]) = Sparse::open(files, main)?;
    let mut variant = if s.compressed {
        "streamOptimized".to_string()
    } else {
        "monolithicSparse".to_string()
    };
    let mut described = false;
    if desc_at > 0 && desc_len > 0 {
        let at = desc_at.saturating_mul(SECTOR);
        let len = desc_len.saturating_mul(SECTOR).min(MAX_DESCRIPTOR);
        let mut text = vec![0u8; usize::try_from(len).unwrap_or(0)];
        let got = files.read_some(main, at, &mut text)?;
        text.truncate(got);
        let d = parse_descriptor(&String::from_utf8_lossy(&text), &path)?;
        refuse_parent(&d, &path)?;
        if let Some(t) = d.create_type {
            variant = t;
        }
        described = !d.extents.is_empty();
        let sum: u64 = d
            .extents
            .iter()
            .map(|e| e.sectors.saturating_mul(SECTOR))
            .fold(0, u64::saturating_add);
        if described && sum != s.capacity {
            notes.push(format!(
                "embedded descriptor's extents total {sum} bytes, the header's capacity {}; the capacity is used",
                s.capacity
            ));
        }
    }
    if !described {
        // qemu reserves room for a descriptor in each part of a split
        // sparse set but writes it only in the descriptor file.
        notes.push(format!(
            "VMDK {version} sparse extent without an embedded descriptor (part of a split set?): read alone, its parent (if any) unknown"
        ));
    }
    Ok(Opened {
        variant,
        size: s.capacity,
        unit: s.grain,
        layout: Box::new(Vmdk {
            extents: vec![Extent {
                start: 0,
                len: s.capacity,
                kind: Kind::Sparse(s),
            }],
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extent_lines() {
        let e = parse_extent(r#"RW 4192256 FLAT "a b-f001.vmdk" 0"#).unwrap();
        assert_eq!((e.sectors, e.kind.as_str()), (4192256, "FLAT"));
        assert_eq!(e.file.as_deref(), Some("a b-f001.vmdk"));
        let z = parse_extent("RDONLY 100 ZERO").unwrap();
        assert_eq!((z.sectors, z.kind.as_str(), z.file), (100, "ZERO", None));
        assert!(parse_extent("RW x FLAT \"a\"").is_none());
        assert!(parse_extent("RW 5 FLAT \"a").is_none());
    }

    #[test]
    fn extent_paths_stay_beside_the_descriptor() {
        let mut notes = Vec::new();
        let d = Path::new("/ev/disk.vmdk");
        assert_eq!(
            extent_path(d, "disk-f001.vmdk", &mut notes),
            Path::new("/ev/disk-f001.vmdk")
        );
        assert!(notes.is_empty());
        assert_eq!(
            extent_path(d, "../../etc/x.vmdk", &mut notes),
            Path::new("/ev/x.vmdk")
        );
        assert_eq!(
            extent_path(d, "/abs/y.vmdk", &mut notes),
            Path::new("/ev/y.vmdk")
        );
        assert_eq!(notes.len(), 2);
    }
}
