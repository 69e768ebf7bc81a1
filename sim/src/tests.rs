//! Tests of the Verilated models (skipped with a message when this build has none).

use super::*;
use systole_core::regmap;

/// The models of every compiled size, or `None` (and a note) when Verilator is absent.
fn models() -> Option<Vec<VerilatedArray>> {
    if cfg!(systole_no_verilator) {
        eprintln!("systole-sim built without Verilator: {INSTALL_HINT}");
        assert_eq!(
            VerilatedArray::new(&ArrayConfig::square(8)).err(),
            Some(SimError::NotBuilt)
        );
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

#[test]
fn trace_writes_a_vcd() {
    let Some(mut sims) = models() else { return };
    let sim = &mut sims[0];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.vcd");
    match sim.open_trace(&path) {
        Err(SimError::TraceNotBuilt) => return,
        r => r.unwrap(),
    }
    sim.write_reg(regmap::SEED, 5).unwrap();
    sim.idle(3).unwrap();
    sim.close_trace();
    let vcd = std::fs::read_to_string(&path).unwrap();
    assert!(vcd.contains("$enddefinitions"), "not a VCD");
    assert!(vcd.contains("reg_wdata"), "ports missing from the VCD");
    assert!(sim.open_trace(Path::new("/nonexistent-dir/x.vcd")).is_err());
}

#[test]
fn a_trace_opened_after_the_first_clock_is_refused() {
    let Some(mut sims) = models() else { return };
    let sim = &mut sims[0];
    sim.read_reg(regmap::STATUS).unwrap();
    sim.idle(1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    match sim.open_trace(&dir.path().join("late.vcd")) {
        Err(SimError::TraceNotBuilt) | Err(SimError::TraceTooLate) => {}
        other => panic!("expected TraceTooLate, got {other:?}"),
    }
}

/// The traced model (a separate Verilation) computes exactly what the fast one does.
#[test]
fn traced_and_fast_models_agree() {
    use systole_core::Rounding;
    use systole_firmware::driver::{matmul, MatmulJob};
    let Some(sims) = models() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (m, k, n) = (20, 37, 19);
    let a: Vec<i16> = (0..m * k).map(|i| (i as i16).wrapping_mul(-977)).collect();
    let b: Vec<i16> = (0..k * n).map(|i| (i as i16).wrapping_mul(1201)).collect();
    let job = MatmulJob {
        a: &a,
        b: &b,
        m,
        k,
        n,
        shift: 9,
        rounding: Rounding::Stochastic,
        seed: 7,
    };
    for mut fast in sims {
        let cfg = *fast.config();
        let mut traced = VerilatedArray::new(&cfg).unwrap();
        match traced.open_trace(&dir.path().join(format!("sa{}.vcd", cfg.size))) {
            Err(SimError::TraceNotBuilt) => return,
            r => r.unwrap(),
        }
        let (mut want, mut got) = (vec![0i16; m * n], vec![0i16; m * n]);
        let s1 = matmul(&mut fast, &cfg, &job, &mut want).unwrap();
        let s2 = matmul(&mut traced, &cfg, &job, &mut got).unwrap();
        assert_eq!(want, got, "{0}x{0}: traced model differs", cfg.size);
        assert_eq!(s1, s2);
        assert_eq!(fast.cycles(), traced.cycles());
        assert_eq!(
            fast.read_reg(regmap::CYCLES).unwrap(),
            traced.read_reg(regmap::CYCLES).unwrap()
        );
    }
}

#[test]
fn port_parser_reads_rust_hdl_declarations() {
    let v = "module top(clock,reg_addr,a_wr_data$0,reg_rdata);\n// Module arguments\n\
             input wire  clock;\ninput wire  [7:0] reg_addr;\n\
             input wire signed [15:0] a_wr_data$0;\noutput reg  [31:0] reg_rdata;\nendmodule";
    let p = ports::parse_top_ports(v).unwrap();
    assert_eq!(p.len(), 4);
    assert_eq!(
        (p[1].name.as_str(), p[1].width, p[1].input),
        ("reg_addr", 8, true)
    );
    assert_eq!(
        (p[2].cpp(), p[2].width),
        ("a_wr_data__0240".to_string(), 16)
    );
    assert!(!p[3].input);
    let e = ports::TopPorts::find(&p, 1).err().unwrap();
    assert!(e.contains("`reset` is missing"), "{e}");
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
