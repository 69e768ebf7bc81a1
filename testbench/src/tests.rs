//! The testbench against rust-hdl's own simulation of the same block, the cache, and the
//! errors of bad port accesses.

use super::*;
use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use std::path::Path;

/// A multiply-accumulator with a signed accumulator, an 80-bit shift register of past inputs
/// that can also be loaded (ports wider than 64 bits both ways) and a combinational output.
#[derive(LogicBlock, Default)]
struct MacHistory {
    clock: Signal<In, Clock>,
    reset: Signal<In, Bit>,
    a: Signal<In, Signed<16>>,
    b: Signal<In, Signed<16>>,
    en: Signal<In, Bit>,
    x: Signal<In, Bits<16>>,
    load: Signal<In, Bits<80>>,
    load_en: Signal<In, Bit>,
    acc: Signal<Out, Signed<40>>,
    hist: Signal<Out, Bits<80>>,
    next_x: Signal<Out, Bits<16>>,
    acc_q: DFF<Signed<40>>,
    hist_q: DFF<Bits<80>>,
    prod: Signal<Local, Signed<32>>,
}

impl Logic for MacHistory {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, acc_q, hist_q);
        self.prod.next = self.a.val() * self.b.val();
        if self.en.val() {
            self.acc_q.d.next = self.acc_q.q.val() + signed_bit_cast::<40, 32>(self.prod.val());
        }
        if self.reset.val() {
            self.acc_q.d.next = 0.into();
        }
        self.hist_q.d.next = (self.hist_q.q.val() << 16) | bit_cast::<80, 16>(self.x.val());
        if self.load_en.val() {
            self.hist_q.d.next = self.load.val();
        }
        self.acc.next = self.acc_q.q.val();
        self.hist.next = self.hist_q.q.val();
        self.next_x.next = self.x.val() + 1;
    }
}

/// Small deterministic generator (splitmix64).
fn rng(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The outputs of rust-hdl's simulation: (acc, hist words, next_x).
fn hdl_outputs(m: &MacHistory) -> (i64, Vec<u64>, u64) {
    let acc = unsigned_cast(m.acc.val()).to_u64();
    let acc = ((acc << 24) as i64) >> 24;
    let h = m.hist.val();
    let hist = vec![h.get_bits::<64>(0).to_u64(), h.get_bits::<16>(64).to_u64()];
    (acc, hist, m.next_x.val().to_u64())
}

fn tb_outputs(tb: &mut Testbench) -> (i64, Vec<u64>, u64) {
    (
        tb.read_signed("acc").unwrap(),
        tb.read_words("hist").unwrap(),
        tb.read("next_x").unwrap(),
    )
}

fn settle(m: &mut MacHistory) {
    assert!(simulate(m, 100), "rust-hdl's simulation did not settle");
}

#[test]
fn verilated_block_matches_rust_hdl_simulation_every_cycle() {
    let mut tb = Testbench::new(&mut MacHistory::default()).unwrap();
    let mut m = MacHistory::default();
    m.connect_all();
    settle(&mut m);
    let (a, b, en, x, reset) = (
        tb.port("a").unwrap(),
        tb.port("b").unwrap(),
        tb.port("en").unwrap(),
        tb.port("x").unwrap(),
        tb.port("reset").unwrap(),
    );
    let (load, load_en) = (tb.port("load").unwrap(), tb.port("load_en").unwrap());
    let mut s = 7;
    for cycle in 0..2000 {
        // Extreme operands half the time (the largest products), a reset about every 50 cycles.
        let pick = |s: &mut u64| match rng(s) % 4 {
            0 => -32768,
            1 => 32767,
            _ => (rng(s) as u16) as i16 as i64,
        };
        let (va, vb, ven, vx, vr) = (
            pick(&mut s),
            pick(&mut s),
            !rng(&mut s).is_multiple_of(4),
            rng(&mut s) as u16,
            rng(&mut s).is_multiple_of(50),
        );
        tb.write_signed(a, va).unwrap();
        tb.write_signed(b, vb).unwrap();
        tb.write(en, ven.into()).unwrap();
        tb.write(x, vx.into()).unwrap();
        tb.write(reset, vr.into()).unwrap();
        let (vl, vle) = (
            [rng(&mut s), rng(&mut s) & 0xffff],
            rng(&mut s).is_multiple_of(10),
        );
        tb.write_words(load, &vl).unwrap();
        tb.write(load_en, vle.into()).unwrap();
        m.load.next =
            (bit_cast::<80, 16>(bits::<16>(vl[1])) << 64) | bit_cast::<80, 64>(bits::<64>(vl[0]));
        m.load_en.next = vle;
        m.a.next = signed(va);
        m.b.next = signed(vb);
        m.en.next = ven;
        m.x.next = bits(vx.into());
        m.reset.next = vr;
        settle(&mut m);
        assert_eq!(
            tb_outputs(&mut tb),
            hdl_outputs(&m),
            "cycle {cycle}, before the edge"
        );
        tb.clock();
        m.clock.next = true.into();
        settle(&mut m);
        m.clock.next = false.into();
        settle(&mut m);
        assert_eq!(
            tb_outputs(&mut tb),
            hdl_outputs(&m),
            "cycle {cycle}, after the edge"
        );
    }
    assert_eq!(tb.cycles(), 2000);
}

#[test]
fn a_second_build_comes_from_the_cache_and_traces_keep_rust_hdl_names() {
    let cache = default_cache_dir().join("cache-test");
    let opts = Options {
        trace: Some(TraceFormat::Vcd),
        cache_dir: Some(cache.clone()),
        rebuild: true,
    };
    let first = Testbench::with_options(&mut MacHistory::default(), &opts).unwrap();
    assert!(!first.cached(), "rebuild must run Verilator");
    let again = Options {
        rebuild: false,
        ..opts
    };
    let mut tb = Testbench::with_options(&mut MacHistory::default(), &again).unwrap();
    assert!(tb.cached(), "the same block must load from the cache");
    assert_eq!(tb.model_dir(), first.model_dir());
    drop(first);
    let vcd = cache.join(format!("trace-{}.vcd", std::process::id()));
    tb.trace(&vcd).unwrap();
    tb.reset().unwrap();
    tb.write("x", 0xbeef).unwrap();
    tb.clock();
    tb.close_trace();
    let text = std::fs::read_to_string(&vcd).unwrap();
    let _ = std::fs::remove_file(&vcd);
    for name in [" acc_q$q ", " hist ", " next_x ", " clock "] {
        assert!(
            text.contains(name),
            "{name} missing from the trace:\n{text}"
        );
    }
    // Two cycles of reset and one more: the rising edges at times 1, 3 and 5.
    assert!(text.contains("#5"), "no third rising edge:\n{text}");
    assert_eq!(tb.read_words("hist").unwrap(), vec![0xbeef, 0]);
}

#[test]
fn bad_port_accesses_are_errors_naming_the_port_and_the_fix() {
    let mut tb = Testbench::new(&mut MacHistory::default()).unwrap();
    let e = tb.write("acc_in", 1).unwrap_err().to_string();
    assert!(
        e.contains("no port `acc_in`") && e.contains("acc (output, 40 bits)"),
        "{e}"
    );
    let e = tb.write("acc", 1).unwrap_err().to_string();
    assert!(e.contains("`acc` is an output"), "{e}");
    let e = tb.write("x", 0x1_0000).unwrap_err().to_string();
    assert!(e.contains("does not fit the 16-bit port `x`"), "{e}");
    let e = tb.write_signed("a", 32768).unwrap_err().to_string();
    assert!(e.contains("32768 does not fit the 16-bit port `a`"), "{e}");
    let e = tb.read("hist").unwrap_err().to_string();
    assert!(e.contains("`hist` is 80 bits wide: use read_words"), "{e}");
    let e = tb
        .write_words("load", &[0, 1 << 16])
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not fit the 80-bit port `load`"), "{e}");
    let e = tb.write_words("x", &[1, 2]).unwrap_err().to_string();
    assert!(e.contains("takes 1 64-bit words, not 2"), "{e}");
    let e = tb.trace(Path::new("t.vcd")).unwrap_err().to_string();
    assert!(e.contains("built without tracing"), "{e}");
    // Nothing wrote a port.
    assert_eq!(tb.read("x").unwrap(), 0);
}

#[test]
fn a_missing_verilator_says_how_to_install_it() {
    let e = toolchain::version_of("verilator-that-is-not-installed").unwrap_err();
    assert!(matches!(e, TestbenchError::VerilatorMissing { .. }));
    let text = e.to_string();
    assert!(
        text.contains("apt-get install verilator") && text.contains("./x"),
        "{text}"
    );
    assert!(std::error::Error::source(&e).is_some(), "the cause is kept");
}

#[test]
fn fst_traces_are_written_when_built_for_them() {
    let opts = Options {
        trace: Some(TraceFormat::Fst),
        ..Options::default()
    };
    let mut tb = Testbench::with_options(&mut MacHistory::default(), &opts).unwrap();
    let fst = std::env::temp_dir().join(format!("systole-tb-{}.fst", std::process::id()));
    tb.trace(&fst).unwrap();
    tb.reset().unwrap();
    tb.clock_n(10);
    tb.close_trace();
    let bytes = std::fs::read(&fst).unwrap();
    let _ = std::fs::remove_file(&fst);
    // An FST file opens with its header block (type 0) and names the signals.
    assert_eq!(bytes.first(), Some(&0), "not an FST header");
    assert!(bytes.len() > 100, "an empty trace: {} bytes", bytes.len());
}

/// A block that writes its own input.
#[derive(LogicBlock, Default)]
struct WritesItsInput {
    pub a: Signal<In, Bit>,
    pub y: Signal<Out, Bit>,
}

impl Logic for WritesItsInput {
    #[hdl_gen]
    fn update(&mut self) {
        self.a.next = true;
        self.y.next = self.a.val();
    }
}

/// rust-hdl's design-check failure stays the error's source, naming the signal at fault.
#[test]
fn a_failed_design_check_keeps_rust_hdls_error_as_its_source() {
    use rust_hdl_core::check_error::CheckError;
    use std::error::Error;
    let Err(e) = Testbench::new(&mut WritesItsInput::default()) else {
        panic!("a block writing its input was Verilated")
    };
    assert!(matches!(e, TestbenchError::Check(_)), "{e}");
    let cause = e.source().expect("the design check as the source");
    let check = cause.downcast_ref::<DesignCheck>().expect("a DesignCheck");
    assert!(
        matches!(&check.0, CheckError::WritesToInputs(l) if l.iter().any(|p| p.name == "a")),
        "{check:?}"
    );
    assert!(e.to_string().contains("inputs written to"), "{e}");
}
