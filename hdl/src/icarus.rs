//! Running Verilog under Icarus Verilog (`iverilog -g2012` + `vvp`), for the tests that check
//! the emitted Verilog on a second simulator: the portable-Verilog smoke test of `top` (see
//! [`bus_testbench`]) and the differential tests of the hand-written blocks.
//!
//! [`bus_testbench`] writes a testbench for `top` that replays a script of bus operations, one
//! a line, so a test drives the accelerator through its documented ports and registers only:
//!
//! | line | action |
//! |------|--------|
//! | `w ADDR DATA` | one register write beat (hex) |
//! | `a BANK ROW D0 .. Dn-1`, `b ...` | write one A (B) row: the `n` lane words, 16-bit hex |
//! | `p ADDR MASK VALUE` | clock until `reg_rdata` of `ADDR` masked with `MASK` equals `VALUE` |
//! | `r ADDR` | read a register; prints `R ADDR VALUE` (hex) |
//! | `c BANK ROW` | read one C row; prints `C BANK ROW D0 .. Dn-1` (hex) |
//! | `q` | end; prints `END CYCLES` |
//!
//! A `p` that waits more than 100000 cycles prints `TIMEOUT` and ends the run. Every signal of
//! `top` is dumped to `dump.vcd` ([`unknown_at_end`] lists those left unknown).

use crate::{ports, top_module_name, PortDir};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use systole_core::ArrayConfig;

/// Why a Verilog run under Icarus failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IcarusError {
    /// `iverilog` or `vvp` is not installed.
    #[error(
        "`{tool}` not found: install Icarus Verilog (Debian: `apt-get install iverilog`; `./x test` installs it)"
    )]
    NotInstalled {
        /// The missing program.
        tool: &'static str,
        /// Why it could not be started.
        #[source]
        cause: std::io::Error,
    },
    /// A file of the run could not be written or read.
    #[error("Icarus run in {dir}: {what}")]
    Io {
        /// The run's directory.
        dir: PathBuf,
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        cause: std::io::Error,
    },
    /// `iverilog` rejected the sources.
    #[error("iverilog failed to compile {top} in {dir}:\n{log}")]
    Compile {
        /// Top module.
        top: String,
        /// The run's directory (kept for inspection).
        dir: PathBuf,
        /// iverilog's messages.
        log: String,
    },
    /// `vvp` ended with an error status.
    #[error("vvp failed on {top} in {dir}:\n{log}")]
    Run {
        /// Top module.
        top: String,
        /// The run's directory (kept for inspection).
        dir: PathBuf,
        /// vvp's output.
        log: String,
    },
}

/// Checks that `iverilog` and `vvp` can be started.
pub fn available() -> Result<(), IcarusError> {
    for tool in ["iverilog", "vvp"] {
        Command::new(tool)
            .arg("-V")
            .output()
            .map_err(|cause| IcarusError::NotInstalled { tool, cause })?;
    }
    Ok(())
}

/// What a run printed and wrote.
#[derive(Debug)]
pub struct RunOutput {
    /// vvp's standard output.
    pub stdout: String,
    /// The contents of the files asked for, in order.
    pub files: Vec<String>,
}

/// Compiles `sources` (name, text) with `iverilog -g2012 -s top` in `dir` (created; removed
/// after a successful run unless `SYSTOLE_KEEP_SIM` is set) and runs the result with `vvp`
/// there. Files the testbench reads (`inputs`: name, text) are written beside the sources;
/// the files named in `read_back` are read after the run.
pub fn run(
    dir: &Path,
    top: &str,
    sources: &[(&str, &str)],
    inputs: &[(&str, &str)],
    read_back: &[&str],
) -> Result<RunOutput, IcarusError> {
    available()?;
    let io = |what: String| {
        let dir = dir.to_path_buf();
        move |cause| IcarusError::Io { dir, what, cause }
    };
    std::fs::create_dir_all(dir).map_err(io("creating the directory".into()))?;
    for (name, text) in sources.iter().chain(inputs) {
        std::fs::write(dir.join(name), text).map_err(io(format!("writing {name}")))?;
    }
    let mut compile = Command::new("iverilog");
    compile
        .current_dir(dir)
        .args(["-g2012", "-o", "sim.vvp", "-s", top]);
    for (name, _) in sources {
        compile.arg(name);
    }
    let out = compile
        .output()
        .map_err(|cause| IcarusError::NotInstalled {
            tool: "iverilog",
            cause,
        })?;
    if !out.status.success() {
        return Err(IcarusError::Compile {
            top: top.into(),
            dir: dir.into(),
            log: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let out = Command::new("vvp")
        .current_dir(dir)
        .args(["-n", "sim.vvp"])
        .output()
        .map_err(|cause| IcarusError::NotInstalled { tool: "vvp", cause })?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(IcarusError::Run {
            top: top.into(),
            dir: dir.into(),
            log: format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
        });
    }
    let mut files = Vec::new();
    for name in read_back {
        files.push(std::fs::read_to_string(dir.join(name)).map_err(io(format!("reading {name}")))?);
    }
    if std::env::var_os("SYSTOLE_KEEP_SIM").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(RunOutput { stdout, files })
}

/// The signals of a VCD file whose last value has an unknown (`x`) or floating (`z`) bit:
/// logic the simulator never evaluated, or that reads such logic. Variables of named blocks
/// and functions (scratch values of a clocked block, set only in the cycles that use them)
/// are not signals and are left out.
pub fn unknown_at_end(vcd: &str) -> Vec<String> {
    use std::collections::BTreeMap;
    let mut scope: Vec<&str> = Vec::new();
    let mut kinds: Vec<&str> = Vec::new();
    let mut names: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut last: BTreeMap<&str, &str> = BTreeMap::new();
    let mut words = vcd.split_whitespace();
    while let Some(w) = words.next() {
        match w {
            "$scope" => {
                kinds.extend(words.next());
                scope.extend(words.next());
            }
            "$upscope" => {
                scope.pop();
                kinds.pop();
            }
            "$var" => {
                let (_kind, _width) = (words.next(), words.next());
                let in_modules = kinds.iter().all(|k| *k == "module");
                if let (Some(id), Some(name), true) = (words.next(), words.next(), in_modules) {
                    names
                        .entry(id)
                        .or_default()
                        .push(format!("{}.{name}", scope.join(".")));
                }
            }
            _ if w.starts_with('$') || w.starts_with('#') => {}
            _ => {
                // `b0x1 id` (vector) or `xid` (scalar).
                if let Some(bits) = w.strip_prefix('b') {
                    if let Some(id) = words.next() {
                        last.insert(id, bits);
                    }
                } else if w.len() > 1 && w.is_char_boundary(1) {
                    last.insert(&w[1..], &w[..1]);
                }
            }
        }
    }
    let mut out: Vec<String> = last
        .iter()
        .filter(|(_, v)| v.contains(['x', 'z', 'X', 'Z']))
        .flat_map(|(id, _)| names.get(id).cloned().unwrap_or_default())
        .collect();
    out.sort();
    out
}

/// A testbench module `tb` for the `top` of `cfg` that replays the bus script `script.txt` (see
/// the module docs). Port names and widths come from [`ports`].
pub fn bus_testbench(cfg: &ArrayConfig) -> Result<String, crate::HdlError> {
    let ports = ports(cfg)?;
    let n = cfg.size;
    let mut v = String::from("module tb;\n");
    for p in &ports {
        let kind = match p.dir {
            PortDir::Input => "reg",
            PortDir::Output => "wire",
        };
        let _ = writeln!(v, "    {kind} [{}:0] {};", p.width - 1, p.name);
    }
    let conns: Vec<String> = ports.iter().map(|p| format!(".{0}({0})", p.name)).collect();
    let _ = writeln!(v, "    {} dut({});", top_module_name(), conns.join(", "));
    let lanes = |m: &str| -> String {
        (0..n)
            .map(|i| format!(" {m}_wr_data_{i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let c_words: Vec<String> = (0..n).map(|i| format!("c_rd_data_{i}")).collect();
    let fmt: String = (0..n).map(|_| " %h").collect();
    let inputs_zero: String = ports
        .iter()
        .filter(|p| p.dir == PortDir::Input)
        .map(|p| format!("        {} = 0;\n", p.name))
        .collect();
    let _ = write!(
        v,
        "    integer fd, cycles, code, waited;
    // Every signal of the design, to find any left unknown (see `unknown_at_end`).
    initial begin $dumpfile(\"dump.vcd\"); $dumpvars(0, dut); end
    reg [7:0] op;
    reg [31:0] x0, x1, x2;
    task tick; begin #1 clock = 1; #1 clock = 0; cycles = cycles + 1; end endtask
    initial begin
{inputs_zero}        cycles = 0;
        reset = 1; tick; tick; reset = 0;
        fd = $fopen(\"script.txt\", \"r\");
        if (fd == 0) begin $display(\"NO SCRIPT\"); $finish; end
        op = 0;
        while (op != \"q\") begin
            code = $fscanf(fd, \" %c\", op);
            if (code != 1) op = \"q\";
            case (op)
                \"w\": begin
                    code = $fscanf(fd, \" %h %h\", x0, x1);
                    reg_addr = x0; reg_wdata = x1; reg_we = 1; tick; reg_we = 0;
                end
                \"a\": begin
                    code = $fscanf(fd, \" %h %h{fmt}\", a_wr_bank, a_wr_row,{a});
                    a_wr_en = 1; tick; a_wr_en = 0;
                end
                \"b\": begin
                    code = $fscanf(fd, \" %h %h{fmt}\", b_wr_bank, b_wr_row,{b});
                    b_wr_en = 1; tick; b_wr_en = 0;
                end
                \"p\": begin
                    code = $fscanf(fd, \" %h %h %h\", x0, x1, x2);
                    reg_addr = x0; waited = 0;
                    #1;
                    while ((reg_rdata & x1) != x2 && waited < 100000) begin
                        tick; waited = waited + 1;
                    end
                    if (waited >= 100000) begin $display(\"TIMEOUT %h\", reg_rdata); op = \"q\"; end
                end
                \"r\": begin
                    code = $fscanf(fd, \" %h\", x0);
                    reg_addr = x0; #1;
                    $display(\"R %h %h\", x0, reg_rdata);
                end
                \"c\": begin
                    code = $fscanf(fd, \" %h %h\", c_rd_bank, c_rd_row);
                    tick; #1;
                    $display(\"C %0d %0d{fmt}\", c_rd_bank, c_rd_row, {c});
                end
                default: ;
            endcase
        end
        $display(\"END %0d\", cycles);
        $finish;
    end
endmodule
",
        a = lanes("a"),
        b = lanes("b"),
        c = c_words.join(", "),
    );
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_at_the_end_are_found() {
        let vcd = "$scope module tb $end\n$scope module dut $end\n$var reg 1 ! a $end\n\
                   $var wire 4 \" b [3:0] $end\n$scope begin blk $end\n$var reg 1 $ t $end\n\
                   $upscope $end\n$upscope $end\n$var wire 1 # c $end\n\
                   $upscope $end\n$enddefinitions $end\n#0\nx!\nbx \"\nz#\nx$\n#2\n1!\nb10x1 \"\n";
        assert_eq!(unknown_at_end(vcd), ["tb.c", "tb.dut.b"]);
    }
}
