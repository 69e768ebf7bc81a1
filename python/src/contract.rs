//! `systole.contract`: the numeric contract's primitives (docs/HARDWARE.md, "The numeric
//! contract"), the very functions the golden model and the devices use, so a user can
//! re-implement them and check their own hardware.

use crate::errors::{guard, Failure, Kind};
use crate::words::{accumulators, to_array};
use numpy::ndarray::IxDyn;
use numpy::PyArray;
use pyo3::prelude::*;
use systole_core::numeric::{self as num, Lfsr32, Rounding};
use systole_golden::TiledConverter;

fn rounding_of(name: &str) -> Result<Rounding, Failure> {
    systole::cli::embed::parse_rounding(name).map_err(|e| Failure::new(Kind::Option, e.to_string()))
}

fn width(word_bits: u32) -> Result<u32, Failure> {
    if (num::MIN_WORD_BITS..=num::MAX_WORD_BITS).contains(&word_bits) {
        Ok(word_bits)
    } else {
        Err(Failure::new(
            Kind::Range,
            systole_golden::NumericError::WordBits(word_bits).to_string(),
        ))
    }
}

fn check_shift(shift: u32) -> Result<u32, Failure> {
    if shift <= num::MAX_SHIFT {
        Ok(shift)
    } else {
        Err(Failure::new(
            Kind::Range,
            format!(
                "shift {shift} is outside 0..={}: the LFSR supplies 32 random bits",
                num::MAX_SHIFT
            ),
        ))
    }
}

fn check_acc(acc: i64, word_bits: u32) -> Result<i64, Failure> {
    let (lo, hi) = (num::acc_min(word_bits), num::acc_max(word_bits));
    if (lo..=hi).contains(&acc) {
        Ok(acc)
    } else {
        Err(Failure::new(
            Kind::Range,
            format!(
                "accumulator {acc} is outside the {}-bit accumulator of W = {word_bits} ({lo}..={hi}): no sum of at most MAX_K products of W-bit words reaches it",
                num::acc_bits(word_bits)
            ),
        ))
    }
}

/// The seed of the output tile whose first row is ``row0`` and first column ``col0`` in an
/// operation seeded with ``seed`` (the value the host writes to ``SEED``). Arguments are 32-bit.
#[pyfunction]
fn tile_seed(seed: u32, row0: u32, col0: u32) -> u32 {
    num::tile_seed(seed, row0, col0)
}

/// The start state of the LFSR of column ``lane`` of a tile whose seed is ``tile_seed``.
#[pyfunction]
fn lane_seed(tile_seed: u32, lane: u32) -> u32 {
    num::lane_seed(tile_seed, lane)
}

/// The contract's 32-bit Galois LFSR from ``seed`` (0 is replaced by 1): its states after 1, 2,
/// ..., ``steps`` steps.
#[pyfunction]
fn lfsr(seed: u32, steps: usize) -> Vec<u32> {
    let mut l = Lfsr32::new(seed);
    (0..steps).map(|_| l.step()).collect()
}

/// One output conversion: the accumulator ``acc`` shifted right by ``shift`` bits (0 to 32) with
/// ``rounding`` (``"truncate"``, ``"nearest"`` or ``"stochastic"``, which adds the low ``shift``
/// bits of ``random``, the output's LFSR state), then saturated to ``word_bits`` bits.
#[pyfunction]
#[pyo3(signature = (acc, shift, rounding = "nearest", random = 0, word_bits = 16))]
fn convert(
    py: Python<'_>,
    acc: i64,
    shift: u32,
    rounding: &str,
    random: u32,
    word_bits: u32,
) -> PyResult<i64> {
    guard(py, || {
        (|| {
            let w = width(word_bits)?;
            Ok(num::convert(
                check_acc(acc, w)?,
                check_shift(shift)?,
                rounding_of(rounding)?,
                random,
                w,
            ))
        })()
        .map_err(|f: Failure| f.into_pyerr(py))
    })
}

/// The conversion of a whole output matrix as a device does it: ``acc`` holds the exact sums
/// (M x N integers, e.g. ``a.astype(np.int64) @ b``); each output is converted once by
/// :func:`convert`, its random bits from the LFSR of its column in its ``array`` x ``array``
/// tile (seeded by :func:`tile_seed` and :func:`lane_seed` from ``seed``, stepped once per row).
/// Returns M x N ``int16`` words: what ``Device(..., array=array).matmul`` returns.
#[pyfunction]
#[pyo3(signature = (acc, shift, rounding = "nearest", seed = 0, array = 8, word_bits = 16))]
fn convert_tiled<'py>(
    py: Python<'py>,
    acc: &Bound<'py, PyAny>,
    shift: u32,
    rounding: &str,
    seed: u32,
    array: usize,
    word_bits: u32,
) -> PyResult<Bound<'py, PyArray<i16, IxDyn>>> {
    guard(py, || {
        let (shape, data) = accumulators(acc)?.map_err(|f| f.into_pyerr(py))?;
        let out = (|| {
            let w = width(word_bits)?;
            for &v in &data {
                check_acc(v, w)?;
            }
            let mut conv = TiledConverter::new_at(
                shape[1],
                check_shift(shift)?,
                rounding_of(rounding)?,
                seed,
                array,
                w,
            )
            .map_err(|e| Failure::new(Kind::Range, e.to_string()))?;
            let mut out = vec![0i16; data.len()];
            for (acc_row, out_row) in data.chunks(shape[1]).zip(out.chunks_mut(shape[1])) {
                conv.next_row(acc_row, out_row);
            }
            Ok(out)
        })()
        .map_err(|f: Failure| f.into_pyerr(py))?;
        to_array(py, &out, &shape)
    })
}

/// The smallest ``word_bits``-bit word.
#[pyfunction]
fn word_min(py: Python<'_>, word_bits: u32) -> PyResult<i64> {
    Ok(num::word_min(
        width(word_bits).map_err(|f| f.into_pyerr(py))?,
    ))
}

/// The largest ``word_bits``-bit word.
#[pyfunction]
fn word_max(py: Python<'_>, word_bits: u32) -> PyResult<i64> {
    Ok(num::word_max(
        width(word_bits).map_err(|f| f.into_pyerr(py))?,
    ))
}

/// The accumulator width of ``word_bits``-bit words: ``2W + 16``.
#[pyfunction]
fn acc_bits(py: Python<'_>, word_bits: u32) -> PyResult<u32> {
    Ok(num::acc_bits(
        width(word_bits).map_err(|f| f.into_pyerr(py))?,
    ))
}

/// Adds the contract's functions and constants to `m` (the extension module; `systole.contract`
/// re-exports them).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tile_seed, m)?)?;
    m.add_function(wrap_pyfunction!(lane_seed, m)?)?;
    m.add_function(wrap_pyfunction!(lfsr, m)?)?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_function(wrap_pyfunction!(convert_tiled, m)?)?;
    m.add_function(wrap_pyfunction!(word_min, m)?)?;
    m.add_function(wrap_pyfunction!(word_max, m)?)?;
    m.add_function(wrap_pyfunction!(acc_bits, m)?)?;
    m.add("LFSR_TAPS", num::LFSR_TAPS)?;
    m.add("LANE_SEED_MUL", num::LANE_SEED_MUL)?;
    m.add(
        "TILE_SEED_MUL",
        (num::TILE_SEED_MUL[0], num::TILE_SEED_MUL[1]),
    )?;
    m.add(
        "TILE_SEED_MIX",
        (num::TILE_SEED_MIX[0], num::TILE_SEED_MIX[1]),
    )?;
    m.add("MAX_SHIFT", num::MAX_SHIFT)?;
    m.add("MAX_K", num::MAX_K)?;
    m.add("MIN_WORD_BITS", num::MIN_WORD_BITS)?;
    m.add("MAX_WORD_BITS", num::MAX_WORD_BITS)?;
    let [t, n, st] = Rounding::ALL.map(|r| r.name());
    m.add("ROUNDINGS", (t, n, st))?;
    Ok(())
}
