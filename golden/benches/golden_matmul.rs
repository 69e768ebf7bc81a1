//! Golden fixed-point matmul (exact, with the contract's conversion) against `f32` sgemm from
//! the `matrixmultiply` crate, 256x256x256, in the same run. Prints the ratio.
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::time::Instant;
use systole_core::Rounding;
use systole_golden::QMatrix;
use systole_golden::{matmul, OutputSpec};

fn operands(n: usize) -> (QMatrix, QMatrix, Vec<f32>, Vec<f32>) {
    let mut s = 0x1234_5678u32;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        (s >> 16) as i16
    };
    let a: Vec<i16> = (0..n * n).map(|_| next()).collect();
    let b: Vec<i16> = (0..n * n).map(|_| next()).collect();
    let af = a.iter().map(|&v| v as f32).collect();
    let bf = b.iter().map(|&v| v as f32).collect();
    (
        QMatrix::from_vec(n, n, 8, a).unwrap(),
        QMatrix::from_vec(n, n, 8, b).unwrap(),
        af,
        bf,
    )
}

fn sgemm(n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    // SAFETY: a, b, c are n*n row-major slices.
    unsafe {
        matrixmultiply::sgemm(
            n,
            n,
            n,
            1.0,
            a.as_ptr(),
            n as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

fn bench(c: &mut Criterion) {
    let n = 256;
    let (qa, qb, af, bf) = operands(n);
    let mut cf = vec![0f32; n * n];
    let spec = OutputSpec {
        frac: 8,
        rounding: Rounding::Stochastic,
        seed: 1,
    };
    let mut g = c.benchmark_group("matmul_256");
    g.bench_function("golden_fixed16_stochastic", |bch| {
        bch.iter(|| matmul(black_box(&qa), black_box(&qb), &spec, 8).unwrap())
    });
    g.bench_function("f32_sgemm_matrixmultiply", |bch| {
        bch.iter(|| sgemm(n, black_box(&af), black_box(&bf), &mut cf))
    });
    g.finish();

    // One ratio measured back to back in this run (criterion's own estimates are above).
    let reps = 20;
    let t = Instant::now();
    for _ in 0..reps {
        black_box(matmul(&qa, &qb, &spec, 8).unwrap());
    }
    let golden = t.elapsed().as_secs_f64() / reps as f64;
    let t = Instant::now();
    for _ in 0..reps {
        sgemm(n, &af, &bf, &mut cf);
        black_box(&cf);
    }
    let f32t = t.elapsed().as_secs_f64() / reps as f64;
    println!(
        "golden/sgemm time ratio at 256^3: {:.2} (golden {:.3} ms, sgemm {:.3} ms)",
        golden / f32t,
        golden * 1e3,
        f32t * 1e3
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
