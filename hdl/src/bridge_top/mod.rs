//! Bridge top level without a CPU: a UART bridge from a byte protocol straight onto the
//! accelerator's register bus and row ports.
//!
//! The firmware engineer's framed protocol runs on boards with a soft CPU; this bridge is the
//! CPU-less option, small enough for an iCE40UP5K. Every command is an opcode byte, a fixed
//! header, and for row writes a payload. Multi-byte fields are big-endian; row words are 16-bit
//! two's complement, lane 0 first, each big-endian (an array of `W`-bit words takes and gives
//! each word sign-extended to 16 bits).
//!
//! | command | bytes sent | reply |
//! |---------|-----------|-------|
//! | write register | `'W'` addr data(4) crc(2) | `'W'` once written |
//! | read register | `'R'` addr | data(4) crc(2) |
//! | write A row | `'A'` bank row(2) then `n` words, crc(2) | `'A'` once written |
//! | write B row | `'B'` bank row(2) then `n` words, crc(2) | `'B'` once written |
//! | read C row | `'C'` bank row(2) | `n` words, crc(2) |
//! | write feature-map row | `'F'` row(2) then `R` words, crc(2) | `'F'` once written |
//! | a write whose crc does not match | | `'!'`, nothing written |
//! | anything else | one byte | `'?'` |
//!
//! `R` is the feature-map row width (`ArrayConfig::fm_row_words`: the largest power of two of
//! words not above `n`); the row is the word address divided by `R`. A board built without
//! the conv unit ([`BridgeTopOptions::fm_depth`] 0, the default of the board flows) accepts
//! `'F'` and ignores it; its `CONFIG` register says the unit is absent.
//!
//! `crc` is the CRC-16 of [`systole_core::crc`], sent big-endian. A write's covers its own
//! bytes (opcode, header and words as sent): the bridge checks it before it writes anything,
//! and answers `'!'` ([`REPLY_DAMAGED`]) instead of the echo when a byte arrived damaged, so a
//! flipped bit on the way to the board is never written. A read's covers the read command's
//! bytes as the bridge received them (opcode and header) followed by the reply's data bytes:
//! it covers both directions of a read: a flipped bit in the address or in the data makes the
//! host's CRC of what it sent and got differ, and the host reads again (reads change nothing on
//! the board) or stops with an error. A write's echo is one byte: a flipped echo is caught as
//! a wrong echo (see `systole_device::bridge` for what the host does then).
//!
//! The bridge takes the next command as soon as it starts sending a write's one-byte echo, so
//! the host streams writes and checks their echoes later; bytes that arrive while a read's
//! longer reply is still being sent are dropped, so the host waits for a read's whole reply
//! before it sends more (`systole_device::bridge`). A register read takes no clock of its own (the
//! register file's read is combinational); a C row read samples the address on one edge and
//! captures the words after it, as the accelerator's port timing asks.
//!
//! [`BridgeTop`] adds the UART, a reset synchronizer for a button of either polarity and two
//! LEDs (bridge activity and a clock heartbeat) around the bridge and the accelerator core.

mod bridge;

pub use bridge::{
    UartBridge, OP_READ_C, OP_READ_REG, OP_WRITE_A, OP_WRITE_B, OP_WRITE_FM, OP_WRITE_REG,
    REPLY_DAMAGED, REPLY_UNKNOWN, WRITE_CRC_BYTES,
};

use crate::top::{Core, CORE_TILE_ROW_BITS};
use crate::uart::{clocks_per_bit, UartRx, UartTx};
use crate::HdlError;
use rust_hdl_core::prelude::*;
use rust_hdl_widgets::{dff::DFF, dff_setup};
use systole_core::ArrayConfig;

/// How the bridge top is built for one board.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BridgeTopOptions {
    /// Board oscillator frequency in Hz.
    pub clock_hz: u32,
    /// UART baud rate.
    pub baud: u32,
    /// The reset button reads low when pressed.
    pub reset_active_low: bool,
    /// The LEDs light when driven low.
    pub led_active_low: bool,
    /// Run everything on the oscillator divided by two (a toggle flip-flop), for parts whose
    /// logic cannot close timing at the oscillator frequency (the iCE40UP5K at 12 MHz). The
    /// UART timing is computed from the divided clock.
    pub halve_clock: bool,
    /// Feature-map words of the conv unit (`ArrayConfig::fm_depth`: 0 leaves the unit out;
    /// else a power of two in `MIN_FM_DEPTH..=MAX_FM_DEPTH` of `systole_core::config`). Each of
    /// the two gather engines keeps one copy of the map per pair of lanes:
    /// `2 * ceil(n / 2) * fm_depth * 16` bits of block RAM.
    pub fm_depth: usize,
}

/// The board's top level (module `top`): reset synchronizer, UART receiver and transmitter,
/// the byte-protocol bridge and the accelerator core. Ports: `clock`, `reset_pin`, `uart_rx`,
/// `uart_tx`, `led0` (a bridge command is in progress), `led1` (bit 23 of a free-running
/// counter: it blinks when the clock runs). All logic runs on the net `sys_clock`: the
/// oscillator, or half of it (see [`BridgeTopOptions::halve_clock`]).
#[derive(LogicBlock)]
pub struct BridgeTop {
    /// Board oscillator.
    pub clock: Signal<In, Clock>,
    /// Reset button, either polarity (see [`BridgeTopOptions::reset_active_low`]).
    pub reset_pin: Signal<In, Bit>,
    /// Serial line from the host.
    pub uart_rx: Signal<In, Bit>,
    /// Serial line to the host.
    pub uart_tx: Signal<Out, Bit>,
    /// Activity LED.
    pub led0: Signal<Out, Bit>,
    /// Heartbeat LED.
    pub led1: Signal<Out, Bit>,
    sys_clock: Signal<Local, Clock>,
    half: DFF<Clock>,
    halve: Constant<Bit>,
    reset_sync0: DFF<Bit>,
    reset_sync1: DFF<Bit>,
    heartbeat: DFF<Bits<24>>,
    reset_low: Constant<Bit>,
    led_low: Constant<Bit>,
    rx: UartRx,
    tx: UartTx,
    bridge: UartBridge,
    core: Core,
    _n: usize,
    _fm_row_words: usize,
}

impl BridgeTop {
    /// The bridge top for `cfg` (checked) with the UART timing of `opts`. Any `W` the array
    /// takes (`ArrayConfig::validate_built`): its bridge moves 16-bit words, a `W`-bit word
    /// sign-extended (the core reads its low `W` bits and returns C words sign-extended).
    pub fn new(cfg: &ArrayConfig, opts: &BridgeTopOptions) -> Result<Self, HdlError> {
        cfg.validate_built().map_err(HdlError::Config)?;
        let sys_hz = u64::from(opts.clock_hz) / if opts.halve_clock { 2 } else { 1 };
        let cpb = clocks_per_bit(sys_hz, u64::from(opts.baud)).map_err(HdlError::Block)?;
        Ok(Self {
            clock: Default::default(),
            reset_pin: Default::default(),
            uart_rx: Default::default(),
            uart_tx: Default::default(),
            led0: Default::default(),
            led1: Default::default(),
            sys_clock: Default::default(),
            half: Default::default(),
            halve: Constant::new(opts.halve_clock),
            reset_sync0: Default::default(),
            reset_sync1: Default::default(),
            heartbeat: Default::default(),
            reset_low: Constant::new(opts.reset_active_low),
            led_low: Constant::new(opts.led_active_low),
            rx: UartRx::new(cpb),
            tx: UartTx::new(cpb),
            bridge: UartBridge::new(cfg.size),
            // The options, not `cfg`, size the conv unit: a board's block RAM rarely holds the
            // default 32k-word map (two engines keep a copy per pair of lanes).
            core: Core::new(&ArrayConfig {
                fm_depth: opts.fm_depth,
                ..*cfg
            })?,
            _n: cfg.size,
            _fm_row_words: cfg.fm_row_words(),
        })
    }
}

impl Logic for BridgeTop {
    #[hdl_gen]
    fn update(&mut self) {
        self.half.clock.next = self.clock.val();
        self.half.d.next = !self.half.q.val();
        // A constant select: synthesis keeps one input and no multiplexer on the clock.
        if self.halve.val() {
            self.sys_clock.next = self.half.q.val();
        } else {
            self.sys_clock.next = self.clock.val();
        }
        dff_setup!(self, sys_clock, reset_sync0, reset_sync1, heartbeat);
        // The button is asynchronous: two flip-flops before anything uses it. With an
        // active-low button the flip-flops' zero start value also gives a reset at power-up.
        self.reset_sync0.d.next = self.reset_pin.val() ^ self.reset_low.val();
        self.reset_sync1.d.next = self.reset_sync0.q.val();
        self.heartbeat.d.next = self.heartbeat.q.val() + 1;
        self.rx.clock.next = self.sys_clock.val();
        self.tx.clock.next = self.sys_clock.val();
        self.bridge.clock.next = self.sys_clock.val();
        self.core.clock.next = self.sys_clock.val();
        self.rx.reset.next = self.reset_sync1.q.val();
        self.tx.reset.next = self.reset_sync1.q.val();
        self.bridge.reset.next = self.reset_sync1.q.val();
        self.core.reset.next = self.reset_sync1.q.val();
        self.rx.rx.next = self.uart_rx.val();
        self.uart_tx.next = self.tx.tx.val();
        self.bridge.rx_data.next = self.rx.data.val();
        self.bridge.rx_valid.next = self.rx.valid.val();
        self.tx.data.next = self.bridge.tx_data.val();
        self.tx.start.next = self.bridge.tx_start.val();
        self.bridge.tx_busy.next = self.tx.busy.val();
        self.led0.next = self.bridge.active.val() ^ self.led_low.val();
        self.led1.next = self.heartbeat.q.val().get_bit(23) ^ self.led_low.val();
        self.core.reg_addr.next = self.bridge.reg_addr.val();
        self.core.reg_wdata.next = self.bridge.reg_wdata.val();
        self.core.reg_we.next = self.bridge.reg_we.val();
        self.core.fm_wr_en.next = self.bridge.fm_wr_en.val();
        self.core.fm_wr_row.next = self.bridge.row.val();
        for w in 0..self._fm_row_words {
            self.core.fm_wr_data[w].next = self.bridge.fm_wr_data[w].val();
        }
        self.bridge.reg_rdata.next = self.core.reg_rdata.val();
        self.core.a_wr_en.next = self.bridge.a_wr_en.val();
        self.core.a_wr_bank.next = self.bridge.bank.val();
        self.core.a_wr_row.next = self.bridge.row.val();
        self.core.b_wr_en.next = self.bridge.b_wr_en.val();
        self.core.b_wr_bank.next = self.bridge.bank.val();
        self.core.b_wr_row.next = self.bridge.row.val();
        self.core.c_rd_bank.next = self.bridge.bank.val();
        self.core.c_rd_row.next = self.bridge.row.val().get_bits::<CORE_TILE_ROW_BITS>(0);
        for i in 0..self._n {
            self.core.a_wr_data[i].next = self.bridge.wr_data[i].val();
            self.core.b_wr_data[i].next = self.bridge.wr_data[i].val();
            self.bridge.c_rd_data[i].next = self.core.c_rd_data[i].val();
        }
    }
}

/// Verilog of the bridge top (module `top`) for `cfg`, a `clock_hz` oscillator and `baud`,
/// with an active-low reset button and active-high LEDs (the Arty and Nexys wiring); see
/// [`generate_bridge_verilog_with`] for the other polarities.
pub fn generate_bridge_verilog(
    cfg: &ArrayConfig,
    clock_hz: u32,
    baud: u32,
) -> Result<String, HdlError> {
    generate_bridge_verilog_with(
        cfg,
        &BridgeTopOptions {
            clock_hz,
            baud,
            reset_active_low: true,
            led_active_low: false,
            halve_clock: false,
            fm_depth: 0,
        },
    )
}

/// Verilog of the bridge top (module `top`) for `cfg` and the board wiring in `opts`.
pub fn generate_bridge_verilog_with(
    cfg: &ArrayConfig,
    opts: &BridgeTopOptions,
) -> Result<String, HdlError> {
    let mut top = BridgeTop::new(cfg, opts)?;
    top.connect_all();
    check_all(&top).map_err(HdlError::check)?;
    Ok(generate_verilog(&top))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn board_verilog_has_the_board_ports() {
        let cfg = ArrayConfig::new(2, 8, 16).unwrap();
        let v = generate_bridge_verilog(&cfg, 12_000_000, 115_200).unwrap();
        for port in ["clock", "reset_pin", "uart_rx", "uart_tx", "led0", "led1"] {
            assert!(
                v.contains(&format!(" {port},"))
                    || v.contains(&format!(" {port}\n"))
                    || v.contains(&format!(" {port};")),
                "{port}"
            );
        }
        assert!(
            v.starts_with("\n\nmodule top") || v.contains("module top("),
            "no top module"
        );
        let slow = generate_bridge_verilog(&cfg, 12_000_000, 12_000_000).unwrap_err();
        assert!(slow.to_string().contains("cycles per bit"), "{slow}");
        let bad = ArrayConfig { size: 1, ..cfg };
        assert!(generate_bridge_verilog(&bad, 12_000_000, 115_200).is_err());
    }

    /// Decodes 8N1 frames from a line sampled once per clock, `bit` clocks per bit.
    fn decode_uart(line: &[bool], bit: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut t = 1;
        while t < line.len() {
            if line[t - 1] && !line[t] && t + bit * 10 <= line.len() {
                let mid = |k: usize| line[t + k * bit + bit / 2];
                let byte = (0..8).fold(0u8, |b, i| b | (u8::from(mid(1 + i)) << i));
                if !mid(0) && mid(9) {
                    out.push(byte);
                }
                t += bit * 10;
            } else {
                t += 1;
            }
        }
        out
    }

    /// The whole bridge top through its serial pins: reads the accelerator's ID register and
    /// writes and reads back `SHIFT`, with the oscillator used directly and halved.
    #[test]
    fn bridge_top_answers_over_the_uart() {
        for halve_clock in [false, true] {
            let opts = BridgeTopOptions {
                clock_hz: 800_000,
                baud: 100_000,
                reset_active_low: true,
                led_active_low: false,
                halve_clock,
                fm_depth: 0,
            };
            let cfg = ArrayConfig::new(2, 8, 16).unwrap();
            let mut uut = BridgeTop::new(&cfg, &opts).unwrap();
            uut.connect_all();
            let line = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let rec = line.clone();
            // 8 oscillator clocks per bit either way.
            let mut sim = simple_sim!(BridgeTop, clock, 800_000, ep, {
                let mut x = ep.init()?;
                let mut rec = rec.lock().unwrap();
                x.reset_pin.next = false;
                x.uart_rx.next = true;
                wait_clock_cycles!(ep, clock, x, 8);
                x.reset_pin.next = true;
                wait_clock_cycles!(ep, clock, x, 8);
                let crc = systole_core::crc::crc16_bitwise(&[b'W', 8, 0, 0, 0, 5]).to_be_bytes();
                let write = [b'W', 8, 0, 0, 0, 5, crc[0], crc[1]];
                let cmds: [&[u8]; 3] = [&[b'R', 0], &write, &[b'R', 8]];
                for cmd in cmds {
                    for &b in cmd {
                        let frame = (0..10).map(|i| match i {
                            0 => false,
                            9 => true,
                            _ => (b >> (i - 1)) & 1 == 1,
                        });
                        for level in frame {
                            x.uart_rx.next = level;
                            for _ in 0..8 {
                                wait_clock_cycle!(ep, clock, x);
                                rec.push(x.uart_tx.val());
                            }
                        }
                    }
                    for _ in 0..(8 * 10 * 8) {
                        wait_clock_cycle!(ep, clock, x);
                        rec.push(x.uart_tx.val());
                    }
                }
                drop(rec);
                ep.done(x)
            });
            sim.run(Box::new(uut), 1_250_000 * 4_000).unwrap();
            let got = decode_uart(&line.lock().unwrap(), 8);
            let crc = |bytes: &[u8]| systole_core::crc::crc16_bitwise(bytes).to_be_bytes();
            let mut want = b"SYST".to_vec();
            want.extend(crc(b"R\0SYST"));
            want.push(b'W');
            want.extend(b"\0\0\0\x05");
            want.extend(crc(b"R\x08\0\0\0\x05"));
            assert_eq!(got, want, "halve_clock {halve_clock}");
        }
    }
}
