use super::super::find;
use super::*;

fn conv(n: usize, fm_depth: usize) -> ArrayConfig {
    ArrayConfig {
        fm_depth,
        ..ArrayConfig::square(n)
    }
}

#[test]
fn generated_files_hold_the_soc_the_image_and_the_board() {
    let arty = find("arty-a7-35").unwrap();
    let image = [0x0000_0297, 0xdead_beef, 7];
    let f = soc_files(arty, &conv(4, 4096), &image).unwrap();
    let names: Vec<&str> = f.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [SOC_VERILOG, FIRMWARE_HEX, files::XDC, files::VIVADO_TCL]
    );
    let (v, hex, xdc, tcl) = (&f[0].1, &f[1].1, &f[2].1, &f[3].1);
    assert!(
        v.contains("module top(") && v.contains("VexRiscv cpu("),
        "not the SoC"
    );
    assert!(
        v.contains(".HAS_INIT(1'b1)") && v.contains(".INIT_FILE(\"firmware.hex\")"),
        "no RAM init"
    );
    // The RAM block has loader ports; a board build's top ties them off, never exposes them.
    let top = &v[v.find("module top(").unwrap()..];
    let ports = &top[..top.find(");").unwrap()];
    assert!(
        !ports.contains("load_we"),
        "a board build has no simulation loader"
    );
    // Every RAM word, the image first, then zeros.
    let words: Vec<&str> = hex.lines().collect();
    assert_eq!(words.len(), BASE_RAM_BYTES as usize / 4);
    assert_eq!(words[..4], ["00000297", "deadbeef", "00000007", "00000000"]);
    assert!(words[3..].iter().all(|w| *w == "00000000"));
    for port in ["clock", "reset_pin", "uart_rx", "uart_tx", "led0", "led1"] {
        assert!(xdc.contains(&format!("{{ {port} }}")), "{port} not placed");
    }
    for file in [VEXRISCV_FILE, SOC_VERILOG, files::XDC] {
        assert!(
            tcl.contains(&format!("{{{file}}}")),
            "{file} not read:\n{tcl}"
        );
    }
    assert!(tcl.contains("synth_design -top top -part xc7a35ticsg324-1L"));
}

#[test]
fn bram_parts_count_every_memory() {
    let arty = find("arty-a7-35").unwrap();
    // 8x8, 4096 words: CPU 10, 64 KiB RAM 32, 2 KiB FIFO 1, 16 lanes of A/B 16, two engines
    // of four 64-kbit copies 32 (Yosys: 91).
    let parts = bram_parts(arty, &conv(8, 4096));
    assert_eq!(parts.map(|p| p.1), [CPU_RAMB18, 32, 1, 16, 32], "{parts:?}");
    assert_eq!(estimate(arty, &conv(8, 4096)).brams, 91);
    assert_eq!(estimate(arty, &conv(8, 8192)).brams, 123);
}

#[test]
fn a_soc_that_cannot_fit_is_refused_before_any_file() {
    let arty = find("arty-a7-35").unwrap();
    let dir = std::env::temp_dir().join(format!("systole-soc-refused-{}", std::process::id()));
    let e = bitstream(arty, &conv(8, 8192), &dir, &[1], Path::new("/nonexistent"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("123 RAMB18") && e.contains("feature maps 64") && e.contains("has 100"),
        "{e}"
    );
    let best = largest_conv_unit(arty).unwrap();
    assert!(
        e.contains(&format!("{0}x{0} with {1} words", best.size, best.fm_depth)),
        "{e}"
    );
    assert!(!dir.exists(), "nothing may be written");
    let ice = find("icebreaker").unwrap();
    let e = soc_files(ice, &conv(2, 0), &[1]).unwrap_err().to_string();
    assert!(e.contains("7-series and ECP5 boards only"), "{e}");
    // Too many multipliers: the accelerator's own check.
    let e = soc_files(arty, &conv(10, 0), &[1]).unwrap_err().to_string();
    assert!(e.contains("hard multipliers"), "{e}");
}

#[test]
fn a_missing_or_oversized_image_is_refused() {
    let arty = find("arty-a7-35").unwrap();
    let too_big = vec![0; BASE_RAM_BYTES as usize / 4 + 1];
    for image in [&[][..], &too_big[..]] {
        let e = soc_files(arty, &conv(4, 0), image).unwrap_err().to_string();
        assert!(
            e.contains("firmware image") && e.contains("systole-soc-image"),
            "{e}"
        );
    }
}

#[test]
fn each_board_builds_the_soc_with_its_own_ram() {
    use systole_core::soc::TRAINING_RAM_BYTES;
    for (name, ram) in [
        ("arty-a7-35", BASE_RAM_BYTES),
        ("basys3", BASE_RAM_BYTES),
        ("arty-a7-100", TRAINING_RAM_BYTES),
        ("nexys-a7-100", TRAINING_RAM_BYTES),
    ] {
        let board = find(name).unwrap();
        assert_eq!(ram_bytes(board), ram, "{name}");
        let f = soc_files(board, &conv(8, 4096), &[0x13]).unwrap();
        assert_eq!(
            f[1].1.lines().count(),
            ram as usize / 4,
            "{name}: hex words"
        );
        assert!(
            f[0].1
                .contains(&format!(".ADDR_BITS({})", (ram / 4).trailing_zeros())),
            "{name}: the Verilog's RAM"
        );
        // A RAMB18 holds 2 KiB: the RAM's share of the block RAM follows its size.
        let parts = bram_parts(board, &conv(8, 4096));
        assert_eq!(parts[1], ("RAM", ram / 2048), "{name}");
    }
    // 8x8 with 4096 words and 256 KiB on the A7-100T: 59 + 128 of its 270 RAMB18.
    let a100 = find("arty-a7-100").unwrap();
    assert_eq!(estimate(a100, &conv(8, 4096)).brams, 91 - 32 + 128);
    assert!(clearly_too_big(a100, &conv(8, 8192)).is_none());
}

#[test]
fn largest_conv_units_beside_the_cpu() {
    let best = |name| largest_conv_unit(find(name).unwrap()).map(|c| (c.size, c.fm_depth));
    assert_eq!(best("icebreaker"), None);
    let arty = best("arty-a7-35").unwrap();
    // 8x8 with 4096 words beside the CPU: 91 of 100 RAMB18, 16,800 LUTs (Yosys) within the
    // 85% of the LUTs the model allows (8192 words: 123 RAMB18; 9x9: about 19,200 LUTs).
    assert_eq!(arty, (8, 4096));
    let e = estimate(find("arty-a7-35").unwrap(), &conv(8, 4096));
    assert!(e.brams <= 100 && e.luts <= 20_800 && e.dsps <= 90, "{e:?}");
    let board = find("arty-a7-35").unwrap();
    let fits = |n, d| model::fits(board, &estimate(board, &conv(n, d)));
    assert!(fits(arty.0, arty.1), "{arty:?}");
    assert!(
        !fits(arty.0 + 1, 512) && !fits(arty.0, arty.1 * 2),
        "{arty:?} is not the largest"
    );
}

/// Yosys `synth_xilinx -flatten` of the synthesis table in docs/SOC.md: the bridge top (UART bridge) and the SoC
/// (the CPU, a one-instruction image) with a conv unit, each printed with its share of the
/// part (minutes each; `SYSTOLE_SYNTH=arty-a7-35:8:4096:cpu,arty-a7-35:8:4096:alone,...`
/// picks the rows). Designs the part cannot hold are still synthesised (on a copy of the board
/// without limits) to show what they would take. The claim checked: 8x8 with 4096 words beside
/// the CPU passes the estimate's fit rule (LUTs within the headroom) by Yosys's own count.
#[test]
#[ignore = "heavy: minutes of Yosys per configuration"]
fn synthesis_figures() {
    use systole_hdl::bridge_top::{generate_bridge_verilog_with, BridgeTopOptions};
    let list = std::env::var("SYSTOLE_SYNTH").unwrap_or_else(|_| "arty-a7-35:8:4096:cpu".into());
    for item in list.split(',') {
        let f: Vec<&str> = item.split(':').collect();
        let (board, n, fm) = (
            find(f[0]).unwrap(),
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
        );
        let with_cpu = f[3] == "cpu";
        let unlimited = Board {
            budget: crate::Budget {
                dsps: u32::MAX / 2,
                bram_blocks: u32::MAX / 2,
                ..board.budget
            },
            ..*board
        };
        let dir = std::env::temp_dir().join(format!("systole-synth-{}", item.replace(':', "-")));
        std::fs::create_dir_all(&dir).unwrap();
        let verilog: &[&str] = if with_cpu {
            let cpu = systole_hdl::soc::vexriscv_verilog().unwrap();
            std::fs::copy(&cpu, dir.join(VEXRISCV_FILE)).unwrap();
            for (name, text) in soc_files(&unlimited, &conv(n, fm), &[0x13]).unwrap() {
                std::fs::write(dir.join(name), text).unwrap();
            }
            &[VEXRISCV_FILE, SOC_VERILOG]
        } else {
            let opts = BridgeTopOptions {
                clock_hz: board.clock_hz,
                baud: BAUD,
                reset_active_low: board.reset.active_low,
                led_active_low: board.leds.first().is_some_and(|l| l.active_low),
                halve_clock: board.halve_clock,
                fm_depth: fm,
            };
            let text = generate_bridge_verilog_with(&conv(n, fm), &opts).unwrap();
            std::fs::write(dir.join(files::VERILOG), text).unwrap();
            &[files::VERILOG]
        };
        let r = tools::yosys_synth(board, verilog, &dir).unwrap();
        let b = &board.budget;
        let pct = |x: u32, of: u32| 100.0 * f64::from(x) / f64::from(of);
        println!(
            "{item}: LUT {} + {} ({:.1}%), FF {}, DSP {}, RAMB18 {} ({:.0}%)",
            r.luts,
            r.lutram,
            pct(r.luts + r.lutram, b.luts),
            r.ffs,
            r.dsps,
            r.brams,
            pct(r.brams, b.bram_blocks)
        );
        if item == "arty-a7-35:8:4096:cpu" {
            let e = model::Estimate {
                luts: r.luts + r.lutram,
                ffs: r.ffs,
                dsps: r.dsps,
                brams: r.brams,
            };
            assert!(model::fits(board, &e), "{e:?}");
        }
    }
}
