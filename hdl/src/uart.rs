//! 8N1 UART transmitter and receiver (8 data bits, no parity, one stop bit, LSB first).
//!
//! Both take the bit time in clock cycles as a constructor argument (`clock_hz / baud`,
//! rounded), so one block serves every board clock. Reset is synchronous and active high, like
//! the accelerator's.

use rust_hdl_core::prelude::*;
use rust_hdl_widgets::{dff::DFF, dff_setup};

/// Clock cycles per bit for a clock and baud rate, or an error text if the ratio is outside
/// what the 16-bit counters and the mid-bit sampling can do.
pub fn clocks_per_bit(clock_hz: u64, baud: u64) -> Result<u64, String> {
    if baud == 0 {
        return Err("baud rate 0".into());
    }
    let cpb = (clock_hz + baud / 2) / baud;
    if !(4..=65_535).contains(&cpb) {
        return Err(format!(
            "a {clock_hz} Hz clock gives {cpb} cycles per bit at {baud} baud: need 4 to 65535"
        ));
    }
    Ok(cpb)
}

/// UART transmitter: pulse `start` for one cycle with `data` while `busy` is low; `tx` idles
/// high.
#[derive(LogicBlock)]
pub struct UartTx {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset, active high.
    pub reset: Signal<In, Bit>,
    /// Byte to send, sampled when `start` is high and `busy` low.
    pub data: Signal<In, Bits<8>>,
    /// Starts a frame.
    pub start: Signal<In, Bit>,
    /// A frame is being sent; `start` is ignored.
    pub busy: Signal<Out, Bit>,
    /// Serial output.
    pub tx: Signal<Out, Bit>,
    /// Start bit, 8 data bits, stop bit; shifted out LSB first.
    frame: DFF<Bits<10>>,
    bits_left: DFF<Bits<4>>,
    count: DFF<Bits<16>>,
    last_count: Constant<Bits<16>>,
}

impl UartTx {
    /// A transmitter whose bits last `clocks_per_bit` cycles (see [`clocks_per_bit`]).
    pub fn new(clocks_per_bit: u64) -> Self {
        Self {
            clock: Default::default(),
            reset: Default::default(),
            data: Default::default(),
            start: Default::default(),
            busy: Default::default(),
            tx: Default::default(),
            frame: Default::default(),
            bits_left: Default::default(),
            count: Default::default(),
            last_count: Constant::new((clocks_per_bit - 1).to_bits()),
        }
    }
}

impl Logic for UartTx {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, frame, bits_left, count);
        self.busy.next = self.bits_left.q.val().any();
        // Idle line is high; while sending, bit 0 of the frame is on the wire.
        self.tx.next = !self.bits_left.q.val().any() | self.frame.q.val().get_bit(0);
        if self.bits_left.q.val().any() {
            if self.count.q.val() == self.last_count.val() {
                self.count.d.next = 0.into();
                // Shift in ones so the line stays high after the stop bit.
                self.frame.d.next = (self.frame.q.val() >> 1) | bits::<10>(512);
                self.bits_left.d.next = self.bits_left.q.val() - 1;
            } else {
                self.count.d.next = self.count.q.val() + 1;
            }
        } else if self.start.val() {
            self.frame.d.next = (bit_cast::<10, 8>(self.data.val()) << 1) | bits::<10>(512);
            self.bits_left.d.next = 10.into();
            self.count.d.next = 0.into();
        }
        if self.reset.val() {
            self.bits_left.d.next = 0.into();
            self.count.d.next = 0.into();
        }
    }
}

/// UART receiver: `valid` pulses for one cycle with `data` when a frame with a good stop bit
/// has arrived. A start bit shorter than half a bit time is ignored as a glitch.
#[derive(LogicBlock)]
pub struct UartRx {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset, active high.
    pub reset: Signal<In, Bit>,
    /// Serial input (asynchronous: synchronized here with two flip-flops).
    pub rx: Signal<In, Bit>,
    /// Received byte, valid while `valid` is high.
    pub data: Signal<Out, Bits<8>>,
    /// One-cycle strobe per received byte.
    pub valid: Signal<Out, Bit>,
    sync0: DFF<Bit>,
    sync1: DFF<Bit>,
    active: DFF<Bit>,
    /// Bits sampled so far in this frame: 0 is the start bit, 1..=8 data, 9 the stop bit.
    bit_index: DFF<Bits<4>>,
    count: DFF<Bits<16>>,
    shift: DFF<Bits<8>>,
    out: DFF<Bits<8>>,
    strobe: DFF<Bit>,
    last_count: Constant<Bits<16>>,
    half_count: Constant<Bits<16>>,
}

impl UartRx {
    /// A receiver for bits of `clocks_per_bit` cycles (see [`clocks_per_bit`]).
    pub fn new(clocks_per_bit: u64) -> Self {
        Self {
            clock: Default::default(),
            reset: Default::default(),
            rx: Default::default(),
            data: Default::default(),
            valid: Default::default(),
            sync0: Default::default(),
            sync1: Default::default(),
            active: Default::default(),
            bit_index: Default::default(),
            count: Default::default(),
            shift: Default::default(),
            out: Default::default(),
            strobe: Default::default(),
            last_count: Constant::new((clocks_per_bit - 1).to_bits()),
            half_count: Constant::new((clocks_per_bit / 2 - 1).to_bits()),
        }
    }
}

impl Logic for UartRx {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, sync0, sync1, active, bit_index, count, shift, out, strobe);
        self.sync0.d.next = self.rx.val();
        self.sync1.d.next = self.sync0.q.val();
        self.strobe.d.next = false;
        self.data.next = self.out.q.val();
        self.valid.next = self.strobe.q.val();
        if !self.active.q.val() {
            if !self.sync1.q.val() {
                // Falling edge of a start bit: sample again in the middle of it.
                self.active.d.next = true;
                self.bit_index.d.next = 0.into();
                self.count.d.next = self.half_count.val();
            }
        } else if self.count.q.val().any() {
            self.count.d.next = self.count.q.val() - 1;
        } else {
            self.count.d.next = self.last_count.val();
            self.bit_index.d.next = self.bit_index.q.val() + 1;
            if self.bit_index.q.val() == 0 {
                if self.sync1.q.val() {
                    self.active.d.next = false;
                }
            } else if self.bit_index.q.val() == 9 {
                self.active.d.next = false;
                if self.sync1.q.val() {
                    self.out.d.next = self.shift.q.val();
                    self.strobe.d.next = true;
                }
            } else {
                if self.sync1.q.val() {
                    self.shift.d.next = (self.shift.q.val() >> 1) | bits::<8>(128);
                } else {
                    self.shift.d.next = self.shift.q.val() >> 1;
                }
            }
        }
        if self.reset.val() {
            self.active.d.next = false;
            self.strobe.d.next = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cycles per bit in the tests: small, so rust-hdl's simulator stays fast.
    const CPB: u64 = 6;

    #[derive(LogicBlock)]
    struct Loop {
        clock: Signal<In, Clock>,
        reset: Signal<In, Bit>,
        data: Signal<In, Bits<8>>,
        start: Signal<In, Bit>,
        busy: Signal<Out, Bit>,
        got: Signal<Out, Bits<8>>,
        valid: Signal<Out, Bit>,
        tx: UartTx,
        rx: UartRx,
    }

    impl Logic for Loop {
        #[hdl_gen]
        fn update(&mut self) {
            self.tx.clock.next = self.clock.val();
            self.rx.clock.next = self.clock.val();
            self.tx.reset.next = self.reset.val();
            self.rx.reset.next = self.reset.val();
            self.tx.data.next = self.data.val();
            self.tx.start.next = self.start.val();
            self.busy.next = self.tx.busy.val();
            self.rx.rx.next = self.tx.tx.val();
            self.got.next = self.rx.data.val();
            self.valid.next = self.rx.valid.val();
        }
    }

    fn looped() -> Loop {
        let mut uut = Loop {
            clock: Default::default(),
            reset: Default::default(),
            data: Default::default(),
            start: Default::default(),
            busy: Default::default(),
            got: Default::default(),
            valid: Default::default(),
            tx: UartTx::new(CPB),
            rx: UartRx::new(CPB),
        };
        uut.connect_all();
        uut
    }

    #[test]
    fn bytes_survive_tx_to_rx() {
        let bytes: Vec<u8> = vec![0x00, 0xFF, 0x55, 0xA3, 0x80, 0x01];
        let mut sim = simple_sim!(Loop, clock, 1_000_000, ep, {
            let mut x = ep.init()?;
            x.reset.next = true;
            wait_clock_cycles!(ep, clock, x, 2);
            x.reset.next = false;
            for b in &bytes {
                x.data.next = (*b as u64).to_bits();
                x.start.next = true;
                wait_clock_cycle!(ep, clock, x);
                x.start.next = false;
                let mut seen = None;
                for _ in 0..(12 * CPB) {
                    wait_clock_cycle!(ep, clock, x);
                    if x.valid.val() {
                        seen = Some(x.got.val().index() as u8);
                    }
                }
                sim_assert_eq!(ep, seen, Some(*b), x);
                sim_assert_eq!(ep, x.busy.val(), false, x);
            }
            ep.done(x)
        });
        sim.run(Box::new(looped()), 1_000_000 * 2_000).unwrap();
    }

    #[test]
    fn tx_line_shape_is_8n1() {
        let mut sim = simple_sim!(Loop, clock, 1_000_000, ep, {
            let mut x = ep.init()?;
            x.reset.next = true;
            wait_clock_cycles!(ep, clock, x, 2);
            x.reset.next = false;
            sim_assert_eq!(ep, x.tx.tx.val(), true, x);
            x.data.next = 0x35.into(); // 0011_0101: LSB first 1,0,1,0,1,1,0,0
            x.start.next = true;
            wait_clock_cycle!(ep, clock, x);
            x.start.next = false;
            let want = [
                false, true, false, true, false, true, true, false, false, true,
            ];
            for bit in want {
                // Sample in the middle of each bit.
                wait_clock_cycles!(ep, clock, x, CPB / 2);
                sim_assert_eq!(ep, x.tx.tx.val(), bit, x);
                wait_clock_cycles!(ep, clock, x, CPB - CPB / 2);
            }
            sim_assert_eq!(ep, x.tx.tx.val(), true, x);
            ep.done(x)
        });
        sim.run(Box::new(looped()), 1_000_000 * 1_000).unwrap();
    }

    #[test]
    fn clocks_per_bit_checks_range() {
        assert_eq!(clocks_per_bit(100_000_000, 115_200), Ok(868));
        assert_eq!(clocks_per_bit(12_000_000, 115_200), Ok(104));
        assert!(clocks_per_bit(12_000_000, 0).is_err());
        assert!(clocks_per_bit(1_000_000, 1_000_000).is_err());
    }

    #[test]
    fn uart_verilog_is_generated() {
        let v = generate_verilog(&looped());
        assert!(v.contains("module top"), "{v}");
        assert!(!v.contains("$display"));
    }
}
