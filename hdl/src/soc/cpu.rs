//! The CPU: VexRiscv (RV32IMAC, Wishbone instruction and data buses) from PyPI's
//! `pythondata-cpu-vexriscv`, which `./x` installs into the project-local `.venv`. Its Verilog
//! is read from there and never copied into this repository; the SoC instantiates module
//! `VexRiscv` (in `soc_cpu.v`) and every tool is handed [`vexriscv_verilog`] beside the SoC's
//! own file.

use crate::HdlError;
use std::path::{Path, PathBuf};

/// The pinned PyPI package holding the CPU's Verilog (the same pin as `PIP_PACKAGES` in `x`).
pub const VEXRISCV_PIP: &str = "pythondata-cpu-vexriscv==1.0.1.post407";
/// The variant's file inside the package's `verilog` folder (module `VexRiscv`).
pub const VEXRISCV_FILE: &str = "VexRiscv_IMAC.v";
/// Environment variable naming the file directly (overrides the search in `.venv`).
pub const VEXRISCV_ENV: &str = "SYSTOLE_VEXRISCV";

/// The path of `VexRiscv_IMAC.v`: `$SYSTOLE_VEXRISCV` when set, else the copy in the
/// workspace's `.venv` (any `lib/python3.*/site-packages`). The error says how to install it.
pub fn vexriscv_verilog() -> Result<PathBuf, HdlError> {
    if let Some(p) = std::env::var_os(VEXRISCV_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(HdlError::Block(format!(
                "{VEXRISCV_ENV}={} is not a file: point it at {VEXRISCV_FILE} or unset it",
                p.display()
            )))
        };
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    find_in_venv(&root.join(".venv")).ok_or_else(|| {
        HdlError::Block(format!(
            "the SoC's CPU ({VEXRISCV_FILE}) is not installed: run ./x test (it runs \
             pip install {VEXRISCV_PIP} into .venv), or by hand: python3 -m venv .venv && \
             .venv/bin/python -m pip install {VEXRISCV_PIP}"
        ))
    })
}

/// `VexRiscv_IMAC.v` under a venv's `lib/python3.*/site-packages`, if there.
fn find_in_venv(venv: &Path) -> Option<PathBuf> {
    let mut libs: Vec<PathBuf> = std::fs::read_dir(venv.join("lib"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
        })
        .collect();
    libs.sort();
    libs.into_iter()
        .map(|lib| {
            lib.join("site-packages/pythondata_cpu_vexriscv/verilog")
                .join(VEXRISCV_FILE)
        })
        .find(|f| f.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_is_the_one_x_installs() {
        let x =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../x")).unwrap();
        let line = x
            .lines()
            .find(|l| l.starts_with("PIP_PACKAGES=("))
            .expect("x has a PIP_PACKAGES line");
        assert!(line.contains(VEXRISCV_PIP), "x pins: {line}");
    }

    #[test]
    fn a_missing_venv_says_how_to_install() {
        let dir = std::env::temp_dir().join(format!("systole-no-venv-{}", std::process::id()));
        assert_eq!(find_in_venv(&dir), None);
        std::fs::create_dir_all(dir.join("lib/python3.99/site-packages")).unwrap();
        assert_eq!(find_in_venv(&dir), None);
        let f = dir.join("lib/python3.99/site-packages/pythondata_cpu_vexriscv/verilog");
        std::fs::create_dir_all(&f).unwrap();
        std::fs::write(f.join(VEXRISCV_FILE), "module VexRiscv; endmodule").unwrap();
        assert_eq!(find_in_venv(&dir), Some(f.join(VEXRISCV_FILE)));
        let _ = std::fs::remove_dir_all(&dir);
        if vexriscv_verilog().is_err() {
            let e = vexriscv_verilog().unwrap_err().to_string();
            assert!(e.contains("./x test") && e.contains(VEXRISCV_PIP), "{e}");
        }
    }
}
