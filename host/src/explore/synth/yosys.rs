//! [`Yosys`]: a board image (the bridge top or the SoC) for a board, through
//! `systole_boards::tools::yosys_synth`, the flow `systole bitstream` runs.

use super::{fnv1a, synth_err, Resources, Synthesizer};
use crate::explore::{DesignPoint, ExploreError};
use std::path::{Path, PathBuf};
use systole_boards::measured::Image;
use systole_boards::tools::{self, files};
use systole_boards::{Board, BoardError, Family};
use systole_hdl::soc::VEXRISCV_FILE;

/// Yosys on a board image, the flow of `systole bitstream`: `synth_xilinx -flatten -family
/// xc7` on 7-series, `synth_ice40 -dsp` on iCE40 (`systole_boards::tools::yosys_synth`).
pub struct Yosys {
    /// Where each synthesis runs (a folder per design, removed after).
    pub work: PathBuf,
    /// Which image, for which board.
    pub image: Image,
    /// The board whose build is synthesised (family, clock, pins, the SoC's RAM).
    pub board: &'static Board,
}

impl Yosys {
    /// The bridge top for the reference 7-series board: what a sweep synthesises.
    pub fn bridge(work: PathBuf) -> Yosys {
        Yosys {
            work,
            image: Image::Bridge,
            board: super::reference_board(),
        }
    }

    /// The flow as the cache key names it. Entries cached before the RAMB36 count was kept
    /// (`Resources::ramb36`) are not reused: the name carries `ramb36`.
    fn flow(&self) -> String {
        let synth = match self.board.family {
            Family::Xc7 => "synth_xilinx -flatten -family xc7",
            Family::Ice40Up => "synth_ice40 -dsp",
            Family::Ecp5 => "synth_ecp5",
        };
        let top = match self.image {
            Image::Bridge => "bridge_top",
            Image::Soc => "soc_top",
        };
        format!("{top} {synth}; ramb36")
    }

    /// The files Yosys reads, (name in the work folder, text): the bridge top, or the SoC's
    /// Verilog (RAM without initial contents, which changes no cell) and the CPU's.
    fn sources(&self, point: &DesignPoint) -> Result<Vec<(String, String)>, ExploreError> {
        let cfg = point.config();
        Ok(match self.image {
            Image::Bridge => vec![(
                files::VERILOG.to_string(),
                systole_boards::flow::bridge_verilog(self.board, &cfg).map_err(synth_err(point))?,
            )],
            Image::Soc => {
                let cpu = systole_hdl::soc::vexriscv_verilog()
                    .map_err(BoardError::Hdl)
                    .map_err(synth_err(point))?;
                let cpu_text =
                    std::fs::read_to_string(&cpu).map_err(|source| ExploreError::Cache {
                        path: cpu.clone(),
                        source,
                    })?;
                let soc = systole_boards::soc::soc_verilog(self.board, &cfg, None)
                    .map_err(synth_err(point))?;
                vec![
                    (VEXRISCV_FILE.to_string(), cpu_text),
                    (systole_boards::soc::SOC_VERILOG.to_string(), soc),
                ]
            }
        })
    }
}

impl Synthesizer for Yosys {
    fn source(&self) -> String {
        format!(
            "Yosys `{}` of the {} image for {}",
            self.flow().split("; ").next().unwrap_or_default(),
            match self.image {
                Image::Bridge => "bridge",
                Image::Soc => "SoC",
            },
            self.board.name
        )
    }

    fn design_hash(&self, point: &DesignPoint) -> Result<String, ExploreError> {
        let version = tools::yosys_version().map_err(synth_err(point))?;
        let sources = self.sources(point)?;
        let w = point.word_bits.to_string();
        let flow = self.flow();
        let mut parts: Vec<&str> = vec![&flow, &version, &w];
        for (name, text) in &sources {
            parts.push(name);
            parts.push(text);
        }
        Ok(format!("{:016x}", fnv1a(&parts)))
    }

    fn synthesize(&self, point: &DesignPoint) -> Result<Resources, ExploreError> {
        let sources = self.sources(point)?;
        let (n, fm, w, pack) = point.hardware_key();
        let dir = self.work.join(format!(
            "synth-{}-{}-{n}x{n}-fm{fm}-w{w}-pack{}-{}",
            self.flow().split(' ').next().unwrap_or_default(),
            self.board.name,
            u8::from(pack),
            std::process::id()
        ));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ExploreError::Cache { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        for (name, text) in &sources {
            let v = dir.join(name);
            std::fs::write(&v, text).map_err(io(&v))?;
        }
        let names: Vec<&str> = sources.iter().map(|(n, _)| n.as_str()).collect();
        let r = tools::yosys_synth(self.board, &names, &dir);
        // The log stays for a failure (the error names it); a success leaves nothing behind.
        if r.is_ok() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Ok(r.map_err(synth_err(point))?.into())
    }
}
