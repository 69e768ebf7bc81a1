//! `systole bench`: cycles of matrix products and of the conv unit's LeNet layer on Verilated
//! arrays (`--link`: the SoC and the bridge per training step).

use super::BenchArgs;
use systole_core::ArrayConfig;

/// `systole bench`.
pub fn bench(a: &BenchArgs) -> anyhow::Result<()> {
    if a.link {
        if a.steps == 0 || a.batch == 0 || a.hidden == 0 {
            anyhow::bail!("--steps, --batch and --hidden must be at least 1");
        }
        let bench = crate::bench_link::run(a.steps, a.batch, a.hidden)?;
        outln!("{bench}");
        return Ok(());
    }
    for &n in &a.array {
        ArrayConfig::new(n, 8, 512).map_err(|e| anyhow::anyhow!("--array: {e}"))?;
    }
    use systole_core::limits::MAX_TENSOR_WORDS;
    if a.sizes.contains(&0) {
        anyhow::bail!("--sizes must be positive");
    }
    if let Some(s) = a
        .sizes
        .iter()
        .find(|&&s| s.checked_mul(s).is_none_or(|w| w > MAX_TENSOR_WORDS))
    {
        anyhow::bail!(
            "--sizes {s}: a {s}x{s} matrix is more than the {MAX_TENSOR_WORDS} (2^26) words systole allocates per tensor; use sizes up to 8192"
        );
    }
    // The weight gradient reduces over every output position of the batch.
    let one = crate::bench_conv::lenet_layer(1);
    let max_batch = systole_core::numeric::MAX_K / (one.out_h() * one.out_w());
    if a.conv_batch > max_batch {
        anyhow::bail!(
            "--conv-batch {}: the weight gradient would sum over more than the contract's {} (MAX_K) products; use at most {max_batch}",
            a.conv_batch,
            systole_core::numeric::MAX_K
        );
    }
    if a.trace.trace.is_some() && a.array.len() != 1 {
        anyhow::bail!(
            "--trace writes the waveform of one model: give one --array size (not {})",
            a.array.len()
        );
    }
    let window = a.trace.window(&systole_device::DeviceSpec::Verilator)?;
    let shapes: Vec<(usize, usize, usize)> = a.sizes.iter().map(|&s| (s, s, s)).collect();
    let rows = super::trace::finish(
        &window,
        crate::bench::matmul_table(&a.array, &shapes, window.clone()).map_err(Into::into),
    )?;
    outln!("{}", crate::bench::BenchTable(&rows));
    if a.conv_batch > 0 {
        let g = crate::bench_conv::lenet_layer(a.conv_batch);
        outln!(
            "conv unit: LeNet layer {}->{} channels, {}x{} kernel, {}x{} input, batch {}",
            g.in_ch,
            g.out_ch,
            g.kernel,
            g.kernel,
            g.in_h,
            g.in_w,
            g.batch
        );
        let rows = crate::bench_conv::conv_table(&a.array, &g)?;
        outln!("{}", crate::bench_conv::ConvTable(&rows));
    }
    Ok(())
}
