//! Writers of the files `--dataset idx:` and `npz:` read (IDX, gzip, .npy, zip), for tests:
//! written from the formats' specifications, independently of the readers under test.

use std::io::Write;

/// An IDX file: magic `0 0 code ndim`, big-endian u32 dimensions, the data.
pub fn idx(code: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, code, dims.len() as u8];
    for d in dims {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend_from_slice(data);
    b
}

/// `bytes` gzip-compressed.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// A version-1 .npy file, its header padded with spaces to a multiple of 64 as numpy does.
pub fn npy(descr: &str, shape: &[usize], fortran: bool, data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let tuple = match shape.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let f = if fortran { "True" } else { "False" };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {f}, 'shape': {tuple}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h.as_bytes());
    b.extend_from_slice(data);
    b
}

/// How [`zip`] writes an archive.
#[derive(Clone, Copy, Default)]
pub struct ZipStyle {
    /// Members deflated (`np.savez_compressed`) rather than stored (`np.savez`).
    pub deflate: bool,
    /// Local headers with ZIP64 sizes, as numpy's `force_zip64` writes them.
    pub zip64_local: bool,
    /// Central-directory sizes and offsets in ZIP64 extra fields.
    pub zip64_central: bool,
    /// A ZIP64 end record and locator before the classic end record.
    pub zip64_end: bool,
}

fn crc(data: &[u8]) -> u32 {
    let mut c = flate2::Crc::new();
    c.update(data);
    c.sum()
}

/// A zip archive of `members` (name, contents).
pub fn zip(members: &[(&str, Vec<u8>)], style: ZipStyle) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in members {
        let packed = if style.deflate {
            let mut e =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        } else {
            data.clone()
        };
        let method: u16 = if style.deflate { 8 } else { 0 };
        let offset = out.len() as u32;
        let sizes64 = |on: bool, with_offset: bool| {
            let mut x = Vec::new();
            if on {
                let len: u16 = if with_offset { 24 } else { 16 };
                x.extend_from_slice(&1u16.to_le_bytes());
                x.extend_from_slice(&len.to_le_bytes());
                x.extend_from_slice(&(data.len() as u64).to_le_bytes());
                x.extend_from_slice(&(packed.len() as u64).to_le_bytes());
                if with_offset {
                    x.extend_from_slice(&u64::from(offset).to_le_bytes());
                }
            }
            x
        };
        let head = |b: &mut Vec<u8>, z64: bool| {
            b.extend_from_slice(&45u16.to_le_bytes()); // version needed
            b.extend_from_slice(&0u16.to_le_bytes()); // flags
            b.extend_from_slice(&method.to_le_bytes());
            b.extend_from_slice(&[0, 0, 0x21, 0]); // time, date
            b.extend_from_slice(&crc(data).to_le_bytes());
            let (c, u) = if z64 {
                (u32::MAX, u32::MAX)
            } else {
                (packed.len() as u32, data.len() as u32)
            };
            b.extend_from_slice(&c.to_le_bytes());
            b.extend_from_slice(&u.to_le_bytes());
            b.extend_from_slice(&(name.len() as u16).to_le_bytes());
        };
        let lx = sizes64(style.zip64_local, false);
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        head(&mut out, style.zip64_local);
        out.extend_from_slice(&(lx.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&lx);
        out.extend_from_slice(&packed);
        let cx = sizes64(style.zip64_central, true);
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&45u16.to_le_bytes()); // version made by
        head(&mut central, style.zip64_central);
        central.extend_from_slice(&(cx.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0; 6]); // comment length, disk, internal attributes
        central.extend_from_slice(&[0; 4]); // external attributes
        let off = if style.zip64_central {
            u32::MAX
        } else {
            offset
        };
        central.extend_from_slice(&off.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
        central.extend_from_slice(&cx);
    }
    let cd_offset = out.len();
    out.extend_from_slice(&central);
    let n = members.len();
    if style.zip64_end {
        let at = out.len() as u64;
        out.extend_from_slice(&0x0606_4b50u32.to_le_bytes());
        out.extend_from_slice(&44u64.to_le_bytes());
        out.extend_from_slice(&[45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&(n as u64).to_le_bytes());
        out.extend_from_slice(&(n as u64).to_le_bytes());
        out.extend_from_slice(&(central.len() as u64).to_le_bytes());
        out.extend_from_slice(&(cd_offset as u64).to_le_bytes());
        out.extend_from_slice(&0x0706_4b50u32.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
    }
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let (count, cd_off) = if style.zip64_end {
        (u16::MAX, u32::MAX)
    } else {
        (n as u16, cd_offset as u32)
    };
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_off.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// numpy's `np.savez`: stored members, ZIP64 local headers (`force_zip64`).
pub const SAVEZ: ZipStyle = ZipStyle {
    deflate: false,
    zip64_local: true,
    zip64_central: false,
    zip64_end: false,
};

/// `np.savez_compressed`.
pub const COMPRESSED: ZipStyle = ZipStyle {
    deflate: true,
    ..SAVEZ
};

/// An npz of the four arrays (each a .npy file's bytes) under numpy's member names.
pub fn npz(arrays: [Vec<u8>; 4], style: ZipStyle) -> Vec<u8> {
    let [a, b, c, d] = arrays;
    zip(
        &[
            ("x_train.npy", a),
            ("y_train.npy", b),
            ("x_test.npy", c),
            ("y_test.npy", d),
        ],
        style,
    )
}
