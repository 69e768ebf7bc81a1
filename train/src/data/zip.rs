//! A small reader of zip archives, as much as `.npz` files need: the central directory
//! (with ZIP64 sizes and offsets, which `np.savez` writes), members stored (method 0, as
//! `np.savez` writes them) or deflated (method 8, `np.savez_compressed`), CRC-32 checked.
//! No encryption, no multi-disk archives.

use std::io::Read;

/// One member of the archive, from its central-directory entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// File name inside the archive.
    pub name: String,
    method: u16,
    flags: u16,
    crc: u32,
    packed: u64,
    size: u64,
    local: u64,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

const EOCD: u32 = 0x0605_4b50;
const EOCD64: u32 = 0x0606_4b50;
const LOCATOR64: u32 = 0x0706_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const LOCAL: u32 = 0x0403_4b50;

/// (entries, central directory offset) from the end records.
fn directory(b: &[u8]) -> Result<(u64, u64), String> {
    let not_zip = || "not a zip archive (no end-of-central-directory record)".to_string();
    let lowest = b.len().saturating_sub(22 + 0xFFFF);
    let eocd = (lowest..=b.len().saturating_sub(22))
        .rev()
        .find(|&i| u32_at(b, i) == Some(EOCD))
        .ok_or_else(not_zip)?;
    let entries = u16_at(b, eocd + 10).ok_or_else(not_zip)?;
    let offset = u32_at(b, eocd + 16).ok_or_else(not_zip)?;
    if entries != 0xFFFF && offset != 0xFFFF_FFFF {
        return Ok((u64::from(entries), u64::from(offset)));
    }
    // ZIP64: the locator just before the end record points to the 64-bit end record.
    let bad64 = || "a damaged ZIP64 end record".to_string();
    let loc = eocd.checked_sub(20).ok_or_else(bad64)?;
    if u32_at(b, loc) != Some(LOCATOR64) {
        return Err(bad64());
    }
    let at = usize::try_from(u64_at(b, loc + 8).ok_or_else(bad64)?).map_err(|_| bad64())?;
    if u32_at(b, at) != Some(EOCD64) {
        return Err(bad64());
    }
    Ok((
        u64_at(b, at + 32).ok_or_else(bad64)?,
        u64_at(b, at + 48).ok_or_else(bad64)?,
    ))
}

/// The values a ZIP64 extra field (id 1) replaces: each 32-bit field that is all ones, in order.
fn zip64(extra: &[u8], fields: [&mut u64; 3]) -> Result<(), String> {
    let mut at = 0;
    while at + 4 <= extra.len() {
        let id = u16_at(extra, at).unwrap_or(0);
        let len = usize::from(u16_at(extra, at + 2).unwrap_or(0));
        if id == 1 {
            let mut k = at + 4;
            for f in fields {
                if *f == 0xFFFF_FFFF {
                    *f = u64_at(extra, k)
                        .filter(|_| k + 8 <= at + 4 + len)
                        .ok_or("a truncated ZIP64 extra field")?;
                    k += 8;
                }
            }
            return Ok(());
        }
        at += 4 + len;
    }
    if fields.iter().any(|f| **f == 0xFFFF_FFFF) {
        return Err("a ZIP64 size without its extra field".into());
    }
    Ok(())
}

/// The archive's members, from its central directory.
pub fn members(b: &[u8]) -> Result<Vec<Member>, String> {
    let (entries, offset) = directory(b)?;
    let mut at = usize::try_from(offset).map_err(|_| "a central directory beyond the file")?;
    // Each entry takes at least 46 bytes: a count the file cannot hold is refused before any
    // allocation.
    if entries > (b.len() / 46) as u64 {
        return Err(format!(
            "the directory claims {entries} members, more than the file holds"
        ));
    }
    let mut out = Vec::with_capacity(entries as usize);
    for k in 0..entries {
        let damaged = || format!("a damaged central directory (entry {k})");
        if u32_at(b, at) != Some(CENTRAL) {
            return Err(damaged());
        }
        let field16 = |o| u16_at(b, at + o).ok_or_else(damaged);
        let field32 = |o| u32_at(b, at + o).ok_or_else(damaged);
        let (n, e, c) = (
            usize::from(field16(28)?),
            usize::from(field16(30)?),
            usize::from(field16(32)?),
        );
        let name = b.get(at + 46..at + 46 + n).ok_or_else(damaged)?;
        let extra = b.get(at + 46 + n..at + 46 + n + e).ok_or_else(damaged)?;
        let mut size = u64::from(field32(24)?);
        let mut packed = u64::from(field32(20)?);
        let mut local = u64::from(field32(42)?);
        zip64(extra, [&mut size, &mut packed, &mut local])?;
        out.push(Member {
            name: String::from_utf8_lossy(name).into_owned(),
            method: field16(10)?,
            flags: field16(8)?,
            crc: field32(16)?,
            packed,
            size,
            local,
        });
        at += 46 + n + e + c;
    }
    Ok(out)
}

/// The uncompressed bytes of member `m`, refused if it claims more than `limit` bytes.
pub fn extract(b: &[u8], m: &Member, limit: u64) -> Result<Vec<u8>, String> {
    let damaged = || format!("member {} is damaged or truncated", m.name);
    if m.flags & 1 != 0 {
        return Err(format!("member {} is encrypted", m.name));
    }
    if m.size > limit {
        return Err(format!(
            "member {} is {} bytes uncompressed, more than the {limit} systole reads",
            m.name, m.size
        ));
    }
    let at = usize::try_from(m.local).map_err(|_| damaged())?;
    if u32_at(b, at) != Some(LOCAL) {
        return Err(damaged());
    }
    let n = usize::from(u16_at(b, at + 26).ok_or_else(damaged)?);
    let e = usize::from(u16_at(b, at + 28).ok_or_else(damaged)?);
    let start = at + 30 + n + e;
    let packed = usize::try_from(m.packed).map_err(|_| damaged())?;
    let data = start
        .checked_add(packed)
        .and_then(|end| b.get(start..end))
        .ok_or_else(damaged)?;
    let out = match m.method {
        0 => data.to_vec(),
        8 => {
            let mut out = Vec::new();
            flate2::read::DeflateDecoder::new(data)
                .take(m.size + 1)
                .read_to_end(&mut out)
                .map_err(|e| format!("member {} does not inflate: {e}", m.name))?;
            out
        }
        x => {
            return Err(format!(
                "member {} uses compression method {x}: only stored (0) and deflate (8), as numpy writes, are read",
                m.name
            ))
        }
    };
    if out.len() as u64 != m.size {
        return Err(damaged());
    }
    let mut crc = flate2::Crc::new();
    crc.update(&out);
    if crc.sum() != m.crc {
        return Err(format!(
            "member {} fails its CRC-32 check: the file is damaged",
            m.name
        ));
    }
    Ok(out)
}
