//! Buffer RAMs: one simple dual-port RAM per lane, holding two banks.
//!
//! The A and B buffers are `n` lanes of `2 x buffer_depth` words (lane `r` of A holds
//! `A[i0 + r][k]` at row `k`); the C buffer is `n` lanes of `2 x n` words (lane `c` holds
//! `C[i0 + r][j0 + c]` at row `r`), written by the column converters, one lane each, since the
//! columns finish at staggered times. Each RAM has one write port and one read port with a
//! registered output: the address is sampled on a rising edge and the data is valid after it.
//!
//! Row addresses arrive `W` bits wide and only the low `row_bits` are used (the generator keeps
//! one internal width for every buffer depth). The RAM is written as plain Verilog so that FPGA
//! tools infer block RAM; its simulation model below follows the same rules.

use crate::HdlError;
use rust_hdl_core::prelude::*;

/// One lane of a double-buffered RAM: `2 x 2^row_bits` signed 16-bit words.
#[derive(LogicBlock)]
pub struct LaneRam<const W: usize> {
    /// Clock for both ports.
    pub clock: Signal<In, Clock>,
    /// Write `w_data` on this edge.
    pub we: Signal<In, Bit>,
    /// Bank written.
    pub w_bank: Signal<In, Bit>,
    /// Row written (low `row_bits` used).
    pub w_row: Signal<In, Bits<W>>,
    /// Word written.
    pub w_data: Signal<In, Signed<16>>,
    /// Bank read.
    pub r_bank: Signal<In, Bit>,
    /// Row read (low `row_bits` used).
    pub r_row: Signal<In, Bits<W>>,
    /// Word at the read address sampled on the previous edge.
    pub r_data: Signal<Out, Signed<16>>,
    _row_bits: usize,
    _mem: Vec<Signed<16>>,
}

impl<const W: usize> LaneRam<W> {
    /// A lane RAM with `2^row_bits` rows per bank (`1 <= row_bits <= W`).
    pub fn new(row_bits: usize) -> Result<Self, HdlError> {
        if row_bits == 0 || row_bits > W || row_bits > 16 {
            return Err(HdlError::Block(format!(
                "lane RAM with {row_bits} row address bits: must be 1..={}",
                W.min(16)
            )));
        }
        Ok(Self {
            clock: Default::default(),
            we: Default::default(),
            w_bank: Default::default(),
            w_row: Default::default(),
            w_data: Default::default(),
            r_bank: Default::default(),
            r_row: Default::default(),
            r_data: Default::default(),
            _row_bits: row_bits,
            _mem: vec![Signed::default(); 2 << row_bits],
        })
    }

    fn index(&self, bank: bool, row: Bits<W>) -> usize {
        let row = row.index() & ((1 << self._row_bits) - 1);
        ((bank as usize) << self._row_bits) | row
    }
}

impl<const W: usize> Logic for LaneRam<W> {
    fn update(&mut self) {
        if self.clock.pos_edge() {
            // Read before write: a read of the row being written returns the old word.
            self.r_data.next = self._mem[self.index(self.r_bank.val(), self.r_row.val())];
            if self.we.val() {
                let i = self.index(self.w_bank.val(), self.w_row.val());
                self._mem[i] = self.w_data.val();
            }
        }
    }

    fn connect(&mut self) {
        self.r_data.connect();
    }

    fn hdl(&self) -> Verilog {
        let rb = self._row_bits;
        // Verilator's lint ignores signals named `*unused*`: the high address bits are unused
        // on purpose when the bank is shallower than the port is wide.
        let unused = if rb < W {
            format!(
                "wire unused_row_bits = &{{1'b0, w_row[{hi}:{rb}], r_row[{hi}:{rb}]}};\n",
                hi = W - 1
            )
        } else {
            String::new()
        };
        Verilog::Custom(format!(
            "\
reg signed [15:0] mem[0:{last}];
{unused}
always @(posedge clock) begin
   r_data <= mem[{{r_bank, r_row[{top}:0]}}];
   if (we) begin
      mem[{{w_bank, w_row[{top}:0]}}] <= w_data;
   end
end
",
            last = (2usize << rb) - 1,
            top = rb - 1,
        ))
    }

    fn timing(&self) -> Vec<TimingInfo> {
        vec![TimingInfo {
            name: "lane_ram".into(),
            clock: "clock".into(),
            inputs: vec![
                "we".into(),
                "w_bank".into(),
                "w_row".into(),
                "w_data".into(),
                "r_bank".into(),
                "r_row".into(),
            ],
            outputs: vec!["r_data".into()],
        }]
    }
}
