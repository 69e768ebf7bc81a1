//! docs/EXTENDING.md, "A new device backend", both ways in.
//!
//! A new transport to the array is a [`Link`]: the five bus calls of `AcceleratorBus` and the
//! link's name, plus the parts it has (here a [`Meter`]: it counts its traffic). This one
//! carries each bus call over a channel to a worker thread that owns the accelerator (the
//! Verilated array), as a network or PCIe link would; `BusDevice::on_link` makes it a device.
//! It runs the conformance body every backend runs, its counts reach the device's stats, and
//! the same link flipping one bit of the C rows it carries fails the body.
//!
//! Something else that computes the contract implements `Device` itself: the second half puts
//! the golden model behind a channel, a request an operation.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;
use systole_core::bus::{Beat, RowRead};
use systole_core::{AcceleratorBus, ArrayConfig};
use systole_device::backend::{BusDevice, Link, Meter, Traffic};
use systole_device::{self as device, Device, DeviceError, DeviceStats};
use systole_golden::{OutputSpec, QMatrix};
use systole_sim::VerilatedArray;

mod common;
use common::conformance::{conformance, QUICK};

/// A row write as it crosses the link: bank, row, words.
type Row = (u8, u16, Vec<i16>);

/// One bus call as it crosses the link, its words owned as a wire would carry them.
enum Call {
    ReadReg(u8),
    WriteReg(u8, u32),
    Beat(Option<Row>, Option<Row>, Option<RowRead>),
    Idle(u32),
    WriteFm(u32, Vec<i16>),
}

impl Call {
    /// Bytes the call takes on the wire: a tag byte and its fields.
    fn bytes(&self) -> u64 {
        let row = |r: &Option<Row>| r.as_ref().map_or(0, |(_, _, w)| 3 + 2 * w.len() as u64);
        1 + match self {
            Call::ReadReg(_) => 1,
            Call::WriteReg(..) | Call::Idle(_) => 5,
            Call::Beat(a, b, c) => row(a) + row(b) + if c.is_some() { 3 } else { 0 },
            Call::WriteFm(_, w) => 4 + 2 * w.len() as u64,
        }
    }
}

/// The far end's answer to one call: a register's value and a C row's words (either may be
/// empty), or what went wrong there.
type Answer = Result<(u32, Vec<i16>), String>;

/// A failure of the link or of the accelerator behind it.
#[derive(Debug)]
struct ChannelError(String);

impl std::fmt::Display for ChannelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "channel link: {}", self.0)
    }
}

impl std::error::Error for ChannelError {}

/// The link: calls go out on one channel, answers come back on the other.
struct ChannelLink {
    calls: Option<Sender<Call>>,
    answers: Receiver<Answer>,
    worker: Option<JoinHandle<()>>,
    traffic: Traffic,
    /// A fault to inject: flip the lowest bit of the first word of every C row carried back.
    corrupt: bool,
}

impl ChannelLink {
    /// Starts the worker, which opens the Verilated array of `config` on its own thread (the
    /// far end owns its accelerator); `NotBuilt` when this build has no such model.
    fn spawn(config: ArrayConfig, corrupt: bool) -> Result<Self, DeviceError> {
        let (to_worker, calls) = channel::<Call>();
        let (to_host, answers) = channel::<Answer>();
        let (opened, open_result) = channel();
        let worker = std::thread::spawn(move || {
            let mut array = match VerilatedArray::new(&config) {
                Ok(a) => a,
                Err(e) => return drop(opened.send(Err(e))),
            };
            drop(opened.send(Ok(())));
            // The loop ends when the host drops its end of the calls.
            for call in calls {
                let answer = serve(&mut array, call).map_err(|e| e.to_string());
                if to_host.send(answer).is_err() {
                    return;
                }
            }
        });
        let link = ChannelLink {
            calls: Some(to_worker),
            answers,
            worker: Some(worker),
            traffic: Traffic::default(),
            corrupt,
        };
        match open_result.recv() {
            Ok(Ok(())) => Ok(link),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(DeviceError::Unsupported("the worker ended early".into())),
        }
    }

    /// Sends `call` and waits for its answer, counting both ways.
    fn exchange(&mut self, call: Call) -> Result<(u32, Vec<i16>), ChannelError> {
        self.traffic.frames += 1;
        self.traffic.round_trips += 1;
        self.traffic.bytes_out += call.bytes();
        let sent = self.calls.as_ref().map(|c| c.send(call));
        if !matches!(sent, Some(Ok(()))) {
            return Err(ChannelError("the worker is gone".into()));
        }
        let (reg, mut words) = self
            .answers
            .recv()
            .map_err(|_| ChannelError("the worker is gone".into()))?
            .map_err(ChannelError)?;
        self.traffic.bytes_in += 4 + 2 * words.len() as u64;
        if let (true, Some(w)) = (self.corrupt, words.first_mut()) {
            *w ^= 1;
        }
        Ok((reg, words))
    }
}

/// A row write as the bus takes it.
fn row_write(r: &Option<Row>) -> Option<systole_core::bus::RowWrite<'_>> {
    r.as_ref()
        .map(|(bank, row, data)| systole_core::bus::RowWrite {
            bank: *bank,
            row: *row,
            data,
        })
}

/// Runs one call on the far end's accelerator.
fn serve(bus: &mut VerilatedArray, call: Call) -> Result<(u32, Vec<i16>), systole_sim::SimError> {
    match call {
        Call::ReadReg(addr) => Ok((bus.read_reg(addr)?, Vec::new())),
        Call::WriteReg(addr, value) => bus.write_reg(addr, value).map(|()| (0, Vec::new())),
        Call::Beat(a, b, c) => {
            let mut out = vec![0; if c.is_some() { bus.config().size } else { 0 }];
            let beat = Beat {
                a: row_write(&a),
                b: row_write(&b),
                c,
            };
            bus.beat(&beat, &mut out).map(|()| (0, out))
        }
        Call::Idle(cycles) => bus.idle(cycles).map(|()| (0, Vec::new())),
        Call::WriteFm(addr, words) => bus.write_fm(addr, &words).map(|()| (0, Vec::new())),
    }
}

impl AcceleratorBus for ChannelLink {
    type Error = ChannelError;

    fn read_reg(&mut self, addr: u8) -> Result<u32, ChannelError> {
        Ok(self.exchange(Call::ReadReg(addr))?.0)
    }

    fn write_reg(&mut self, addr: u8, value: u32) -> Result<(), ChannelError> {
        self.exchange(Call::WriteReg(addr, value)).map(drop)
    }

    fn beat(&mut self, beat: &Beat<'_>, c_out: &mut [i16]) -> Result<(), ChannelError> {
        let own = |w: Option<systole_core::bus::RowWrite<'_>>| {
            w.map(|w| (w.bank, w.row, w.data.to_vec()))
        };
        let (_, words) = self.exchange(Call::Beat(own(beat.a), own(beat.b), beat.c))?;
        if beat.c.is_some() {
            c_out.copy_from_slice(&words);
        }
        Ok(())
    }

    fn idle(&mut self, cycles: u32) -> Result<(), ChannelError> {
        self.exchange(Call::Idle(cycles)).map(drop)
    }

    fn write_fm(&mut self, addr: u32, words: &[i16]) -> Result<(), ChannelError> {
        self.exchange(Call::WriteFm(addr, words.to_vec())).map(drop)
    }
}

/// Its name, and the one part it has: it counts its traffic. No board operations, no training:
/// the device runs the tile driver over the bus and keeps tensors in host memory.
impl Link for ChannelLink {
    const KIND: &'static str = "channel";

    fn meter(&mut self) -> Option<&mut dyn Meter<ChannelError>> {
        Some(self)
    }
}

impl Meter<ChannelError> for ChannelLink {
    fn traffic(&self) -> Traffic {
        self.traffic
    }
}

impl Drop for ChannelLink {
    fn drop(&mut self) {
        // Closing the calls ends the worker's loop.
        drop(self.calls.take());
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// The device on a channel link to a 4x4 array, `None` (with a message) when this build has no
/// Verilated model.
fn channel_device(corrupt: bool) -> Option<BusDevice<ChannelLink>> {
    let config = ArrayConfig::square(4);
    let link = match ChannelLink::spawn(config, corrupt) {
        Ok(link) => link,
        Err(e @ DeviceError::NotBuilt { .. }) => {
            eprintln!("SKIPPED the channel link: {e}");
            return None;
        }
        Err(e) => panic!("channel link: {e}"),
    };
    Some(BusDevice::on_link(config, link, "worker thread").unwrap())
}

#[test]
fn a_new_link_passes_conformance_and_its_counts_reach_the_stats() {
    let Some(mut dev) = channel_device(false) else {
        return;
    };
    assert_eq!(dev.name(), "channel 4x4 at worker thread");
    conformance(&mut dev, &QUICK);
    // Everything the body ran crossed the link, and the device took its counts from it.
    let st = dev.stats();
    assert!(st.frames > 0 && st.frames == st.round_trips, "{st:?}");
    assert!(st.bytes_to_device > 0 && st.bytes_from_device > 0, "{st:?}");
}

#[test]
fn the_same_link_flipping_one_bit_of_a_c_row_fails_conformance() {
    let Some(mut dev) = channel_device(true) else {
        return;
    };
    let body = std::panic::AssertUnwindSafe(|| conformance(&mut dev, &QUICK));
    let failed = std::panic::catch_unwind(body).expect_err("a corrupting link must fail");
    let message = failed.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("golden model says"), "{message}");
}

// The other way in: a `Device` of its own.

/// What crosses the second transport: one product request, or a counter request.
enum Request {
    Matmul(
        QMatrix,
        QMatrix,
        OutputSpec,
        Sender<Result<QMatrix, DeviceError>>,
    ),
    Stats(Sender<DeviceStats>),
    ResetStats,
}

/// A device whose operations run on the far side of a channel.
struct ChannelDevice {
    config: ArrayConfig,
    to_worker: Option<Sender<Request>>,
    worker: Option<JoinHandle<()>>,
    /// A transport fault to inject: flip the lowest bit of the last word of every answer.
    corrupt: bool,
}

impl ChannelDevice {
    /// Starts the worker that owns `inner` (the "board" at the far end).
    fn spawn(mut inner: Box<dyn Device + Send>, corrupt: bool) -> Self {
        let config = *inner.config();
        let (to_worker, requests): (Sender<Request>, Receiver<Request>) = channel();
        let worker = std::thread::spawn(move || {
            for request in requests {
                // A dropped answer channel means the caller gave up: nothing to tell it.
                match request {
                    Request::Matmul(a, b, out, reply) => {
                        let _ = reply.send(inner.matmul(&a, &b, &out));
                    }
                    Request::Stats(reply) => {
                        let _ = reply.send(inner.stats());
                    }
                    Request::ResetStats => inner.reset_stats(),
                }
            }
        });
        ChannelDevice {
            config,
            to_worker: Some(to_worker),
            worker: Some(worker),
            corrupt,
        }
    }

    fn send(&self, request: Request) {
        self.to_worker
            .as_ref()
            .expect("the worker runs until drop")
            .send(request)
            .expect("the worker ended early");
    }
}

impl Device for ChannelDevice {
    fn name(&self) -> String {
        format!("channel {}x{}", self.config.size, self.config.size)
    }

    fn config(&self) -> &ArrayConfig {
        &self.config
    }

    fn matmul(
        &mut self,
        a: &QMatrix,
        b: &QMatrix,
        out: &OutputSpec,
    ) -> Result<QMatrix, DeviceError> {
        let (reply, answer) = channel();
        self.send(Request::Matmul(a.clone(), b.clone(), *out, reply));
        let mut c = answer.recv().expect("the worker ended early")?;
        if self.corrupt {
            if let Some(last) = c.data.last_mut() {
                *last ^= 1;
            }
        }
        Ok(c)
    }

    fn stats(&self) -> DeviceStats {
        let (reply, answer) = channel();
        self.send(Request::Stats(reply));
        answer.recv().expect("the worker ended early")
    }

    fn reset_stats(&mut self) {
        self.send(Request::ResetStats);
    }
}

impl Drop for ChannelDevice {
    fn drop(&mut self) {
        // Closing the channel ends the worker's loop.
        drop(self.to_worker.take());
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

fn golden(size: usize) -> Box<dyn Device + Send> {
    Box::new(device::golden::GoldenDevice::new(ArrayConfig::square(size)).unwrap())
}

#[test]
fn a_backend_behind_a_channel_passes_conformance() {
    let mut dev = ChannelDevice::spawn(golden(4), false);
    conformance(&mut dev, &QUICK);
    assert_eq!(dev.name(), "channel 4x4");
}

#[test]
#[should_panic(expected = "golden model says")]
fn a_transport_that_flips_one_bit_fails_conformance() {
    let mut dev = ChannelDevice::spawn(golden(4), true);
    conformance(&mut dev, &QUICK);
}
