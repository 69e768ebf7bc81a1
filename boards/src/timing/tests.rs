//! Against stored nextpnr reports (`--report`): `ecp5-report.json` beside this file is a real
//! report of nextpnr-ecp5, cut to its summary; the iCE40 one below keeps the same layout.

use super::*;

const ECP5: &str = include_str!("ecp5-report.json");

const ICE40: &str = r#"{
 "utilization": {"ICESTORM_LC": {"used": 4400, "available": 5280},
                 "ICESTORM_DSP": {"used": 4, "available": 8},
                 "ICESTORM_RAM": {"used": 16, "available": 30}},
 "fmax": {"clock$SB_IO_IN_$glb_clk": {"achieved": 18.52, "constraint": 6.0},
          "sys_clock": {"achieved": 8.25, "constraint": 6.0}},
 "critical_paths": [
  {"from": "clock$SB_IO_IN_$glb_clk", "to": "clock$SB_IO_IN_$glb_clk", "path": [
    {"type": "clk-to-q", "from": {"cell": "half_q", "port": "CLK", "loc": [1, 1]},
     "to": {"cell": "half_q", "port": "O", "loc": [1, 1]}, "delay": 0.8}]},
  {"from": "sys_clock", "to": "sys_clock", "path": [
    {"type": "clk-to-q", "from": {"cell": "acc_q[3]", "port": "CLK", "loc": [5, 9]},
     "to": {"cell": "acc_q[3]", "port": "O", "loc": [5, 9]}, "delay": 0.82},
    {"type": "routing", "from": {"cell": "acc_q[3]", "port": "O", "loc": [5, 9]},
     "to": {"cell": "add_c[4]", "port": "I1", "loc": [6, 9]}, "net": "acc_q[3]", "delay": 1.5},
    {"type": "setup", "from": {"cell": "add_c[47]", "port": "I3", "loc": [6, 20]},
     "to": {"cell": "acc_q[47]", "port": "I3", "loc": [6, 20]}, "delay": 0.4}]}
 ]
}"#;

#[test]
fn the_tightest_clock_and_its_path_are_the_verdict() {
    let r = parse_nextpnr_report(ICE40, Family::Ice40Up).unwrap();
    let t = r.tightest().unwrap();
    // 8.25 / 6 is a smaller margin than 18.52 / 6.
    assert_eq!((t.name.as_str(), t.fmax_mhz), ("sys_clock", 8.25));
    let p = r.worst_path.unwrap();
    assert_eq!(
        (p.from.as_str(), p.to.as_str()),
        ("acc_q[3].CLK", "acc_q[47].I3")
    );
    assert!((p.delay_ns.unwrap() - 2.72).abs() < 1e-9);
    assert_eq!(
        r.placed,
        Placed {
            luts: 4400,
            ffs: 0,
            dsps: 4,
            brams: 16
        }
    );
}

#[test]
fn the_stored_ecp5_report_reads() {
    // The 4x4 bridge top on the ULX3S at 50 MHz: 46.82 MHz, the converter's rounding.
    let r = parse_nextpnr_report(ECP5, Family::Ecp5).unwrap();
    let t = r.tightest().unwrap();
    assert_eq!(t.name, "$glbnet$design.bridge.args.clock");
    assert!(
        (t.fmax_mhz - 46.816).abs() < 1e-3 && t.clock_mhz == 50.0,
        "{t:?}"
    );
    let p = r.worst_path.unwrap();
    assert_eq!(p.from, "design.core.converters$1.shift_TRELLIS_FF_Q_2.Q");
    assert_eq!(p.to, "design.core.converters$3.wr_data_q_TRELLIS_FF_Q_14.M");
    assert_eq!(
        r.placed,
        Placed {
            luts: 7735,
            ffs: 3294,
            dsps: 16,
            brams: 8
        }
    );
}

#[test]
fn broken_reports_say_what_is_missing() {
    let e = parse_nextpnr_report("{\"utilization\": {}}", Family::Ecp5)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no `fmax`"), "{e}");
    let e = parse_nextpnr_report("{\"fmax\": {}}", Family::Ecp5)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no clock"), "{e}");
    let e = parse_nextpnr_report("{\"fmax\": {\"c\": {\"achieved\": 1}}}", Family::Ecp5)
        .unwrap_err()
        .to_string();
    assert!(e.contains("constraint"), "{e}");
    assert!(parse_nextpnr_report("not json", Family::Ecp5).is_err());
}

fn timing(fmax: f64, met: bool) -> Timing {
    Timing {
        board: "ulx3s-85f".into(),
        image: crate::measured::Image::Soc,
        array: 8,
        fm_depth: 4096,
        word_bits: 16,
        clock_mhz: 50.0,
        fmax_mhz: fmax,
        met,
        clocks: vec![ClockTiming {
            name: "design_clock".into(),
            fmax_mhz: fmax,
            clock_mhz: 50.0,
        }],
        worst_path: Some(WorstPath {
            from: "a.Q".into(),
            to: "b.DI".into(),
            delay_ns: Some(25.0),
        }),
        placed: Placed::default(),
        synthesis: "Yosys 0.70".into(),
        place_and_route: "nextpnr-ecp5 0.11".into(),
    }
}

#[test]
fn the_line_and_the_error_name_the_failing_path() {
    let t = timing(40.0, false);
    assert_eq!(
        t.line(),
        "timing NOT met: fmax 40.00 MHz for the 50 MHz clock (ulx3s-85f, routed by nextpnr-ecp5 0.11); worst path a.Q -> b.DI"
    );
    let dir = std::env::temp_dir().join(format!("systole-timing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    t.write(&dir).unwrap();
    assert_eq!(Timing::read(&dir).unwrap(), t);
    let e = crate::routed::finish(&t, &dir).unwrap_err().to_string();
    assert!(
        e.contains("a.Q -> b.DI") && e.contains("no bitstream") && e.contains("--clock-mhz 40 "),
        "{e}"
    );
    assert!(crate::routed::finish(&timing(55.0, true), &dir).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        t.command(),
        "systole bitstream --board ulx3s-85f --soc --array 8 --fm-depth 4096 --word-bits 16 --out DIR"
    );
    let slow = Timing {
        clock_mhz: 37.5,
        ..timing(40.0, true)
    };
    assert!(
        slow.command().contains("--clock-mhz 37.5 --out"),
        "{}",
        slow.command()
    );
}
