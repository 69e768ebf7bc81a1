//! The ECP5 top around a design whose clock is not the board's oscillator: an EHXPLLL makes the
//! design clock from it, and the design (its own `top`, renamed [`WRAPPED_TOP`] by the Yosys
//! script) is held in reset until the PLL locks.
//!
//! The divider limits are the ECP5 sysCLOCK PLL's (Lattice FPGA-TN-02200): the phase detector
//! runs at 3.125 to 400 MHz, the VCO at 400 to 800 MHz; with the feedback taken from CLKOP the
//! output is `f_in / CLKI_DIV * CLKFB_DIV` and the VCO `f_out * CLKOP_DIV`.

use super::super::{Board, BoardError, Family};
use std::fmt::Write;

/// The name the design's own `top` gets inside the PLL top.
pub const WRAPPED_TOP: &str = "systole_top";

/// EHXPLLL dividers for one output frequency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PllDividers {
    /// Input divider.
    pub clki_div: u32,
    /// Feedback divider (feedback from CLKOP).
    pub clkfb_div: u32,
    /// CLKOP output divider (VCO over output).
    pub clkop_div: u32,
}

const PFD_HZ: (u64, u64) = (3_125_000, 400_000_000);
const VCO_HZ: (u64, u64) = (400_000_000, 800_000_000);

/// Dividers making exactly `out_hz` from `in_hz`, the VCO nearest the middle of its range
/// (600 MHz); `None` when no setting within the limits gives that frequency exactly.
pub fn pll_dividers(in_hz: u32, out_hz: u32) -> Option<PllDividers> {
    let (fin, fout) = (u64::from(in_hz), u64::from(out_hz));
    let mut best: Option<(u64, PllDividers)> = None;
    for clki_div in 1..=128u32 {
        let d = u64::from(clki_div);
        if fin < PFD_HZ.0 * d {
            break;
        }
        if fin > PFD_HZ.1 * d {
            continue;
        }
        for clkfb_div in 1..=80u32 {
            // f_out = f_in * CLKFB_DIV / CLKI_DIV, exactly.
            if fin * u64::from(clkfb_div) != fout * d {
                continue;
            }
            for clkop_div in 1..=128u32 {
                let vco = fout * u64::from(clkop_div);
                if vco < VCO_HZ.0 || vco > VCO_HZ.1 {
                    continue;
                }
                let dist = vco.abs_diff(600_000_000);
                if best.is_none_or(|(b, _)| dist < b) {
                    best = Some((
                        dist,
                        PllDividers {
                            clki_div,
                            clkfb_div,
                            clkop_div,
                        },
                    ));
                }
            }
        }
    }
    best.map(|(_, p)| p)
}

/// `board` with its design clock at `mhz` (`systole bitstream --clock-mhz`): on a board with a
/// PLL any frequency its dividers make exactly; on one without, the oscillator itself or half
/// of it (the bridge top's halved clock). Anything else is refused, saying what can be built.
pub fn with_clock(board: &Board, mhz: f64) -> Result<Board, BoardError> {
    let refuse = |what: String| BoardError::ClockOption {
        board: board.name,
        what,
    };
    if board.pll_hz.is_none() {
        let osc = f64::from(board.clock_hz) / 1e6;
        let halve = if mhz == osc {
            false
        } else if mhz == osc / 2.0 {
            true
        } else {
            return Err(refuse(format!(
                "{} has no PLL in its table entry: its logic runs at the {} MHz oscillator or \
                 half of it, not {mhz} MHz",
                board.name,
                super::super::timing::trim_mhz(osc)
            )));
        };
        return Ok(Board {
            halve_clock: halve,
            ..*board
        });
    }
    let hz = mhz * 1e6;
    if !(hz.is_finite() && (1e6..=400e6).contains(&hz) && hz.fract() == 0.0) {
        return Err(refuse(format!(
            "--clock-mhz {mhz}: give a whole number of Hz between 1 and 400 MHz"
        )));
    }
    let hz = hz as u32;
    if pll_dividers(board.clock_hz, hz).is_none() {
        return Err(refuse(format!(
            "no EHXPLLL setting makes {mhz} MHz from the {} MHz oscillator exactly (try a \
             multiple of {} MHz)",
            super::super::timing::trim_mhz(f64::from(board.clock_hz) / 1e6),
            super::super::timing::trim_mhz(f64::from(board.clock_hz) / 1e6 / 8.0)
        )));
    }
    Ok(Board {
        pll_hz: Some(hz),
        ..*board
    })
}

/// The Verilog of module `top` for an ECP5 board with a PLL: the board's ports, an EHXPLLL
/// from the oscillator to `board.pll_hz`, and [`WRAPPED_TOP`] on the PLL's clock, its reset
/// asserted while the PLL is not locked.
pub fn generate_ecp5_pll_top(board: &Board) -> Result<String, BoardError> {
    let no_pll = |what: String| BoardError::DoesNotFit {
        board: board.name,
        what,
    };
    let out_hz = match (board.family, board.pll_hz) {
        (Family::Ecp5, Some(hz)) => hz,
        _ => {
            return Err(no_pll(
                "the board has no ECP5 PLL in its table entry".into(),
            ))
        }
    };
    let d = pll_dividers(board.clock_hz, out_hz).ok_or_else(|| {
        no_pll(format!(
            "no EHXPLLL setting makes {out_hz} Hz from {} Hz exactly",
            board.clock_hz
        ))
    })?;
    let mhz = |hz: u32| super::super::timing::trim_mhz(f64::from(hz) / 1e6);
    let (fin, fout) = (mhz(board.clock_hz), mhz(out_hz));
    // Held in reset (the button's level) until the PLL locks.
    let reset = if board.reset.active_low {
        "reset_pin & locked"
    } else {
        "reset_pin | ~locked"
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// {} ({}), generated by systole: the {fin} MHz oscillator into an EHXPLLL, its {fout} MHz",
        board.title, board.part
    );
    let _ = writeln!(
        s,
        "// CLKOP (VCO {} MHz) clocking the design, held in reset until the PLL locks.",
        u64::from(out_hz) * u64::from(d.clkop_div) / 1_000_000
    );
    s.push_str(
        "module top(input clock, input reset_pin, input uart_rx, output uart_tx,\n           \
         output led0, output led1);\n  wire design_clock;\n  wire locked;\n",
    );
    let _ = writeln!(
        s,
        "  (* FREQUENCY_PIN_CLKI=\"{fin}\", FREQUENCY_PIN_CLKOP=\"{fout}\" *)"
    );
    let _ = writeln!(
        s,
        "  EHXPLLL #(.CLKI_DIV({}), .CLKFB_DIV({}), .CLKOP_DIV({}), .CLKOP_CPHASE({}),",
        d.clki_div,
        d.clkfb_div,
        d.clkop_div,
        d.clkop_div - 1
    );
    s.push_str(
        "    .CLKOP_FPHASE(0), .CLKOP_ENABLE(\"ENABLED\"), .FEEDBK_PATH(\"CLKOP\"),\n    \
         .PLLRST_ENA(\"DISABLED\"), .INTFB_WAKE(\"DISABLED\"), .STDBY_ENABLE(\"DISABLED\"),\n    \
         .DPHASE_SOURCE(\"DISABLED\"), .OUTDIVIDER_MUXA(\"DIVA\")\n  ) pll (\n    \
         .CLKI(clock), .CLKFB(design_clock), .CLKOP(design_clock), .LOCK(locked),\n    \
         .RST(1'b0), .STDBY(1'b0), .ENCLKOP(1'b0), .PLLWAKESYNC(1'b0),\n    \
         .PHASESEL0(1'b0), .PHASESEL1(1'b0), .PHASEDIR(1'b0), .PHASESTEP(1'b0),\n    \
         .PHASELOADREG(1'b0)\n  );\n",
    );
    let _ = writeln!(
        s,
        "  {WRAPPED_TOP} design(.clock(design_clock), .reset_pin({reset}), .uart_rx(uart_rx),\n    \
         .uart_tx(uart_tx), .led0(led0), .led1(led1));\nendmodule"
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dividers_are_exact_and_within_the_limits() {
        // 25 MHz to 50: the input undivided, feedback 2, the VCO at 600 MHz.
        assert_eq!(
            pll_dividers(25_000_000, 50_000_000),
            Some(PllDividers {
                clki_div: 1,
                clkfb_div: 2,
                clkop_div: 12
            })
        );
        for (fin, fout) in [
            (25_000_000, 50_000_000),
            (25_000_000, 65_000_000),
            (48_000_000, 60_000_000),
        ] {
            let d = pll_dividers(fin, fout).unwrap();
            assert_eq!(
                u64::from(fin) * u64::from(d.clkfb_div),
                u64::from(fout) * u64::from(d.clki_div)
            );
            let vco = u64::from(fout) * u64::from(d.clkop_div);
            assert!((400_000_000..=800_000_000).contains(&vco), "{d:?}");
        }
        // 25 MHz to 1 MHz: the VCO would need CLKOP_DIV above 128.
        assert_eq!(pll_dividers(25_000_000, 1_000_000), None);
    }

    #[test]
    fn the_pll_top_holds_the_design_in_reset_until_lock() {
        let b = super::super::super::find("ulx3s-85f").unwrap();
        let v = generate_ecp5_pll_top(b).unwrap();
        assert!(
            v.contains(".CLKI_DIV(1), .CLKFB_DIV(2), .CLKOP_DIV(12)"),
            "{v}"
        );
        // The ULX3S button is active low: low or unlocked resets.
        assert!(v.contains(".reset_pin(reset_pin & locked)"), "{v}");
        assert!(v.contains("systole_top design(.clock(design_clock)"), "{v}");
        let ice = super::super::super::find("icebreaker").unwrap();
        assert!(generate_ecp5_pll_top(ice).is_err());
    }

    #[test]
    fn the_clock_option_needs_a_pll_and_an_exact_setting() {
        let b = super::super::super::find("ulx3s-85f").unwrap();
        let slow = with_clock(b, 37.5).unwrap();
        assert_eq!(
            (slow.pll_hz, slow.logic_clock_hz()),
            (Some(37_500_000), 37_500_000)
        );
        let e = with_clock(b, 33.333).unwrap_err().to_string();
        assert!(e.contains("no EHXPLLL setting makes 33.333 MHz"), "{e}");
        assert!(with_clock(b, 0.5).is_err() && with_clock(b, f64::NAN).is_err());
        // Without a PLL: the oscillator, or half of it.
        let ice = super::super::super::find("icebreaker").unwrap();
        assert_eq!(with_clock(ice, 12.0).unwrap().logic_clock_hz(), 12_000_000);
        assert_eq!(with_clock(ice, 6.0).unwrap().logic_clock_hz(), 6_000_000);
        let e = with_clock(ice, 8.0).unwrap_err().to_string();
        assert!(
            e.contains("no PLL") && e.contains("12 MHz oscillator or half"),
            "{e}"
        );
    }
}
