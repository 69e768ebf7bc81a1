//! [`Budget`]: where the SoC's RAM goes.

/// Bytes of each part of the firmware in the SoC's RAM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    /// Code.
    pub text: u32,
    /// Constants.
    pub rodata: u32,
    /// Initialised statics (stored in the image, copied at boot).
    pub data: u32,
    /// Zeroed statics.
    pub bss: u32,
    /// Of `bss`, the tensor store of the board operations
    /// (`systole_core::soc::TENSOR_STORE_BYTES`).
    pub tensor_store: u32,
    /// Stack kept free at the top of RAM (`systole_firmware::soc::stack_reserve_bytes` of the image's RAM).
    pub stack_reserve: u32,
    /// Bytes of the flat image (what the RAM is initialised with).
    pub image: u32,
    /// RAM from its base to the end of the last static (code, data, bss and alignment).
    pub statics: u32,
    /// The SoC's RAM.
    pub ram: u32,
}

impl Budget {
    /// RAM the firmware needs: its statics and the stack reserve.
    pub fn used(&self) -> u64 {
        u64::from(self.statics) + u64::from(self.stack_reserve)
    }

    /// Whether it fits the RAM.
    pub fn fits(&self) -> bool {
        self.used() <= u64::from(self.ram)
    }

    fn percent(&self, bytes: u64) -> f64 {
        100.0 * bytes as f64 / f64::from(self.ram.max(1))
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SoC firmware in {} B RAM:", self.ram)?;
        let parts = [
            ("text", self.text),
            ("rodata", self.rodata),
            ("data", self.data),
            ("bss", self.bss),
            ("stack reserve", self.stack_reserve),
        ];
        for (name, bytes) in parts {
            write!(f, " {name} {bytes} B ({:.1}%)", self.percent(bytes.into()))?;
            if name == "bss" {
                write!(f, " of which tensor store {} B", self.tensor_store)?;
            }
            f.write_str(",")?;
        }
        let used = self.used();
        write!(
            f,
            " image {} B; used {used} B ({:.1}%), ",
            self.image,
            self.percent(used)
        )?;
        match u64::from(self.ram).checked_sub(used) {
            Some(free) => write!(f, "free {free} B"),
            None => write!(f, "{} B too many", used - u64::from(self.ram)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(statics: u32) -> Budget {
        Budget {
            text: 12_000,
            rodata: 1_500,
            data: 16,
            bss: 16_432,
            tensor_store: 16_384,
            stack_reserve: 8_192,
            image: 13_532,
            statics,
            ram: 65_536,
        }
    }

    #[test]
    fn the_budget_in_words_and_its_limit() {
        assert_eq!(
            budget(13_600).to_string(),
            "SoC firmware in 65536 B RAM: text 12000 B (18.3%), rodata 1500 B (2.3%), \
             data 16 B (0.0%), bss 16432 B (25.1%) of which tensor store 16384 B, stack reserve 8192 B (12.5%), image 13532 B; \
             used 21792 B (33.3%), free 43744 B"
        );
        assert!(budget(65_536 - 8_192).fits());
        let over = budget(65_536 - 8_191);
        assert!(!over.fits());
        assert!(over.to_string().ends_with("1 B too many"), "{over}");
    }
}
