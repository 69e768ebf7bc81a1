//! A user-defined block and its Verilator testbench against the golden model.
//!
//! `RoundingPe` is a processing element that rounds on its own: it accumulates `a * b` exactly
//! in 48 bits and shows the running sum shifted down by `SHIFT` bits, rounded to nearest-even
//! and saturated to 16 bits (the array's PE leaves that to the column converters). The
//! testbench drives random dot products through the Verilated block and checks every cycle
//! against `systole_core::numeric::convert`, the numeric contract's one definition.
//!
//! Run: `cargo run --release -p systole-testbench --example rounding_pe`

use rust_hdl_core::prelude::*;
use rust_hdl_widgets::prelude::*;
use systole_core::numeric::{convert, Rounding};
use systole_testbench::{Testbench, TestbenchError};

/// Bits dropped by the rounding.
pub const SHIFT: u32 = 8;

/// Multiply-accumulate with a nearest-even, saturating 16-bit view of the sum.
#[derive(LogicBlock, Default)]
pub struct RoundingPe {
    /// Rising-edge clock.
    pub clock: Signal<In, Clock>,
    /// Operands of this cycle's product.
    pub a: Signal<In, Signed<16>>,
    /// See `a`.
    pub b: Signal<In, Signed<16>>,
    /// Start a new dot product with this cycle's product.
    pub first: Signal<In, Bit>,
    /// The sum so far, rounded and saturated.
    pub y: Signal<Out, Signed<16>>,
    acc: DFF<Signed<48>>,
    /// The exact product. A signal of its own: in Verilog, `$signed(a * b)` would be 16 bits
    /// wide (rust-hdl's simulation would not show that; the Verilated testbench does).
    prod: Signal<Local, Signed<32>>,
    /// The sum plus 2^47 (its sign bit flipped): unsigned, ordered like the signed sum.
    biased: Signal<Local, Bits<48>>,
    /// `biased >> SHIFT`, rounded to nearest-even: the result plus 2^39.
    q: Signal<Local, Bits<41>>,
}

impl Logic for RoundingPe {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, acc);
        self.prod.next = self.a.val() * self.b.val();
        if self.first.val() {
            self.acc.d.next = signed_bit_cast::<48, 32>(self.prod.val());
        } else {
            self.acc.d.next = self.acc.q.val() + signed_bit_cast::<48, 32>(self.prod.val());
        }
        self.biased.next = unsigned_cast(self.acc.q.val()) ^ bits::<48>(1 << 47);
        self.q.next = bit_cast::<41, 40>(self.biased.val().get_bits::<40>(8));
        // Above half, or exactly half and odd: round up.
        if (self.biased.val().get_bits::<8>(0) > 128)
            | ((self.biased.val().get_bits::<8>(0) == 128) & self.biased.val().get_bit(8))
        {
            self.q.next = bit_cast::<41, 40>(self.biased.val().get_bits::<40>(8)) + 1;
        }
        // 2^39 is zero modulo 2^16: the low 16 bits of `q` are the result when it fits.
        self.y.next = signed_cast(self.q.val().get_bits::<16>(0));
        if self.q.val() < bits::<41>((1 << 39) - 32768) {
            self.y.next = signed_cast(bits::<16>(0x8000));
        }
        if self.q.val() > bits::<41>((1 << 39) + 32767) {
            self.y.next = signed_cast(bits::<16>(0x7fff));
        }
    }
}

/// Drives `cycles` cycles of random dot products (lengths 1 to 64) through the Verilated
/// block and compares every output with the golden model. Returns the cycles checked.
pub fn check_against_golden(tb: &mut Testbench, cycles: u64) -> Result<u64, TestbenchError> {
    let (a, b, first, y) = (
        tb.port("a")?,
        tb.port("b")?,
        tb.port("first")?,
        tb.port("y")?,
    );
    let mut seed = 1u64;
    let mut acc = 0i64;
    let mut left = 0;
    for cycle in 0..cycles {
        // Operands of every magnitude, so sums both fit and saturate.
        let (va, vb) = (operand(&mut seed), operand(&mut seed));
        let start = left == 0;
        left = if start {
            1 + random(&mut seed) % 64
        } else {
            left
        } - 1;
        tb.write_signed(a, va.into())?;
        tb.write_signed(b, vb.into())?;
        tb.write(first, start.into())?;
        tb.clock();
        acc = if start { 0 } else { acc } + i64::from(va) * i64::from(vb);
        let want = convert(acc, SHIFT, Rounding::NearestEven, 0, 16);
        let got = tb.read_signed(y)?;
        assert_eq!(got, want, "cycle {cycle}: sum {acc}");
    }
    Ok(cycles)
}

/// A random 16-bit operand shifted down by a random amount (0 to 15 bits).
pub fn operand(s: &mut u64) -> i16 {
    let r = random(s);
    (r as i16) >> (r >> 60)
}

/// splitmix64: the stimulus.
pub fn random(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let z = (*s ^ (*s >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn main() -> Result<(), TestbenchError> {
    let mut tb = Testbench::new(&mut RoundingPe::default())?;
    let checked = check_against_golden(&mut tb, 100_000)?;
    println!(
        "RoundingPe: {checked} cycles equal to the golden model (model {} in {:.1?})",
        if tb.cached() {
            "from the cache"
        } else {
            "Verilated"
        },
        tb.build_time()
    );
    Ok(())
}
