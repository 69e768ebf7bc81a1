//! A `--device` value, parsed once into [`DeviceSpec`]: the CLI's value parser, the Python
//! package and [`crate::open`] all read it through [`DeviceSpec::from_str`].

use crate::DeviceError;
use std::fmt;
use std::str::FromStr;

/// Where products run, as a `--device` value names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSpec {
    /// `golden`: the golden model, the numeric contract in Rust, on this CPU.
    Golden,
    /// `verilator`: the generated HDL simulated by Verilator in this process.
    Verilator,
    /// `serial:PATH`: a board running the firmware behind a serial port (or a simulated
    /// board's pty).
    Serial {
        /// The port.
        path: String,
    },
    /// `bridge:PATH[@BAUD]`: a board flashed with `systole bitstream` (the CPU-less UART
    /// bridge); the baud rate defaults to [`crate::bridge::DEFAULT_BAUD`], the one the board
    /// flow builds.
    Bridge {
        /// The port.
        path: String,
        /// The line rate, bits per second.
        baud: u32,
    },
}

/// The `--device` forms, for help texts and messages.
pub const DEVICE_CHOICES: &str = "golden, verilator, serial:PATH or bridge:PATH[@BAUD]";

impl DeviceSpec {
    /// The kind alone: `golden`, `verilator`, `serial` or `bridge` (what must agree between
    /// runs that share a checkpoint; the port may differ).
    pub fn kind(&self) -> &'static str {
        match self {
            DeviceSpec::Golden => "golden",
            DeviceSpec::Verilator => "verilator",
            DeviceSpec::Serial { .. } => "serial",
            DeviceSpec::Bridge { .. } => "bridge",
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = DeviceError;

    fn from_str(s: &str) -> Result<Self, DeviceError> {
        match s {
            "golden" => return Ok(DeviceSpec::Golden),
            "verilator" => return Ok(DeviceSpec::Verilator),
            _ => {}
        }
        if let Some(path) = s.strip_prefix("serial:") {
            if path.is_empty() {
                return Err(DeviceError::BadSpec(format!(
                    "'{s}' names no serial port: write serial:PATH, e.g. serial:/dev/ttyUSB0"
                )));
            }
            return Ok(DeviceSpec::Serial { path: path.into() });
        }
        let Some(rest) = s.strip_prefix("bridge:") else {
            return Err(DeviceError::UnknownDevice(s.to_string()));
        };
        match (crate::bridge::parse_spec(rest), rest.rsplit_once('@')) {
            (Some((path, baud)), _) => Ok(DeviceSpec::Bridge {
                path: path.into(),
                baud,
            }),
            (None, Some((path, baud))) if !path.is_empty() => Err(DeviceError::BadSpec(format!(
                "'{baud}' after the '@' of '{s}' is not a baud rate: give bits per second from 1 to {}, e.g. bridge:{path}@115200",
                u32::MAX
            ))),
            (None, _) => Err(DeviceError::BadSpec(format!(
                "'{s}' names no serial port: write bridge:PATH or bridge:PATH@BAUD, e.g. bridge:/dev/ttyUSB1@115200"
            ))),
        }
    }
}

/// The value as it is written on the command line (the bridge's default baud rate left out),
/// so it parses back to the same spec.
impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Golden | DeviceSpec::Verilator => f.write_str(self.kind()),
            DeviceSpec::Serial { path } => write!(f, "serial:{path}"),
            DeviceSpec::Bridge { path, baud } if *baud == crate::bridge::DEFAULT_BAUD => {
                write!(f, "bridge:{path}")
            }
            DeviceSpec::Bridge { path, baud } => write!(f, "bridge:{path}@{baud}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_prints_back() {
        let baud = crate::bridge::DEFAULT_BAUD;
        for (text, want) in [
            ("golden", DeviceSpec::Golden),
            ("verilator", DeviceSpec::Verilator),
            (
                "serial:/dev/pts/3",
                DeviceSpec::Serial {
                    path: "/dev/pts/3".into(),
                },
            ),
            (
                "bridge:/dev/ttyUSB1",
                DeviceSpec::Bridge {
                    path: "/dev/ttyUSB1".into(),
                    baud,
                },
            ),
            (
                "bridge:COM3@115200",
                DeviceSpec::Bridge {
                    path: "COM3".into(),
                    baud: 115_200,
                },
            ),
            // The last '@' ends the path: a path may hold one.
            (
                "bridge:/dev/a@b@9600",
                DeviceSpec::Bridge {
                    path: "/dev/a@b".into(),
                    baud: 9600,
                },
            ),
        ] {
            let spec: DeviceSpec = text.parse().unwrap();
            assert_eq!(spec, want, "{text}");
            assert_eq!(
                spec.to_string().parse::<DeviceSpec>().unwrap(),
                spec,
                "{text}"
            );
        }
        let explicit: DeviceSpec = format!("bridge:/dev/x@{baud}").parse().unwrap();
        assert_eq!(explicit.to_string(), "bridge:/dev/x");
        assert_eq!(explicit.kind(), "bridge");
    }

    #[test]
    fn a_wrong_value_says_what_is_wrong() {
        for (text, want) in [
            ("fpga", "unknown device 'fpga': use golden, verilator"),
            ("Golden", "unknown device 'Golden'"),
            ("serial:", "'serial:' names no serial port"),
            ("bridge:", "'bridge:' names no serial port"),
            ("bridge:@9600", "names no serial port"),
            ("bridge:/dev/x@fast", "'fast' after the '@'"),
            ("bridge:/dev/x@0", "'0' after the '@'"),
            ("bridge:/dev/x@99999999999", "is not a baud rate"),
        ] {
            let e = text.parse::<DeviceSpec>().unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
