//! The product sequencer (`hdl/verilog/soc_mm.v`) in Rust: the same refusals, the same walk
//! (row blocks outer, column blocks inner, K in chunks of the buffer depth, an A block kept
//! across a row when K is one chunk) and the same register writes and block moves, over any
//! [`AcceleratorBus`]. The mock array runs products through it when its `sequencer` is on, so
//! the driver's one-command path is tested against the golden model without Verilator; the
//! Verilated SoC is held to the golden model by `systole-sim`'s sequencer tests.

use super::whole::chunk;
use systole_core::bus::{BlockTarget, ProductJob, RowBlock};
use systole_core::numeric::{tile_seed, MAX_K, MAX_SHIFT};
use systole_core::soc::{MM_ERR_CONVERT, MM_ERR_DEVICE, MM_ERR_SIZE};
use systole_core::{regmap, AcceleratorBus, ArrayConfig, Rounding};

/// Runs `job` as the sequencer does; returns its `MM_STATUS` (0: `c` holds the product).
pub(crate) fn sequence<B: AcceleratorBus>(
    bus: &mut B,
    cfg: &ArrayConfig,
    job: &ProductJob,
    (a, b, c): (&[i16], &[i16], &mut [i16]),
) -> Result<u32, B::Error> {
    let (m, k, n) = (job.m, job.k, job.n);
    let bad_size = [m, n].iter().any(|&x| x == 0 || x > 0xFFFF) || k == 0 || k > MAX_K;
    let bad_convert = job.shift > MAX_SHIFT || job.rounding > Rounding::Stochastic.code();
    if bad_size || bad_convert {
        return Ok(
            MM_ERR_SIZE.put(u32::from(bad_size)) | MM_ERR_CONVERT.put(u32::from(bad_convert))
        );
    }
    let wait = regmap::STATUS_BUSY | regmap::STATUS_QUEUE_FULL;
    while bus.read_reg(regmap::STATUS)? & wait != 0 {
        bus.idle(1)?;
    }
    if bus.read_reg(regmap::STATUS)? & regmap::STATUS_ERROR != 0 {
        bus.write_reg(regmap::ERROR_CLEAR, 1)?;
    }
    bus.write_reg(regmap::SHIFT, job.shift)?;
    bus.write_reg(regmap::ROUNDING, job.rounding)?;
    let (size, chunk) = (cfg.size, chunk(cfg));
    let block =
        |rows: usize, lanes: usize, offset: usize, [row_step, lane_step]: [usize; 2]| RowBlock {
            bank: 0,
            first_row: 0,
            rows: rows as u16,
            lanes: lanes as u16,
            offset,
            row_step,
            lane_step,
        };
    let [ai, ak] = job.a_steps;
    let [bk, bj] = job.b_steps;
    let [ci, cj] = job.c_steps;
    for i0 in (0..m).step_by(size) {
        let mut a_held = false;
        let rows = size.min(m - i0);
        for j0 in (0..n).step_by(size) {
            let lanes = size.min(n - j0);
            for k0 in (0..k).step_by(chunk) {
                let kl = chunk.min(k - k0);
                if !a_held {
                    let at = block(kl, rows, i0 * ai + k0 * ak, [ak, ai]);
                    bus.write_block(BlockTarget::A, &at, size, a)?;
                }
                let bt = block(kl, lanes, k0 * bk + j0 * bj, [bk, bj]);
                bus.write_block(BlockTarget::B, &bt, size, b)?;
                a_held = k <= chunk;
                bus.write_reg(regmap::K_LEN, kl as u32)?;
                let last = k0 + kl == k;
                if last {
                    bus.write_reg(regmap::SEED, tile_seed(job.seed, i0 as u32, j0 as u32))?;
                }
                bus.write_reg(regmap::COMMAND, regmap::command(0, 0, 0, k0 == 0, last))?;
                loop {
                    let s = bus.read_reg(regmap::STATUS)?;
                    if s & regmap::STATUS_ERROR != 0 {
                        return Ok(MM_ERR_DEVICE.mask());
                    }
                    if s & wait == 0 {
                        break;
                    }
                    bus.idle(1)?;
                }
            }
            let ct = block(rows, lanes, i0 * ci + j0 * cj, [ci, cj]);
            bus.read_block(&ct, size, c)?;
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::super::mock::MockArray;
    use super::super::tests::{reference, Rng};
    use super::super::{matmul_views, DriverError, MatmulJob, Transposed};
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn transpose(x: &[i16], rows: usize, cols: usize) -> Vec<i16> {
        (0..rows * cols)
            .map(|t| x[(t % rows) * cols + t / rows])
            .collect()
    }

    /// Random shapes (edges padded, K over several 16-row chunks), both transposes, every
    /// shift and rounding: one product each through the sequencer's model, equal to the contract.
    #[test]
    fn the_sequencers_walk_is_the_contract() {
        let cfg = ArrayConfig {
            buffer_depth: 16,
            ..ArrayConfig::square(4)
        };
        let mut rng = Rng(0x5EC0_0001);
        for t in 0..60 {
            let (m, k, n) = (1 + rng.below(11), 1 + rng.below(40), 1 + rng.below(11));
            let words = |rng: &mut Rng, len| -> Vec<i16> {
                (0..len).map(|_| rng.next() as i16 >> 4).collect()
            };
            let (a, b) = (words(&mut rng, m * k), words(&mut rng, k * n));
            let rounding = [
                Rounding::Truncate,
                Rounding::NearestEven,
                Rounding::Stochastic,
            ][t % 3];
            let job = MatmulJob {
                a: &a,
                b: &b,
                m,
                k,
                n,
                shift: rng.below(33) as u32,
                rounding,
                seed: rng.next() as u32,
            };
            let want = reference(&job, cfg.size);
            let tr = Transposed {
                a: t % 2 == 1,
                b: t % 4 >= 2,
            };
            let (at, bt) = (transpose(&a, m, k), transpose(&b, k, n));
            let viewed = MatmulJob {
                a: if tr.a { &at } else { &a },
                b: if tr.b { &bt } else { &b },
                ..job
            };
            let mut mock = MockArray::new(cfg);
            mock.sequencer = true;
            let mut got = vec![0x7777; m * n];
            matmul_views(&mut mock, &cfg, &viewed, tr, &mut got).unwrap();
            assert_eq!(got, want, "product {t}: {m}x{k}x{n} {tr:?}");
            assert_eq!((mock.products, mock.hazards), (1, 0), "product {t}");
        }
    }

    /// The refusals: sizes 0 or past their fields, a shift or rounding out of range; nothing
    /// moves, and the driver turns a status into its typed error.
    #[test]
    fn bad_descriptors_are_refused() {
        let cfg = ArrayConfig::square(4);
        let ok = ProductJob {
            m: 4,
            k: 4,
            n: 4,
            a_steps: [4, 1],
            b_steps: [4, 1],
            c_steps: [4, 1],
            shift: 0,
            rounding: 0,
            seed: 1,
        };
        let (a, b) = (vec![1i16; 16], vec![1i16; 16]);
        let size = MM_ERR_SIZE.mask();
        let conv = MM_ERR_CONVERT.mask();
        for (job, want) in [
            (ProductJob { m: 0, ..ok }, size),
            (ProductJob { n: 0x1_0000, ..ok }, size),
            (ProductJob { k: MAX_K + 1, ..ok }, size),
            (ProductJob { shift: 33, ..ok }, conv),
            (ProductJob { rounding: 3, ..ok }, conv),
            (
                ProductJob {
                    k: 0,
                    shift: 40,
                    ..ok
                },
                size | conv,
            ),
            (ok, 0),
        ] {
            let mut mock = MockArray::new(cfg);
            let mut c = vec![-5i16; 16];
            let status = sequence(&mut mock, &cfg, &job, (&a, &b, &mut c)).unwrap();
            assert_eq!(status, want, "{job:?}");
            let untouched = c.iter().all(|&x| x == -5);
            assert_eq!(untouched, want != 0, "{job:?}");
        }
        // A status the sequencer answers reaches the caller as the driver's typed error.
        let mut mock = MockArray::new(cfg);
        mock.sequencer = true;
        mock.answer = Some(MM_ERR_DEVICE.mask());
        let job = MatmulJob {
            a: &a,
            b: &b,
            m: 4,
            k: 4,
            n: 4,
            shift: 0,
            rounding: Rounding::Truncate,
            seed: 1,
        };
        let mut c = vec![0i16; 16];
        let e = matmul_views(&mut mock, &cfg, &job, Transposed::default(), &mut c).unwrap_err();
        assert_eq!(
            e,
            DriverError::Sequencer {
                status: MM_ERR_DEVICE.mask()
            }
        );
        assert!(std::format!("{e}").contains("incomplete"), "{e}");
        let e: DriverError<core::convert::Infallible> = DriverError::Sequencer { status: conv };
        let text = std::format!("{e}");
        assert!(text.contains("shift or rounding"), "{text}");
    }
}
