//! The one list of a run's options: [`TrainConfig::options`]. The checkpoint's resume check
//! ([`TrainConfig::differences`]) and the MPI ranks' agreement
//! ([`crate::agreement::run_settings`]) both read it, so an option added to [`TrainConfig`] is
//! compared by both or by neither, and the list names every field of the struct (an
//! exhaustive pattern, no `..`), so a new field does not compile until it is listed here.

use super::model::ModelSpec;
use super::TrainConfig;

/// The options a resumed run may change: `--epochs` (a run continues to more epochs).
pub const RESUMABLE: &[&str] = &["--epochs"];

/// What [`TrainConfig::options`] writes for an option that is not set.
const NOT_SET: &str = "none";

impl TrainConfig {
    /// Every option of the run as (command-line name, value text), in the order of
    /// `systole train --help`. Equal texts mean equal effect on the run: a float's `Display`
    /// is the shortest text that reads back to the same value.
    pub fn options(&self) -> Vec<(&'static str, String)> {
        // No `..`: a field added to `TrainConfig` is a compile error here until it is listed.
        let TrainConfig {
            model,
            dataset,
            input_scale,
            input_offset,
            train_limit,
            epochs,
            batch,
            lr,
            lr_decay,
            momentum,
            seed,
            precision,
            rounding,
            array,
            word_bits,
            master_bits,
            shards,
            microbatches,
        } = self;
        let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let none = || NOT_SET.to_string();
        let (kind, hidden, channels) = match model {
            ModelSpec::Mlp { hidden } => ("mlp".into(), list(hidden), "none (mlp)".to_string()),
            ModelSpec::Cnn { channels } => ("cnn".into(), "none (cnn)".to_string(), list(channels)),
            ModelSpec::Lenet5 => ("lenet5".into(), none(), none()),
            ModelSpec::Resnet8 => ("resnet8".into(), none(), none()),
            ModelSpec::Graph { source, graph } => {
                // The graph's own bytes, so a changed file is told from the one a run began with.
                let mut wire = Vec::new();
                graph.encode_to(&mut wire);
                let fnv = wire.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                    (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
                });
                (format!("{source} (network {fnv:016x})"), none(), none())
            }
        };
        let or_none = |v: &Option<usize>| v.map_or(NOT_SET.to_string(), |x| x.to_string());
        vec![
            ("--array", array.to_string()),
            ("--model", kind),
            ("--hidden", hidden),
            ("--channels", channels),
            ("--dataset", dataset.to_string()),
            ("--input-scale", input_scale.to_string()),
            ("--input-offset", input_offset.to_string()),
            ("--limit", or_none(train_limit)),
            ("--precision", precision.name().to_string()),
            ("--rounding", rounding.name().to_string()),
            ("--word-bits", word_bits.to_string()),
            ("--master-bits", master_bits.to_string()),
            ("--epochs", epochs.to_string()),
            ("--batch", batch.to_string()),
            ("--lr", lr.to_string()),
            ("--lr-decay", lr_decay.to_string()),
            ("--momentum", momentum.to_string()),
            ("--seed", seed.to_string()),
            ("--shards", or_none(shards)),
            ("--microbatches", or_none(microbatches)),
        ]
    }

    /// The options (other than the [`RESUMABLE`] ones) that differ between `self` (this
    /// command line) and `other`, as command-line phrases naming `other` by `there`: with
    /// `there` = "in the checkpoint", `--lr 0.1 here, 0.05 in the checkpoint`.
    pub fn differences(&self, other: &TrainConfig, there: &str) -> Vec<String> {
        self.options()
            .into_iter()
            .zip(other.options())
            .filter(|((name, a), (_, b))| !RESUMABLE.contains(name) && a != b)
            .map(|((name, a), (_, b))| format!("{name} {a} here, {b} {there}"))
            .collect()
    }

    /// Whether a checkpoint written under `other` can continue under `self`: no option but
    /// the [`RESUMABLE`] ones differs.
    pub fn same_run(&self, other: &TrainConfig) -> bool {
        self.differences(other, "").is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::DatasetSpec;
    use crate::Precision;
    use systole_core::Rounding;

    fn base() -> TrainConfig {
        TrainConfig {
            model: ModelSpec::Mlp { hidden: vec![8] },
            dataset: DatasetSpec::Digits,
            input_scale: 1.0,
            input_offset: 0.0,
            train_limit: None,
            epochs: 2,
            batch: 32,
            lr: 0.05,
            lr_decay: 0.85,
            momentum: 0.9,
            seed: 1,
            precision: Precision::Fixed16,
            rounding: Rounding::Stochastic,
            array: 8,
            word_bits: 16,
            master_bits: 16,
            shards: None,
            microbatches: None,
        }
    }

    /// One changed value per field: each must show as exactly its option in `options()` (and
    /// so in the resume check and the MPI agreement), `--epochs` only in `options()`.
    #[test]
    fn every_field_is_an_option_of_its_own() {
        let b = base();
        let changed: Vec<(&str, TrainConfig)> = vec![
            (
                "--array",
                TrainConfig {
                    array: 4,
                    ..b.clone()
                },
            ),
            (
                "--model",
                TrainConfig {
                    model: ModelSpec::Cnn { channels: vec![8] },
                    ..b.clone()
                },
            ),
            (
                "--hidden",
                TrainConfig {
                    model: ModelSpec::Mlp { hidden: vec![9] },
                    ..b.clone()
                },
            ),
            (
                "--dataset",
                TrainConfig {
                    dataset: DatasetSpec::Npz("set.npz".into()),
                    ..b.clone()
                },
            ),
            (
                "--input-scale",
                TrainConfig {
                    input_scale: 2.0,
                    ..b.clone()
                },
            ),
            (
                "--input-offset",
                TrainConfig {
                    input_offset: -0.5,
                    ..b.clone()
                },
            ),
            (
                "--limit",
                TrainConfig {
                    train_limit: Some(10),
                    ..b.clone()
                },
            ),
            (
                "--precision",
                TrainConfig {
                    precision: Precision::F32,
                    ..b.clone()
                },
            ),
            (
                "--rounding",
                TrainConfig {
                    rounding: Rounding::NearestEven,
                    ..b.clone()
                },
            ),
            (
                "--word-bits",
                TrainConfig {
                    word_bits: 12,
                    ..b.clone()
                },
            ),
            (
                "--master-bits",
                TrainConfig {
                    master_bits: 12,
                    ..b.clone()
                },
            ),
            (
                "--epochs",
                TrainConfig {
                    epochs: 3,
                    ..b.clone()
                },
            ),
            (
                "--batch",
                TrainConfig {
                    batch: 16,
                    ..b.clone()
                },
            ),
            (
                "--lr",
                TrainConfig {
                    lr: 0.1,
                    ..b.clone()
                },
            ),
            (
                "--lr-decay",
                TrainConfig {
                    lr_decay: 1.0,
                    ..b.clone()
                },
            ),
            (
                "--momentum",
                TrainConfig {
                    momentum: 0.5,
                    ..b.clone()
                },
            ),
            (
                "--seed",
                TrainConfig {
                    seed: 2,
                    ..b.clone()
                },
            ),
            (
                "--shards",
                TrainConfig {
                    shards: Some(2),
                    ..b.clone()
                },
            ),
            (
                "--microbatches",
                TrainConfig {
                    microbatches: Some(2),
                    ..b.clone()
                },
            ),
        ];
        for (option, c) in &changed {
            let differing: Vec<&str> = b
                .options()
                .into_iter()
                .zip(c.options())
                .filter(|(x, y)| x != y)
                .map(|((name, _), _)| name)
                .collect();
            let want = match *option {
                "--model" => vec!["--model", "--hidden", "--channels"],
                o => vec![o],
            };
            assert_eq!(differing, want, "changing {option}");
            assert_eq!(b.same_run(c), RESUMABLE.contains(option), "{option}");
        }
    }

    #[test]
    fn differences_name_the_option_and_both_values() {
        let now = TrainConfig {
            lr: 0.1,
            epochs: 5,
            ..base()
        };
        assert_eq!(
            now.differences(&base(), "in the checkpoint"),
            ["--lr 0.1 here, 0.05 in the checkpoint"]
        );
    }
}
