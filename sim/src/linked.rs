//! The models `build.rs` compiled and linked into this crate (through
//! `systole_testbench::layer`), as the tables `Testbench::linked` drives.

/// A serial-pin image's model: the bridge image or the SoC image.
pub(crate) struct ImageModel {
    /// Array size of the image's accelerator.
    pub size: usize,
    /// Oscillator frequency the image's UART timing was built for.
    pub clock_hz: u32,
    /// Baud rate of the image's UART.
    pub baud: u32,
    /// The compiled model.
    pub linked: &'static systole_testbench::layer::Linked,
    /// The RAM loader of an image with a CPU (the SoC), `None` for the bridge image.
    pub loader: Option<Loader>,
}

/// The SoC image's RAM loader (ports `load_we`, `load_addr`, `load_data`).
pub(crate) struct Loader {
    /// RAM size in bytes.
    pub ram_bytes: u32,
}

include!(concat!(env!("OUT_DIR"), "/models.rs"));
include!(concat!(env!("OUT_DIR"), "/firmware.rs"));
