//! CRC-16/CCITT-FALSE (parameters in [`systole_core::crc`]), table-driven: the frame check of
//! the protocol and the check of the board bridge's read replies. A 16-bit CRC detects every
//! error burst up to 16 bits and all odd bit-error counts in frames far longer than the
//! protocol's largest.

/// One table entry per byte value, built at compile time so the firmware has no runtime setup.
const TABLE: [u16; 256] = build_table();

const fn build_table() -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        // The register after shifting in byte `i` from zero: its effect on any register.
        table[i] = systole_core::crc::update_byte(0, i as u8);
        i += 1;
    }
    table
}

/// Initial register value.
pub const INIT: u16 = systole_core::crc::INIT;

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

    /// The bit-by-bit reference the hardware follows.
    fn reference(data: &[u8]) -> u16 {
        systole_core::crc::crc16_bitwise(data)
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
