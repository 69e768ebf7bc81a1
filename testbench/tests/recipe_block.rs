//! docs/EXTENDING.md, "A new hardware block and its testbench": a rust-hdl block (a running
//! maximum over a window of signed words, as a max-pooling unit would compute it) and its
//! Verilator testbench, every cycle against a plain Rust model. A block whose comparison is
//! unsigned fails it on the first negative word.

use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use systole_testbench::Testbench;

/// The largest signed word since the last `first`, `first`'s own word included.
#[derive(LogicBlock, Default)]
pub struct RunningMax {
    /// Rising-edge clock.
    pub clock: Signal<In, Clock>,
    /// This cycle's word.
    pub a: Signal<In, Signed<16>>,
    /// Start a new window with this cycle's word.
    pub first: Signal<In, Bit>,
    /// The window's maximum so far.
    pub y: Signal<Out, Signed<16>>,
    best: DFF<Signed<16>>,
    /// `a` with its sign bit flipped: unsigned, ordered like the signed word.
    a_key: Signal<Local, Bits<16>>,
    /// The same for `best`.
    best_key: Signal<Local, Bits<16>>,
}

impl Logic for RunningMax {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, best);
        self.a_key.next = unsigned_cast(self.a.val()) ^ bits::<16>(0x8000);
        self.best_key.next = unsigned_cast(self.best.q.val()) ^ bits::<16>(0x8000);
        self.best.d.next = self.best.q.val();
        if self.first.val() | (self.a_key.val() > self.best_key.val()) {
            self.best.d.next = self.a.val();
        }
        self.y.next = self.best.q.val();
    }
}

/// splitmix64: the stimulus.
fn random(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let z = (*s ^ (*s >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn the_running_max_equals_its_model_on_every_cycle() {
    // Verilated on first use (seconds), then loaded from target/systole-testbench/.
    let mut tb = Testbench::new(&mut RunningMax::default()).unwrap();
    let e = tb.port("b").unwrap_err().to_string();
    assert!(e.contains("b"), "a port the block lacks is an error: {e}");
    let (a, first, y) = (
        tb.port("a").unwrap(),
        tb.port("first").unwrap(),
        tb.port("y").unwrap(),
    );
    let (mut seed, mut best, mut left) = (7u64, 0i64, 0u64);
    for cycle in 0..20_000 {
        // Words of every magnitude and sign, including both ends of the range.
        let r = random(&mut seed);
        let word = match r % 16 {
            0 => i16::MIN,
            1 => i16::MAX,
            _ => (r >> 8) as i16 >> (r % 13),
        };
        let start = left == 0;
        left = if start {
            1 + random(&mut seed) % 9
        } else {
            left
        } - 1;
        tb.write_signed(a, word.into()).unwrap();
        tb.write(first, start.into()).unwrap();
        tb.clock();
        best = if start {
            word.into()
        } else {
            best.max(word.into())
        };
        assert_eq!(tb.read_signed(y).unwrap(), best, "cycle {cycle}");
    }
}
