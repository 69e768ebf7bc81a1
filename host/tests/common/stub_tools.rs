//! Stand-ins for the external tools of the board flows: shell scripts that check every file
//! they are handed exists from the folder they run in, then write what the real tool would.
#![allow(dead_code)] // each test crate uses a part

use std::ffi::OsString;
use std::path::Path;

/// Fails (exit 1, naming the file) when a file argument is not there from the tool's folder.
const NEED: &str = r#"need() { [ -f "$1" ] || { echo "$TOOL: cannot open $1 from $(pwd)"; exit 1; }; }
echo "$TOOL $(pwd) $*" >> "$STUB_LOG"
"#;

/// Every tool the board flows run, by name.
pub const ALL: [(&str, &str); 5] = [
    (
        "yosys",
        // yosys -q -p "read_verilog F; synth_...[ -json J]; tee -q -o S stat"
        r#"v=$(printf '%s' "$3" | sed -n 's/^read_verilog \([^;]*\);.*/\1/p')
need "$v"
j=$(printf '%s' "$3" | sed -n 's/.* -json \([^;]*\);.*/\1/p')
[ -z "$j" ] || echo '{}' > "$j"
printf '   Number of cells: 2\n     SB_LUT4 1\n     DSP48E1 1\n' > yosys_stat.txt
"#,
    ),
    (
        "nextpnr-ice40",
        r#"while [ $# -gt 0 ]; do
  case "$1" in --json|--pcf) need "$2"; shift;; --asc) asc="$2"; shift;; esac; shift
done
echo asc > "$asc"
echo "Info: ICESTORM_LC: 100/ 5280 1%"
echo "Info: Max frequency for clock 'clk': 10.00 MHz (PASS at 6.00 MHz)"
"#,
    ),
    ("icepack", "need \"$1\"\necho bin > \"$2\"\n"),
    (
        "vivado",
        r#"while [ $# -gt 0 ]; do [ "$1" = -source ] && tcl="$2"; shift; done
need "$tcl"
for f in $(sed -n 's/^read_[a-z]* {\(.*\)}$/\1/p' "$tcl"); do need "$f"; done
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
        std::fs::write(&path, format!("#!/bin/sh\nTOOL={tool}\n{NEED}{body}")).unwrap();
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
