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
mod tests {
    use super::*;

    const N: usize = 4;

    /// Drives bytes into the bridge and plays the accelerator and the transmitter: records
    /// every strobe the bridge raises and every byte it sends.
    #[derive(Default, Debug, PartialEq)]
    struct Seen {
        reg_writes: Vec<(u64, u64)>,
        a_rows: Vec<(bool, u64, Vec<i64>)>,
        b_rows: Vec<(bool, u64, Vec<i64>)>,
        fm_rows: Vec<(u64, Vec<i64>)>,
        sent: Vec<u8>,
    }

    /// Sends each command's bytes (one every tenth cycle, as a UART receiver of one clock per
    /// bit would deliver them; real ones take at least 40) and waits for its reply of the given
    /// length before the next, as a host does.
    fn run(commands: Vec<(Vec<u8>, usize)>) -> Seen {
        run_lanes(N, commands)
    }

    /// [`run`] on a bridge of `n` lanes.
    fn run_lanes(n: usize, commands: Vec<(Vec<u8>, usize)>) -> Seen {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
        let out = seen.clone();
        let total: usize = commands
            .iter()
            .map(|(c, r)| 10 * c.len() + 10 * r + 8)
            .sum();
        let mut sim = simple_sim!(UartBridge, clock, 1_000_000, ep, {
            let mut x = ep.init()?;
            x.reset.next = true;
            wait_clock_cycles!(ep, clock, x, 2);
            x.reset.next = false;
            let mut log = out.lock().unwrap();
            let mut bytes = commands.iter().flat_map(|(c, r)| {
                c.iter()
                    .enumerate()
                    .map(move |(i, b)| (*b, if i + 1 == c.len() { *r } else { 0 }))
            });
            let mut gap = 0;
            let mut wait_for = 0;
            // A real reply byte takes ten bit times on the wire: the host's next byte never
            // arrives in the cycle right after the bridge's last send.
            let mut quiet = 0;
            for _cycle in 0..total {
                x.rx_valid.next = false;
                if gap == 0 && log.sent.len() >= wait_for && quiet >= 2 {
                    if let Some((b, reply)) = bytes.next() {
                        x.rx_data.next = (b as u64).to_bits();
                        x.rx_valid.next = true;
                        wait_for += reply;
                    }
                    gap = 9;
                } else if gap > 0 {
                    gap -= 1;
                }
                // The accelerator: ID at register 0, the address itself elsewhere; the C row
                // words encode bank, row and lane.
                let addr = x.reg_addr.val().index() as u64;
                x.reg_rdata.next = (if addr == 0 { 0x5359_5354 } else { addr }).to_bits();
                for i in 0..n {
                    let v =
                        (x.bank.val() as i64) * 1000 + x.row.val().index() as i64 * 10 + i as i64;
                    // (Wrapped to a word: rows past 3276 appear in the feature-map test.)
                    x.c_rd_data[i].next = i64::from(-v as i16).to_signed_bits();
                }
                x.tx_busy.next = false;
                wait_clock_cycle!(ep, clock, x);
                let lanes = |x: &UartBridge| -> Vec<i64> {
                    x.wr_data
                        .iter()
                        .map(|s| s.val().bigint().try_into().unwrap())
                        .collect()
                };
                if x.reg_we.val() {
                    let w = (
                        x.reg_addr.val().index() as u64,
                        x.reg_wdata.val().index() as u64,
                    );
                    log.reg_writes.push(w);
                }
                if x.a_wr_en.val() {
                    log.a_rows
                        .push((x.bank.val(), x.row.val().index() as u64, lanes(&x)));
                }
                if x.b_wr_en.val() {
                    log.b_rows
                        .push((x.bank.val(), x.row.val().index() as u64, lanes(&x)));
                }
                if x.fm_wr_en.val() {
                    let words = x
                        .fm_wr_data
                        .iter()
                        .map(|s| s.val().bigint().try_into().unwrap())
                        .collect();
                    log.fm_rows.push((x.row.val().index() as u64, words));
                }
                quiet += 1;
                if x.tx_start.val() {
                    log.sent.push(x.tx_data.val().index() as u8);
                    quiet = 0;
                }
            }
            drop(log);
            ep.done(x)
        });
        let mut uut = UartBridge::new(n);
        uut.connect_all();
        sim.run(Box::new(uut), 1_000_000 * 10_000).unwrap();
        std::sync::Arc::try_unwrap(seen)
            .unwrap()
            .into_inner()
            .unwrap()
    }

    /// A write command: `bytes` followed by their CRC, high byte first.
    fn write(bytes: &[u8]) -> Vec<u8> {
        let crc = systole_core::crc::crc16_bitwise(bytes);
        bytes.iter().copied().chain(crc.to_be_bytes()).collect()
    }

    /// `data` followed by the CRC of `request` and `data`, high byte first: a read's reply.
    fn checked(request: &[u8], data: &[u8]) -> Vec<u8> {
        let all: Vec<u8> = request.iter().chain(data).copied().collect();
        let crc = systole_core::crc::crc16_bitwise(&all);
        data.iter().copied().chain(crc.to_be_bytes()).collect()
    }

    #[test]
    fn register_write_and_read() {
        let s = run(vec![
            (write(&[b'W', 0x0B, 0x00, 0x01, 0x02, 0x03]), 1),
            (vec![b'R', 0x00], 6),
            (vec![b'R', 0x07], 6),
        ]);
        assert_eq!(s.reg_writes, vec![(0x0B, 0x0001_0203)]);
        let mut want = vec![b'W'];
        want.extend(checked(&[b'R', 0], &[0x53, 0x59, 0x53, 0x54]));
        want.extend(checked(&[b'R', 7], &[0, 0, 0, 7]));
        assert_eq!(s.sent, want);
        // The CRC of the first reply, computed outside the project from the parameters.
        assert_eq!(s.sent[5..7], [0x9A, 0xE1]);
    }

    #[test]
    fn row_writes_and_c_read() {
        let mut a = vec![b'A', 1, 0x01, 0x05];
        for w in [1i16, -2, 300, -32768] {
            a.extend(w.to_be_bytes());
        }
        let mut b = vec![b'B', 0, 0x00, 0x02];
        for w in [7i16, 8, 9, 32767] {
            b.extend(w.to_be_bytes());
        }
        let s = run(vec![
            (write(&a), 1),
            (write(&b), 1),
            (vec![b'C', 1, 0x00, 0x03], 2 * N + 2),
            (vec![b'x'], 1),
        ]);
        assert_eq!(s.a_rows, vec![(true, 0x105, vec![1, -2, 300, -32768])]);
        assert_eq!(s.b_rows, vec![(false, 2, vec![7, 8, 9, 32767])]);
        let mut want = vec![b'A', b'B'];
        let mut row = vec![];
        for lane in 0..N as i16 {
            row.extend((-(1000 + 30 + lane)).to_be_bytes());
        }
        want.extend(checked(&[b'C', 1, 0x00, 0x03], &row));
        want.push(b'?');
        assert_eq!(s.sent, want);
    }

    /// `'F'` row(2) then `R` words: one feature-map row strobe with the words in order. With 6
    /// lanes a row is 4 words (they shift in to lanes 2..6); with 4 lanes, all four.
    #[test]
    fn feature_map_rows() {
        for (n, words) in [
            (6usize, vec![5i16, -6, 32767, -32768]),
            (4, vec![1, 2, 3, -4]),
        ] {
            let mut f = vec![b'F', 0x12, 0x34];
            for w in &words {
                f.extend(w.to_be_bytes());
            }
            let s = run_lanes(
                n,
                vec![
                    (write(&f), 1),
                    (write(&[b'F', 0, 1, 0, 9, 0, 8, 0, 7, 0, 6]), 1),
                ],
            );
            let want: Vec<i64> = words.iter().map(|&w| w.into()).collect();
            assert_eq!(
                s.fm_rows,
                vec![(0x1234, want), (1, vec![9, 8, 7, 6])],
                "{n} lanes"
            );
            assert_eq!(s.sent, b"FF", "{n} lanes");
            assert!(s.a_rows.is_empty() && s.b_rows.is_empty() && s.reg_writes.is_empty());
        }
    }

    /// Every write with one bit flipped anywhere (opcode aside: that makes another command)
    /// is answered `'!'` and changes nothing; the same write intact then goes through.
    #[test]
    fn a_damaged_write_is_refused_and_changes_nothing() {
        let mut a = vec![b'A', 1, 0x01, 0x05];
        for w in [1i16, -2, 300, -32768] {
            a.extend(w.to_be_bytes());
        }
        let f = vec![b'F', 0, 1, 0, 9, 0, 8, 0, 7, 0, 6];
        let reg = vec![b'W', 0x0B, 0x00, 0x01, 0x02, 0x03];
        for cmd in [reg, a, f] {
            let good = write(&cmd);
            let clean = run(vec![(good.clone(), 1)]);
            for byte in 1..good.len() {
                let mut bad = good.clone();
                bad[byte] ^= 1 << (byte % 8);
                let s = run(vec![(bad, 1), (good.clone(), 1)]);
                assert_eq!(s.sent, [REPLY_DAMAGED, cmd[0]], "byte {byte} of {cmd:?}");
                let strobes = (&s.reg_writes, &s.a_rows, &s.b_rows, &s.fm_rows);
                let once = (
                    &clean.reg_writes,
                    &clean.a_rows,
                    &clean.b_rows,
                    &clean.fm_rows,
                );
                assert_eq!(strobes, once, "byte {byte} of {cmd:?}");
            }
        }
    }

    #[test]
    fn bridge_verilog_has_no_unresolved_indices() {
        let mut uut = UartBridge::new(3);
        uut.connect_all();
        let v = generate_verilog(&uut);
        assert!(!v.contains("[i"), "loop index left in Verilog");
        assert!(v.contains("module top"));
    }
}
