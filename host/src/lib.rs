//! The `systole` command line ([`cli`]) and what only it shows: accelerator measurements
//! ([`bench`], [`bench_conv`], [`bench_link`]), the design-space sweep ([`explore`]), loss curves ([`plot`]), run reports ([`report`]) and the hardware
//! guide's generated tables and examples ([`guide`]). The work itself is done by the crates
//! below: `systole-golden` (the golden model), `systole-device` (devices), `systole-train` (the
//! trainer) and `systole-boards` (board flows).
#![deny(missing_docs)]

pub mod bench;
pub mod bench_conv;
pub mod bench_link;
pub mod board_sim;
pub mod cli;
pub mod cli_docs;
pub mod explore;
pub mod guide;
pub mod onnx;
pub mod plot;
pub mod report;
