//! [`ArrayConfig`]: the single description of one accelerator instance.

use crate::dsp_pack::MAX_PACK_WORD_BITS;
use crate::numeric::{self, ACC_BITS, MAX_K, MAX_WORD_BITS, MIN_WORD_BITS};

/// Feature-map buffer depth of [`ArrayConfig::square`] and [`ArrayConfig::new`].
pub const DEFAULT_FM_DEPTH: usize = MAX_FM_DEPTH;
/// Smallest array size.
pub const MIN_SIZE: usize = 2;
/// Largest array size.
pub const MAX_SIZE: usize = 64;
/// Smallest buffer depth (rows per A/B bank; a power of two).
pub const MIN_BUFFER_DEPTH: usize = 16;
/// Largest buffer depth.
pub const MAX_BUFFER_DEPTH: usize = 65536;
/// Smallest feature-map buffer of a conv unit (words; a power of two).
pub const MIN_FM_DEPTH: usize = 512;
/// Largest feature-map buffer (words).
pub const MAX_FM_DEPTH: usize = 32768;
/// Register stages of each column converter between taking a row of accumulators off its
/// column and writing the converted word into the C buffer: the first adds the stochastic
/// bits, the second shifts, rounds and saturates (one stage each at 50 MHz on an ECP5).
pub const CONVERTER_STAGES: u32 = 2;
/// Size and formats of one systolic-array accelerator. The HDL generator, the register map
/// constants (read back from `regmap::CONFIG`) and the host's tiler are all derived from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArrayConfig {
    /// Rows and columns of processing elements (the array is square, `size x size`).
    pub size: usize,
    /// Width `W` of input and output words in bits, `MIN_WORD_BITS..=MAX_WORD_BITS` (16 by
    /// default; set it with [`ArrayConfig::with_word_bits`], which sets `acc_bits` too).
    pub word_bits: u32,
    /// Width of each processing element's accumulator in bits: `numeric::acc_bits(word_bits)`
    /// (48 at `W = 16`).
    pub acc_bits: u32,
    /// Default fractional bits of a tensor when the host has no better choice.
    pub frac_bits: u32,
    /// Rows (K entries) of each of the two A and two B buffer banks. Dot products longer than
    /// this run as several chunks that accumulate in place, so it limits speed, not K.
    pub buffer_depth: usize,
    /// Words of the feature-map buffer the conv unit gathers from (`crate::gather`), or 0 for
    /// an array without a conv unit. Each of the two gather engines has a read port per lane
    /// (in hardware a true dual-port copy per pair of lanes), so every lane reads a word per clock.
    pub fm_depth: usize,
    /// Two multiplies per DSP48E1: vertically neighbouring PEs share their B word and compute
    /// both products in one packed multiply (`crate::dsp_pack`; `systole_hdl::pe_pair`). Only
    /// at `W <= dsp_pack::MAX_PACK_WORD_BITS` and an even `size`; off by default (set it with
    /// [`ArrayConfig::with_dsp_pack`]). Results and cycles are the unpacked array's.
    pub dsp_pack: bool,
}

/// Why an [`ArrayConfig`] was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `size` is outside `MIN_SIZE..=MAX_SIZE`.
    Size(usize),
    /// `word_bits` is outside `MIN_WORD_BITS..=MAX_WORD_BITS`.
    WordBits(u32),
    /// `acc_bits` is not `numeric::acc_bits(word_bits)`.
    AccBits {
        /// The accumulator width asked for.
        acc_bits: u32,
        /// The word width it was asked with.
        word_bits: u32,
    },
    /// `frac_bits` is not below `word_bits`.
    FracBits {
        /// The fractional bits asked for.
        frac_bits: u32,
        /// The word width they must stay below.
        word_bits: u32,
    },
    /// `buffer_depth` is not a power of two in `MIN_BUFFER_DEPTH..=MAX_BUFFER_DEPTH`.
    BufferDepth(usize),
    /// `fm_depth` is neither 0 (no conv unit) nor a power of two in `MIN_FM_DEPTH..=MAX_FM_DEPTH`.
    FmDepth(usize),
    /// `dsp_pack` asked of words wider than `dsp_pack::MAX_PACK_WORD_BITS` or an odd size.
    DspPack {
        /// The word width asked for.
        word_bits: u32,
        /// The array size asked for.
        size: usize,
    },
}

impl core::error::Error for ConfigError {}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::Size(n) => write!(f, "array size {n} is not supported: choose {MIN_SIZE} to {MAX_SIZE} (4, 8, 16 and 32 are tested)"),
            ConfigError::WordBits(w) => write!(f, "word width {w} bits is not supported: choose {MIN_WORD_BITS} to {MAX_WORD_BITS} bits"),
            ConfigError::AccBits { acc_bits, word_bits } => write!(f, "accumulator width {acc_bits} bits does not match {word_bits}-bit words: the contract derives it as 2W + 16 = {} bits (ArrayConfig::with_word_bits sets both)", numeric::acc_bits(*word_bits)),
            ConfigError::FracBits { frac_bits, word_bits } => write!(f, "{frac_bits} fractional bits do not fit a {word_bits}-bit word: choose 0 to {}", word_bits.saturating_sub(1)),
            ConfigError::BufferDepth(d) => write!(f, "buffer depth {d} is not a power of two between {MIN_BUFFER_DEPTH} and {MAX_BUFFER_DEPTH}"),
            ConfigError::FmDepth(d) => write!(f, "feature-map buffer depth {d} is neither 0 (no conv unit) nor a power of two between {MIN_FM_DEPTH} and {MAX_FM_DEPTH}"),
            ConfigError::DspPack { word_bits, size } => write!(f, "two multiplies per DSP48E1 (DSP packing) need words of at most {MAX_PACK_WORD_BITS} bits and an even array size (PEs pair by rows), not {word_bits}-bit words on a {size}x{size} array: turn packing off or choose such a design"),
        }
    }
}

impl ArrayConfig {
    /// The default configuration for a `size x size` array: 16-bit words, 48-bit accumulators,
    /// 8 fractional bits, 512-row buffer banks, a 32768-word feature-map buffer.
    pub const fn square(size: usize) -> Self {
        ArrayConfig {
            size,
            word_bits: numeric::WORD_BITS,
            acc_bits: ACC_BITS,
            frac_bits: 8,
            buffer_depth: 512,
            fm_depth: DEFAULT_FM_DEPTH,
            dsp_pack: false,
        }
    }

    /// Builds and checks a configuration.
    pub const fn new(
        size: usize,
        frac_bits: u32,
        buffer_depth: usize,
    ) -> Result<Self, ConfigError> {
        let c = ArrayConfig {
            size,
            word_bits: numeric::WORD_BITS,
            acc_bits: ACC_BITS,
            frac_bits,
            buffer_depth,
            fm_depth: DEFAULT_FM_DEPTH,
            dsp_pack: false,
        };
        match c.validate() {
            Ok(()) => Ok(c),
            Err(e) => Err(e),
        }
    }

    /// The same configuration with `W`-bit words, the accumulator the contract derives for
    /// them (`numeric::acc_bits`) and the default fractional bits of `W`-bit words, `W / 2` (8
    /// at 16 bits, as [`Self::square`]); [`Self::validate`] checks `W`.
    pub const fn with_word_bits(self, word_bits: u32) -> Self {
        ArrayConfig {
            word_bits,
            frac_bits: word_bits / 2,
            acc_bits: if word_bits <= MAX_WORD_BITS {
                numeric::acc_bits(word_bits)
            } else {
                0
            },
            ..self
        }
    }

    /// The same configuration with two multiplies per DSP48E1 (`pack`) or one; [`Self::validate`]
    /// checks that `W` and the size allow it.
    pub const fn with_dsp_pack(self, pack: bool) -> Self {
        ArrayConfig {
            dsp_pack: pack,
            ..self
        }
    }

    /// Multiply-accumulates per DSP48E1: 2 with [`Self::dsp_pack`], else 1.
    pub const fn macs_per_dsp(&self) -> u32 {
        if self.dsp_pack {
            2
        } else {
            1
        }
    }

    /// Checks every field against the numeric contract and the limits; the devices call this
    /// before using a config (the HDL generator calls [`Self::validate_built`]).
    pub const fn validate(&self) -> Result<(), ConfigError> {
        if self.size < MIN_SIZE || self.size > MAX_SIZE {
            return Err(ConfigError::Size(self.size));
        }
        if self.word_bits < MIN_WORD_BITS || self.word_bits > MAX_WORD_BITS {
            return Err(ConfigError::WordBits(self.word_bits));
        }
        if self.acc_bits != numeric::acc_bits(self.word_bits) {
            return Err(ConfigError::AccBits {
                acc_bits: self.acc_bits,
                word_bits: self.word_bits,
            });
        }
        if self.frac_bits >= self.word_bits {
            return Err(ConfigError::FracBits {
                frac_bits: self.frac_bits,
                word_bits: self.word_bits,
            });
        }
        if !self.buffer_depth.is_power_of_two()
            || self.buffer_depth < MIN_BUFFER_DEPTH
            || self.buffer_depth > MAX_BUFFER_DEPTH
        {
            return Err(ConfigError::BufferDepth(self.buffer_depth));
        }
        if self.fm_depth != 0
            && (!self.fm_depth.is_power_of_two()
                || self.fm_depth < MIN_FM_DEPTH
                || self.fm_depth > MAX_FM_DEPTH)
        {
            return Err(ConfigError::FmDepth(self.fm_depth));
        }
        if self.dsp_pack && (self.word_bits > MAX_PACK_WORD_BITS || !self.size.is_multiple_of(2)) {
            return Err(ConfigError::DspPack {
                word_bits: self.word_bits,
                size: self.size,
            });
        }
        Ok(())
    }

    /// [`Self::validate`], and the array can be built: what the HDL generator of the array's
    /// `top`, the board images (bridge and SoC) and the Verilated models accept. Every valid
    /// configuration is built (the array, its conv unit with `W`-bit feature-map words, and the
    /// board images, at every `W` of the contract): the name stays for the callers that ask
    /// what the generator takes.
    pub const fn validate_built(&self) -> Result<(), ConfigError> {
        self.validate()
    }

    /// Bits of a buffer row address within one bank (`log2(buffer_depth)`).
    pub const fn row_addr_bits(&self) -> u32 {
        self.buffer_depth.trailing_zeros()
    }

    /// Clock edges from the edge that issues an emitting command's last K row to the edge on
    /// which `DONE_COUNT` counts its tile (its last word written into the C bank): `2n` for the
    /// last products to reach the bottom right PE (the array's input register, PE (0, 0), then
    /// `2(n - 1)` steps of skew), `n` for that column's shadow chain to shift its rows out, and
    /// the converter's [`CONVERTER_STAGES`]. A command written into an idle array issues its
    /// first row on the second edge after the `COMMAND` write, so its tile counts
    /// `K_LEN + 1 + emit_latency()` edges after that write.
    pub const fn emit_latency(&self) -> u32 {
        3 * self.size as u32 + CONVERTER_STAGES
    }

    /// Bits needed to count to `size` rows of an output tile.
    pub const fn tile_row_bits(&self) -> u32 {
        usize::BITS - (self.size - 1).leading_zeros()
    }

    /// Longest dot product the numeric contract accepts (the same at every word width: the
    /// accumulator is sized for it).
    pub const fn max_k(&self) -> usize {
        MAX_K
    }

    /// The value the hardware reports in `regmap::CONFIG`, so a host can check it is talking
    /// to the array it thinks it is.
    pub const fn config_word(&self) -> u32 {
        use crate::regmap::config::{ACC_BITS as ACC, FM_CODE, LOG2_DEPTH, SIZE, WORD_BITS};
        SIZE.put(self.size as u32)
            | WORD_BITS.put(self.word_bits)
            | ACC.put(self.acc_bits)
            | LOG2_DEPTH.put(self.row_addr_bits())
            | FM_CODE.put(self.fm_code())
    }

    /// `log2(fm_depth) - 8`, or 0 without a conv unit (`regmap::config::FM_CODE`).
    const fn fm_code(&self) -> u32 {
        if self.fm_depth == 0 {
            0
        } else {
            self.fm_depth.trailing_zeros() - 8
        }
    }

    /// Words per feature-map row: the largest power of two not above `size`. The feature map
    /// is written one row per clock, at row-aligned word addresses.
    pub const fn fm_row_words(&self) -> usize {
        1 << (usize::BITS - 1 - self.size.leading_zeros())
    }

    /// Whether the array has the conv unit (a feature-map buffer and two gather engines).
    pub const fn has_conv_unit(&self) -> bool {
        self.fm_depth != 0
    }

    /// Bits of a feature-map word address (`log2(fm_depth)`; 9 without a conv unit, so the
    /// port exists in every build).
    pub const fn fm_addr_bits(&self) -> u32 {
        if self.fm_depth == 0 {
            9
        } else {
            self.fm_depth.trailing_zeros()
        }
    }

    /// Decodes [`Self::config_word`] (the default fractional bits are not in hardware: 0 here).
    pub const fn from_config_word(word: u32) -> Self {
        use crate::regmap::config::{ACC_BITS as ACC, FM_CODE, LOG2_DEPTH, SIZE, WORD_BITS};
        ArrayConfig {
            size: SIZE.get(word) as usize,
            word_bits: WORD_BITS.get(word),
            acc_bits: ACC.get(word),
            frac_bits: 0,
            buffer_depth: 1usize << LOG2_DEPTH.get(word),
            fm_depth: match FM_CODE.get(word) {
                0 => 0,
                c => 1usize << (c + 8),
            },
            // Not in CONFIG: a packed array computes and times exactly as an unpacked one.
            dsp_pack: false,
        }
    }

    /// A short name used for generated files and Verilator prefixes, e.g. `sa8x8_d512`, and
    /// `sa8x8_d512_w8` for words other than 16 bits.
    pub fn name(&self) -> ConfigName {
        ConfigName {
            size: self.size,
            depth: self.buffer_depth,
            word_bits: self.word_bits,
            dsp_pack: self.dsp_pack,
        }
    }
}

/// Display helper returned by [`ArrayConfig::name`] (no allocation: the crate is `no_std`).
#[derive(Clone, Copy, Debug)]
pub struct ConfigName {
    size: usize,
    depth: usize,
    word_bits: u32,
    dsp_pack: bool,
}

impl core::fmt::Display for ConfigName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "sa{}x{}_d{}", self.size, self.size, self.depth)?;
        if self.word_bits != numeric::WORD_BITS {
            write!(f, "_w{}", self.word_bits)?;
        }
        if self.dsp_pack {
            write!(f, "_pack")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::format;

    #[test]
    fn defaults_validate_and_round_trip() {
        for n in [4, 8, 16, 32] {
            let c = ArrayConfig::square(n);
            assert_eq!(c.validate(), Ok(()));
            let back = ArrayConfig::from_config_word(c.config_word());
            assert_eq!(
                (
                    back.size,
                    back.word_bits,
                    back.acc_bits,
                    back.buffer_depth,
                    back.fm_depth
                ),
                (n, 16, 48, 512, 32768)
            );
        }
        assert_eq!(ArrayConfig::square(8).row_addr_bits(), 9);
        assert_eq!(ArrayConfig::square(8).tile_row_bits(), 3);
        assert_eq!(ArrayConfig::square(5).tile_row_bits(), 3);
        assert_eq!(ArrayConfig::square(5).fm_row_words(), 4);
        assert_eq!(ArrayConfig::square(16).fm_row_words(), 16);
    }

    #[test]
    fn bad_configs_are_named() {
        assert_eq!(ArrayConfig::new(1, 8, 512), Err(ConfigError::Size(1)));
        assert_eq!(
            ArrayConfig::new(8, 16, 512),
            Err(ConfigError::FracBits {
                frac_bits: 16,
                word_bits: 16
            })
        );
        assert_eq!(
            ArrayConfig::new(8, 8, 500),
            Err(ConfigError::BufferDepth(500))
        );
    }

    /// Packing validates at W = 8 on even sizes only; above 8 bits and on odd sizes it is
    /// refused naming both values and the fix. Off by default, it changes neither the CONFIG
    /// word nor, off, the name.
    #[test]
    fn dsp_packing_at_8_bits_and_even_sizes_only() {
        let c = ArrayConfig::square(8).with_word_bits(8);
        assert!(!c.dsp_pack && c.macs_per_dsp() == 1);
        let packed = c.with_dsp_pack(true);
        assert_eq!(packed.validate(), Ok(()));
        assert_eq!(packed.macs_per_dsp(), 2);
        assert_eq!(packed.config_word(), c.config_word());
        assert_eq!(format!("{}", packed.name()), "sa8x8_d512_w8_pack");
        assert_eq!(format!("{}", c.name()), "sa8x8_d512_w8");
        for (n, w) in [(8, 9), (8, 16), (5, 8)] {
            let e = ArrayConfig::square(n)
                .with_word_bits(w)
                .with_dsp_pack(true)
                .validate()
                .unwrap_err();
            assert_eq!(
                e,
                ConfigError::DspPack {
                    word_bits: w,
                    size: n
                }
            );
            let text = format!("{e}");
            assert!(
                text.contains("at most 8 bits") && text.contains("turn packing off"),
                "{text}"
            );
        }
    }

    /// Every W of the contract validates with its derived accumulator and round-trips through
    /// the CONFIG word; W outside 8..=16, a mismatched accumulator and frac bits not below W are
    /// refused naming the value and the fix.
    #[test]
    fn word_widths_of_the_contract() {
        for w in numeric::MIN_WORD_BITS..=numeric::MAX_WORD_BITS {
            let c = ArrayConfig::square(4).with_word_bits(w);
            assert_eq!(c.validate(), Ok(()), "W = {w}");
            assert_eq!((c.acc_bits, c.frac_bits), (2 * w + 16, w / 2));
            let back = ArrayConfig::from_config_word(c.config_word());
            assert_eq!((back.word_bits, back.acc_bits), (w, 2 * w + 16));
            let top = ArrayConfig {
                frac_bits: w - 1,
                ..c
            };
            assert_eq!(top.validate(), Ok(()));
            let over = ArrayConfig { frac_bits: w, ..c };
            let e = over.validate().unwrap_err();
            assert_eq!(
                e,
                ConfigError::FracBits {
                    frac_bits: w,
                    word_bits: w
                }
            );
            let text = format!("{e}");
            let want = format!(
                "{w} fractional bits do not fit a {w}-bit word: choose 0 to {}",
                w - 1
            );
            assert_eq!(text, want);
        }
        for w in [0, 7, 17, 32, u32::MAX] {
            let e = ArrayConfig::square(4).with_word_bits(w).validate();
            assert_eq!(e, Err(ConfigError::WordBits(w)));
            let text = format!("{}", e.unwrap_err());
            assert!(text.contains("choose 8 to 16 bits"), "{text}");
        }
        let wrong_acc = ArrayConfig {
            word_bits: 8,
            ..ArrayConfig::square(4)
        };
        let e = wrong_acc.validate().unwrap_err();
        assert_eq!(
            e,
            ConfigError::AccBits {
                acc_bits: 48,
                word_bits: 8
            }
        );
        assert!(format!("{e}").contains("2W + 16 = 32 bits"), "{e}");
        // The array, its conv unit and the board images around them are built at every W.
        let no_conv = ArrayConfig {
            fm_depth: 0,
            ..ArrayConfig::square(4)
        };
        assert_eq!(ArrayConfig::square(4).validate_built(), Ok(()));
        for w in [8, 12] {
            assert_eq!(no_conv.with_word_bits(w).validate_built(), Ok(()));
            let with_conv = ArrayConfig::square(4).with_word_bits(w);
            assert_eq!(with_conv.validate_built(), Ok(()));
            assert_eq!(
                format!("{}", no_conv.with_word_bits(w).name()),
                format!("sa4x4_d512_w{w}")
            );
        }
        assert_eq!(format!("{}", no_conv.name()), "sa4x4_d512");
    }
}
