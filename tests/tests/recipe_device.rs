//! docs/EXTENDING.md, "A new device backend": a backend is a type that implements `Device`.
//! This one puts the device behind a transport, as a network or PCIe backend would: each
//! operation is a request to a worker thread that owns the accelerator (here the golden
//! model), and the answer comes back on a channel. It runs the conformance body every backend
//! runs, and a transport that corrupts one word fails it.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;
use systole_core::ArrayConfig;
use systole_device::{self as device, Device, DeviceError, DeviceStats};
use systole_golden::{OutputSpec, QMatrix};

mod common;
use common::conformance::{conformance, QUICK};

/// What crosses the transport: one product request, or a counter request.
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
