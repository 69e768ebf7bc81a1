//! Tests of the Verilated models (skipped with a message when this build has none).

use super::*;
use systole_core::regmap;

/// The models of every compiled size, or `None` (and a note) when Verilator is absent.
fn models() -> Option<Vec<VerilatedArray>> {
    if cfg!(systole_no_verilator) {
        eprintln!("systole-sim built without Verilator: {INSTALL_HINT}");
        assert!(matches!(
            VerilatedArray::new(&ArrayConfig::square(8)),
            Err(SimError::NotBuilt)
        ));
        return None;
    }
    Some(
        built_sizes()
            .iter()
            .map(|&n| VerilatedArray::new(&ArrayConfig::square(n)).unwrap())
            .collect(),
    )
}

#[test]
fn id_and_config_registers_read_back() {
    let Some(sims) = models() else { return };
    assert!(!sims.is_empty());
    for mut sim in sims {
        let cfg = *sim.config();
        assert_eq!(sim.read_reg(regmap::ID).unwrap(), regmap::ID_VALUE);
        assert_eq!(sim.read_reg(regmap::CONFIG).unwrap(), cfg.config_word());
        // Reads take no clock; writes take one.
        let c0 = sim.cycles();
        sim.read_reg(regmap::STATUS).unwrap();
        assert_eq!(sim.cycles(), c0);
        sim.write_reg(regmap::SHIFT, 7).unwrap();
        assert_eq!(sim.cycles(), c0 + 1);
        assert_eq!(sim.read_reg(regmap::SHIFT).unwrap(), 7);
        let hw0 = sim.read_reg(regmap::CYCLES).unwrap();
        sim.idle(10).unwrap();
        assert_eq!(sim.read_reg(regmap::CYCLES).unwrap().wrapping_sub(hw0), 10);
    }
}

#[test]
fn unbuilt_sizes_and_bad_accesses_are_errors() {
    if models().is_none() {
        return;
    }
    match VerilatedArray::new(&ArrayConfig::square(64)) {
        Err(SimError::SizeNotBuilt {
            size: 64, built, ..
        }) => assert_eq!(built, built_sizes()),
        other => panic!("expected SizeNotBuilt, got {:?}", other.err()),
    }
    let deep = ArrayConfig::new(built_sizes()[0], 8, 1024).unwrap();
    let e = VerilatedArray::new(&deep).err().unwrap();
    assert!(e.to_string().contains("SYSTOLE_VERILATOR_SIZES"), "{e}");
    let mut sim = VerilatedArray::new(&ArrayConfig::square(built_sizes()[0])).unwrap();
    let n = sim.config().size;
    assert!(sim.write_a_row(0, 0, &vec![1; n + 1]).is_err());
    assert!(sim.write_b_row(0, 512, &vec![1; n]).is_err());
    assert!(sim.read_c_row(0, n as u16, &mut vec![0; n]).is_err());
    assert!(sim.read_c_row(0, 0, &mut vec![0; n - 1]).is_err());
}

/// Every linked model's shim serves its top's ports from the top's own definition: the
/// array's from `systole_hdl::ports`, the board's walked from its rust-hdl block (the layer
/// checked both against what Verilator compiled), the SoC's as Verilator declares them.
#[test]
fn shim_ports_come_from_the_hdl_definition() {
    let listed = |l: &systole_testbench::layer::Linked| -> Vec<systole_testbench::PortInfo> {
        l.ports.iter().map(|p| p.info()).collect()
    };
    for &(n, linked) in crate::linked::MODELS {
        let (_, want) = crate::images::array(&ArrayConfig::square(n)).unwrap();
        assert_eq!(listed(linked), want, "{n}x{n} array");
    }
    if let Some(bridge) = &crate::linked::BRIDGE_IMAGE {
        let (_, want) = crate::images::bridge(bridge.size, 16).unwrap();
        assert_eq!(listed(bridge.linked), want, "bridge image");
    }
    if let Ok(soc) = &crate::linked::SOC {
        let names: Vec<&str> = soc.linked.ports.iter().map(|p| p.name).collect();
        for pin in [
            "clock",
            "reset_pin",
            "uart_rx",
            "uart_tx",
            "load_we",
            "load_addr",
        ] {
            assert!(names.contains(&pin), "SoC lacks {pin}: {names:?}");
        }
        let clocks: Vec<&str> = soc
            .linked
            .ports
            .iter()
            .filter(|p| p.clock)
            .map(|p| p.name)
            .collect();
        assert_eq!(clocks, ["clock"]);
    }
}

/// The driver's overlap on the shape (simulated cycles, not wall clock): PE utilization
/// `m*k*n / size² / cycles` must reach 90% on 8x8 and 16x16.
#[test]
#[ignore = "simulates 256x256x256 on 8x8 and 16x16; run with --ignored --nocapture"]
fn utilization_256_cubed() {
    use systole_core::Rounding;
    use systole_firmware::driver::{matmul, MatmulJob};
    if models().is_none() {
        return;
    }
    let (m, k, n) = (256, 256, 256);
    let a: Vec<i16> = (0..m * k).map(|i| (i as i16).wrapping_mul(31)).collect();
    let b: Vec<i16> = (0..k * n).map(|i| (i as i16).wrapping_mul(17)).collect();
    let job = MatmulJob {
        a: &a,
        b: &b,
        m,
        k,
        n,
        shift: 8,
        rounding: Rounding::Stochastic,
        seed: 1,
    };
    for size in [8, 16].into_iter().filter(|s| built_sizes().contains(s)) {
        let cfg = ArrayConfig::square(size);
        let mut sim = VerilatedArray::new(&cfg).unwrap();
        let mut out = vec![0i16; m * n];
        let c0 = sim.cycles();
        let t0 = std::time::Instant::now();
        let st = matmul(&mut sim, &cfg, &job, &mut out).unwrap();
        let secs = t0.elapsed().as_secs_f64();
        let ideal = (m * k * n / (size * size)) as f64;
        let util = ideal / st.cycles as f64;
        println!(
            "{size}x{size}: {} cycles, ideal {ideal}, utilization {:.1}%, mac cycles {}, {:.0} cycles/s (debug build)",
            st.cycles,
            100.0 * util,
            st.mac_cycles,
            (sim.cycles() - c0) as f64 / secs
        );
        assert_eq!(st.mac_cycles, (m / size * n / size * k) as u64);
        assert!(util >= 0.9, "{size}x{size}: utilization {util:.3}");
    }
}

/// An emitting command written into an idle array has its tile counted in `DONE_COUNT`
/// `K_LEN + 1 + ArrayConfig::emit_latency()` edges after the `COMMAND` write, at every size
/// and K (the latency the guide, the firmware's mock and the drivers take from
/// `systole_core`).
#[test]
fn emitted_tiles_are_counted_after_the_stated_latency() {
    let Some(sims) = models() else { return };
    for mut sim in sims {
        let cfg = *sim.config();
        let n = cfg.size;
        for (tile, k) in [1u32, 2, 7].into_iter().enumerate() {
            sim.write_reg(regmap::K_LEN, k).unwrap();
            for row in 0..k as u16 {
                let data: Vec<i16> = (0..n as i16).map(|i| i + row as i16).collect();
                sim.write_a_row(0, row, &data).unwrap();
                sim.write_b_row(0, row, &data).unwrap();
            }
            sim.write_reg(regmap::COMMAND, regmap::CMD_CLEAR | regmap::CMD_EMIT)
                .unwrap();
            let mut edges = 0;
            while sim.read_reg(regmap::DONE_COUNT).unwrap() != tile as u32 + 1 {
                assert!(edges < 10_000, "{n}x{n}: no tile");
                sim.idle(1).unwrap();
                edges += 1;
            }
            eprintln!("{n}x{n} K {k}: {edges} edges");
            assert_eq!(edges, k + 1 + cfg.emit_latency(), "{n}x{n}, K_LEN {k}");
        }
    }
}
