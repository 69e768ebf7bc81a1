//! A resumed run refuses a checkpoint with any field wrong, naming the file and the field: a
//! changed weight (the checksum), remembered formats out of range, a step counter that does not
//! fit the epochs, a tensor of the wrong shape.

use super::*;
use crate::data::{self, Dataset};
use crate::model::ModelSpec;
use crate::run::{run, RunOptions};
use crate::{Precision, Quiet};
use serde_json::Value;

fn cfg(epochs: usize) -> TrainConfig {
    TrainConfig {
        model: ModelSpec::Mlp { hidden: vec![8] },
        dataset: crate::data::DatasetSpec::Digits,
        input_scale: 1.0,
        input_offset: 0.0,
        train_limit: Some(64),
        epochs,
        batch: 32,
        lr: 0.05,
        lr_decay: 1.0,
        momentum: 0.9,
        seed: 1,
        precision: Precision::Fixed16,
        rounding: systole_core::Rounding::NearestEven,
        array: 4,
        word_bits: 16,
        master_bits: 16,
        shards: None,
        microbatches: None,
    }
}

fn opts(dir: &Path, resume: bool) -> RunOptions {
    RunOptions {
        device: systole_device::DeviceSpec::Golden,
        host_step: false,
        checkpoint_every: 1,
        check: false,
        out: Some(dir.to_path_buf()),
        resume,
        overwrite: false,
        trace: None,
    }
}

/// A run folder holding one epoch's checkpoint; the data set.
fn one_epoch() -> (tempfile::TempDir, Dataset) {
    let d = data::load("digits").unwrap();
    let dir = tempfile::tempdir().unwrap();
    run(&cfg(1), &d, &opts(dir.path(), false), &mut Quiet).unwrap();
    (dir, d)
}

/// Rewrites the checkpoint in `dir` through `edit`; `resum` recomputes its checksum (so the
/// field itself must be caught), else the old one stays.
fn edit(dir: &Path, resum: bool, edit: impl FnOnce(&mut Value)) {
    let p = dir.join(FILE_NAME);
    let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    let old = v.as_object_mut().unwrap().remove(CHECKSUM).unwrap();
    edit(&mut v);
    let sum = if resum { checksum(&v).into() } else { old };
    v.as_object_mut().unwrap().insert(CHECKSUM.into(), sum);
    std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
}

/// Resuming to 2 epochs fails naming the file and `field`.
fn refused(dir: &Path, d: &Dataset, field: &str) {
    let e = run(&cfg(2), d, &opts(dir, true), &mut Quiet).unwrap_err();
    let text = e.to_string();
    let file = dir.join(FILE_NAME).display().to_string();
    assert!(text.contains(&file) && text.contains(field), "{text}");
}

#[test]
fn an_intact_checkpoint_resumes() {
    let (dir, d) = one_epoch();
    run(&cfg(2), &d, &opts(dir.path(), true), &mut Quiet).unwrap();
}

/// Values whose decimal form a fast float parser reads one unit off (as a board run wrote
/// them): the file still reads back to the bytes its checksum covers.
#[test]
fn floats_read_back_exactly_for_the_checksum() {
    let (dir, d) = one_epoch();
    edit(dir.path(), true, |v| {
        v["history"][0]["test_acc"] = serde_json::json!(13.927577018737793f64);
        v["history"][0]["seconds"] = serde_json::json!(0.014251583f64);
    });
    run(&cfg(2), &d, &opts(dir.path(), true), &mut Quiet).unwrap();
}

#[test]
fn a_changed_weight_fails_the_checksum() {
    let (dir, d) = one_epoch();
    edit(dir.path(), false, |v| {
        let w = &mut v["params"][0]["Fixed"]["data"][3];
        *w = (w.as_i64().unwrap() + 1).into();
    });
    refused(dir.path(), &d, "`checksum`");
}

#[test]
fn remembered_formats_out_of_range_are_refused() {
    let (dir, d) = one_epoch();
    edit(dir.path(), true, |v| {
        let fracs = v["fracs"].as_object_mut().unwrap();
        let first = fracs.keys().next().unwrap().clone();
        fracs.insert(first, 99.into());
    });
    refused(dir.path(), &d, "`fracs.");
}

#[test]
fn a_step_counter_that_does_not_fit_the_epochs_is_refused() {
    let (dir, d) = one_epoch();
    edit(dir.path(), true, |v| v["step"] = 5.into());
    refused(dir.path(), &d, "`step`");
}

#[test]
fn a_velocity_of_the_wrong_shape_is_refused() {
    let (dir, d) = one_epoch();
    edit(dir.path(), true, |v| {
        let t = &mut v["velocity"][1]["Fixed"];
        let (r, c) = (t["rows"].as_u64().unwrap(), t["cols"].as_u64().unwrap());
        t["rows"] = c.into();
        t["cols"] = r.into();
        if r == c {
            t["rows"] = (r + 1).into();
        }
    });
    refused(dir.path(), &d, "`velocity[1]");
}
