//! Waveforms of the array: a window of cycles written to a VCD or FST file.
//!
//! The fast models compiled by `build.rs` have no tracing (Verilator's `--trace` cost about 25%
//! of their speed even with no file open). A traced model is Verilated on first use through
//! `systole-testbench` (cached under `target/systole-testbench/`, so later runs load it at
//! once), from the same Verilog and the same port list (`systole_hdl::ports`) as the fast one,
//! in the format asked for. [`TracedTop`] drives it port by port with the fast shim's timing,
//! one clock at a time, so the trace window opens and closes on exact cycles.

use crate::SimError;
use std::path::{Path, PathBuf};
use systole_core::ArrayConfig;
use systole_testbench::{Dir, Options, Port, PortInfo, Testbench};

pub use systole_testbench::TraceFormat;

/// Which cycles of a simulation go to which trace file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceWindow {
    /// The trace file.
    pub path: PathBuf,
    /// Its format.
    pub format: TraceFormat,
    /// The first cycle traced, counted as [`crate::VerilatedArray::cycles`] counts (from the
    /// model's creation, its reset included).
    pub from: u64,
    /// How many cycles are traced (`None`: to the end of the simulation).
    pub cycles: Option<u64>,
}

impl TraceWindow {
    /// A window writing `path`, in `format` when given, else the one its extension names
    /// (`.vcd`, `.fst`).
    pub fn new(
        path: &Path,
        format: Option<TraceFormat>,
        from: u64,
        cycles: Option<u64>,
    ) -> Result<TraceWindow, SimError> {
        let by_name = match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("vcd") => Some(TraceFormat::Vcd),
            Some(e) if e.eq_ignore_ascii_case("fst") => Some(TraceFormat::Fst),
            _ => None,
        };
        let format = format.or(by_name).ok_or_else(|| {
            SimError::TraceSetup(format!(
                "{}: name the trace file .vcd or .fst (or state the format), e.g. run.{}",
                path.display(),
                default_format().name()
            ))
        })?;
        if cycles == Some(0) {
            return Err(SimError::TraceSetup(
                "a trace of 0 cycles would hold nothing: give at least 1 cycle".into(),
            ));
        }
        Ok(TraceWindow {
            path: path.to_path_buf(),
            format,
            from,
            cycles,
        })
    }

    /// The cycle after the last one traced.
    fn end(&self) -> Option<u64> {
        self.cycles.map(|c| self.from.saturating_add(c))
    }

    /// Creates the (empty) trace file, so a path that cannot be written fails before any
    /// simulation. An existing file is replaced only when `overwrite`; a link, folder, device
    /// or FIFO never is.
    pub fn create_file(&self, overwrite: bool) -> Result<(), SimError> {
        let shown = self.path.display();
        if let Ok(meta) = std::fs::symlink_metadata(&self.path) {
            if !meta.file_type().is_file() {
                return Err(SimError::TraceSetup(format!(
                    "{shown} exists and is not a regular file (a link, folder, device or FIFO): name a new file"
                )));
            }
            if !overwrite {
                return Err(SimError::TraceSetup(format!(
                    "{shown} exists: choose another --trace file, or replace it with --overwrite-trace"
                )));
            }
        }
        let mut open = std::fs::OpenOptions::new();
        open.write(true);
        if overwrite {
            open.create(true).truncate(true);
        } else {
            open.create_new(true);
        }
        open.open(&self.path)
            .map(drop)
            .map_err(|cause| SimError::TraceFile {
                path: self.path.clone(),
                cause,
            })
    }
}

/// FST where Verilator's FST writer can be built (it needs zlib's header), else VCD.
pub fn default_format() -> TraceFormat {
    let zlib = ["/usr/include/zlib.h", "/usr/local/include/zlib.h"];
    if zlib.iter().any(|p| Path::new(p).is_file()) {
        TraceFormat::Fst
    } else {
        TraceFormat::Vcd
    }
}

/// Where the trace window stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceState {
    /// The first traced cycle is still ahead.
    Waiting,
    /// Cycles are being written.
    Open,
    /// The window has passed; the file is complete.
    Closed,
}

/// Handles of the ports of `top` the bus drives.
struct TopPorts {
    reset: Port,
    reg_addr: Port,
    reg_wdata: Port,
    reg_we: Port,
    reg_rdata: Port,
    /// `(en, bank, row, lanes)` of A and B.
    ab: [(Port, Port, Port, Vec<Port>); 2],
    c_bank: Port,
    c_row: Port,
    c_data: Vec<Port>,
    fm_en: Port,
    fm_row: Port,
    fm_data: Vec<Port>,
}

/// The traced model of one array configuration with its trace window.
pub(crate) struct TracedTop {
    tb: Testbench,
    p: TopPorts,
    window: TraceWindow,
    state: TraceState,
}

/// The testbench's error as a [`SimError`] (a build failure keeps Verilator's log).
fn tb_error(e: systole_testbench::TestbenchError) -> SimError {
    SimError::Traced(Box::new(e))
}

impl TracedTop {
    /// Verilates (or loads from the cache) the traced model of `cfg` and resets it as
    /// [`crate::VerilatedArray::new`] resets the fast one.
    pub fn new(cfg: &ArrayConfig, window: TraceWindow) -> Result<TracedTop, SimError> {
        let verilog = systole_hdl::generate_verilog(cfg)
            .map_err(|e| SimError::TraceSetup(format!("cannot generate the Verilog: {e}")))?;
        let ports = systole_hdl::ports(cfg)
            .map_err(|e| SimError::TraceSetup(format!("cannot list the ports: {e}")))?
            .into_iter()
            .map(|p| PortInfo {
                clock: p.name == "clock",
                name: p.name,
                width: p.width as usize,
                dir: match p.dir {
                    systole_hdl::PortDir::Input => Dir::Input,
                    systole_hdl::PortDir::Output => Dir::Output,
                },
                signed: false,
            })
            .collect();
        let opts = Options {
            trace: Some(window.format),
            ..Options::default()
        };
        let tb = Testbench::from_verilog(&verilog, ports, &opts).map_err(tb_error)?;
        let h = |name: &str| tb.port(name).map_err(tb_error);
        let lanes = |base: &str, n: usize| -> Result<Vec<Port>, SimError> {
            (0..n).map(|i| h(&format!("{base}_{i}"))).collect()
        };
        let n = cfg.size;
        let ab = |m: &str| -> Result<_, SimError> {
            Ok((
                h(&format!("{m}_wr_en"))?,
                h(&format!("{m}_wr_bank"))?,
                h(&format!("{m}_wr_row"))?,
                lanes(&format!("{m}_wr_data"), n)?,
            ))
        };
        let p = TopPorts {
            reset: h("reset")?,
            reg_addr: h("reg_addr")?,
            reg_wdata: h("reg_wdata")?,
            reg_we: h("reg_we")?,
            reg_rdata: h("reg_rdata")?,
            ab: [ab("a")?, ab("b")?],
            c_bank: h("c_rd_bank")?,
            c_row: h("c_rd_row")?,
            c_data: lanes("c_rd_data", n)?,
            fm_en: h("fm_wr_en")?,
            fm_row: h("fm_wr_row")?,
            fm_data: lanes("fm_wr_data", cfg.fm_row_words())?,
        };
        let mut top = TracedTop {
            tb,
            p,
            window,
            state: TraceState::Waiting,
        };
        top.reset(crate::RESET_CYCLES)?;
        Ok(top)
    }

    /// Where the window stands.
    pub fn state(&self) -> TraceState {
        self.state
    }

    /// One clock cycle, opening the trace before the window's first cycle and closing it
    /// after its last.
    fn clock(&mut self) -> Result<(), SimError> {
        if self.state == TraceState::Waiting && self.tb.cycles() >= self.window.from {
            self.tb.trace(&self.window.path).map_err(tb_error)?;
            self.state = TraceState::Open;
        }
        self.tb.clock();
        if self.state == TraceState::Open && self.window.end() == Some(self.tb.cycles()) {
            self.tb.close_trace();
            self.state = TraceState::Closed;
        }
        Ok(())
    }

    /// Holds `reset` high for `cycles` cycles (inputs idle).
    pub fn reset(&mut self, cycles: u32) -> Result<(), SimError> {
        self.idle_inputs()?;
        self.write(self.p.reset, 1)?;
        for _ in 0..cycles {
            self.clock()?;
        }
        self.write(self.p.reset, 0)
    }

    fn write(&mut self, port: Port, value: u64) -> Result<(), SimError> {
        self.tb.write(port, value).map_err(tb_error)
    }

    /// Every enable low, as the fast shim leaves them after each beat.
    fn idle_inputs(&mut self) -> Result<(), SimError> {
        let (we, a, b, fm) = (self.p.reg_we, self.p.ab[0].0, self.p.ab[1].0, self.p.fm_en);
        for en in [we, a, b, fm] {
            self.write(en, 0)?;
        }
        Ok(())
    }

    /// The combinational register read (no clock edge).
    pub fn read_reg(&mut self, addr: u32) -> Result<u32, SimError> {
        self.write(self.p.reg_addr, addr.into())?;
        self.write(self.p.reg_we, 0)?;
        let v = self.tb.read(self.p.reg_rdata).map_err(tb_error)?;
        Ok(v as u32)
    }

    /// One beat: the inputs of `inp`, a clock edge, then the C row into `c_out` when given.
    pub fn tick(
        &mut self,
        inp: &crate::ffi::PortIn,
        c_out: Option<&mut [i16]>,
    ) -> Result<(), SimError> {
        let p = &self.p;
        let mut w: Vec<(Port, u64)> = vec![
            (p.reg_addr, inp.reg_addr.into()),
            (p.reg_wdata, inp.reg_wdata.into()),
            (p.reg_we, inp.reg_we.into()),
            (p.c_bank, inp.c_bank.into()),
            (p.c_row, inp.c_row.into()),
            (p.fm_en, inp.fm_en.into()),
            (p.fm_row, inp.fm_row.into()),
        ];
        for (i, (en, bank, row, data)) in [
            (inp.a_en, inp.a_bank, inp.a_row, inp.a_data),
            (inp.b_en, inp.b_bank, inp.b_row, inp.b_data),
        ]
        .into_iter()
        .enumerate()
        {
            let (pe, pb, pr, lanes) = &p.ab[i];
            w.extend([(*pe, en.into()), (*pb, bank.into()), (*pr, row.into())]);
            if en != 0 {
                // SAFETY (of the caller): an enabled row points at one word per lane.
                #[allow(unsafe_code)]
                let words = unsafe { core::slice::from_raw_parts(data, lanes.len()) };
                w.extend(
                    lanes
                        .iter()
                        .zip(words)
                        .map(|(l, &v)| (*l, u64::from(v as u16))),
                );
            }
        }
        if inp.fm_en != 0 {
            #[allow(unsafe_code)]
            // SAFETY (of the caller): an enabled feature-map row points at a row of words.
            let words = unsafe { core::slice::from_raw_parts(inp.fm_data, p.fm_data.len()) };
            w.extend(
                p.fm_data
                    .iter()
                    .zip(words)
                    .map(|(l, &v)| (*l, u64::from(v as u16))),
            );
        }
        for (port, v) in w {
            self.write(port, v)?;
        }
        self.clock()?;
        self.idle_inputs()?;
        if let Some(out) = c_out {
            for (o, &port) in out.iter_mut().zip(&self.p.c_data) {
                *o = self.tb.read(port).map_err(tb_error)? as u16 as i16;
            }
        }
        Ok(())
    }

    /// `cycles` clock cycles with every enable low.
    pub fn idle(&mut self, cycles: u32) -> Result<(), SimError> {
        self.idle_inputs()?;
        for _ in 0..cycles {
            self.clock()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
