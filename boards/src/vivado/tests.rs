//! Against reports written in Vivado's documented layouts (UG906): `timing.rpt` and
//! `utilization.rpt` beside this file (hand-made for an 8x8 bridge top on the Arty A7-35T
//! missing its 100 MHz clock by 1.25 ns, not the output of a real run).

use super::*;
use crate::measured::Image;
use systole_core::ArrayConfig;

const TIMING: &str = include_str!("timing.rpt");
const UTILIZATION: &str = include_str!("utilization.rpt");

#[test]
fn the_timing_summary_gives_wns_clock_and_worst_path() {
    assert_eq!(parse_wns(TIMING).unwrap(), -1.25);
    assert_eq!(
        parse_clocks(TIMING),
        vec![("sys_clk".to_string(), 10.0, 100.0)]
    );
    let p = parse_worst_path(TIMING).unwrap();
    assert_eq!(p.from, "array/col_3/conv/acc_q_reg[12]/C");
    assert_eq!(p.to, "array/col_3/conv/out_q_reg[15]/D");
    assert_eq!(p.delay_ns, Some(11.102));
    assert!(parse_wns("no summary here").is_err());
}

#[test]
fn the_utilization_gives_placed_counts_in_ramb18() {
    let u = parse_utilization(UTILIZATION).unwrap();
    // 8.5 Block RAM Tiles: one RAMB36 and fifteen RAMB18.
    assert_eq!(
        u,
        Placed {
            luts: 10084,
            ffs: 9619,
            dsps: 64,
            brams: 17
        }
    );
    let e = parse_utilization("| Slice LUTs | 3 |")
        .unwrap_err()
        .to_string();
    assert!(e.contains("Slice Registers"), "{e}");
}

#[test]
fn reports_become_the_same_timing_json_as_the_open_flows() {
    let board = crate::find("arty-a7-35").unwrap();
    let cfg = ArrayConfig {
        fm_depth: 0,
        ..ArrayConfig::square(8)
    };
    let build = Build {
        board,
        image: Image::Bridge,
        cfg: &cfg,
    };
    let t = timing_from_texts(build, TIMING, UTILIZATION, "Vivado v.2023.2".into()).unwrap();
    // 1000 / (10 + 1.25) ns.
    assert!((t.fmax_mhz - 88.888_888).abs() < 1e-3, "{t:?}");
    assert_eq!(t.clock_mhz, 100.0);
    assert!(!t.met);
    assert_eq!(t.array, 8);
    let line = t.line();
    assert!(
        line.starts_with("timing NOT met: fmax 88.89 MHz for the 100 MHz clock")
            && line.contains("acc_q_reg[12]/C -> array/col_3/conv/out_q_reg[15]/D"),
        "{line}"
    );
    // Met when the slack is not negative.
    let met = TIMING.replace("     -1.250     -312.400", "      0.350        0.000");
    let t = timing_from_texts(build, &met, UTILIZATION, "Vivado".into()).unwrap();
    assert!(t.met && (t.fmax_mhz - 1000.0 / 9.65).abs() < 1e-9, "{t:?}");
}
