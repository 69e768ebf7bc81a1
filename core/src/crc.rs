//! CRC-16/CCITT-FALSE: the check of the firmware protocol's frames and of the board bridge's
//! writes and read replies. Its parameters live here once; the firmware's table-driven CRC and the
//! bridge's bit-serial hardware CRC are built from them.
//!
//! Parameters: polynomial [`POLY`], initial value [`INIT`], no input or output reflection, no
//! final XOR. The check value of the ASCII bytes `"123456789"` is `0x29B1`. A 16-bit CRC
//! detects every error burst up to 16 bits and all odd bit-error counts (the polynomial has
//! `x + 1` as a factor).

/// Generator polynomial (`x^16 + x^12 + x^5 + 1`, the `x^16` term implied).
pub const POLY: u16 = 0x1021;

/// Initial register value.
pub const INIT: u16 = 0xFFFF;

/// One bit step, most significant bit first: what the hardware does each clock.
pub const fn step(crc: u16, bit: bool) -> u16 {
    if ((crc >> 15) != 0) != bit {
        (crc << 1) ^ POLY
    } else {
        crc << 1
    }
}

/// Continues `crc` over one byte, bit by bit (the reference the table-driven CRC and the
/// hardware are tested against).
pub const fn update_byte(mut crc: u16, byte: u8) -> u16 {
    let mut i = 0;
    while i < 8 {
        crc = step(crc, (byte >> (7 - i)) & 1 == 1);
        i += 1;
    }
    crc
}

/// CRC of `data` from [`INIT`], bit by bit.
pub fn crc16_bitwise(data: &[u8]) -> u16 {
    data.iter().fold(INIT, |c, &b| update_byte(c, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        assert_eq!(crc16_bitwise(b"123456789"), 0x29B1);
        assert_eq!(crc16_bitwise(b""), 0xFFFF);
    }
}
