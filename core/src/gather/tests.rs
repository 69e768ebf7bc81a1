//! The walk model against the convolution definitions, address by address.

use super::*;

/// A small deterministic generator (no dependencies in this no_std crate's tests).
struct Gen(u64);
impl Gen {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

/// Walks `lanes` lane positions and `ks` K positions and checks every gathered word.
fn check(
    cfg: &GatherConfig,
    lanes: usize,
    ks: usize,
    reference: &dyn Fn(usize, usize) -> Option<usize>,
) {
    // fm[i] = i + 1 so a gathered word names its address and 0 means "not gathered".
    let fm: [i16; 4096] = core::array::from_fn(|i| i as i16 + 1);
    let mut l = cfg.lanes.start;
    for m in 0..lanes {
        let mut k = cfg.k.start;
        for kk in 0..ks {
            let got = cfg.value(&l, &k, &fm);
            let want = reference(m, kk).map_or(0, |a| a as i16 + 1);
            assert_eq!(got, want, "row {m}, column {kk}, {cfg:?}");
            k = cfg.k.step(&k, cfg.modulus);
        }
        l = cfg.lanes.step(&l, cfg.modulus);
    }
}

fn geoms() -> impl Iterator<Item = (ConvGeom, usize)> {
    let mut g = Gen(42);
    let mut fixed = [
        // LeNet's second layer, a strided and padded 3x3, a 1x1, a 5x5 with stride 2.
        (
            ConvGeom {
                in_ch: 6,
                in_h: 14,
                in_w: 14,
                out_ch: 16,
                kernel: 5,
                stride: 1,
                pad: 0,
            },
            2,
        ),
        (
            ConvGeom {
                in_ch: 3,
                in_h: 7,
                in_w: 6,
                out_ch: 5,
                kernel: 3,
                stride: 2,
                pad: 1,
            },
            3,
        ),
        (
            ConvGeom {
                in_ch: 5,
                in_h: 4,
                in_w: 5,
                out_ch: 3,
                kernel: 1,
                stride: 1,
                pad: 0,
            },
            4,
        ),
        (
            ConvGeom {
                in_ch: 2,
                in_h: 9,
                in_w: 8,
                out_ch: 3,
                kernel: 5,
                stride: 2,
                pad: 2,
            },
            3,
        ),
        (
            ConvGeom {
                in_ch: 2,
                in_h: 8,
                in_w: 7,
                out_ch: 2,
                kernel: 3,
                stride: 3,
                pad: 2,
            },
            2,
        ),
    ]
    .to_vec();
    for _ in 0..30 {
        let kernel: usize = [1, 3, 5][g.below(3)];
        let pad = g.below(kernel.div_ceil(2) + 1);
        let in_h = (kernel.saturating_sub(2 * pad)).max(1) + g.below(6);
        let in_w = (kernel.saturating_sub(2 * pad)).max(1) + g.below(6);
        let geom = ConvGeom {
            in_ch: 1 + g.below(4),
            in_h,
            in_w,
            out_ch: 1 + g.below(4),
            kernel,
            stride: 1 + g.below(3),
            pad,
        };
        fixed.push((geom, 1 + g.below(4)));
    }
    fixed.into_iter()
}

#[test]
fn forward_walk_is_im2col() {
    for (g, batch) in geoms() {
        g.check().unwrap();
        let (oh, ow, k) = (g.out_h(), g.out_w(), g.kernel);
        let slot = g.in_words();
        let slots = ConvGeom::slots(slot, 4096).unwrap().min(3);
        let cfg = g.forward_a(slots, slot);
        let reference = |m: usize, kk: usize| {
            let (b, oy, ox) = (m / (oh * ow), m / ow % oh, m % ow);
            let (ci, ky, kx) = (kk / (k * k), kk / k % k, kk % k);
            let y = (oy * g.stride + ky)
                .checked_sub(g.pad)
                .filter(|&y| y < g.in_h)?;
            let x = (ox * g.stride + kx)
                .checked_sub(g.pad)
                .filter(|&x| x < g.in_w)?;
            Some((b % slots) * slot + (ci * g.in_h + y) * g.in_w + x)
        };
        check(&cfg, batch * oh * ow, g.in_ch * k * k, &reference);
    }
}

#[test]
fn input_gradient_walk_is_the_strided_transposed_gather() {
    for (g, batch) in geoms() {
        let (oh, ow, k) = (g.out_h(), g.out_w(), g.kernel);
        let slot = g.out_words();
        let slots = ConvGeom::slots(slot, 4096).unwrap().min(2);
        let cfg = g.backward_input_a(slots, slot);
        let axis = |i: usize, kk: usize, out: usize| {
            let n = (i + g.pad).checked_sub(kk)?;
            (n % g.stride == 0 && n / g.stride < out).then_some(n / g.stride)
        };
        let reference = |m: usize, kk: usize| {
            let (b, y, x) = (m / (g.in_h * g.in_w), m / g.in_w % g.in_h, m % g.in_w);
            let (co, ky, kx) = (kk / (k * k), kk / k % k, kk % k);
            let oy = axis(y, ky, oh)?;
            let ox = axis(x, kx, ow)?;
            Some((b % slots) * slot + (co * oh + oy) * ow + ox)
        };
        check(&cfg, batch * g.in_h * g.in_w, g.out_ch * k * k, &reference);
    }
}

#[test]
fn weight_gradient_walks_are_dy_and_im2col() {
    for (g, batch) in geoms() {
        let (oh, ow, k) = (g.out_h(), g.out_w(), g.kernel);
        let slot = g.in_words() + g.out_words();
        let slots = ConvGeom::slots(slot, 4096).unwrap().min(3);
        let a = g.backward_weights_a(slots, slot, g.in_words());
        let dy = |co: usize, kk: usize| {
            let (b, p) = (kk / (oh * ow), kk % (oh * ow));
            Some((b % slots) * slot + g.in_words() + co * oh * ow + p)
        };
        check(&a, g.out_ch, batch * oh * ow, &dy);
        let bcfg = g.backward_weights_b(slots, slot);
        let x = |j: usize, kk: usize| {
            let (b, oy, ox) = (kk / (oh * ow), kk / ow % oh, kk % ow);
            let (ci, ky, kx) = (j / (k * k), j / k % k, j % k);
            let y = (oy * g.stride + ky)
                .checked_sub(g.pad)
                .filter(|&y| y < g.in_h)?;
            let x = (ox * g.stride + kx)
                .checked_sub(g.pad)
                .filter(|&x| x < g.in_w)?;
            Some((b % slots) * slot + (ci * g.in_h + y) * g.in_w + x)
        };
        check(&bcfg, g.in_ch * k * k, batch * oh * ow, &x);
    }
}

#[test]
fn words_pack_every_field() {
    let g = ConvGeom {
        in_ch: 3,
        in_h: 7,
        in_w: 6,
        out_ch: 5,
        kernel: 3,
        stride: 2,
        pad: 1,
    };
    let c = g.backward_input_a(2, g.out_words());
    let w = c.words();
    assert_eq!(w.len(), WORDS);
    assert_eq!(
        w[0],
        u32::from(c.lanes.counts[0]) | (u32::from(c.lanes.counts[1]) << 16)
    );
    assert_eq!(w[1] >> 16, 2, "modulus");
    assert_eq!(
        w[WORDS - 1],
        u32::from(c.limit[0]) | (u32::from(c.limit[1]) << 16)
    );
    assert_eq!(
        w[WALK_WORDS + 10],
        0xFFFF_FFFF,
        "the flipped K walk carries -1 into both q"
    );
    assert_eq!(w[WALK_WORDS + 11], (-(g.out_w() as i32)) as u32 & ADDR_MASK);
}

#[test]
fn bad_geometry_is_named() {
    let ok = ConvGeom {
        in_ch: 1,
        in_h: 4,
        in_w: 4,
        out_ch: 1,
        kernel: 3,
        stride: 1,
        pad: 0,
    };
    assert_eq!(
        ConvGeom { kernel: 5, ..ok }.check(),
        Err(GeomError::KernelTooLarge {
            kernel: 5,
            padded_h: 4,
            padded_w: 4
        })
    );
    assert_eq!(ConvGeom { out_ch: 0, ..ok }.check(), Err(GeomError::Shape));
    assert_eq!(
        ConvGeom { stride: 16, ..ok }.check(),
        Err(GeomError::Stride(16))
    );
    assert_eq!(
        ConvGeom::slots(5000, 4096),
        Err(GeomError::SlotTooLarge {
            words: 5000,
            fm_depth: 4096
        })
    );
}

#[test]
fn words_decode_to_the_same_config() {
    for (g, _) in geoms() {
        for c in [
            g.forward_a(3, 500),
            g.backward_input_a(2, 300),
            g.backward_weights_a(2, 700, g.in_words() + 3),
            g.backward_weights_b(1, 900),
        ] {
            assert_eq!(GatherConfig::from_words(&c.words()), c);
        }
    }
}

#[test]
fn engine_model_walks_lanes_by_tiles() {
    use crate::regmap::LaneMode;
    let g = ConvGeom {
        in_ch: 2,
        in_h: 5,
        in_w: 5,
        out_ch: 3,
        kernel: 3,
        stride: 2,
        pad: 1,
    };
    let cfg = g.forward_a(1, g.in_words());
    let fm: [i16; 512] = core::array::from_fn(|i| i as i16 + 1);
    let mut e = EngineModel::new(4);
    let mut rows = [[0i16; 4]; 18];
    let mut grab = |e: &mut EngineModel, mode, k_next, klen| {
        e.run(&cfg, klen, mode, k_next, &fm, |k, w| {
            rows[k].copy_from_slice(w)
        });
        rows
    };
    // Tile 0 (pixels 0..4), tile 1 (pixels 4..8), tile 1 again, tile 0 again.
    let t0 = grab(&mut e, LaneMode::Load, false, 18);
    let t1 = grab(&mut e, LaneMode::Next, false, 18);
    let t1b = grab(&mut e, LaneMode::Keep, false, 18);
    let t0b = grab(&mut e, LaneMode::Load, false, 18);
    assert_eq!(t1, t1b);
    assert_eq!(t0, t0b);
    assert_ne!(t0, t1);
    // Pixel 5 = (oy 1, ox 2): y = 2 + ky - 1, x = 4 + kx - 1; K column 4 = (ci 0, ky 1, kx 1).
    assert_eq!(t1[4][1], (2 * 5 + 4) as i16 + 1);
    // Pixel 0 = (0, 0), K column 0 = (0, 0, 0) reads (-1, -1): padding.
    assert_eq!(t0[0][0], 0);
    // Continuing K: two commands of 9 rows equal one of 18.
    let mut e2 = EngineModel::new(4);
    let first = grab(&mut e2, LaneMode::Load, false, 9);
    let second = grab(&mut e2, LaneMode::Keep, true, 9);
    assert_eq!(first[..9], t0[..9]);
    assert_eq!(second[..9], t0[9..]);
}
