//! Reads the `top` module's port list from generated Verilog and writes the C++ shim and the
//! Rust function table for one Verilated model. Used by `build.rs` only.

use std::fmt::Write as _;

/// One port of `top` as declared in the Verilog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// Name in the Verilog (may contain `$`).
    pub name: String,
    /// `true` for `input`.
    pub input: bool,
    /// Bit width.
    pub width: u32,
}

impl Port {
    /// The member name Verilator gives the port in C++ (`$` becomes `__024`).
    pub fn cpp(&self) -> String {
        self.name.replace('$', "__024")
    }
}

/// The ports of `module top(...)`, in declaration order.
pub fn parse_top_ports(verilog: &str) -> Result<Vec<Port>, String> {
    let start = verilog
        .find("module top(")
        .ok_or("the generated Verilog has no `module top(`")?;
    let body = &verilog[start..];
    let body = &body[..body.find("endmodule").unwrap_or(body.len())];
    let mut ports = Vec::new();
    for line in body.lines().map(str::trim) {
        let (input, rest) = if let Some(r) = line.strip_prefix("input wire") {
            (true, r)
        } else if let Some(r) = line.strip_prefix("output reg") {
            (false, r)
        } else if let Some(r) = line.strip_prefix("output wire") {
            (false, r)
        } else {
            continue;
        };
        let rest = rest.trim().trim_end_matches(';').trim();
        let rest = rest.strip_prefix("signed").unwrap_or(rest).trim();
        let (width, name) = match rest.strip_prefix('[') {
            Some(r) => {
                let (range, name) = r
                    .split_once(']')
                    .ok_or_else(|| format!("bad port: {line}"))?;
                let (hi, lo) = range
                    .split_once(':')
                    .ok_or_else(|| format!("bad port: {line}"))?;
                let hi: u32 = hi.trim().parse().map_err(|_| format!("bad port: {line}"))?;
                let lo: u32 = lo.trim().parse().map_err(|_| format!("bad port: {line}"))?;
                (hi - lo + 1, name.trim())
            }
            None => (1, rest),
        };
        ports.push(Port {
            name: name.to_string(),
            input,
            width,
        });
    }
    Ok(ports)
}

/// The ports the shim drives, found by the names agreed in ARCHITECTURE.md.
pub struct TopPorts {
    scalars: Vec<(&'static str, Port)>,
    /// `(a_wr_data, b_wr_data, c_rd_data, fm_wr_data)` lanes, lane 0 first (the last has
    /// `fm_row_words` lanes, the others `size`).
    lanes: [Vec<Port>; 4],
}

const SCALARS: [&str; 16] = [
    "clock",
    "reset",
    "reg_addr",
    "reg_wdata",
    "reg_we",
    "reg_rdata",
    "a_wr_en",
    "a_wr_bank",
    "a_wr_row",
    "b_wr_en",
    "b_wr_bank",
    "b_wr_row",
    "c_rd_bank",
    "c_rd_row",
    "fm_wr_en",
    "fm_wr_row",
];
const LANES: [&str; 4] = ["a_wr_data", "b_wr_data", "c_rd_data", "fm_wr_data"];

impl TopPorts {
    /// Matches the parsed ports against the agreed names; `size` lanes per row port.
    pub fn find(ports: &[Port], size: usize) -> Result<TopPorts, String> {
        let all = || {
            ports
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut scalars = Vec::new();
        for s in SCALARS {
            let p = ports
                .iter()
                .find(|p| p.name == s)
                .ok_or_else(|| format!("port `{s}` is missing from top (it has: {})", all()))?;
            scalars.push((s, p.clone()));
        }
        let lane_port = |base: &str, lane: usize| {
            ports.iter().find(|p| {
                p.name
                    .strip_prefix(base)
                    .map(|r| r.trim_start_matches(['$', '_']))
                    .is_some_and(|r| r == lane.to_string())
            })
        };
        let mut lanes: [Vec<Port>; 4] = Default::default();
        // The feature-map row is the largest power of two of words not above the size.
        let fm_row_words = 1usize << (usize::BITS - 1 - size.leading_zeros());
        for (i, base) in LANES.iter().enumerate() {
            let count = if i == 3 { fm_row_words } else { size };
            for lane in 0..count {
                let p = lane_port(base, lane).ok_or_else(|| {
                    format!(
                        "lane {lane} of `{base}` is missing from top (it has: {})",
                        all()
                    )
                })?;
                if p.width != 16 {
                    return Err(format!("`{}` is {} bits wide, not 16", p.name, p.width));
                }
                lanes[i].push(p.clone());
            }
        }
        Ok(TopPorts { scalars, lanes })
    }

    /// The C++ member name of the clock input.
    pub fn clock_member(&self) -> String {
        self.s("clock")
    }

    fn s(&self, name: &str) -> String {
        self.scalars
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p.cpp())
            .unwrap()
    }
}

/// C++ source of the `extern "C"` shim for model class `V{name}` (functions `systole_{name}_*`).
///
/// `skip_falling_eval`: the design only reacts to rising edges, so when Verilator's edge
/// detector state (`prev_clock_member`, in the root class) is known, the falling edge is
/// applied without a second `eval()` (which would re-run all input-combinational logic) by
/// resetting that state directly. Off while a trace is open, so the VCD shows both phases.
pub fn shim_cpp(
    name: &str,
    ports: &TopPorts,
    trace: bool,
    prev_clock_member: Option<&str>,
) -> String {
    let cls = format!("V{name}");
    let f = format!("systole_{name}");
    let s = |n: &str| ports.s(n);
    let mut lanes_in = String::new();
    for (which, en) in [(0, "a"), (1, "b"), (3, "fm")] {
        let _ = writeln!(lanes_in, "    if (in->{en}_en) {{");
        for (l, p) in ports.lanes[which].iter().enumerate() {
            let _ = writeln!(
                lanes_in,
                "        m->{} = (uint16_t)in->{en}_data[{l}];",
                p.cpp()
            );
        }
        let _ = writeln!(lanes_in, "    }}");
    }
    let mut lanes_out = String::new();
    for (l, p) in ports.lanes[2].iter().enumerate() {
        let _ = writeln!(
            lanes_out,
            "        c_out[{l}] = (int16_t)(uint16_t)m->{};",
            p.cpp()
        );
    }
    let (trace_inc, trace_dump) = if trace {
        (
            "#include \"verilated_vcd_c.h\"\n",
            "    if (s->tfp) s->tfp->dump(s->t);\n    s->t++;\n",
        )
    } else {
        ("", "")
    };
    let trace_fns = if trace {
        format!(
            r#"extern "C" int {f}_trace_open(State* s, const char* path) {{
    if (s->tfp) {{ s->tfp->close(); delete s->tfp; }}
    s->tfp = new VerilatedVcdC;
    s->m->trace(s->tfp, 99);
    s->tfp->open(path);
    if (!s->tfp->isOpen()) {{ delete s->tfp; s->tfp = nullptr; return 1; }}
    return 0;
}}
extern "C" void {f}_trace_close(State* s) {{
    if (s->tfp) {{ s->tfp->close(); delete s->tfp; s->tfp = nullptr; }}
}}
"#
        )
    } else {
        format!(
            "extern \"C\" int {f}_trace_open(State*, const char*) {{ return 2; }}\n\
             extern \"C\" void {f}_trace_close(State*) {{}}\n"
        )
    };
    let tfp_member = if trace {
        "VerilatedVcdC* tfp = nullptr;"
    } else {
        ""
    };
    format!(
        r#"// Generated by systole-sim's build.rs from the port list of the generated Verilog.
#include <cstdint>
#include "verilated.h"
{trace_inc}#include "{cls}.h"
#include "{cls}___024root.h"

namespace systole_{name} {{
struct PortIn {{
    uint32_t reg_addr, reg_wdata, reg_we;
    uint32_t a_en, a_bank, a_row; const int16_t* a_data;
    uint32_t b_en, b_bank, b_row; const int16_t* b_data;
    uint32_t c_bank, c_row;
    uint32_t fm_en, fm_row; const int16_t* fm_data;
}};
struct State {{
    VerilatedContext* ctx;
    {cls}* m;
    {tfp_member}
    uint64_t t = 0;
}};
// Each half cycle is one eval; traced at every eval so the VCD shows both clock phases.
inline void settle(State* s) {{
    s->m->eval();
{trace_dump}}}
inline void clock_cycle(State* s) {{
    s->m->{clock} = 1;
    settle(s);
    s->m->{clock} = 0;
{fast_fall}    settle(s);
}}
}}
using namespace systole_{name};

{trace_fns}
extern "C" State* {f}_new() {{
    State* s = new State;
    s->ctx = new VerilatedContext;
    s->ctx->traceEverOn({trace_on});
    s->m = new {cls}{{s->ctx, "top"}};
    s->m->{clock} = 0;
    s->m->{reset} = 0;
    s->m->{reg_we} = 0;
    s->m->{a_en} = 0;
    s->m->{b_en} = 0;
    s->m->{fm_en} = 0;
    settle(s);
    return s;
}}
extern "C" void {f}_delete(State* s) {{
    {close_trace}
    s->m->final();
    delete s->m;
    delete s->ctx;
    delete s;
}}
extern "C" void {f}_reset(State* s, uint32_t cycles) {{
    s->m->{reg_we} = 0; s->m->{a_en} = 0; s->m->{b_en} = 0;
    s->m->{reset} = 1;
    for (uint32_t i = 0; i < cycles; i++) clock_cycle(s);
    s->m->{reset} = 0;
    settle(s);
}}
extern "C" uint32_t {f}_read_reg(State* s, uint32_t addr) {{
    s->m->{reg_addr} = addr;
    s->m->{reg_we} = 0;
    s->m->eval();
    return s->m->{reg_rdata};
}}
extern "C" void {f}_tick(State* s, const PortIn* in, int16_t* c_out) {{
    {cls}* m = s->m;
    m->{reg_addr} = in->reg_addr;
    m->{reg_wdata} = in->reg_wdata;
    m->{reg_we} = in->reg_we;
    m->{a_en} = in->a_en; m->{a_bank} = in->a_bank; m->{a_row} = in->a_row;
    m->{b_en} = in->b_en; m->{b_bank} = in->b_bank; m->{b_row} = in->b_row;
    m->{c_bank} = in->c_bank; m->{c_row} = in->c_row;
    m->{fm_en} = in->fm_en; m->{fm_row} = in->fm_row;
{lanes_in}    clock_cycle(s);
    m->{reg_we} = 0; m->{a_en} = 0; m->{b_en} = 0; m->{fm_en} = 0;
    if (c_out) {{
{lanes_out}    }}
}}
extern "C" void {f}_idle(State* s, uint32_t cycles) {{
    s->m->{reg_we} = 0; s->m->{a_en} = 0; s->m->{b_en} = 0;
    for (uint32_t i = 0; i < cycles; i++) clock_cycle(s);
}}
"#,
        clock = s("clock"),
        reset = s("reset"),
        reg_addr = s("reg_addr"),
        reg_wdata = s("reg_wdata"),
        reg_we = s("reg_we"),
        reg_rdata = s("reg_rdata"),
        a_en = s("a_wr_en"),
        a_bank = s("a_wr_bank"),
        a_row = s("a_wr_row"),
        b_en = s("b_wr_en"),
        b_bank = s("b_wr_bank"),
        b_row = s("b_wr_row"),
        c_bank = s("c_rd_bank"),
        c_row = s("c_rd_row"),
        fm_en = s("fm_wr_en"),
        fm_row = s("fm_wr_row"),
        trace_on = if trace { "true" } else { "false" },
        fast_fall = match prev_clock_member {
            Some(member) => format!(
                "    if ({}) {{ s->m->rootp->{member} = 0; return; }}\n",
                if trace { "!s->tfp" } else { "true" }
            ),
            None => String::new(),
        },
        close_trace = if trace {
            format!("{f}_trace_close(s);")
        } else {
            String::new()
        },
    )
}

/// Rust declarations and the [`ModelFns`] entry for model `name` of a `size x size` array
/// (spliced into `models.rs`); `traced` when it was Verilated with `--trace`.
pub fn rust_entry(name: &str, size: usize, traced: bool) -> (String, String) {
    let f = format!("systole_{name}");
    let decls = format!(
        r#"extern "C" {{
    fn {f}_new() -> *mut c_void;
    fn {f}_delete(s: *mut c_void);
    fn {f}_reset(s: *mut c_void, cycles: u32);
    fn {f}_read_reg(s: *mut c_void, addr: u32) -> u32;
    fn {f}_tick(s: *mut c_void, inp: *const PortIn, c_out: *mut i16);
    fn {f}_idle(s: *mut c_void, cycles: u32);
    fn {f}_trace_open(s: *mut c_void, path: *const c_char) -> i32;
    fn {f}_trace_close(s: *mut c_void);
}}
"#
    );
    let entry = format!(
        "    ModelFns {{ size: {size}, traced: {traced}, new: {f}_new, delete: {f}_delete, reset: {f}_reset, \
         read_reg: {f}_read_reg, tick: {f}_tick, idle: {f}_idle, trace_open: {f}_trace_open, \
         trace_close: {f}_trace_close }},\n"
    );
    (decls, entry)
}

/// C++ source of the board image's shim (model class `Vboard`, functions `systole_board_*`).
pub fn board_shim_cpp() -> String {
    r#"// Generated by systole-sim's build.rs: the simulated board's serial pins.
#include <cstdint>
#include "verilated.h"
#include "Vboard.h"

namespace systole_board {
struct State {
    VerilatedContext* ctx;
    Vboard* m;
};
}
using namespace systole_board;

extern "C" State* systole_board_new() {
    State* s = new State;
    s->ctx = new VerilatedContext;
    s->m = new Vboard{s->ctx, "top"};
    s->m->clock = 0;
    s->m->reset_pin = 1;
    s->m->uart_rx = 1;
    s->m->eval();
    return s;
}
extern "C" void systole_board_delete(State* s) {
    s->m->final();
    delete s->m;
    delete s->ctx;
    delete s;
}
// `cycles` oscillator cycles with the reset button and the receive line held; the transmit
// line after each rising edge goes to `tx` (one byte per cycle).
extern "C" void systole_board_run(State* s, uint32_t reset_pin, uint32_t rx, uint32_t cycles, uint8_t* tx) {
    Vboard* m = s->m;
    m->reset_pin = reset_pin;
    m->uart_rx = rx;
    for (uint32_t i = 0; i < cycles; i++) {
        m->clock = 1;
        m->eval();
        tx[i] = m->uart_tx;
        m->clock = 0;
        m->eval();
    }
}
"#
    .to_string()
}

/// Rust declarations of the board shim's functions (for `models.rs`).
pub fn board_rust_decls() -> String {
    r#"extern "C" {
    fn systole_board_new() -> *mut c_void;
    fn systole_board_delete(s: *mut c_void);
    fn systole_board_run(s: *mut c_void, reset_pin: u32, rx: u32, cycles: u32, tx: *mut u8);
}
"#
    .to_string()
}

/// C++ source of the SoC image's shim (model class `Vsoc`, functions `systole_soc_*`): the
/// board shim's serial pins plus the RAM loader.
pub fn soc_shim_cpp() -> String {
    board_shim_cpp()
        .replace("Vboard", "Vsoc")
        .replace("systole_board", "systole_soc")
        .replace(
            "the simulated board's serial pins",
            "the simulated SoC's serial pins",
        )
        + r#"
// Writes `n` RAM words from word `addr` through the loader port, the reset button held (the
// CPU stays in reset; the button is released by the next run).
extern "C" void systole_soc_load(State* s, uint32_t addr, const uint32_t* words, uint32_t n) {
    Vsoc* m = s->m;
    m->reset_pin = 0;
    for (uint32_t i = 0; i < n; i++) {
        m->load_we = 1;
        m->load_addr = addr + i;
        m->load_data = words[i];
        m->clock = 1;
        m->eval();
        m->clock = 0;
        m->eval();
    }
    m->load_we = 0;
    m->eval();
}
"#
}

/// Rust declarations of the SoC shim's functions (for `models.rs`).
pub fn soc_rust_decls() -> String {
    board_rust_decls().replace("systole_board", "systole_soc")
        + r#"extern "C" {
    fn systole_soc_load(s: *mut c_void, addr: u32, words: *const u32, n: u32);
}
"#
}
