//! `systole boards`: what each known board holds, by the resource estimates of the bridge
//! top (`model`) and of the SoC (`soc`). Apart from the flows, which build one board's image.

use super::{model, soc, Family};
use std::fmt::Write as _;

/// One line per board: part, budget, clock, and the largest array and the largest conv unit
/// (array, feature-map words) the resource model fits, alone and (7-series) beside the SoC's
/// CPU (`model`, `soc`: estimates, not synthesis).
pub fn boards_table() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<13} {:<19} {:>7} {:>7} {:>4} {:>8} {:>9}  largest array; with conv unit; with conv unit beside the SoC's CPU (estimated)",
        "board", "part", "LUTs", "FFs", "DSP", "BRAM", "logic clk"
    );
    for b in super::list() {
        let mut largest = match model::largest_array(b) {
            Some(c) => format!("{0}x{0} (buffers {1} rows)", c.size, c.buffer_depth),
            None => "none".to_string(),
        };
        match model::largest_conv_unit(b) {
            Some(c) => {
                let _ = write!(largest, "; {0}x{0} with {1} words", c.size, c.fm_depth);
            }
            None => largest.push_str("; none"),
        }
        if let Some(c) = soc::largest_conv_unit(b) {
            let _ = write!(
                largest,
                "; beside the CPU {0}x{0} with {1} words and {2} KiB RAM",
                c.size,
                c.fm_depth,
                soc::ram_bytes(b) / 1024
            );
        }
        let bram = match b.family {
            Family::Xc7 | Family::Ecp5 => format!("{}x18k", b.budget.bram_blocks),
            Family::Ice40Up => format!("{}x4k", b.budget.bram_blocks),
        };
        let _ = writeln!(
            s,
            "{:<13} {:<19} {:>7} {:>7} {:>4} {:>8} {:>6}MHz  {}",
            b.name,
            b.part,
            b.budget.luts,
            b.budget.ffs,
            b.budget.dsps,
            bram,
            b.logic_clock_hz() / 1_000_000,
            largest
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_lists_every_board_with_its_largest_array() {
        let t = boards_table();
        assert_eq!(t.lines().count(), 1 + super::super::list().len());
        let arty = t.lines().find(|l| l.starts_with("arty-a7-35 ")).unwrap();
        assert!(
            arty.contains("xc7a35ticsg324-1L")
                && arty.contains("9x9")
                && arty.contains("; 9x9 with 8192 words")
                && arty.contains("; beside the CPU 8x8 with 4096 words and 64 KiB RAM"),
            "{arty}"
        );
        let nexys = t.lines().find(|l| l.starts_with("nexys-a7-100")).unwrap();
        assert!(
            nexys.contains("KiB RAM") && nexys.ends_with(" and 256 KiB RAM"),
            "{nexys}"
        );
        let ice = t.lines().find(|l| l.starts_with("icebreaker")).unwrap();
        // The UP5K runs its logic on the 12 MHz oscillator.
        assert!(
            ice.contains("2x2") && ice.contains(" 12MHz") && ice.ends_with("; none"),
            "{ice}"
        );
    }
}
