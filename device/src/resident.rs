//! Tensors kept on a device ([`DeviceTensor`] handles): uploaded once, used by as many
//! products as need them, the products' results kept beside them, read back only when the
//! host needs the words.
//!
//! Where the words live is the device's business: [`HostTensors`], the default, keeps them in
//! host memory (the golden device, the Verilated array, the bridge and a serial board without a
//! tensor store; their products run through the value-based methods, so on the same
//! hardware); a serial board with a tensor store keeps them in its RAM
//! (`device/src/serial/kept.rs`), pinned there: the serial link's cache of operands never
//! evicts them. Either way the device's table here says which handles are alive.
//!
//! A handle names its device (a number drawn once per table, never reused) and a key never
//! reused on that device, so a handle from another device or one already freed is a typed
//! [`DeviceError`], never another tensor's words.
//!
//! ```
//! use systole_core::{ArrayConfig, Rounding};
//! use systole_device::{golden::GoldenDevice, Device, DeviceError, Transposed};
//! use systole_golden::{OutputSpec, QMatrix};
//!
//! let mut dev = GoldenDevice::new(ArrayConfig::square(4))?;
//! let spec = OutputSpec { frac: 4, rounding: Rounding::NearestEven, seed: 1 };
//! let (x, w) = (QMatrix::from_vec(2, 3, 4, vec![16, -8, 3, 5, 0, 32])?, QMatrix::from_vec(3, 2, 4, vec![1, 2, 3, 4, 5, 6])?);
//! let (hx, hw) = (dev.upload(&x)?, dev.upload(&w)?);
//! let h = dev.matmul_kept(&hx, &hw, Transposed::default(), &spec)?; // H = X·W, kept
//! let dx = dev.matmul_kept(&h, &hw, Transposed { a: false, b: true }, &spec)?; // H·Wᵀ
//! assert_eq!(dev.read_tensor(&h)?, dev.matmul(&x, &w, &spec)?); // bit for bit
//! assert_eq!((dx.rows(), dx.cols()), (2, 3));
//! dev.free_tensor(&hx)?;
//! assert!(matches!(dev.read_tensor(&hx), Err(DeviceError::FreedTensor { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::{Device, DeviceError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use systole_firmware::driver::Transposed;
use systole_golden::tensor::QMatrix;
use systole_golden::{NumericError, OutputSpec};

/// A tensor kept on the device that returned it: its shape and format, and which device and
/// tensor it is. Only a device makes one ([`Device::upload`], [`Device::matmul_kept`]); cloning
/// it does not copy the tensor, and it stays valid until [`Device::free_tensor`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceTensor {
    owner: u64,
    key: u64,
    rows: usize,
    cols: usize,
    frac: u32,
}

impl DeviceTensor {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Fractional bits of its words.
    pub fn frac(&self) -> u32 {
        self.frac
    }

    /// Words it holds.
    pub fn words(&self) -> usize {
        self.rows * self.cols
    }

    /// How messages name it.
    pub fn describe(&self) -> String {
        format!(
            "kept tensor #{} ({}x{}, {} fractional bits)",
            self.key, self.rows, self.cols, self.frac
        )
    }
}

/// The room a device has for kept tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorRoom {
    /// Words the kept tensors hold.
    pub used: usize,
    /// Words they may hold in all (a board's store, or the limit set on a host table).
    pub capacity: usize,
}

impl TensorRoom {
    /// Words free for more kept tensors.
    pub fn free(&self) -> usize {
        self.capacity.saturating_sub(self.used)
    }
}

/// Next device number: each table draws one, so handles of two devices never match.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// A device's table of kept tensors: which handles are alive, their shapes, and (for tensors
/// in host memory) their words.
#[derive(Debug)]
pub struct HostTensors {
    owner: u64,
    next_key: u64,
    held: HashMap<u64, Held>,
    limit: usize,
}

#[derive(Debug)]
struct Held {
    rows: usize,
    cols: usize,
    /// The words when they are in host memory; `None` when the device keeps them.
    words: Option<Arc<QMatrix>>,
}

impl Default for HostTensors {
    fn default() -> Self {
        HostTensors::new()
    }
}

impl Clone for HostTensors {
    /// A fresh, empty table: a cloned device is another device, and the tensors kept on the
    /// original are not on it.
    fn clone(&self) -> Self {
        HostTensors {
            limit: self.limit,
            ..HostTensors::new()
        }
    }
}

impl HostTensors {
    /// An empty table of a new device, its words unlimited until [`HostTensors::set_limit`].
    pub fn new() -> Self {
        HostTensors {
            owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
            next_key: 1,
            held: HashMap::new(),
            limit: usize::MAX,
        }
    }

    /// Limits the words all kept tensors together may hold (a board's store limits them
    /// further).
    pub fn set_limit(&mut self, words: usize) {
        self.limit = words;
    }

    /// The limit [`HostTensors::set_limit`] set (`usize::MAX`: none).
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Words the kept tensors hold.
    pub fn used(&self) -> usize {
        self.held.values().map(|h| h.rows * h.cols).sum()
    }

    /// The room in this table: its words against its limit.
    pub fn room(&self) -> TensorRoom {
        TensorRoom {
            used: self.used(),
            capacity: self.limit,
        }
    }

    /// Refuses a tensor of `needed` words that `room` has no space for.
    pub(crate) fn check_room(
        room: TensorRoom,
        needed: usize,
        device: &str,
    ) -> Result<(), DeviceError> {
        if needed > room.free() {
            return Err(DeviceError::StoreFull {
                device: device.to_string(),
                needed,
                free: room.free(),
                capacity: room.capacity,
            });
        }
        Ok(())
    }

    /// The tensor `t` names, if it is this device's and alive.
    fn held(&self, t: &DeviceTensor, device: &str) -> Result<&Held, DeviceError> {
        if t.owner != self.owner {
            return Err(DeviceError::ForeignTensor {
                device: device.to_string(),
                tensor: t.describe(),
            });
        }
        self.held
            .get(&t.key)
            .ok_or_else(|| DeviceError::FreedTensor {
                device: device.to_string(),
                tensor: t.describe(),
            })
    }

    /// `Ok` when `t` is alive on this device (a typed error naming it otherwise).
    pub(crate) fn check(&self, t: &DeviceTensor, device: &str) -> Result<(), DeviceError> {
        self.held(t, device).map(|_| ())
    }

    /// The key of `t` for a device that keeps its words itself.
    pub(crate) fn key(&self, t: &DeviceTensor, device: &str) -> Result<u64, DeviceError> {
        self.check(t, device)?;
        Ok(t.key)
    }

    /// Enters a new tensor; `words` when its words are kept here.
    pub(crate) fn insert(
        &mut self,
        rows: usize,
        cols: usize,
        frac: u32,
        words: Option<Arc<QMatrix>>,
    ) -> DeviceTensor {
        let key = self.next_key;
        self.next_key += 1;
        self.held.insert(key, Held { rows, cols, words });
        DeviceTensor {
            owner: self.owner,
            key,
            rows,
            cols,
            frac,
        }
    }

    /// The key a tensor entered next will get (a device that keeps the words itself stores
    /// them under it before entering it here).
    pub(crate) fn next_key(&self) -> u64 {
        self.next_key
    }

    /// Drops `t` from the table (after the device let its words go).
    pub(crate) fn remove(&mut self, t: &DeviceTensor, device: &str) -> Result<(), DeviceError> {
        self.check(t, device)?;
        self.held.remove(&t.key);
        Ok(())
    }

    /// The words of `t`, kept in host memory.
    fn words(&self, t: &DeviceTensor, device: &str) -> Result<Arc<QMatrix>, DeviceError> {
        self.held(t, device)?.words.clone().ok_or_else(|| {
            DeviceError::Unsupported(format!(
                "{}: {} is kept by the device, not in host memory",
                device,
                t.describe()
            ))
        })
    }
}

/// The error of a device that keeps no tensors (a wrapper that does not pass them on).
fn no_table(device: &str) -> DeviceError {
    DeviceError::Unsupported(format!(
        "{device} keeps no tensors: use the value-based products (matmul) instead"
    ))
}

/// The product `op(A)·op(B)`'s `(m, k, n)`, checked as the value-based products check it.
pub(crate) fn product_shape(
    a: &DeviceTensor,
    b: &DeviceTensor,
    tr: Transposed,
) -> Result<(usize, usize, usize), DeviceError> {
    product_dims((a.rows, a.cols), (b.rows, b.cols), tr)
}

/// `(m, k, n)` of `op(A)·op(B)` for an A of `a = (rows, cols)` and a B of `b`, checked against
/// the contract (inner sizes equal, `k <= MAX_K`): the one check of kept and value-based
/// products alike.
pub(crate) fn product_dims(
    a: (usize, usize),
    b: (usize, usize),
    tr: Transposed,
) -> Result<(usize, usize, usize), DeviceError> {
    let op = |(r, c): (usize, usize), t: bool| if t { (c, r) } else { (r, c) };
    let ((m, k), (kb, n)) = (op(a, tr.a), op(b, tr.b));
    if k != kb {
        let t = |t: bool| if t { "ᵀ" } else { "" };
        return Err(NumericError::Shape(format!(
            "A{} is {m}x{k} and B{} is {kb}x{n}: the left operand's columns must equal the right one's rows",
            t(tr.a),
            t(tr.b)
        ))
        .into());
    }
    if k > systole_core::numeric::MAX_K {
        return Err(NumericError::KTooLong(k).into());
    }
    Ok((m, k, n))
}

/// [`Device::upload`] into host memory: the default of every device.
pub fn upload_to_host<D: Device + ?Sized>(
    dev: &mut D,
    t: &QMatrix,
) -> Result<DeviceTensor, DeviceError> {
    let name = dev.name();
    let table = dev.host_tensors().ok_or_else(|| no_table(&name))?;
    HostTensors::check_room(table.room(), t.data.len(), &name)?;
    Ok(table.insert(t.rows, t.cols, t.frac, Some(Arc::new(t.clone()))))
}

/// [`Device::read_tensor`] from host memory.
pub fn read_from_host<D: Device + ?Sized>(
    dev: &mut D,
    t: &DeviceTensor,
) -> Result<QMatrix, DeviceError> {
    let name = dev.name();
    let table = dev.host_tensors().ok_or_else(|| no_table(&name))?;
    Ok(table.words(t, &name)?.as_ref().clone())
}

/// [`Device::free_tensor`] in host memory.
pub fn free_in_host<D: Device + ?Sized>(dev: &mut D, t: &DeviceTensor) -> Result<(), DeviceError> {
    let name = dev.name();
    let table = dev.host_tensors().ok_or_else(|| no_table(&name))?;
    table.remove(t, &name)
}

/// [`Device::matmul_kept`] on tensors in host memory: the value-based product of the device
/// (so on its array) on the kept words, its result kept beside them. Refused before anything
/// runs when the result does not fit.
pub fn matmul_in_host<D: Device + ?Sized>(
    dev: &mut D,
    a: &DeviceTensor,
    b: &DeviceTensor,
    tr: Transposed,
    out: &OutputSpec,
) -> Result<DeviceTensor, DeviceError> {
    let name = dev.name();
    let table = dev.host_tensors().ok_or_else(|| no_table(&name))?;
    let (wa, wb) = (table.words(a, &name)?, table.words(b, &name)?);
    let (m, _, n) = product_shape(a, b, tr)?;
    HostTensors::check_room(table.room(), m * n, &name)?;
    let c = match (tr.a, tr.b) {
        (false, false) => dev.matmul(&wa, &wb, out)?,
        (false, true) => dev.matmul_nt(&wa, &wb, out)?,
        (true, false) => dev.matmul_tn(&wa, &wb, out)?,
        (true, true) => dev.matmul(&wa.transpose(), &wb.transpose(), out)?,
    };
    let table = dev.host_tensors().ok_or_else(|| no_table(&name))?;
    Ok(table.insert(c.rows, c.cols, c.frac, Some(Arc::new(c))))
}
