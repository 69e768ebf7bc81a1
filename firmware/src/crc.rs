//! CRC-16/CCITT-FALSE, the frame check of the protocol.
//!
//! Parameters: polynomial `0x1021`, initial value `0xFFFF`, no input or output reflection, no
//! final XOR. The check value of the ASCII bytes `"123456789"` is `0x29B1`. A 16-bit CRC detects
//! every error burst up to 16 bits and all odd bit-error counts (the polynomial has `x + 1` as
//! a factor) in frames far longer than the protocol's largest.

/// One table entry per byte value, built at compile time so the firmware has no runtime setup.
const TABLE: [u16; 256] = build_table();

const fn build_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 0x8000 != 0 {
                (c << 1) ^ 0x1021
            } else {
                c << 1
            };
            bit += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

/// Initial register value.
pub const INIT: u16 = 0xFFFF;

/// Continues a CRC over `data`, starting from `crc` (use [`INIT`] for a fresh one).
pub fn update(mut crc: u16, data: &[u8]) -> u16 {
    for &b in data {
        crc = (crc << 8) ^ TABLE[usize::from((crc >> 8) as u8 ^ b)];
    }
    crc
}

/// CRC-16/CCITT-FALSE of `data`.
pub fn crc16(data: &[u8]) -> u16 {
    update(INIT, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit-by-bit reference, written from the parameter list, to check the table.
    fn reference(data: &[u8]) -> u16 {
        let mut crc = 0xFFFFu16;
        for &b in data {
            crc ^= u16::from(b) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
        }
        crc
    }

    #[test]
    fn check_value() {
        assert_eq!(crc16(b"123456789"), 0x29B1);
        assert_eq!(crc16(b""), 0xFFFF);
    }

    #[test]
    fn incremental_equals_whole() {
        let data = b"systolic arrays move data rhythmically";
        let (x, y) = data.split_at(11);
        assert_eq!(update(update(INIT, x), y), crc16(data));
    }

    proptest::proptest! {
        #[test]
        fn table_matches_bitwise(data in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            proptest::prop_assert_eq!(crc16(&data), reference(&data));
        }
    }
}
