//! `systole.Device`: a device opened as the CLI's `--device` opens it, its operations on numpy
//! arrays of words.

use crate::errors::{device_failure, guard, Failure, Kind};
use crate::words::{to_array, words, Words};
use numpy::ndarray::IxDyn;
use numpy::PyArray;
use pyo3::prelude::*;
use systole_core::numeric::max_frac;
use systole_core::{ArrayConfig, Rounding};
use systole_device::DeviceError;
use systole_golden::tensor::QMatrix;
use systole_golden::{Conv2dGeom, ConvGeom, OutputSpec};

/// A device: where products run. Open one of the kinds the CLI's ``--device`` takes:
///
/// * ``"golden"``: the golden model, the numeric contract in Rust, on this CPU;
/// * ``"verilator"``: the generated HDL of an ``array`` x ``array`` systolic array simulated
///   cycle by cycle by Verilator (sizes 4, 8 and 16 at 16-bit words are built in; other word
///   widths are Verilated at first use, tens of seconds, then cached);
/// * ``"serial:PATH"``: a board running the firmware behind a serial port (or a simulated board,
///   ``systole-board-sim``);
/// * ``"bridge:PATH[@BAUD]"``: a board flashed with ``systole bitstream``.
///
/// Every device returns the golden model's words bit for bit. ``word_bits`` is the array's
/// word width W (8 to 16): operands must be W-bit words and results saturate to W bits.
/// ``buffer_depth``, ``fm_depth`` and ``dsp_pack`` describe the hardware as
/// ``systole emit-verilog`` does (a board's must match the one it was built with).
///
/// A device is used from the thread that opened it; its long operations let other Python
/// threads run meanwhile. ``close()`` (or a ``with`` block) releases a serial port.
#[pyclass(unsendable, module = "systole")]
pub struct Device {
    dev: Option<Box<dyn systole_device::Device>>,
    kind: String,
    config: ArrayConfig,
}

/// Moves a borrow of the device into `Python::detach`'s closure. `detach` runs the closure on
/// this same thread (it only lets other Python threads run meanwhile), so the device, which is
/// not `Send`, never changes threads.
struct OnThisThread<T>(T);
// SAFETY: see above: the value is used only by a closure that runs on the thread that owns it.
#[allow(unsafe_code)]
unsafe impl<T> Send for OnThisThread<T> {}
impl<T> OnThisThread<T> {
    fn get(self) -> T {
        self.0
    }
}

/// The operands' fractional bits and the output's that make the contract's `shift`: the Device
/// API carries `shift = frac_a + frac_b - frac_out` with each operand's below W.
fn fracs(shift: u32, word_bits: u32) -> Result<(u32, u32), Failure> {
    let most = max_frac(word_bits);
    if shift > 2 * most {
        return Err(Failure::new(
            Kind::Range,
            format!(
                "shift {shift} is outside 0..={} at W = {word_bits}: a device's shift is the operands' fractional bits (each at most W - 1 = {most}) less the output's",
                2 * most
            ),
        ));
    }
    let a = shift.min(most);
    Ok((a, shift - a))
}

/// The output format and seed of one operation.
fn spec(rounding: &str, seed: u64) -> Result<(Rounding, u32), Failure> {
    let r = systole::cli::embed::parse_rounding(rounding)
        .map_err(|e| Failure::new(Kind::Option, e.to_string()))?;
    let seed = u32::try_from(seed).map_err(|_| {
        Failure::new(
            Kind::Range,
            format!(
                "seed {seed} is outside 0..={}: the operation seed is a 32-bit word (SEED)",
                u32::MAX
            ),
        )
    })?;
    Ok((r, seed))
}

fn matrix(rows: usize, cols: usize, frac: u32, data: Vec<i16>) -> QMatrix {
    QMatrix {
        rows,
        cols,
        frac,
        data,
    }
}

/// A square kernel's side from weights of shape `(out_ch, in_ch, k, k)`.
fn kernel_of(w: &Words, name: &str) -> Result<usize, Failure> {
    let s = &w.shape;
    if s[2] != s[3] {
        return Err(Failure::new(
            Kind::Shape,
            format!("{name} has shape {s:?}: the array's convolutions take square kernels (out_ch, in_ch, k, k)"),
        ));
    }
    Ok(s[2])
}

/// A pair `(h, w)` from an int or a 2-sequence.
fn pair(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Result<(usize, usize), Failure>> {
    if let Ok(n) = obj.extract::<usize>() {
        return Ok(Ok((n, n)));
    }
    match obj.extract::<Vec<usize>>() {
        Ok(v) if v.len() == 2 => Ok(Ok((v[0], v[1]))),
        _ => Ok(Err(Failure::new(
            Kind::Shape,
            format!("{what} must be (height, width) or one size for both"),
        ))),
    }
}

type Out<'py> = Bound<'py, PyArray<i16, IxDyn>>;

impl Device {
    fn open(&mut self) -> Result<&mut Box<dyn systole_device::Device>, Failure> {
        self.dev.as_mut().ok_or_else(|| {
            Failure::new(
                Kind::Device,
                format!("device {} is closed: open a new systole.Device", self.kind),
            )
        })
    }

    /// Runs one operation with the GIL released.
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        op: impl FnOnce(&mut dyn systole_device::Device) -> Result<QMatrix, DeviceError>,
    ) -> Result<QMatrix, Failure> {
        let dev = OnThisThread(self.open()?.as_mut());
        let op = OnThisThread(op);
        py.detach(move || (op.get())(dev.get()))
            .map_err(|e| device_failure(&e))
    }

    fn words(
        &self,
        obj: &Bound<'_, PyAny>,
        name: &str,
        what: &str,
        ndim: usize,
    ) -> PyResult<Words> {
        let py = obj.py();
        words(obj, name, what, ndim, self.config.word_bits)?.map_err(|f| f.into_pyerr(py))
    }
}

#[pymethods]
impl Device {
    #[new]
    #[pyo3(signature = (kind, array = 8, word_bits = 16, *, buffer_depth = 512, fm_depth = systole_core::config::DEFAULT_FM_DEPTH, dsp_pack = false))]
    fn new(
        py: Python<'_>,
        kind: &str,
        array: usize,
        word_bits: u32,
        buffer_depth: usize,
        fm_depth: usize,
        dsp_pack: bool,
    ) -> PyResult<Self> {
        guard(py, || {
            let config = ArrayConfig {
                buffer_depth,
                fm_depth,
                ..ArrayConfig::square(array).with_word_bits(word_bits)
            }
            .with_dsp_pack(dsp_pack);
            config
                .validate()
                .map_err(|e| Failure::new(Kind::Option, e.to_string()).into_pyerr(py))?;
            // The CLI's parser: a wrong kind is refused before anything opens.
            let spec: systole_device::DeviceSpec = kind
                .parse()
                .map_err(|e| device_failure(&e).into_pyerr(py))?;
            let dev = py
                .detach(move || spec.open(config).map(OnThisThread))
                .map_err(|e| device_failure(&e).into_pyerr(py))?
                .get();
            Ok(Device {
                dev: Some(dev),
                kind: kind.to_string(),
                config,
            })
        })
    }

    /// ``C = A·B`` on the device: ``a`` (M x K) and ``b`` (K x N) integer arrays of W-bit words;
    /// returns the M x N ``int16`` words the hardware returns. Each output is the exact sum
    /// shifted right by ``shift`` bits with ``rounding`` (``"truncate"``, ``"nearest"`` (to even)
    /// or ``"stochastic"``, whose random bits come from ``seed`` by the contract's ``tile_seed``),
    /// then saturated to W bits: the ``SHIFT``, ``ROUNDING`` and ``SEED`` registers of
    /// docs/HARDWARE.md.
    #[pyo3(signature = (a, b, shift = 0, rounding = "nearest", seed = 0))]
    fn matmul<'py>(
        &mut self,
        py: Python<'py>,
        a: &Bound<'py, PyAny>,
        b: &Bound<'py, PyAny>,
        shift: u32,
        rounding: &str,
        seed: u64,
    ) -> PyResult<Out<'py>> {
        guard(py, || {
            let a = self.words(a, "a", "matmul", 2)?;
            let b = self.words(b, "b", "matmul", 2)?;
            let result = (|| -> Result<_, Failure> {
                let (out, fa, fb) = operation(shift, rounding, seed, self.config.word_bits)?;
                let (ma, mb) = (
                    matrix(a.shape[0], a.shape[1], fa, a.data),
                    matrix(b.shape[0], b.shape[1], fb, b.data),
                );
                self.run(py, move |d| d.matmul(&ma, &mb, &out))
            })();
            let c = result.map_err(|f| f.into_pyerr(py))?;
            to_array(py, &c.data, &[c.rows, c.cols])
        })
    }

    /// Forward convolution on the device, as PyTorch's ``conv2d`` without bias: ``x`` of shape
    /// ``(batch, in_ch, h, w)`` and weights ``w`` of shape ``(out_ch, in_ch, k, k)``; returns
    /// ``(batch, out_ch, oh, ow)`` words with ``oh = (h + 2·padding - k) // stride + 1``.
    /// ``shift``, ``rounding`` and ``seed`` as in :meth:`matmul` (the convolution is one product
    /// over the lowered operand, docs/HARDWARE.md).
    #[pyo3(signature = (x, w, stride = 1, padding = 0, shift = 0, rounding = "nearest", seed = 0))]
    #[allow(clippy::too_many_arguments)]
    fn conv2d<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        w: &Bound<'py, PyAny>,
        stride: usize,
        padding: usize,
        shift: u32,
        rounding: &str,
        seed: u64,
    ) -> PyResult<Out<'py>> {
        guard(py, || {
            let x = self.words(x, "x", "conv2d", 4)?;
            let w = self.words(w, "w", "conv2d", 4)?;
            let result = (|| -> Result<_, Failure> {
                let k = kernel_of(&w, "w")?;
                let [b, c, h, wd] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
                let g = geometry(b, c, h, wd, w.shape[0], k, stride, padding)?;
                if w.shape[1] != c {
                    return Err(Failure::new(
                        Kind::Shape,
                        format!(
                            "x has {c} input channels but w takes {} (w is (out_ch, in_ch, k, k))",
                            w.shape[1]
                        ),
                    ));
                }
                let (out, fx, fw) = operation(shift, rounding, seed, self.config.word_bits)?;
                let mx = matrix(b, c * h * wd, fx, x.data);
                let mw = matrix(w.shape[0], c * k * k, fw, w.data);
                let y = self.run(py, move |d| d.conv2d_forward(&mx, &mw, &g, &out))?;
                Ok((y, [b, g.out_ch, g.out_h(), g.out_w()]))
            })();
            let (y, shape) = result.map_err(|f| f.into_pyerr(py))?;
            to_array(py, &y.data, &shape)
        })
    }

    /// Gradient of :meth:`conv2d` with respect to its input, as PyTorch's
    /// ``torch.nn.grad.conv2d_input``: ``dy`` of shape ``(batch, out_ch, oh, ow)``, the weights
    /// ``w`` ``(out_ch, in_ch, k, k)`` and ``input_size`` ``(h, w)`` of the input (or one size
    /// for both); returns ``(batch, in_ch, h, w)`` words.
    #[pyo3(signature = (dy, w, input_size, stride = 1, padding = 0, shift = 0, rounding = "nearest", seed = 0))]
    #[allow(clippy::too_many_arguments)]
    fn conv2d_grad_input<'py>(
        &mut self,
        py: Python<'py>,
        dy: &Bound<'py, PyAny>,
        w: &Bound<'py, PyAny>,
        input_size: &Bound<'py, PyAny>,
        stride: usize,
        padding: usize,
        shift: u32,
        rounding: &str,
        seed: u64,
    ) -> PyResult<Out<'py>> {
        guard(py, || {
            let dy = self.words(dy, "dy", "conv2d_grad_input", 4)?;
            let w = self.words(w, "w", "conv2d_grad_input", 4)?;
            let size = pair(input_size, "input_size")?;
            let result = (|| -> Result<_, Failure> {
                let (h, wd) = size?;
                let k = kernel_of(&w, "w")?;
                let [b, oc, c] = [dy.shape[0], w.shape[0], w.shape[1]];
                let g = geometry(b, c, h, wd, oc, k, stride, padding)?;
                let (out, fd, fw) = operation(shift, rounding, seed, self.config.word_bits)?;
                expect_map(&dy, "dy", [b, oc, g.out_h(), g.out_w()])?;
                let md = matrix(b, oc * g.out_h() * g.out_w(), fd, dy.data);
                let mw = matrix(oc, c * k * k, fw, w.data);
                let dx = self.run(py, move |d| d.conv2d_backward_input(&md, &mw, &g, &out))?;
                Ok((dx, [b, c, h, wd]))
            })();
            let (dx, shape) = result.map_err(|f| f.into_pyerr(py))?;
            to_array(py, &dx.data, &shape)
        })
    }

    /// Gradient of :meth:`conv2d` with respect to its weights, as PyTorch's
    /// ``torch.nn.grad.conv2d_weight``: the input ``x`` ``(batch, in_ch, h, w)``, ``dy``
    /// ``(batch, out_ch, oh, ow)`` and the kernel size ``k``; returns ``(out_ch, in_ch, k, k)``
    /// words.
    #[pyo3(signature = (x, dy, kernel_size, stride = 1, padding = 0, shift = 0, rounding = "nearest", seed = 0))]
    #[allow(clippy::too_many_arguments)]
    fn conv2d_grad_weight<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        dy: &Bound<'py, PyAny>,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        shift: u32,
        rounding: &str,
        seed: u64,
    ) -> PyResult<Out<'py>> {
        guard(py, || {
            let x = self.words(x, "x", "conv2d_grad_weight", 4)?;
            let dy = self.words(dy, "dy", "conv2d_grad_weight", 4)?;
            let result = (|| -> Result<_, Failure> {
                let [b, c, h, wd] = [x.shape[0], x.shape[1], x.shape[2], x.shape[3]];
                let (k, oc) = (kernel_size, dy.shape[1]);
                let g = geometry(b, c, h, wd, oc, k, stride, padding)?;
                let (out, fx, fd) = operation(shift, rounding, seed, self.config.word_bits)?;
                expect_map(&dy, "dy", [b, oc, g.out_h(), g.out_w()])?;
                let mx = matrix(b, c * h * wd, fx, x.data);
                let md = matrix(b, oc * g.out_h() * g.out_w(), fd, dy.data);
                let dw = self.run(py, move |d| d.conv2d_backward_weights(&mx, &md, &g, &out))?;
                Ok((dw, [oc, c, k, k]))
            })();
            let (dw, shape) = result.map_err(|f| f.into_pyerr(py))?;
            to_array(py, &dw.data, &shape)
        })
    }

    /// The device's counters since it was opened or :meth:`reset_stats`: operations, MACs,
    /// simulated cycles, cycles the array was busy (``mac_cycles``), bytes each way and the
    /// link's frames (run.json's ``device`` fields), as a dict of ints.
    fn stats<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guard(py, || {
            let st = self.open().map_err(|f| f.into_pyerr(py))?.stats();
            let json = serde_json::to_string(&st).expect("the counters are plain integers");
            py.import("json")?.getattr("loads")?.call1((json,))
        })
    }

    /// Zeroes the counters.
    fn reset_stats(&mut self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            self.open().map_err(|f| f.into_pyerr(py))?.reset_stats();
            Ok(())
        })
    }

    /// The device's name, e.g. ``"verilator 8x8"``.
    #[getter]
    fn name(&mut self, py: Python<'_>) -> PyResult<String> {
        guard(py, || Ok(self.open().map_err(|f| f.into_pyerr(py))?.name()))
    }

    /// The kind it was opened with (``"golden"``, ``"verilator"``, ``"serial:PATH"``, ...).
    #[getter]
    fn kind(&self) -> String {
        self.kind.clone()
    }

    /// The array size N (an N x N array).
    #[getter]
    fn array(&self) -> usize {
        self.config.size
    }

    /// The word width W in bits.
    #[getter]
    fn word_bits(&self) -> u32 {
        self.config.word_bits
    }

    /// Releases the device (a serial port, a simulator); later operations raise DeviceError.
    fn close(&mut self) {
        self.dev = None;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "systole.Device('{}', array={}, word_bits={}){}",
            self.kind,
            self.config.size,
            self.config.word_bits,
            if self.dev.is_none() { " (closed)" } else { "" }
        )
    }
}

/// A checked convolution geometry.
#[allow(clippy::too_many_arguments)]
fn geometry(
    batch: usize,
    in_ch: usize,
    in_h: usize,
    in_w: usize,
    out_ch: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
) -> Result<Conv2dGeom, Failure> {
    let g = Conv2dGeom {
        batch,
        shape: ConvGeom {
            in_ch,
            in_h,
            in_w,
            out_ch,
            kernel,
            stride,
            pad,
        },
    };
    g.validate()
        .map_err(|e| Failure::new(crate::errors::numeric_kind(&e), e.to_string()))?;
    Ok(g)
}

/// The output spec and the two operands' fractional bits of an operation at `shift`.
fn operation(
    shift: u32,
    rounding: &str,
    seed: u64,
    word_bits: u32,
) -> Result<(OutputSpec, u32, u32), Failure> {
    let (fa, fb) = fracs(shift, word_bits)?;
    let (rounding, seed) = spec(rounding, seed)?;
    Ok((
        OutputSpec {
            frac: 0,
            rounding,
            seed,
        },
        fa,
        fb,
    ))
}

/// Checks a 4-D operand's shape.
fn expect_map(m: &Words, name: &str, shape: [usize; 4]) -> Result<(), Failure> {
    if m.shape != shape {
        return Err(Failure::new(
            Kind::Shape,
            format!(
                "{name} has shape {:?} but this convolution's output is {shape:?} (batch, out_ch, oh, ow)",
                m.shape
            ),
        ));
    }
    Ok(())
}
