//! Simulation speed of the Verilated models in clock cycles per second (criterion reports it as
//! "elements/s"): the tile driver running a 128x256x128 product keeps the array busy, so this is
//! the speed of a loaded model. Sizes not compiled in are skipped.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use systole_core::{ArrayConfig, Rounding};
use systole_firmware::driver::{matmul, MatmulJob};
use systole_sim::{built_sizes, VerilatedArray};

fn loaded_model(c: &mut Criterion) {
    let (m, k, n) = (128, 256, 128);
    let a: Vec<i16> = (0..m * k).map(|i| (i as i16).wrapping_mul(31)).collect();
    let b: Vec<i16> = (0..k * n).map(|i| (i as i16).wrapping_mul(17)).collect();
    let job = MatmulJob {
        a: &a,
        b: &b,
        m,
        k,
        n,
        shift: 8,
        rounding: Rounding::Stochastic,
        seed: 1,
    };
    let mut group = c.benchmark_group("verilated_cycles");
    group.sample_size(10);
    for size in [8, 16] {
        if !built_sizes().contains(&size) {
            eprintln!("{size}x{size} model not built: skipped");
            continue;
        }
        let cfg = ArrayConfig::square(size);
        let mut sim = VerilatedArray::new(&cfg).expect("model");
        let mut out = vec![0i16; m * n];
        let before = sim.cycles();
        matmul(&mut sim, &cfg, &job, &mut out).expect("matmul");
        group.throughput(Throughput::Elements(sim.cycles() - before));
        group.bench_function(
            BenchmarkId::new("matmul_128x256x128", format!("{size}x{size}")),
            |bench| bench.iter(|| matmul(&mut sim, &cfg, &job, &mut out).expect("matmul")),
        );
    }
    group.finish();
}

criterion_group!(benches, loaded_model);
criterion_main!(benches);
