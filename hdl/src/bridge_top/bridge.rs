//! The byte-protocol bridge of the bridge top (protocol in the parent module's docs).
//!
//! The check of writes and of read replies is one bit-serial CRC-16 ([`systole_core::crc`]):
//! each byte the CRC covers is shifted in one bit per clock, eight clocks per byte, while the
//! UART takes at least 40 clocks per byte (4 clocks per bit at the least), so a 16-bit
//! register, a byte shift register and a bit counter are all it costs. A write's own CRC is
//! shifted in after its bytes: the register then reads zero exactly when the write arrived as
//! sent (the CRC has no final XOR and no reflection), and only then is it carried out.

use rust_hdl_core::prelude::*;
use rust_hdl_widgets::{dff::DFF, dff_setup};
use systole_core::config::{MAX_SIZE, MIN_SIZE};

/// Opcode of "write register".
pub const OP_WRITE_REG: u8 = b'W';
/// Opcode of "read register".
pub const OP_READ_REG: u8 = b'R';
/// Opcode of "write A row".
pub const OP_WRITE_A: u8 = b'A';
/// Opcode of "write B row".
pub const OP_WRITE_B: u8 = b'B';
/// Opcode of "read C row".
pub const OP_READ_C: u8 = b'C';
/// Opcode of "write feature-map row".
pub const OP_WRITE_FM: u8 = b'F';
/// Reply to an unknown opcode.
pub const REPLY_UNKNOWN: u8 = b'?';
/// Reply to a write whose CRC did not match its bytes: nothing was written. At least two bits
/// from every echo and from [`REPLY_UNKNOWN`], so one flipped bit never turns one into another.
pub const REPLY_DAMAGED: u8 = b'!';
/// Bytes of the CRC that ends every write command.
pub const WRITE_CRC_BYTES: usize = 2;

/// Bridge states.
#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum BridgeState {
    /// Waiting for an opcode.
    Idle,
    /// Collecting header bytes into `args`.
    Header,
    /// Collecting row words into the lane chain.
    Payload,
    /// Collecting a write's two CRC bytes (`header_left` counts them).
    Trailer,
    /// Waiting for the CRC to take the last byte in, then checking it.
    Verify,
    /// One cycle with the register or row strobe.
    Exec,
    /// The C row is valid: copy it into the lane chain.
    Capture,
    /// Sending the lane chain, high byte first.
    Send,
    /// Sending the one-byte reply held in `op`.
    Ack,
    /// Sending the CRC of a read reply, high byte first.
    Check,
}

/// The byte-protocol bridge (see the `bridge_top` module docs) for an array of `n` lanes.
#[derive(LogicBlock)]
pub struct UartBridge {
    /// Clock.
    pub clock: Signal<In, Clock>,
    /// Synchronous reset, active high.
    pub reset: Signal<In, Bit>,
    /// Byte from the UART receiver.
    pub rx_data: Signal<In, Bits<8>>,
    /// `rx_data` is a new byte.
    pub rx_valid: Signal<In, Bit>,
    /// Byte to the UART transmitter.
    pub tx_data: Signal<Out, Bits<8>>,
    /// Start sending `tx_data`.
    pub tx_start: Signal<Out, Bit>,
    /// The transmitter is busy.
    pub tx_busy: Signal<In, Bit>,
    /// Register address.
    pub reg_addr: Signal<Out, Bits<8>>,
    /// Register write data.
    pub reg_wdata: Signal<Out, Bits<32>>,
    /// Register write strobe.
    pub reg_we: Signal<Out, Bit>,
    /// Register read data (combinational from `reg_addr`).
    pub reg_rdata: Signal<In, Bits<32>>,
    /// A row write strobe.
    pub a_wr_en: Signal<Out, Bit>,
    /// B row write strobe.
    pub b_wr_en: Signal<Out, Bit>,
    /// Bank of the A/B row write and of the C row read.
    pub bank: Signal<Out, Bit>,
    /// Row of the A/B write or the C read (the accelerator uses the low bits).
    pub row: Signal<Out, Bits<16>>,
    /// Row words for A/B writes, lane 0 first.
    pub wr_data: Vec<Signal<Out, Signed<16>>>,
    /// C row words from the accelerator, valid the cycle after the address edge.
    pub c_rd_data: Vec<Signal<In, Signed<16>>>,
    /// Feature-map row write strobe (row in `row`).
    pub fm_wr_en: Signal<Out, Bit>,
    /// Feature-map row words (the largest power of two of words not above the lane count).
    pub fm_wr_data: Vec<Signal<Out, Signed<16>>>,
    /// A command is in progress.
    pub active: Signal<Out, Bit>,
    state: DFF<BridgeState>,
    op: DFF<Bits<8>>,
    header_left: DFF<Bits<3>>,
    args: DFF<Bits<40>>,
    words_left: DFF<Bits<8>>,
    high_byte: DFF<Bit>,
    held: DFF<Bits<8>>,
    /// Row words: a shift chain (new words enter at the top, lane 0 leaves at the bottom),
    /// because rust-hdl kernels can only index with loop variables.
    lanes: Vec<DFF<Bits<16>>>,
    /// CRC of the current read command's request and reply bytes so far.
    crc: DFF<Bits<16>>,
    /// Bits of the byte being shifted into `crc`, most significant first.
    crc_byte: DFF<Bits<8>>,
    /// Bits of `crc_byte` still to shift in (0: the CRC is up to date).
    crc_bits_left: DFF<Bits<4>>,
    crc_poly: Constant<Bits<16>>,
    crc_init: Constant<Bits<16>>,
    n: Constant<Bits<8>>,
    /// Words of a feature-map row.
    fm_words: Constant<Bits<8>>,
    /// Lane of the first feature-map word once a row has shifted in (`n - fm_words`).
    _fm_base: usize,
    _fm_row_words: usize,
}

impl UartBridge {
    /// A bridge for `lanes` lanes (`MIN_SIZE..=MAX_SIZE`).
    pub fn new(lanes: usize) -> Self {
        assert!(
            (MIN_SIZE..=MAX_SIZE).contains(&lanes),
            "lanes must be {MIN_SIZE}..={MAX_SIZE}"
        );
        let fm_row_words = 1usize << (usize::BITS - 1 - lanes.leading_zeros());
        Self {
            clock: Default::default(),
            reset: Default::default(),
            rx_data: Default::default(),
            rx_valid: Default::default(),
            tx_data: Default::default(),
            tx_start: Default::default(),
            tx_busy: Default::default(),
            reg_addr: Default::default(),
            reg_wdata: Default::default(),
            reg_we: Default::default(),
            reg_rdata: Default::default(),
            a_wr_en: Default::default(),
            b_wr_en: Default::default(),
            bank: Default::default(),
            row: Default::default(),
            wr_data: (0..lanes).map(|_| Default::default()).collect(),
            c_rd_data: (0..lanes).map(|_| Default::default()).collect(),
            fm_wr_en: Default::default(),
            fm_wr_data: (0..fm_row_words).map(|_| Default::default()).collect(),
            active: Default::default(),
            state: Default::default(),
            op: Default::default(),
            header_left: Default::default(),
            args: Default::default(),
            words_left: Default::default(),
            high_byte: Default::default(),
            held: Default::default(),
            lanes: (0..lanes).map(|_| Default::default()).collect(),
            crc: Default::default(),
            crc_byte: Default::default(),
            crc_bits_left: Default::default(),
            crc_poly: Constant::new(u64::from(systole_core::crc::POLY).to_bits()),
            crc_init: Constant::new(u64::from(systole_core::crc::INIT).to_bits()),
            n: Constant::new((lanes as u64).to_bits()),
            fm_words: Constant::new((fm_row_words as u64).to_bits()),
            _fm_base: lanes - fm_row_words,
            _fm_row_words: fm_row_words,
        }
    }

    fn fm_base_end(&self) -> usize {
        self._fm_base + 1
    }
}

impl Logic for UartBridge {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self,
            clock,
            state,
            op,
            header_left,
            args,
            words_left,
            high_byte,
            held,
            crc,
            crc_byte,
            crc_bits_left
        );
        for i in 0..self.lanes.len() {
            self.lanes[i].clock.next = self.clock.val();
            self.lanes[i].d.next = self.lanes[i].q.val();
            self.wr_data[i].next = signed_cast(self.lanes[i].q.val());
        }
        // A feature-map row shifts in like an A/B row: its first word ends in lane `n - R`.
        for b in self._fm_base..self.fm_base_end() {
            for w in 0..self._fm_row_words {
                self.fm_wr_data[w].next = signed_cast(self.lanes[w + b].q.val());
            }
        }
        self.active.next = true;
        self.reg_we.next = false;
        self.a_wr_en.next = false;
        self.b_wr_en.next = false;
        self.fm_wr_en.next = false;
        self.tx_start.next = false;
        self.tx_data.next = self.op.q.val();
        self.bank.next = self.args.q.val().get_bit(16);
        self.row.next = self.args.q.val().get_bits::<16>(0);
        self.reg_wdata.next = self.args.q.val().get_bits::<32>(0);
        if self.op.q.val() == 0x57 {
            self.reg_addr.next = self.args.q.val().get_bits::<8>(32);
        } else {
            self.reg_addr.next = self.args.q.val().get_bits::<8>(0);
        }
        // One CRC step per clock; a state that takes a new byte overrides this below.
        if self.crc_bits_left.q.val().any() {
            if self.crc.q.val().get_bit(15) ^ self.crc_byte.q.val().get_bit(7) {
                self.crc.d.next = (self.crc.q.val() << 1) ^ self.crc_poly.val();
            } else {
                self.crc.d.next = self.crc.q.val() << 1;
            }
            self.crc_byte.d.next = self.crc_byte.q.val() << 1;
            self.crc_bits_left.d.next = self.crc_bits_left.q.val() - 1;
        }
        match self.state.q.val() {
            BridgeState::Idle => {
                self.active.next = false;
                if self.rx_valid.val() {
                    // A new command: its CRC starts over with the opcode.
                    self.crc.d.next = self.crc_init.val();
                    self.crc_byte.d.next = self.rx_data.val();
                    self.crc_bits_left.d.next = 8.into();
                    self.op.d.next = self.rx_data.val();
                    self.state.d.next = BridgeState::Header;
                    if self.rx_data.val() == 0x57 {
                        self.header_left.d.next = 5.into();
                    } else if self.rx_data.val() == 0x52 {
                        self.header_left.d.next = 1.into();
                    } else if (self.rx_data.val() == 0x41)
                        | (self.rx_data.val() == 0x42)
                        | (self.rx_data.val() == 0x43)
                    {
                        self.header_left.d.next = 3.into();
                    } else if self.rx_data.val() == 0x46 {
                        self.header_left.d.next = 2.into();
                    } else {
                        self.op.d.next = bits::<8>(0x3F);
                        self.state.d.next = BridgeState::Ack;
                    }
                }
            }
            BridgeState::Header => {
                if self.rx_valid.val() {
                    self.crc_byte.d.next = self.rx_data.val();
                    self.crc_bits_left.d.next = 8.into();
                    self.args.d.next =
                        (self.args.q.val() << 8) | bit_cast::<40, 8>(self.rx_data.val());
                    self.header_left.d.next = self.header_left.q.val() - 1;
                    if self.header_left.q.val() == 1 {
                        if (self.op.q.val() == 0x41) | (self.op.q.val() == 0x42) {
                            self.state.d.next = BridgeState::Payload;
                            self.words_left.d.next = self.n.val();
                            self.high_byte.d.next = true;
                        } else if self.op.q.val() == 0x46 {
                            self.state.d.next = BridgeState::Payload;
                            self.words_left.d.next = self.fm_words.val();
                            self.high_byte.d.next = true;
                        } else if self.op.q.val() == 0x57 {
                            self.state.d.next = BridgeState::Trailer;
                            self.header_left.d.next = 2.into();
                        } else {
                            self.state.d.next = BridgeState::Exec;
                        }
                    }
                }
            }
            BridgeState::Payload => {
                if self.rx_valid.val() {
                    self.crc_byte.d.next = self.rx_data.val();
                    self.crc_bits_left.d.next = 8.into();
                    if self.high_byte.q.val() {
                        self.held.d.next = self.rx_data.val();
                        self.high_byte.d.next = false;
                    } else {
                        for i in 0..(self.lanes.len() - 1) {
                            self.lanes[i].d.next = self.lanes[i + 1].q.val();
                        }
                        for i in (self.lanes.len() - 1)..self.lanes.len() {
                            self.lanes[i].d.next = (bit_cast::<16, 8>(self.held.q.val()) << 8)
                                | bit_cast::<16, 8>(self.rx_data.val());
                        }
                        self.high_byte.d.next = true;
                        self.words_left.d.next = self.words_left.q.val() - 1;
                        if self.words_left.q.val() == 1 {
                            self.state.d.next = BridgeState::Trailer;
                            self.header_left.d.next = 2.into();
                        }
                    }
                }
            }
            BridgeState::Trailer => {
                if self.rx_valid.val() {
                    self.crc_byte.d.next = self.rx_data.val();
                    self.crc_bits_left.d.next = 8.into();
                    self.header_left.d.next = self.header_left.q.val() - 1;
                    if self.header_left.q.val() == 1 {
                        self.state.d.next = BridgeState::Verify;
                    }
                }
            }
            BridgeState::Verify => {
                // The write and its CRC leave zero in the register only when undamaged.
                if !self.crc_bits_left.q.val().any() {
                    if self.crc.q.val().any() {
                        self.op.d.next = bits::<8>(0x21);
                        self.state.d.next = BridgeState::Ack;
                    } else {
                        self.state.d.next = BridgeState::Exec;
                    }
                }
            }
            BridgeState::Exec => {
                self.state.d.next = BridgeState::Ack;
                if self.op.q.val() == 0x57 {
                    self.reg_we.next = true;
                } else if self.op.q.val() == 0x41 {
                    self.a_wr_en.next = true;
                } else if self.op.q.val() == 0x42 {
                    self.b_wr_en.next = true;
                } else if self.op.q.val() == 0x46 {
                    self.fm_wr_en.next = true;
                } else if self.op.q.val() == 0x43 {
                    // The C address is sampled on this edge; the words are valid after it.
                    self.state.d.next = BridgeState::Capture;
                } else {
                    // Read register: send the 32-bit value as two 16-bit words.
                    for i in 0..1 {
                        self.lanes[i].d.next = self.reg_rdata.val().get_bits::<16>(16);
                        self.lanes[i + 1].d.next = self.reg_rdata.val().get_bits::<16>(0);
                    }
                    self.words_left.d.next = 2.into();
                    self.high_byte.d.next = true;
                    self.state.d.next = BridgeState::Send;
                }
            }
            BridgeState::Capture => {
                for i in 0..self.lanes.len() {
                    self.lanes[i].d.next = unsigned_cast(self.c_rd_data[i].val());
                }
                self.words_left.d.next = self.n.val();
                self.high_byte.d.next = true;
                self.state.d.next = BridgeState::Send;
            }
            BridgeState::Send => {
                // Each byte sent goes into the CRC; the next waits until it is in.
                for i in 0..1 {
                    if self.high_byte.q.val() {
                        self.tx_data.next = self.lanes[i].q.val().get_bits::<8>(8);
                    } else {
                        self.tx_data.next = self.lanes[i].q.val().get_bits::<8>(0);
                    }
                }
                if !self.tx_busy.val() & !self.crc_bits_left.q.val().any() {
                    self.tx_start.next = true;
                    for i in 0..1 {
                        if self.high_byte.q.val() {
                            self.crc_byte.d.next = self.lanes[i].q.val().get_bits::<8>(8);
                        } else {
                            self.crc_byte.d.next = self.lanes[i].q.val().get_bits::<8>(0);
                        }
                    }
                    self.crc_bits_left.d.next = 8.into();
                    self.high_byte.d.next = !self.high_byte.q.val();
                    if !self.high_byte.q.val() {
                        for i in 0..(self.lanes.len() - 1) {
                            self.lanes[i].d.next = self.lanes[i + 1].q.val();
                        }
                        self.words_left.d.next = self.words_left.q.val() - 1;
                        if self.words_left.q.val() == 1 {
                            self.state.d.next = BridgeState::Check;
                        }
                    }
                }
            }
            BridgeState::Check => {
                // `high_byte` is set again after the last data byte.
                if self.high_byte.q.val() {
                    self.tx_data.next = self.crc.q.val().get_bits::<8>(8);
                } else {
                    self.tx_data.next = self.crc.q.val().get_bits::<8>(0);
                }
                if !self.tx_busy.val() & !self.crc_bits_left.q.val().any() {
                    self.tx_start.next = true;
                    self.high_byte.d.next = !self.high_byte.q.val();
                    if !self.high_byte.q.val() {
                        self.state.d.next = BridgeState::Idle;
                    }
                }
            }
            BridgeState::Ack => {
                // Send the opcode back (or '?').
                if !self.tx_busy.val() {
                    self.tx_start.next = true;
                    self.state.d.next = BridgeState::Idle;
                }
            }
        }
        if self.reset.val() {
            self.state.d.next = BridgeState::Idle;
        }
    }
}

#[cfg(test)]
#[path = "bridge_tests.rs"]
mod tests;
