//! The SoC's Verilog: lint (Verilator `-Wall`, with the CPU's own file waived) and the option
//! checks. The SoC running a program is tested in systole-sim (`soc` tests), on the CPU.

use super::*;
use std::process::Command;

pub(crate) fn sim_opts() -> SocOptions {
    SocOptions {
        clock_hz: 16_000_000,
        baud: 1_000_000,
        reset_active_low: true,
        led_active_low: false,
        ram_bytes: 64 * 1024,
        fm_depth: 4096,
        ram_init: None,
        backdoor: true,
    }
}

/// `verilator --lint-only -Wall` of the SoC and the CPU's file; `None` when Verilator or the
/// CPU is not installed.
fn lint(name: &str, verilog: &str) -> Option<(bool, String)> {
    if Command::new("verilator").arg("--version").output().is_err() {
        println!("verilator not on PATH: skipping the lint of {name}");
        return None;
    }
    let cpu = match vexriscv_verilog() {
        Ok(p) => p,
        Err(e) => {
            println!("skipping the lint of {name}: {e}");
            return None;
        }
    };
    let dir = std::env::temp_dir().join(format!("systole-soc-lint-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut waivers = crate::lint_waivers();
    // The CPU is third-party Verilog, linted by its makers, not by this project's rules.
    waivers.push_str(&format!("lint_off -file \"*{VEXRISCV_FILE}\"\n"));
    std::fs::write(dir.join("lint.vlt"), waivers).unwrap();
    std::fs::write(dir.join("soc.v"), verilog).unwrap();
    let out = Command::new("verilator")
        .current_dir(&dir)
        .args([
            "--lint-only",
            "-Wall",
            "--top-module",
            "top",
            "lint.vlt",
            "soc.v",
        ])
        .arg(&cpu)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    Some((out.status.success(), text))
}

#[test]
fn soc_lints_clean() {
    let sim = sim_opts();
    let board = SocOptions {
        clock_hz: 100_000_000,
        baud: 115_200,
        ram_init: Some("firmware.hex".into()),
        backdoor: false,
        fm_depth: 0,
        ..sim.clone()
    };
    for (name, cfg, opts) in [
        ("soc4", ArrayConfig::square(4), sim),
        ("soc3", ArrayConfig::square(3), board),
    ] {
        let v = generate_soc_verilog(&cfg, &opts).unwrap();
        if let Some((ok, text)) = lint(name, &v) {
            assert!(ok, "verilator lint of {name} failed:\n{text}");
        }
    }
}

#[test]
fn bad_options_are_refused_with_a_message() {
    let cfg = ArrayConfig::square(4);
    let e = generate_soc_verilog(
        &cfg,
        &SocOptions {
            ram_bytes: 5000,
            ..sim_opts()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("power of two"), "{e}");
    let e = generate_soc_verilog(
        &cfg,
        &SocOptions {
            baud: 8_000_000,
            ..sim_opts()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("cycles per bit"), "{e}");
    let quoted = SocOptions {
        ram_init: Some("a\"b".into()),
        ..sim_opts()
    };
    assert!(generate_soc_verilog(&cfg, &quoted).is_err());
    let v = generate_soc_verilog(&cfg, &sim_opts()).unwrap();
    assert!(v.contains("module top(") && v.contains("VexRiscv cpu("));
    assert!(v.contains("module systole_acc(") && v.contains("module soc_uart_rx("));
}

/// Yosys synthesis for the Arty A7-35T's part family of the CPU alone and of the SoC with an
/// 8x8 array, a 4096-word conv unit and 64 KiB of RAM. Heavy (minutes); the counts are
/// printed for docs/SOC.md. Both fit the A7-35T (20,800 LUTs, 41,600 flip-flops, 90 DSP48E1,
/// 100 RAMB18): the SoC's block RAM because two lanes share a feature-map copy (a copy per
/// lane would take 123 RAMB18).
#[test]
#[ignore = "Yosys synthesis of the SoC, minutes; run with --ignored --nocapture"]
fn soc_8x8_with_a_4096_word_conv_unit_fits_the_arty_a7_35t() {
    let (Ok(cpu), true) = (
        vexriscv_verilog(),
        Command::new("yosys").arg("-V").output().is_ok(),
    ) else {
        println!("yosys or the CPU is missing: skipped");
        return;
    };
    let opts = SocOptions {
        clock_hz: 100_000_000,
        baud: 115_200,
        backdoor: false,
        fm_depth: 4096,
        ..sim_opts()
    };
    let v = generate_soc_verilog(&ArrayConfig::square(8), &opts).unwrap();
    let dir = std::env::temp_dir().join(format!("systole-soc-fit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("soc.v"), v).unwrap();
    let mut fits = Vec::new();
    for top in ["VexRiscv", "top"] {
        let script = format!(
            "read_verilog {}; read_verilog soc.v; synth_xilinx -flatten -family xc7 -top {top}; \
             tee -q -o stat_{top}.txt stat",
            cpu.display()
        );
        let o = Command::new("yosys")
            .current_dir(&dir)
            .args(["-q", "-p", &script])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let stat = std::fs::read_to_string(dir.join(format!("stat_{top}.txt"))).unwrap();
        let count = |prefixes: &[&str]| -> u32 {
            stat.lines()
                .filter_map(|l| {
                    let mut it = l.split_whitespace();
                    let (cell, n) = (it.next()?, it.next()?.parse::<u32>().ok()?);
                    prefixes.iter().any(|p| cell.starts_with(p)).then_some(n)
                })
                .sum()
        };
        let luts = count(&["LUT"]);
        let lutram = count(&["RAM32", "RAM64", "RAM128", "SRL"]);
        let ffs = count(&["FD"]);
        let dsps = count(&["DSP48E1"]);
        let b18 = count(&["RAMB18E1"]);
        let b36 = count(&["RAMB36E1"]);
        println!(
            "{top}: {luts} LUT + {lutram} LUTRAM/SRL, {ffs} FF, {dsps} DSP48E1, {b18} RAMB18E1 + {b36} RAMB36E1 (= {} RAMB36)",
            f64::from(b18) / 2.0 + f64::from(b36)
        );
        fits.push((
            luts + lutram <= 20_800 && ffs <= 41_600 && dsps <= 90,
            b18 + 2 * b36 <= 100,
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        fits,
        [(true, true), (true, true)],
        "(logic fits, block RAM fits): CPU, SoC"
    );
}

/// The SoC image at `W`-bit words: the CPU's 16-bit lanes reach the array's `W`-bit row ports
/// as their low `W` bits and the C words come back sign-extended to 16 bits (the Verilated SoC
/// runs the conformance body at 8 bits: `tests/tests/device_conformance.rs`); a conv unit below
/// 16 bits is refused as for the array alone.
#[test]
fn the_soc_carries_w_bit_words_in_16_bit_lanes() {
    let cfg = ArrayConfig {
        fm_depth: 0,
        ..ArrayConfig::square(3)
    }
    .with_word_bits(8);
    let opts = SocOptions {
        fm_depth: 0,
        ..sim_opts()
    };
    let v = generate_soc_verilog(&cfg, &opts).unwrap();
    assert!(v.contains("wire [7:0] c_rd_2;"), "{v}");
    assert!(v.contains("input wire [7:0] c_rd_2,"), "{v}");
    assert!(
        v.contains("cstage_0 <= {{{8{c_rd_1[7]}}, c_rd_1}, {{8{c_rd_0[7]}}, c_rd_0}};"),
        "{v}"
    );
    assert!(
        v.contains("cstage_1 <= {16'd0, {{8{c_rd_2[7]}}, c_rd_2}};"),
        "{v}"
    );
    assert!(v.contains(".a_wr_data_1(stage_0[23:16])"), "{v}");
    assert!(v.contains(".b_wr_data_2(stage_1[7:0])"), "{v}");
    if let Some((ok, text)) = lint("soc3w8", &v) {
        assert!(ok, "verilator lint of soc3w8 failed:\n{text}");
    }
    let conv = SocOptions {
        fm_depth: 4096,
        ..sim_opts()
    };
    // The conv unit is built at every W: the SoC at 8 bits takes it too.
    let with_conv = generate_soc_verilog(&cfg, &conv).unwrap();
    assert!(with_conv.len() > v.len(), "no conv unit in the 8-bit SoC");
}
