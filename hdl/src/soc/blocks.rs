//! The SoC's hand-written blocks (`hdl/verilog/soc_*.v`) and their ports as the top wires
//! them. The test below holds each file's header to its list here.

use super::netlist::{Block, Dir, Port, Width};
use Dir::{In, Out};
use Width::{Bits as B, Param as P};

/// One hand-written block: its Verilog file, parameters and ports.
pub(super) struct Source {
    pub module: &'static str,
    pub text: &'static str,
    params: &'static [&'static str],
    ports: &'static [(&'static str, Dir, Width)],
}

impl Source {
    pub fn block(&self) -> Block {
        Block {
            module: self.module,
            params: self.params.to_vec(),
            ports: self
                .ports
                .iter()
                .map(|&(n, d, w)| Port::new(n, d, w))
                .collect(),
        }
    }
}

pub(super) const RESET: Source = Source {
    module: "soc_reset",
    text: include_str!("../../verilog/soc_reset.v"),
    params: &["BUTTON_ACTIVE_LOW", "LED_ACTIVE_LOW"],
    ports: &[
        ("clock", In, B(1)),
        ("reset_pin", In, B(1)),
        ("soft_reset", In, B(1)),
        ("hard_reset", Out, B(1)),
        ("rst", Out, B(1)),
        ("uart_rst", Out, B(1)),
        ("led0", Out, B(1)),
        ("led1", Out, B(1)),
    ],
};

pub(super) const CPU: Source = Source {
    module: "soc_cpu",
    text: include_str!("../../verilog/soc_cpu.v"),
    params: &["RESET_VECTOR"],
    ports: &[
        ("clock", In, B(1)),
        ("rst", In, B(1)),
        ("i_cyc", Out, B(1)),
        ("i_stb", Out, B(1)),
        ("i_adr", Out, B(30)),
        ("i_ack", In, B(1)),
        ("i_dat_r", In, B(32)),
        ("d_cyc", Out, B(1)),
        ("d_stb", Out, B(1)),
        ("d_we", Out, B(1)),
        ("d_adr", Out, B(30)),
        ("d_dat_w", Out, B(32)),
        ("d_sel", Out, B(4)),
        ("d_ack", In, B(1)),
        ("d_dat_r", In, B(32)),
    ],
};

pub(super) const BUS: Source = Source {
    module: "soc_bus",
    text: include_str!("../../verilog/soc_bus.v"),
    params: &[],
    ports: &[
        ("clock", In, B(1)),
        ("rst", In, B(1)),
        ("i_cyc", In, B(1)),
        ("i_stb", In, B(1)),
        ("i_ack", Out, B(1)),
        ("d_cyc", In, B(1)),
        ("d_stb", In, B(1)),
        ("d_we", In, B(1)),
        ("d_adr", In, B(30)),
        ("d_sel", In, B(4)),
        ("d_ack", Out, B(1)),
        ("d_dat_r", Out, B(32)),
        ("ram_we", Out, B(4)),
        ("ram_q", In, B(32)),
        ("addr", Out, B(32)),
        ("mmio_rd", Out, B(1)),
        ("mmio_wr", Out, B(1)),
        ("mmio_rdata", In, B(32)),
        ("hold", In, B(1)),
    ],
};

pub(super) const RAM: Source = Source {
    module: "soc_ram",
    text: include_str!("../../verilog/soc_ram.v"),
    params: &["ADDR_BITS", "HAS_INIT", "INIT_FILE"],
    ports: &[
        ("clock", In, B(1)),
        ("i_adr", In, B(30)),
        ("i_q", Out, B(32)),
        ("cpu_adr", In, B(30)),
        ("cpu_we", In, B(4)),
        ("cpu_wdata", In, B(32)),
        ("dma_busy", In, B(1)),
        ("dma_addr", In, P("ADDR_BITS")),
        ("dma_we", In, B(4)),
        ("dma_wdata", In, B(32)),
        ("load_we", In, B(1)),
        ("load_addr", In, P("ADDR_BITS")),
        ("load_wdata", In, B(32)),
        ("d_q", Out, B(32)),
    ],
};

pub(super) const UART: Source = Source {
    module: "soc_uart",
    text: include_str!("../../verilog/soc_uart.v"),
    params: &[
        "DATA_ADDR",
        "STATUS_ADDR",
        "FIFO_BITS",
        "TX_READY_BIT",
        "RX_VALID_BIT",
        "OVERRUN_BIT",
    ],
    ports: &[
        ("clock", In, B(1)),
        ("uart_rst", In, B(1)),
        ("rx", In, B(1)),
        ("tx", Out, B(1)),
        ("addr", In, B(32)),
        ("wr", In, B(1)),
        ("rd", In, B(1)),
        ("wdata", In, B(8)),
        ("rdata", Out, B(32)),
    ],
};

pub(super) const TIMER: Source = Source {
    module: "soc_timer",
    text: include_str!("../../verilog/soc_timer.v"),
    params: &["LO_ADDR", "HI_ADDR"],
    ports: &[
        ("clock", In, B(1)),
        ("rst", In, B(1)),
        ("addr", In, B(32)),
        ("rd", In, B(1)),
        ("rdata", Out, B(32)),
    ],
};

pub(super) const SYS: Source = Source {
    module: "soc_sys",
    text: include_str!("../../verilog/soc_sys.v"),
    params: &[
        "ID_ADDR",
        "ID",
        "RAM_ADDR",
        "RAM_BYTES",
        "CLOCK_ADDR",
        "CLOCK_HZ",
        "FEATURES_ADDR",
        "FEATURES",
        "RESET_ADDR",
        "RESET_KEY",
    ],
    ports: &[
        ("clock", In, B(1)),
        ("hard_reset", In, B(1)),
        ("addr", In, B(32)),
        ("wr", In, B(1)),
        ("wdata", In, B(32)),
        ("soft_reset", Out, B(1)),
        ("rdata", Out, B(32)),
    ],
};

pub(super) const DMA: Source = Source {
    module: "soc_dma",
    text: include_str!("../../verilog/soc_dma.v"),
    params: &[
        "N",
        "LANE_BITS",
        "ADDR_BITS",
        "ADDR_ADDR",
        "ROW_STEP_ADDR",
        "LANE_STEP_ADDR",
        "LANES_ADDR",
        "ROWS_ADDR",
        "CMD_ADDR",
        "COUNT_LSB",
        "ROW_LSB",
        "BANK_LSB",
        "KIND_LSB",
        "KIND_READ_C",
    ],
    ports: &[
        ("clock", In, B(1)),
        ("rst", In, B(1)),
        ("addr", In, B(32)),
        ("wr", In, B(1)),
        ("wdata", In, B(32)),
        ("rdata", Out, B(32)),
        ("hold", Out, B(1)),
        ("ram_busy", Out, B(1)),
        ("ram_addr", Out, P("ADDR_BITS")),
        ("ram_we", Out, B(4)),
        ("ram_wdata", Out, B(32)),
        ("ram_q", In, B(32)),
        ("row_idle", In, B(1)),
        ("stage_load", Out, B(1)),
        ("row_cmd", Out, B(1)),
        ("cmd_row", Out, B(16)),
        ("cmd_bank", Out, B(1)),
        ("cmd_kind", Out, B(2)),
        ("lane_we", Out, B(1)),
        ("lane_idx", Out, P("LANE_BITS")),
        ("lane_data", Out, B(16)),
        ("lanes_clear", Out, B(1)),
        ("c_lane", Out, P("LANE_BITS")),
        ("c_word", In, B(16)),
    ],
};

pub(super) const ROW_SEQ: Source = Source {
    module: "soc_row_seq",
    text: include_str!("../../verilog/soc_row_seq.v"),
    params: &[
        "CMD_ADDR",
        "ROW_LSB",
        "BANK_LSB",
        "KIND_LSB",
        "KIND_WRITE_A",
        "KIND_WRITE_B",
        "KIND_READ_C",
        "KIND_WRITE_FM",
    ],
    ports: &[
        ("clock", In, B(1)),
        ("rst", In, B(1)),
        ("addr", In, B(32)),
        ("wr", In, B(1)),
        ("wdata", In, B(32)),
        ("dma_cmd", In, B(1)),
        ("dma_row", In, B(16)),
        ("dma_bank", In, B(1)),
        ("dma_kind", In, B(2)),
        ("hold", Out, B(1)),
        ("idle", Out, B(1)),
        ("capture", Out, B(1)),
        ("cmd_row", Out, B(16)),
        ("cmd_bank", Out, B(1)),
        ("a_wr_en", Out, B(1)),
        ("b_wr_en", Out, B(1)),
        ("fm_wr_en", Out, B(1)),
    ],
};

pub(super) const MM: Source = Source {
    module: "soc_mm",
    text: include_str!("../../verilog/soc_mm.v"),
    params: &[
        "N",
        "CHUNK",
        "BASE",
        "DMA_ADDR_ADDR",
        "DMA_ROW_STEP_ADDR",
        "DMA_LANE_STEP_ADDR",
        "DMA_LANES_ADDR",
        "DMA_ROWS_ADDR",
        "DMA_CMD_ADDR",
        "DMA_WRITE_A",
        "DMA_WRITE_B",
        "DMA_READ_C",
        "ACC_STATUS",
        "ACC_ERROR_CLEAR",
        "ACC_SHIFT",
        "ACC_ROUNDING",
        "ACC_SEED",
        "ACC_K_LEN",
        "ACC_COMMAND",
        "STATUS_WAIT",
        "STATUS_ERROR",
        "CMD_CLEAR",
        "CMD_EMIT",
        "SEED_STEP_I",
        "SEED_STEP_J",
        "SEED_MIX0",
        "SEED_MIX1",
        "MAX_SHIFT",
        "MAX_ROUNDING",
    ],
    ports: &[
        ("clock", In, B(1)),
        ("rst", In, B(1)),
        ("cpu_addr", In, B(32)),
        ("cpu_wr", In, B(1)),
        ("cpu_rd", In, B(1)),
        ("cpu_wdata", In, B(32)),
        ("addr", Out, B(32)),
        ("wr", Out, B(1)),
        ("rd", Out, B(1)),
        ("wdata", Out, B(32)),
        ("rdata", Out, B(32)),
        ("hold", Out, B(1)),
        ("acc_rdata", In, B(32)),
        ("dma_hold", In, B(1)),
    ],
};

/// Every hand-written block, in the order the SoC's Verilog holds them.
pub(super) const ALL: [&Source; 10] = [
    &RESET, &CPU, &BUS, &RAM, &UART, &TIMER, &SYS, &DMA, &ROW_SEQ, &MM,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vfile;

    /// Each file's module, parameters and ports (order, direction, width) are its list's.
    #[test]
    fn each_file_declares_the_ports_of_its_list() {
        for s in ALL {
            let h = vfile::header(s.text).unwrap_or_else(|e| panic!("{}: {e}", s.module));
            assert_eq!(h.module, s.module);
            assert_eq!(h.params, s.params, "{}", s.module);
            let got: Vec<(String, Dir, Option<String>)> = h
                .ports
                .iter()
                .map(|d| (d.name.clone(), d.dir, d.range.clone()))
                .collect();
            let want: Vec<(String, Dir, Option<String>)> = s
                .ports
                .iter()
                .map(|(n, d, w)| (n.to_string(), *d, w.range()))
                .collect();
            assert_eq!(got, want, "{}", s.module);
            assert!(h.ports.iter().all(|d| !d.signed), "{}", s.module);
        }
    }
}
