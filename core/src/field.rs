//! [`Field`]: one named bit field of a 32-bit register or configuration word.
//!
//! Every bit layout the hardware decodes (the `CONFIG`, `STATUS`, `COMMAND` and gather command
//! words in [`crate::regmap`], the gather configuration words in [`crate::gather::layout`]) is
//! written once as `Field` constants. The encoders and decoders in Rust, the hand-written
//! Verilog generator, the rust-hdl blocks and the hardware guide (docs/HARDWARE.md) all read
//! these constants, so no bit offset is written twice.

/// A bit field: bits `lsb .. lsb + width` of a 32-bit word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Name as the guide and the generated Verilog comments show it.
    pub name: &'static str,
    /// Lowest bit.
    pub lsb: u32,
    /// Width in bits (`1..=32`, `lsb + width <= 32`).
    pub width: u32,
    /// What the field holds (one line, for the guide's tables).
    pub meaning: &'static str,
}

impl Field {
    /// A field (checked at compile time where used in a `const`).
    pub const fn new(name: &'static str, lsb: u32, width: u32, meaning: &'static str) -> Self {
        assert!(
            width >= 1 && lsb + width <= 32,
            "field outside a 32-bit word"
        );
        Field {
            name,
            lsb,
            width,
            meaning,
        }
    }

    /// Highest bit.
    pub const fn msb(&self) -> u32 {
        self.lsb + self.width - 1
    }

    /// The field's values as an unshifted mask (`2^width - 1`).
    pub const fn max(&self) -> u32 {
        if self.width == 32 {
            u32::MAX
        } else {
            (1 << self.width) - 1
        }
    }

    /// The field's bits in the word.
    pub const fn mask(&self) -> u32 {
        self.max() << self.lsb
    }

    /// The field's value in `word`.
    pub const fn get(&self, word: u32) -> u32 {
        (word >> self.lsb) & self.max()
    }

    /// `value` placed in the field (high bits beyond its width dropped).
    pub const fn put(&self, value: u32) -> u32 {
        (value & self.max()) << self.lsb
    }

    /// `word` with the field replaced by `value`.
    pub const fn set(&self, word: u32, value: u32) -> u32 {
        (word & !self.mask()) | self.put(value)
    }
}

/// Checks that `fields` do not overlap (a test helper for every layout table).
pub const fn disjoint(fields: &[Field]) -> bool {
    let mut used = 0u32;
    let mut i = 0;
    while i < fields.len() {
        if used & fields[i].mask() != 0 {
            return false;
        }
        used |= fields[i].mask();
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_put_set_round_trip() {
        let f = Field::new("x", 24, 4, "");
        assert_eq!(f.mask(), 0x0F00_0000);
        assert_eq!(f.msb(), 27);
        assert_eq!(f.put(0x1F), 0x0F00_0000);
        assert_eq!(f.get(0xFABC_DEF0), 0xA);
        assert_eq!(f.set(0xFFFF_FFFF, 0), 0xF0FF_FFFF);
        let w = Field::new("w", 0, 32, "");
        assert_eq!((w.max(), w.get(0xDEAD_BEEF)), (u32::MAX, 0xDEAD_BEEF));
        assert!(disjoint(&[f, Field::new("y", 28, 4, "")]));
        assert!(!disjoint(&[f, Field::new("y", 27, 2, "")]));
    }
}
