//! Softmax cross-entropy in f32, the same bits on every platform: `exp` and `ln` are `libm`'s
//! (pure Rust), everything else IEEE basic operations in a fixed order.

use alloc::vec;
use alloc::vec::Vec;

/// Softmax cross-entropy: returns the mean loss, the number of correct predictions and
/// `d loss / d logits = (softmax - onehot) / batch`.
pub fn softmax_xent(logits: &[f32], labels: &[u8], classes: usize) -> (f32, usize, Vec<f32>) {
    softmax_xent_scaled(logits, labels, classes, labels.len())
}

/// [`softmax_xent`] with the gradient divided by `denom` instead of this batch's size: a shard
/// of a global batch divides by the global batch size.
pub fn softmax_xent_scaled(
    logits: &[f32],
    labels: &[u8],
    classes: usize,
    denom: usize,
) -> (f32, usize, Vec<f32>) {
    let mut grad = vec![0f32; labels.len() * classes];
    let (loss, correct) = softmax_rows(logits, labels, classes, |i, e, s, label| {
        for c in 0..classes {
            let onehot = if c == label { 1.0 } else { 0.0 };
            grad[i * classes + c] = (e[c] / s - onehot) / denom as f32;
        }
    });
    (loss, correct, grad)
}

/// The mean loss and correct count of [`softmax_xent`] without the gradient: an evaluation's
/// (the same bits; a gradient is three float operations a logit more).
pub fn softmax_loss(logits: &[f32], labels: &[u8], classes: usize) -> (f32, usize) {
    softmax_rows(logits, labels, classes, |_, _, _, _| {})
}

/// The rows of the softmax: for each row `i`, `e = exp(z - max z)` and `s = sum e` are given
/// to `each(i, e, s, label)`; returns the mean loss and the correct count.
fn softmax_rows(
    logits: &[f32],
    labels: &[u8],
    classes: usize,
    mut each: impl FnMut(usize, &[f32], f32, usize),
) -> (f32, usize) {
    let b = labels.len();
    let mut e = vec![0f32; classes];
    let mut loss = 0f64;
    let mut correct = 0;
    for (i, &label) in labels.iter().enumerate() {
        let z = &logits[i * classes..(i + 1) * classes];
        let m = z.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        for (e, &v) in e.iter_mut().zip(z) {
            *e = exp(v - m);
        }
        let s: f32 = e.iter().sum();
        loss += -(ln((e[label as usize] / s).max(1e-30))) as f64;
        if argmax(z) == label as usize {
            correct += 1;
        }
        each(i, &e, s, label as usize);
    }
    ((loss / b as f64) as f32, correct)
}

/// `e^x` of the softmax: `libm`'s double-precision `exp` rounded to f32, which is nearer the
/// correctly rounded value than its `expf` (over every f32 in [-104, 0], it differs from glibc's
/// `expf`, which the trainer used before, on 97,052 of 1.12e9 inputs; `libm::expf` on 10.2M).
/// Formed in integers where that gives the same bits ([`crate::exp::exp_f32`]).
fn exp(x: f32) -> f32 {
    crate::exp::exp_f32(x)
}

/// `ln x` of the loss, the same way (differs from glibc's `logf` on 214,946 of the 1.07e9 f32
/// in (0, 1]; `libm::logf` on 6.8M).
pub(crate) fn ln(x: f32) -> f32 {
    libm::log(x as f64) as f32
}

/// Index of the largest value (the first on ties).
pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_gradient_sums_to_zero() {
        let (loss, correct, g) = softmax_xent(&[2.0, 1.0, 0.0, 0.0, 0.0, 3.0], &[0, 1], 3);
        assert!(loss > 0.0);
        assert_eq!(correct, 1);
        for r in 0..2 {
            let s: f32 = g[r * 3..r * 3 + 3].iter().sum();
            assert!(s.abs() < 1e-6);
        }
        // uniform logits: loss = ln(3)
        let (l, _, _) = softmax_xent(&[0.0; 3], &[2], 3);
        assert!((l - ln(3.0)).abs() < 1e-6);
    }

    /// The evaluation's loss without a gradient is the training loss, bit for bit.
    #[test]
    fn softmax_loss_is_the_xent_loss() {
        let mut s = 0x1357_9BDFu32;
        let logits: Vec<f32> = (0..40 * 10)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 65_536) as f32 / 4096.0 - 8.0
            })
            .collect();
        let labels: Vec<u8> = (0..40).map(|i| (i * 7 % 10) as u8).collect();
        let (loss, ok, _) = softmax_xent(&logits, &labels, 10);
        assert_eq!(softmax_loss(&logits, &labels, 10), (loss, ok));
        assert!(ok > 0 && ok < 40, "{ok}");
    }
}
