//! The conv driver on the behavioural stand-in: every op, every rounding mode, odd shapes,
//! against the lowering written out from the convolution's definition and the matmul
//! reference; feature maps sent once; no bank hazards.

extern crate std;

use super::*;
use crate::driver::mock::MockArray;
use crate::driver::tests::reference;
use crate::driver::MatmulJob;
use std::vec;
use std::vec::Vec;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
    fn words(&mut self, len: usize) -> Vec<i16> {
        (0..len).map(|_| self.below(65536) as u16 as i16).collect()
    }
}

/// `(A, B)` of the lowered product, from the definitions (not from the walks).
fn lowered(job: &ConvJob<'_>) -> (Vec<i16>, Vec<i16>) {
    let g = &job.geom;
    let (m, k, n) = job.shape();
    let (oh, ow, ks) = (g.out_h(), g.out_w(), g.kernel);
    let x_at = |b: usize, c: usize, y: isize, xx: isize| -> i16 {
        if y < 0 || xx < 0 || y >= g.in_h as isize || xx >= g.in_w as isize {
            0
        } else {
            job.x[b * g.in_words() + (c * g.in_h + y as usize) * g.in_w + xx as usize]
        }
    };
    let im2col = |row: usize, col: usize| {
        let (b, oy, ox) = (row / (oh * ow), row / ow % oh, row % ow);
        let (ci, ky, kx) = (col / (ks * ks), col / ks % ks, col % ks);
        let y = (oy * g.stride + ky) as isize - g.pad as isize;
        let xx = (ox * g.stride + kx) as isize - g.pad as isize;
        x_at(b, ci, y, xx)
    };
    let mut a = vec![0i16; m * k];
    let mut bm = vec![0i16; k * n];
    let ckk = g.in_ch * ks * ks;
    match job.op {
        ConvOp::Forward => {
            for i in 0..m {
                for kk in 0..k {
                    a[i * k + kk] = im2col(i, kk);
                }
            }
            for kk in 0..k {
                for co in 0..n {
                    bm[kk * n + co] = job.w[co * ckk + kk];
                }
            }
        }
        ConvOp::BackwardInput => {
            for i in 0..m {
                let (b, y, xx) = (i / (g.in_h * g.in_w), i / g.in_w % g.in_h, i % g.in_w);
                for kk in 0..k {
                    let (co, ky, kx) = (kk / (ks * ks), kk / ks % ks, kk % ks);
                    // x position y = oy*s + ky - pad for some output oy.
                    let ny = (y + g.pad) as isize - ky as isize;
                    let nx = (xx + g.pad) as isize - kx as isize;
                    let s = g.stride as isize;
                    if ny >= 0 && nx >= 0 && ny % s == 0 && nx % s == 0 {
                        let (oy, ox) = ((ny / s) as usize, (nx / s) as usize);
                        if oy < oh && ox < ow {
                            a[i * k + kk] = job.dy[b * g.out_words() + (co * oh + oy) * ow + ox];
                        }
                    }
                }
            }
            for kk in 0..k {
                let (co, r) = (kk / (ks * ks), kk % (ks * ks));
                for ci in 0..n {
                    bm[kk * n + ci] = job.w[co * ckk + ci * ks * ks + r];
                }
            }
        }
        ConvOp::BackwardWeights => {
            for co in 0..m {
                for kk in 0..k {
                    let (b, p) = (kk / (oh * ow), kk % (oh * ow));
                    a[co * k + kk] = job.dy[b * g.out_words() + co * oh * ow + p];
                }
            }
            for kk in 0..k {
                for j in 0..n {
                    bm[kk * n + j] = im2col(kk, j);
                }
            }
        }
    }
    (a, bm)
}

fn run_case(
    rng: &mut Rng,
    cfg: ArrayConfig,
    op: ConvOp,
    geom: ConvGeom,
    batch: usize,
    rounding: Rounding,
) {
    let x = rng.words(batch * geom.in_words());
    let dy = rng.words(batch * geom.out_words());
    let w = rng.words(geom.out_ch * geom.in_ch * geom.kernel * geom.kernel);
    let job = ConvJob {
        op,
        geom,
        batch,
        x: &x,
        dy: &dy,
        w: &w,
        shift: 14 + rng.below(6) as u32,
        rounding,
        seed: rng.below(1 << 30) as u32,
    };
    let (m, k, n) = job.shape();
    let (a, b) = lowered(&job);
    let want = reference(
        &MatmulJob {
            a: &a,
            b: &b,
            m,
            k,
            n,
            shift: job.shift,
            rounding,
            seed: job.seed,
        },
        cfg.size,
    );
    let mut dev = MockArray::new(cfg);
    let mut out = vec![0i16; m * n];
    let stats = conv2d(&mut dev, &cfg, &job, &mut out).unwrap();
    assert_eq!(out, want, "{op:?} {geom:?} batch {batch} {rounding:?}");
    assert_eq!(dev.hazards, 0, "{op:?} {geom:?}");
    let slot = job.slot_words(cfg.fm_row_words());
    if op != ConvOp::BackwardWeights || batch * slot <= cfg.fm_depth {
        // Every feature map crossed the bus exactly once (in whole rows).
        assert_eq!(stats.fm_words as usize, batch * slot, "{op:?} {geom:?}");
    }
    assert!(stats.gathers > 0);
}

#[test]
fn every_op_matches_the_lowered_product() {
    let mut rng = Rng(11);
    let cfg = ArrayConfig {
        fm_depth: 4096,
        ..ArrayConfig::new(4, 8, 16).unwrap()
    };
    let lenet = ConvGeom {
        in_ch: 6,
        in_h: 14,
        in_w: 14,
        out_ch: 16,
        kernel: 5,
        stride: 1,
        pad: 0,
    };
    for op in [
        ConvOp::Forward,
        ConvOp::BackwardInput,
        ConvOp::BackwardWeights,
    ] {
        for rounding in [
            Rounding::Truncate,
            Rounding::NearestEven,
            Rounding::Stochastic,
        ] {
            run_case(&mut rng, cfg, op, lenet, 1, rounding);
        }
        for _ in 0..12 {
            let kernel = [1, 3, 5][rng.below(3)];
            let pad = rng.below(kernel / 2 + 2);
            let min = kernel.saturating_sub(2 * pad).max(1);
            let geom = ConvGeom {
                in_ch: 1 + rng.below(5),
                in_h: min + rng.below(7),
                in_w: min + rng.below(7),
                out_ch: 1 + rng.below(6),
                kernel,
                stride: 1 + rng.below(3),
                pad,
            };
            let rounding = [
                Rounding::Truncate,
                Rounding::NearestEven,
                Rounding::Stochastic,
            ][rng.below(3)];
            let batch = 1 + rng.below(4);
            run_case(&mut rng, cfg, op, geom, batch, rounding);
        }
    }
}

#[test]
fn weight_gradient_with_chunked_k_and_a_ring() {
    // 16-row buffers force K chunks; a 512-word feature map holds two images: maps are
    // re-sent per tile and the walks restart mid-batch.
    let mut rng = Rng(5);
    let cfg = ArrayConfig {
        fm_depth: 512,
        ..ArrayConfig::new(4, 8, 16).unwrap()
    };
    let geom = ConvGeom {
        in_ch: 2,
        in_h: 7,
        in_w: 6,
        out_ch: 5,
        kernel: 3,
        stride: 1,
        pad: 1,
    };
    for rounding in [Rounding::NearestEven, Rounding::Stochastic] {
        run_case(&mut rng, cfg, ConvOp::BackwardWeights, geom, 5, rounding);
        run_case(&mut rng, cfg, ConvOp::Forward, geom, 5, rounding);
        run_case(&mut rng, cfg, ConvOp::BackwardInput, geom, 5, rounding);
    }
}

#[test]
fn bad_jobs_are_refused_with_a_reason() {
    let cfg = ArrayConfig::new(4, 8, 16).unwrap();
    let geom = ConvGeom {
        in_ch: 1,
        in_h: 4,
        in_w: 4,
        out_ch: 1,
        kernel: 3,
        stride: 1,
        pad: 0,
    };
    let x = vec![0i16; 16];
    let w = vec![0i16; 9];
    let job = ConvJob {
        op: ConvOp::Forward,
        geom,
        batch: 1,
        x: &x,
        dy: &[],
        w: &w,
        shift: 8,
        rounding: Rounding::Truncate,
        seed: 0,
    };
    let mut out = vec![0i16; 4];
    let mut dev = MockArray::new(cfg);
    assert!(conv2d(&mut dev, &cfg, &job, &mut out).is_ok());
    let none = ArrayConfig { fm_depth: 0, ..cfg };
    assert_eq!(
        conv2d(&mut MockArray::new(none), &none, &job, &mut out),
        Err(DriverError::NoConvUnit)
    );
    let short = ConvJob { x: &x[..15], ..job };
    assert!(matches!(
        conv2d(&mut dev, &cfg, &short, &mut out),
        Err(DriverError::Length { which: "x", .. })
    ));
    let big = ConvJob {
        geom: ConvGeom { kernel: 7, ..geom },
        ..job
    };
    assert!(matches!(
        conv2d(&mut dev, &cfg, &big, &mut out),
        Err(DriverError::Geometry(_))
    ));
    let small = ArrayConfig {
        fm_depth: 512,
        ..cfg
    };
    let huge = ConvGeom { in_ch: 40, ..geom };
    let hx = vec![0i16; 640];
    let hw = vec![0i16; 360];
    let hjob = ConvJob {
        geom: huge,
        x: &hx,
        w: &hw,
        ..job
    };
    assert!(matches!(
        conv2d(&mut MockArray::new(small), &small, &hjob, &mut out),
        Err(DriverError::Geometry(
            systole_core::gather::GeomError::SlotTooLarge { .. }
        ))
    ));
    // `sends_maps_once` is the callers' test of all this: false exactly where the unit would
    // refuse for want of room (or is absent), so they lower those jobs on the host instead.
    assert!(sends_maps_once(&cfg, &job));
    assert!(!sends_maps_once(&none, &job));
    assert!(!sends_maps_once(&small, &hjob));
    // 56 channels of 3x3 (504 words) fill a 512-word map: its one slot cannot hold the two
    // images a tile of 4 pixel rows (9 pixels each) may span, so the unit refuses and the
    // check agrees.
    let tight = ConvGeom {
        in_ch: 56,
        in_h: 3,
        in_w: 3,
        kernel: 1,
        ..geom
    };
    let tx = vec![0i16; 56 * 9 * 2];
    let tw = vec![0i16; 56];
    let tjob = ConvJob {
        geom: tight,
        batch: 2,
        x: &tx,
        w: &tw,
        ..job
    };
    let mut tout = vec![0i16; 2 * 9];
    let refused = conv2d(&mut MockArray::new(small), &small, &tjob, &mut tout);
    assert!(
        matches!(refused, Err(DriverError::FeatureMapTooSmall { .. })),
        "{refused:?}"
    );
    assert!(!sends_maps_once(&small, &tjob));
    // With room for both images it runs, and the check says so.
    let roomy = ArrayConfig {
        fm_depth: 2048,
        ..cfg
    };
    assert!(sends_maps_once(&roomy, &tjob));
    assert!(conv2d(&mut MockArray::new(roomy), &roomy, &tjob, &mut tout).is_ok());
}
