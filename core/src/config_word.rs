//! The check of the `CONFIG` word a device reports against the array asked for, written once:
//! the firmware's tile and conv drivers and every host backend call it.

use crate::ArrayConfig;
use core::fmt;

/// A device's `CONFIG` word describes another array than the one asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigWordMismatch {
    /// The array asked for.
    pub asked: ArrayConfig,
    /// The array the device's word describes ([`ArrayConfig::from_config_word`]).
    pub found: ArrayConfig,
}

impl fmt::Display for ConfigWordMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (&self.found, &self.asked);
        write!(
            f,
            "it is a {0}x{0} array of {1}-bit words with {2}-row buffers and {3} feature-map words, \
             but a {4}x{4} array of {5}-bit words with {6}-row buffers and {7} feature-map words \
             was asked for",
            a.size, a.word_bits, a.buffer_depth, a.fm_depth, b.size, b.word_bits, b.buffer_depth,
            b.fm_depth
        )
    }
}

impl core::error::Error for ConfigWordMismatch {}

impl ArrayConfig {
    /// `Ok` when `word` (read from `regmap::CONFIG`) is this array's [`Self::config_word`],
    /// else both arrays, the one `word` describes decoded.
    pub fn check_config_word(&self, word: u32) -> Result<(), ConfigWordMismatch> {
        if word == self.config_word() {
            return Ok(());
        }
        Err(ConfigWordMismatch {
            asked: *self,
            found: ArrayConfig::from_config_word(word),
        })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    #[test]
    fn a_word_passes_only_for_its_own_array() {
        let asked = ArrayConfig::square(8);
        assert_eq!(asked.check_config_word(asked.config_word()), Ok(()));
        let other = ArrayConfig::square(4);
        let e = asked.check_config_word(other.config_word()).unwrap_err();
        assert_eq!((e.asked, e.found.size), (asked, 4));
        let text = e.to_string();
        assert!(text.starts_with("it is a 4x4 array"), "{text}");
        assert!(text.contains("but a 8x8 array"), "{text}");
    }
}
