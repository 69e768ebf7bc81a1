//! The accelerator through the CPU's bus: the firmware's tile driver runs here and each of its
//! bus accesses becomes a load or store that the monitor program executes on the Verilated CPU
//! (`W`/`R` commands over the UART). So the row stage, `ROW_CMD`, the C stage and the register
//! window are exercised exactly as firmware uses them, and the result is compared with the
//! numeric contract's conversion of the exact sums.

use super::*;
use std::io;
use systole_core::Rounding;

pub(super) struct MonitorBus {
    pub(super) soc: VerilatedSoc,
    pub(super) n: usize,
}

impl MonitorBus {
    pub(super) fn store(&mut self, addr: u32, value: u32) -> io::Result<()> {
        let mut cmd = vec![b'W'];
        cmd.extend(addr.to_le_bytes());
        cmd.extend(value.to_le_bytes());
        self.soc.write_all(&cmd)?;
        self.soc.flush()
    }

    pub(super) fn load(&mut self, addr: u32) -> io::Result<u32> {
        let mut cmd = vec![b'R'];
        cmd.extend(addr.to_le_bytes());
        self.soc.write_all(&cmd)?;
        let mut word = [0u8; 4];
        self.soc.read_exact(&mut word)?;
        Ok(u32::from_le_bytes(word))
    }

    /// Fills the row stage with `data` (two lanes a word) and commits it with `kind`.
    fn row(&mut self, kind: u32, bank: u8, row: u16, data: &[i16]) -> io::Result<()> {
        for (i, pair) in data.chunks(2).enumerate() {
            let hi = pair.get(1).copied().unwrap_or(0) as u16;
            let word = u32::from(pair[0] as u16) | (u32::from(hi) << 16);
            self.store(ROW_STAGE + 4 * i as u32, word)?;
        }
        self.command(kind, bank, row)
    }

    fn command(&mut self, kind: u32, bank: u8, row: u16) -> io::Result<()> {
        let cmd = ROW_CMD_ROW.put(u32::from(row))
            | ROW_CMD_BANK.put(u32::from(bank))
            | ROW_CMD_KIND.put(kind);
        self.store(ROW_CMD, cmd)
    }
}

impl AcceleratorBus for MonitorBus {
    type Error = io::Error;

    fn read_reg(&mut self, addr: u8) -> io::Result<u32> {
        self.load(ACC_REGS + 4 * u32::from(addr))
    }

    fn write_reg(&mut self, addr: u8, value: u32) -> io::Result<()> {
        self.store(ACC_REGS + 4 * u32::from(addr), value)
    }

    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> io::Result<()> {
        if let Some(a) = beat.a {
            self.row(ROW_KIND_WRITE_A, a.bank, a.row, a.data)?;
        }
        if let Some(b) = beat.b {
            self.row(ROW_KIND_WRITE_B, b.bank, b.row, b.data)?;
        }
        if let Some(c) = beat.c {
            self.command(ROW_KIND_READ_C, c.bank, c.row)?;
            for i in 0..self.n.div_ceil(2) {
                let w = self.load(C_STAGE + 4 * i as u32)?;
                c_out[2 * i] = w as u16 as i16;
                if 2 * i + 1 < self.n {
                    c_out[2 * i + 1] = (w >> 16) as u16 as i16;
                }
            }
        }
        Ok(())
    }

    fn idle(&mut self, cycles: u32) -> io::Result<()> {
        self.soc.run(u64::from(cycles));
        Ok(())
    }

    fn write_fm(&mut self, addr: u32, words: &[i16]) -> io::Result<()> {
        let r = self.soc.config().fm_row_words();
        for (i, row) in words.chunks(r).enumerate() {
            let at = (addr as usize / r + i) as u16;
            self.row(ROW_KIND_WRITE_FM, 0, at, row)?;
        }
        Ok(())
    }
}

/// A 5x7 by 7x6 matmul (edge tiles padded by the driver, two tiles in each direction on 4x4)
/// with products that saturate, through the CPU: equal to the contract's conversion.
#[test]
fn a_matmul_through_the_row_stage_equals_the_contract() {
    use systole_core::numeric::convert;
    use systole_firmware::driver::{matmul, MatmulJob};
    let Some(soc) = soc(&monitor_program()) else {
        return;
    };
    let cfg = soc.config();
    let mut bus = MonitorBus { soc, n: cfg.size };
    assert_eq!(bus.load(SYS_ID).unwrap(), SOC_ID_VALUE);
    let (m, k, n) = (5, 7, 6);
    let a: Vec<i16> = (0..m * k)
        .map(|i| (i as i16).wrapping_mul(4099).wrapping_sub(9000))
        .collect();
    let b: Vec<i16> = (0..k * n)
        .map(|i| (i as i16).wrapping_mul(-3001).wrapping_add(77))
        .collect();
    let (shift, rounding) = (14, Rounding::NearestEven);
    let job = MatmulJob {
        a: &a,
        b: &b,
        m,
        k,
        n,
        shift,
        rounding,
        seed: 3,
    };
    let mut got = vec![0i16; m * n];
    matmul(&mut bus, &cfg, &job, &mut got).unwrap();
    let mut want = vec![0i16; m * n];
    let mut saturated = 0;
    for i in 0..m {
        for j in 0..n {
            let acc: i64 = (0..k)
                .map(|t| i64::from(a[i * k + t]) * i64::from(b[t * n + j]))
                .sum();
            want[i * n + j] = convert(acc, shift, rounding, 0, 16) as i16;
            saturated += usize::from(
                want[i * n + j].unsigned_abs() == 0x8000 || want[i * n + j] == i16::MAX,
            );
        }
    }
    assert!(saturated > 0 && saturated < m * n, "{saturated} saturated");
    assert_eq!(got, want);
    eprintln!("matmul through the CPU: {} cycles", bus.soc.cycles());
}
