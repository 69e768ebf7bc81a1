//! The feature map of one gather engine: written a whole row of `R` words per clock (so a map
//! loads at the rate the row ports move operands) and read by every lane, one word per lane
//! per clock, at any word address. Its simulation model: read addresses are sampled on the
//! rising edge and the words are valid after it; a read of the row being written returns the
//! old word. Its words are `W` bits (`ArrayConfig::word_bits`): a write keeps the low `W` bits
//! of each 16-bit input word and a read gives the stored word sign-extended to 16 bits, the
//! way the core carries every `W` (so at `W` < 16 the map takes `W / 16` of the memory).
//!
//! The engine's hand-written Verilog (`gather/verilog.rs`) lays the same memory out for block
//! RAM, with this model's timing: a true dual-port copy per pair of lanes, a row write
//! putting half a row through each port and each lane reading an entry into a register (reads
//! pause on a write clock). This block's own Verilog (one memory, a word read port per
//! lane) is only what rust-hdl emits for the submodule, which `generate_verilog` drops.

use crate::HdlError;
use rust_hdl_core::prelude::*;
use systole_core::numeric::{MAX_WORD_BITS, MIN_WORD_BITS};

/// The low `word_bits` bits of `w`, sign-extended: what a `W`-bit memory word reads back as.
fn keep_word(w: Signed<16>, word_bits: u32) -> Signed<16> {
    let ext = 16 - word_bits;
    let raw = w.inner().index() as u16;
    Signed::from(i64::from(((raw << ext) as i16) >> ext))
}

/// A feature-map RAM of `words` words of `W` bits in rows of `R`, with `lanes` read ports.
#[derive(LogicBlock)]
pub struct FmRam {
    /// Clock for all ports.
    pub clock: Signal<In, Clock>,
    /// Write `w_data` into row `w_row` on this edge.
    pub we: Signal<In, Bit>,
    /// Row written (low `log2(words / R)` bits used).
    pub w_row: Signal<In, Bits<16>>,
    /// The row's words, word `i` at address `w_row * R + i`.
    pub w_data: Vec<Signal<In, Signed<16>>>,
    /// Read on this edge (the lanes' words keep their value otherwise; saves the simulator
    /// `lanes` memory reads per idle clock).
    pub re: Signal<In, Bit>,
    /// Word address each lane reads (low `log2(words)` bits used).
    pub r_addr: Vec<Signal<In, Bits<16>>>,
    /// Word at each lane's address sampled on the previous edge.
    pub r_data: Vec<Signal<Out, Signed<16>>>,
    _row_words: usize,
    _word_bits: u32,
    _mem: Vec<Signed<16>>,
}

impl FmRam {
    /// A RAM of `words` words of `word_bits` bits (`MIN_WORD_BITS..=MAX_WORD_BITS`) in rows of
    /// `row_words` (powers of two, `words <= 65536`) with `lanes` read ports.
    pub fn new(
        words: usize,
        row_words: usize,
        lanes: usize,
        word_bits: u32,
    ) -> Result<Self, HdlError> {
        if !(MIN_WORD_BITS..=MAX_WORD_BITS).contains(&word_bits) {
            return Err(HdlError::Block(format!(
                "feature-map RAM of {word_bits}-bit words: need {MIN_WORD_BITS} to {MAX_WORD_BITS} bits"
            )));
        }
        if !words.is_power_of_two()
            || !row_words.is_power_of_two()
            || words > 65536
            || row_words > 64
            || words < 2 * row_words
            || lanes == 0
        {
            return Err(HdlError::Block(format!(
                "feature-map RAM of {words} words in rows of {row_words}: need powers of two, rows of at most 64 words, at least two rows, at most 65536 words"
            )));
        }
        Ok(Self {
            clock: Default::default(),
            we: Default::default(),
            w_row: Default::default(),
            w_data: (0..row_words).map(|_| Signal::default()).collect(),
            re: Default::default(),
            r_addr: (0..lanes).map(|_| Signal::default()).collect(),
            r_data: (0..lanes).map(|_| Signal::default()).collect(),
            _row_words: row_words,
            _word_bits: word_bits,
            _mem: vec![Signed::default(); words],
        })
    }
}

impl Logic for FmRam {
    fn update(&mut self) {
        if self.clock.pos_edge() {
            let words = self._mem.len();
            if self.re.val() {
                for (d, a) in self.r_data.iter_mut().zip(&self.r_addr) {
                    d.next = self._mem[a.val().index() & (words - 1)];
                }
            }
            if self.we.val() {
                let rows = words / self._row_words;
                let row = self.w_row.val().index() & (rows - 1);
                for (i, w) in self.w_data.iter().enumerate() {
                    self._mem[row * self._row_words + i] = keep_word(w.val(), self._word_bits);
                }
            }
        }
    }

    fn connect(&mut self) {
        for d in &mut self.r_data {
            d.connect();
        }
    }

    fn hdl(&self) -> Verilog {
        let r = self._row_words;
        let rows = self._mem.len() / r;
        let rb = rows.trailing_zeros() as usize;
        let sb = r.trailing_zeros() as usize;
        let ab = rb + sb;
        let w = self._word_bits;
        // At `W` < 16 a word is stored as its low `W` bits and read back sign-extended.
        let narrow = w < MAX_WORD_BITS;
        let concat: Vec<String> = (0..r)
            .rev()
            .map(|i| match narrow {
                true => format!("w_data${i}[{}:0]", w - 1),
                false => format!("w_data${i}"),
            })
            .collect();
        let mut reads = String::new();
        let mut unused = vec![];
        for l in 0..self.r_addr.len() {
            let word = format!(
                "mem[r_addr${l}[{ahi}:{sb}]][r_addr${l}[{slo}:0]*{w} +: {w}]",
                ahi = ab - 1,
                slo = sb - 1,
            );
            let word = match narrow {
                true => format!("$signed({word})"),
                false => word,
            };
            reads.push_str(&format!("      r_data${l} <= {word};\n"));
            if ab < 16 {
                unused.push(format!("r_addr${l}[15:{ab}]"));
            }
        }
        if rb < 16 {
            unused.push(format!("w_row[15:{rb}]"));
        }
        // Verilator's lint ignores signals named `*unused*`: the high address bits are unused
        // when the RAM is smaller than the ports are wide, the high word bits below 16 bits.
        let mut unused = if unused.is_empty() {
            String::new()
        } else {
            format!(
                "wire unused_addr_bits = &{{1'b0, {}}};\n",
                unused.join(", ")
            )
        };
        if narrow {
            let high: Vec<String> = (0..r).map(|i| format!("w_data${i}[15:{w}]")).collect();
            unused.push_str(&format!(
                "wire unused_word_bits = &{{1'b0, {}}};\n",
                high.join(", ")
            ));
        }
        Verilog::Custom(format!(
            "\
reg [{width}:0] mem[0:{last}];
{unused}
always @(posedge clock) begin
   if (re) begin
{reads}   end
   if (we) begin
      mem[w_row[{rhi}:0]] <= {{{concat}}};
   end
end
",
            width = w as usize * r - 1,
            last = rows - 1,
            rhi = rb - 1,
            concat = concat.join(", "),
        ))
    }

    fn timing(&self) -> Vec<TimingInfo> {
        let mut inputs = vec!["we".to_string(), "w_row".to_string(), "re".to_string()];
        inputs.extend((0..self.r_addr.len()).map(|l| format!("r_addr${l}")));
        vec![TimingInfo {
            name: "fm_ram".into(),
            clock: "clock".into(),
            inputs,
            outputs: (0..self.r_data.len())
                .map(|l| format!("r_data${l}"))
                .collect(),
        }]
    }
}
