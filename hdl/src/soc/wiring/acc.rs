//! The accelerator's side of the SoC's `top`: the row sequencer, the row DMA, the generated
//! stage and the accelerator (module `systole_acc`).

use super::super::blocks;
use super::super::netlist::{Block, Dir, Net, Netlist, Port, Src, Value, Width};
use super::super::{stage, Plan};
use super::{inst, Nets};
use crate::{HdlError, PortDir, PortInfo};
use systole_core::soc::*;

// The DMA and the sequencer take a command's fields at these bits, each field whole.
const _: () =
    assert!(ROW_CMD_ROW.width == 16 && ROW_CMD_BANK.width == 1 && ROW_CMD_KIND.width == 2);

/// The fields of a row command, as the sequencer and the DMA decode them.
fn cmd_fields() -> [(&'static str, Value); 3] {
    [
        ("ROW_LSB", Value::Int(ROW_CMD_ROW.lsb)),
        ("BANK_LSB", Value::Int(ROW_CMD_BANK.lsb)),
        ("KIND_LSB", Value::Int(ROW_CMD_KIND.lsb)),
    ]
}

/// The nets between the row sequencer, the row DMA, the stage and the accelerator.
struct AccNets {
    row_idle: Net,
    capture: Net,
    stage_load: Net,
    /// The DMA's row command to the sequencer.
    dma_cmd: Net,
    dma_row: Net,
    dma_bank: Net,
    dma_kind: Net,
    /// The DMA's lanes in the stage, and the C stage's lane it stores.
    lane_we: Net,
    lane_idx: Net,
    lane_data: Net,
    lanes_clear: Net,
    c_lane: Net,
    c_word: Net,
    /// The command on the accelerator's row ports.
    cmd_row: Net,
    cmd_bank: Net,
    a_wr_en: Net,
    b_wr_en: Net,
    fm_wr_en: Net,
    /// The accelerator's registers.
    acc_we: Net,
    acc_rdata: Net,
    /// The accelerator's C words, and the stage words its row ports take.
    c_rd: Vec<Net>,
    stage_words: Vec<Net>,
}

impl AccNets {
    fn new(nl: &mut Netlist, p: &Plan) -> Self {
        let lb = stage::lane_bits(p.n);
        let cmd_row = nl.partly_read_wire(
            "cmd_row",
            16,
            "The accelerator's row ports use as many low bits as its configuration needs.",
        );
        let c_rd = (0..p.n)
            .map(|i| nl.wire(&format!("c_rd_{i}"), p.word_bits))
            .collect();
        let stage_words = (0..stage::words(p.n))
            .map(|i| {
                let why = "The row ports take the low W bits of each 16-bit lane (of the lanes there are).";
                nl.partly_read_wire(&format!("stage_{i}"), 32, why)
            })
            .collect();
        let mut w = |name: &str, width: u32| nl.wire(name, width);
        AccNets {
            row_idle: w("row_idle", 1),
            capture: w("capture", 1),
            stage_load: w("stage_load", 1),
            dma_cmd: w("dma_row_cmd", 1),
            dma_row: w("dma_cmd_row", 16),
            dma_bank: w("dma_cmd_bank", 1),
            dma_kind: w("dma_cmd_kind", 2),
            lane_we: w("lane_we", 1),
            lane_idx: w("lane_idx", lb),
            lane_data: w("lane_data", 16),
            lanes_clear: w("lanes_clear", 1),
            c_lane: w("c_lane", lb),
            c_word: w("c_word", 16),
            cmd_row,
            cmd_bank: w("cmd_bank", 1),
            a_wr_en: w("a_wr_en", 1),
            b_wr_en: w("b_wr_en", 1),
            fm_wr_en: w("fm_wr_en", 1),
            acc_we: w("acc_we", 1),
            acc_rdata: w("acc_rdata", 32),
            c_rd,
            stage_words,
        }
    }
}

/// The row sequencer, the row DMA, the stage and the accelerator itself.
pub(super) fn accelerator(
    nl: &mut Netlist,
    p: &Plan,
    n: &Nets,
    acc_ports: &[PortInfo],
) -> Result<(), HdlError> {
    let a = AccNets::new(nl, p);
    mm(nl, p, n, &a)?;
    row_seq(nl, n, &a)?;
    dma(nl, p, n, &a)?;
    stage_instance(nl, p, n, &a)?;
    acc_instance(nl, n, &a, acc_ports)
}

/// The ports of a block that writes registers on the data bus and resets with the CPU.
fn writer_ports(n: &Nets) -> [(&'static str, Src); 5] {
    [
        ("clock", n.clock.into()),
        ("rst", n.rst.into()),
        ("addr", n.addr.into()),
        ("wr", n.wr.into()),
        ("wdata", n.wdata.into()),
    ]
}

fn row_seq(nl: &mut Netlist, n: &Nets, a: &AccNets) -> Result<(), HdlError> {
    let mut params = vec![("CMD_ADDR", Value::Word(ROW_CMD))];
    params.extend(cmd_fields());
    params.extend([
        ("KIND_WRITE_A", Value::Int(ROW_KIND_WRITE_A)),
        ("KIND_WRITE_B", Value::Int(ROW_KIND_WRITE_B)),
        ("KIND_READ_C", Value::Int(ROW_KIND_READ_C)),
        ("KIND_WRITE_FM", Value::Int(ROW_KIND_WRITE_FM)),
    ]);
    inst(
        nl,
        &blocks::ROW_SEQ,
        "row_seq",
        &params,
        &[
            &writer_ports(n)[..],
            &[
                ("dma_cmd", a.dma_cmd.into()),
                ("dma_row", a.dma_row.into()),
                ("dma_bank", a.dma_bank.into()),
                ("dma_kind", a.dma_kind.into()),
                ("hold", n.row_hold.into()),
                ("idle", a.row_idle.into()),
                ("capture", a.capture.into()),
                ("cmd_row", a.cmd_row.into()),
                ("cmd_bank", a.cmd_bank.into()),
                ("a_wr_en", a.a_wr_en.into()),
                ("b_wr_en", a.b_wr_en.into()),
                ("fm_wr_en", a.fm_wr_en.into()),
            ],
        ]
        .concat(),
    )
}

fn dma(nl: &mut Netlist, p: &Plan, n: &Nets, a: &AccNets) -> Result<(), HdlError> {
    let mut params = vec![
        ("N", Value::Int(p.n as u32)),
        ("LANE_BITS", Value::Int(stage::lane_bits(p.n))),
        ("ADDR_BITS", Value::Int(p.ram_addr_bits as u32)),
        ("ADDR_ADDR", Value::Word(DMA_ADDR)),
        ("ROW_STEP_ADDR", Value::Word(DMA_ROW_STEP)),
        ("LANE_STEP_ADDR", Value::Word(DMA_LANE_STEP)),
        ("LANES_ADDR", Value::Word(DMA_LANES)),
        ("ROWS_ADDR", Value::Word(DMA_ROWS)),
        ("CMD_ADDR", Value::Word(DMA_CMD)),
        ("COUNT_LSB", Value::Int(DMA_COUNT.lsb)),
        ("KIND_READ_C", Value::Int(ROW_KIND_READ_C)),
    ];
    params.extend(cmd_fields());
    inst(
        nl,
        &blocks::DMA,
        "dma",
        &params,
        &[
            &writer_ports(n)[..],
            &[
                ("rdata", n.dma_rdata.into()),
                ("hold", n.dma_hold.into()),
                ("ram_busy", n.dma_busy.into()),
                ("ram_addr", n.dma_ram_addr.into()),
                ("ram_we", n.dma_ram_we.into()),
                ("ram_wdata", n.dma_ram_wdata.into()),
                ("ram_q", n.ram_q.into()),
                ("row_idle", a.row_idle.into()),
                ("stage_load", a.stage_load.into()),
                ("row_cmd", a.dma_cmd.into()),
                ("cmd_row", a.dma_row.into()),
                ("cmd_bank", a.dma_bank.into()),
                ("cmd_kind", a.dma_kind.into()),
                ("lane_we", a.lane_we.into()),
                ("lane_idx", a.lane_idx.into()),
                ("lane_data", a.lane_data.into()),
                ("lanes_clear", a.lanes_clear.into()),
                ("c_lane", a.c_lane.into()),
                ("c_word", a.c_word.into()),
            ],
        ]
        .concat(),
    )
}

/// The product sequencer: the CPU's bus passes through it, and it takes the bus while it runs
/// a product (the DMA's and the array's registers at their addresses).
fn mm(nl: &mut Netlist, p: &Plan, n: &Nets, a: &AccNets) -> Result<(), HdlError> {
    use systole_core::numeric::{MAX_SHIFT, TILE_SEED_MIX, TILE_SEED_MUL};
    use systole_core::{regmap, Rounding};
    let acc = |r: u8| Value::Word(ACC_REGS + 4 * u32::from(r));
    let dma_cmd = |kind: u32| Value::Word(ROW_CMD_KIND.put(kind));
    let size = p.n as u32;
    let params = [
        ("N", Value::Int(size)),
        ("CHUNK", Value::Int(p.chunk)),
        ("BASE", Value::Word(MM_A_ADDR)),
        ("DMA_ADDR_ADDR", Value::Word(DMA_ADDR)),
        ("DMA_ROW_STEP_ADDR", Value::Word(DMA_ROW_STEP)),
        ("DMA_LANE_STEP_ADDR", Value::Word(DMA_LANE_STEP)),
        ("DMA_LANES_ADDR", Value::Word(DMA_LANES)),
        ("DMA_ROWS_ADDR", Value::Word(DMA_ROWS)),
        ("DMA_CMD_ADDR", Value::Word(DMA_CMD)),
        ("DMA_WRITE_A", dma_cmd(ROW_KIND_WRITE_A)),
        ("DMA_WRITE_B", dma_cmd(ROW_KIND_WRITE_B)),
        ("DMA_READ_C", dma_cmd(ROW_KIND_READ_C)),
        ("ACC_STATUS", acc(regmap::STATUS)),
        ("ACC_ERROR_CLEAR", acc(regmap::ERROR_CLEAR)),
        ("ACC_SHIFT", acc(regmap::SHIFT)),
        ("ACC_ROUNDING", acc(regmap::ROUNDING)),
        ("ACC_SEED", acc(regmap::SEED)),
        ("ACC_K_LEN", acc(regmap::K_LEN)),
        ("ACC_COMMAND", acc(regmap::COMMAND)),
        (
            "STATUS_WAIT",
            Value::Word(regmap::STATUS_BUSY | regmap::STATUS_QUEUE_FULL),
        ),
        ("STATUS_ERROR", Value::Word(regmap::STATUS_ERROR)),
        (
            "CMD_CLEAR",
            Value::Word(regmap::command(0, 0, 0, true, false)),
        ),
        (
            "CMD_EMIT",
            Value::Word(regmap::command(0, 0, 0, false, true)),
        ),
        (
            "SEED_STEP_I",
            Value::Word(size.wrapping_mul(TILE_SEED_MUL[0])),
        ),
        (
            "SEED_STEP_J",
            Value::Word(size.wrapping_mul(TILE_SEED_MUL[1])),
        ),
        ("SEED_MIX0", Value::Word(TILE_SEED_MIX[0])),
        ("SEED_MIX1", Value::Word(TILE_SEED_MIX[1])),
        ("MAX_SHIFT", Value::Int(MAX_SHIFT)),
        ("MAX_ROUNDING", Value::Int(Rounding::Stochastic.code())),
    ];
    inst(
        nl,
        &blocks::MM,
        "mm",
        &params,
        &[
            ("clock", n.clock.into()),
            ("rst", n.rst.into()),
            ("cpu_addr", n.cpu_addr.into()),
            ("cpu_wr", n.cpu_wr.into()),
            ("cpu_rd", n.cpu_rd.into()),
            ("cpu_wdata", n.cpu_wdata.into()),
            ("addr", n.addr.into()),
            ("wr", n.wr.into()),
            ("rd", n.rd.into()),
            ("wdata", n.wdata.into()),
            ("rdata", n.mm_rdata.into()),
            ("hold", n.mm_hold.into()),
            ("acc_rdata", a.acc_rdata.into()),
            ("dma_hold", n.dma_hold.into()),
        ],
    )
}

/// The generated stage block ([`stage`]), whose ports name every lane.
fn stage_instance(nl: &mut Netlist, p: &Plan, n: &Nets, a: &AccNets) -> Result<(), HdlError> {
    let mut conns: Vec<(String, Src)> = [
        ("clock", n.clock),
        ("addr", n.addr),
        ("wr", n.wr),
        ("wdata", n.wdata),
        ("rdata", n.stage_rdata),
        ("acc_we", a.acc_we),
        ("acc_rdata", a.acc_rdata),
        ("lane_we", a.lane_we),
        ("lane_idx", a.lane_idx),
        ("lane_data", a.lane_data),
        ("lanes_clear", a.lanes_clear),
        ("stage_load", a.stage_load),
        ("capture", a.capture),
        ("c_lane", a.c_lane),
        ("c_word", a.c_word),
    ]
    .into_iter()
    .map(|(k, net)| (k.to_string(), net.into()))
    .collect();
    let c_rd = a.c_rd.iter().enumerate();
    conns.extend(c_rd.map(|(i, c)| (format!("c_rd_{i}"), (*c).into())));
    let words = a.stage_words.iter().enumerate();
    conns.extend(words.map(|(i, s)| (format!("stage_{i}"), (*s).into())));
    let named: Vec<(&str, Src)> = conns.iter().map(|(k, s)| (k.as_str(), *s)).collect();
    nl.instance(&stage::block(p), "stage", &[], &named)
}

/// The accelerator (module `systole_acc`, ports as [`crate::ports`]): its registers on the bus,
/// its row ports from the sequencer and the stage.
fn acc_instance(
    nl: &mut Netlist,
    n: &Nets,
    a: &AccNets,
    ports: &[PortInfo],
) -> Result<(), HdlError> {
    let block = Block {
        module: "systole_acc",
        params: Vec::new(),
        ports: ports
            .iter()
            .map(|p| {
                let dir = match p.dir {
                    PortDir::Input => Dir::In,
                    PortDir::Output => Dir::Out,
                };
                Port::new(p.name.clone(), dir, Width::Bits(p.width))
            })
            .collect(),
    };
    let mut conns = Vec::new();
    for port in ports {
        conns.push((port.name.as_str(), connection(n, a, port)?));
    }
    nl.instance(&block, "acc", &[], &conns)
}

/// What drives (or is driven by) accelerator port `port`.
fn connection(n: &Nets, a: &AccNets, port: &PortInfo) -> Result<Src, HdlError> {
    let name = port.name.as_str();
    let lane = |l: &str| -> Result<usize, HdlError> {
        l.parse()
            .map_err(|_| HdlError::Block(format!("accelerator port {name}: no lane number")))
    };
    let missing = || HdlError::Block(format!("accelerator port {name}: no such lane in the SoC"));
    if let Some(l) = name.strip_prefix("c_rd_data_") {
        return Ok(Src::Net(*a.c_rd.get(lane(l)?).ok_or_else(missing)?));
    }
    for m in ["a_wr_data_", "b_wr_data_", "fm_wr_data_"] {
        if let Some(l) = name.strip_prefix(m) {
            // Lane l: 16 bits of stage word l / 2, of which the port takes the low W.
            let l = lane(l)?;
            let lo = (l % 2) as u32 * 16;
            let word = *a.stage_words.get(l / 2).ok_or_else(missing)?;
            return Ok(Src::Bits(word, lo + port.width - 1, lo));
        }
    }
    Ok(match name {
        "clock" => n.clock.into(),
        "reset" => n.rst.into(),
        "reg_addr" => Src::Bits(n.addr, 9, 2),
        "reg_wdata" => n.wdata.into(),
        "reg_we" => a.acc_we.into(),
        "reg_rdata" => a.acc_rdata.into(),
        "a_wr_en" => a.a_wr_en.into(),
        "b_wr_en" => a.b_wr_en.into(),
        "fm_wr_en" => a.fm_wr_en.into(),
        "a_wr_bank" | "b_wr_bank" | "c_rd_bank" => a.cmd_bank.into(),
        "a_wr_row" | "b_wr_row" | "c_rd_row" | "fm_wr_row" => {
            Src::Bits(a.cmd_row, port.width - 1, 0)
        }
        other => {
            return Err(HdlError::Block(format!(
                "accelerator port {other} has no connection in the SoC"
            )))
        }
    })
}
