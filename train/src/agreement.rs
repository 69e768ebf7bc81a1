//! What the ranks of a data-parallel run must share before the first step ([`crate::dist::agree`]):
//! every option that changes the result, the data, and the state training starts from.

use super::checkpoint::Checkpoint;
use super::TrainConfig;
use crate::data::{Dataset, Split};
use crate::dist::{Fnv, Setting};
use systole_device::DeviceSpec;

/// The settings of a run, in the order a mismatch is reported: the device's kind, every option
/// of [`TrainConfig::options`] (the list the resume check uses too), the data, the starting
/// state. Of the device only its kind counts (each rank may drive its own port), `start` the
/// state the run starts from (fresh or resumed).
pub fn run_settings(
    cfg: &TrainConfig,
    device: &DeviceSpec,
    data: &Dataset,
    start: &Checkpoint,
) -> Vec<Setting> {
    let mut settings = vec![Setting::new("--device (its kind)", device.kind())];
    settings.extend(
        cfg.options()
            .into_iter()
            .map(|(name, value)| Setting::new(name, value)),
    );
    settings.extend([
        Setting::new(
            "the data set's contents",
            format!(
                "{} with {}+{} images, digest {:016x}",
                data.name,
                data.train.len(),
                data.test.len(),
                data_digest(data)
            ),
        ),
        Setting::new(
            "the starting state (--resume and checkpoint.json)",
            format!(
                "epoch {} step {}, digest {:016x}",
                start.epoch,
                start.step,
                state_digest(start)
            ),
        ),
    ]);
    settings
}

/// A digest of a data set's shape, images and labels.
pub fn data_digest(data: &Dataset) -> u64 {
    let mut h = Fnv::default();
    for n in [data.channels, data.height, data.width, data.classes] {
        h.write(&(n as u64).to_le_bytes());
    }
    for split in [&data.train, &data.test] {
        digest_split(&mut h, split);
    }
    h.0
}

fn digest_split(h: &mut Fnv, s: &Split) {
    h.write(&(s.len() as u64).to_le_bytes());
    h.write(&s.labels);
    for x in &s.images {
        h.write(&x.to_bits().to_le_bytes());
    }
}

/// A digest of the trained state in a checkpoint (not its options or its history, whose
/// wall-clock times differ from rank to rank).
fn state_digest(ck: &Checkpoint) -> u64 {
    let mut h = Fnv::default();
    let state = (ck.epoch, ck.step, &ck.params, &ck.velocity, &ck.fracs);
    // Serialising plain numbers and strings cannot fail; an empty digest input would only
    // make a mismatch go unnoticed, never a match fail.
    h.write(&serde_json::to_vec(&state).unwrap_or_default());
    h.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_kind_ignores_the_port() {
        let kind = |s: &str| s.parse::<DeviceSpec>().unwrap().kind();
        assert_eq!(kind("bridge:/dev/ttyUSB1@115200"), "bridge");
        assert_eq!(kind("golden"), "golden");
    }

    #[test]
    fn one_changed_pixel_changes_the_data_digest() {
        let split = |x: f32| Split {
            images: vec![0.0, x, 1.0, 0.5],
            labels: vec![3, 7],
        };
        let set = |x| Dataset {
            name: "t".into(),
            channels: 1,
            height: 1,
            width: 2,
            classes: 10,
            train: split(x),
            test: split(0.25),
            byte_divisor: None,
        };
        assert_eq!(data_digest(&set(0.125)), data_digest(&set(0.125)));
        assert_ne!(data_digest(&set(0.125)), data_digest(&set(0.1251)));
    }
}
