//! A data set on the board ([`DataSet`]: 8-bit pixels as the data sets store them, one label
//! each) and the training steps run on it ([`run_steps`]): each epoch's order drawn with the
//! trainer's own shuffle ([`crate::rng::epoch_order`]), each batch's images the very `f32`
//! values the host trains with (`pixel / divisor`, one IEEE division), so a step on the board
//! is the host's step bit for bit.

use super::TrainState;
use crate::model::Layer;
use crate::profile::{section, Section};
use crate::step::{train_step, Batch};
use crate::{Fixed, Products, StepError};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Images as bytes: `pixels[i·features..][..features]` is image `i`, its value `pixel as f32 /
/// divisor as f32`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSet {
    /// Pixels per image.
    pub features: usize,
    /// What a pixel is divided by (16 for digits, 255 for Fashion-MNIST).
    pub divisor: u16,
    /// `len() · features` pixels.
    pub pixels: Vec<u8>,
    /// One label per image.
    pub labels: Vec<u8>,
}

/// Why a data set cannot go to (or be used on) the board.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// A value is not `pixel / divisor` for a byte `pixel`.
    #[error("image value {index} is not a byte pixel divided by {divisor}: this data set cannot be uploaded as 8-bit pixels")]
    NotPixels {
        /// Index of the value.
        index: usize,
        /// The divisor.
        divisor: u16,
    },
    /// The records' bytes, the feature count or the divisor do not make a data set.
    #[error("the data set's records are malformed (features {features}, divisor {divisor}, {bytes} bytes)")]
    Records {
        /// Pixels per image.
        features: usize,
        /// Divisor.
        divisor: u16,
        /// Bytes given.
        bytes: usize,
    },
    /// The data set does not fit the model.
    #[error("{0}")]
    Model(String),
}

impl DataSet {
    /// Images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True without images.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// From the host's values (`images`, row-major, `features` each), each of which must be a
    /// byte divided by `divisor` exactly (checked: nothing is uploaded that the board would
    /// turn into other values).
    pub fn from_values(
        images: &[f32],
        labels: &[u8],
        features: usize,
        divisor: u16,
    ) -> Result<DataSet, DataError> {
        let bad = DataError::Records {
            features,
            divisor,
            bytes: images.len(),
        };
        if divisor == 0 || features == 0 || images.len() != labels.len() * features {
            return Err(bad);
        }
        let d = f32::from(divisor);
        let mut pixels = Vec::with_capacity(images.len());
        for (index, &v) in images.iter().enumerate() {
            let p = libm::rintf(v * d);
            if !(0.0..=255.0).contains(&p) || (p / d).to_bits() != v.to_bits() {
                return Err(DataError::NotPixels { index, divisor });
            }
            pixels.push(p as u8);
        }
        Ok(DataSet {
            features,
            divisor,
            pixels,
            labels: labels.to_vec(),
        })
    }

    /// Bytes of one record on the wire: the pixels, then the label.
    pub fn record_bytes(&self) -> usize {
        self.features + 1
    }

    /// The records on the wire, image after image.
    pub fn encode_records(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() * self.record_bytes());
        for (img, &l) in self.pixels.chunks_exact(self.features).zip(&self.labels) {
            out.extend_from_slice(img);
            out.push(l);
        }
        out
    }

    /// From records ([`DataSet::encode_records`]).
    pub fn from_records(features: usize, divisor: u16, bytes: &[u8]) -> Result<DataSet, DataError> {
        let rec = features + 1;
        if features == 0 || divisor == 0 || !bytes.len().is_multiple_of(rec) {
            return Err(DataError::Records {
                features,
                divisor,
                bytes: bytes.len(),
            });
        }
        let n = bytes.len() / rec;
        let mut pixels = Vec::with_capacity(n * features);
        let mut labels = Vec::with_capacity(n);
        for r in bytes.chunks_exact(rec) {
            pixels.extend_from_slice(&r[..features]);
            labels.push(r[features]);
        }
        Ok(DataSet {
            features,
            divisor,
            pixels,
            labels,
        })
    }

    /// The images `idx` as the host's values, row after row. Each pixel value's quotient is
    /// divided once (a soft-float division costs the board's CPU over a hundred cycles; digits
    /// has 17 pixel values).
    pub fn images(&self, idx: &[usize]) -> Vec<f32> {
        let d = f32::from(self.divisor);
        // The quotients' bits; all ones (a NaN, which no quotient of a byte by a positive
        // divisor is): not divided yet.
        let mut quotient = [u32::MAX; 256];
        let mut x = Vec::with_capacity(idx.len() * self.features);
        for &i in idx {
            let img = &self.pixels[i * self.features..(i + 1) * self.features];
            x.extend(img.iter().map(|&p| {
                let q = &mut quotient[usize::from(p)];
                if *q == u32::MAX {
                    *q = (f32::from(p) / d).to_bits();
                }
                f32::from_bits(*q)
            }));
        }
        x
    }

    /// Checks the images are the model's input and the labels its classes.
    pub fn check_model(&self, state: &TrainState) -> Result<(), DataError> {
        let inputs = match state.layers.first() {
            Some(Layer::Dense { inp, .. }) => *inp,
            Some(Layer::ConvBlock { in_ch, h, w, .. }) => in_ch * h * w,
            None => 0,
        };
        if inputs != self.features {
            return Err(DataError::Model(format!(
                "the data set's images have {} values, the model takes {inputs}",
                self.features
            )));
        }
        if let Some(i) = self
            .labels
            .iter()
            .position(|&l| usize::from(l) >= state.classes)
        {
            return Err(DataError::Model(format!(
                "label {} of image {i} is not one of the model's {} classes",
                self.labels[i], state.classes
            )));
        }
        Ok(())
    }
}

/// Which steps of an epoch to run: batches `first_batch..first_batch + steps` of epoch
/// `epochs_done + 1` at batch size `batch` and learning rate `lr`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunSteps {
    /// Epochs completed before this one (its order's stream is `epochs_done + 1`).
    pub epochs_done: u64,
    /// The first batch of the epoch to run.
    pub first_batch: usize,
    /// Steps to run.
    pub steps: usize,
    /// Images per batch (the last batch of an epoch may have fewer).
    pub batch: usize,
    /// The epoch's learning rate (a scheduled rate, `systole_core::schedule`).
    pub lr: f32,
}

impl RunSteps {
    /// Batches of an epoch over `n` images.
    pub fn batches(&self, n: usize) -> usize {
        n.div_ceil(self.batch.max(1))
    }

    /// Whether the steps lie inside an epoch over `n` images.
    pub fn fits(&self, n: usize) -> bool {
        self.batch > 0
            && self.steps > 0
            && self
                .first_batch
                .checked_add(self.steps)
                .is_some_and(|end| end <= self.batches(n))
    }
}

/// One step's result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepResult {
    /// The batch's mean loss.
    pub loss: f32,
    /// Correct predictions in the batch.
    pub correct: usize,
}

/// Runs the steps `req` names on `data` in `order` (the epoch's, [`crate::rng::epoch_order`]),
/// updating `state` (tensors, remembered formats, the step counter) exactly as the host
/// trainer's steps do; `each` sees every step's result. `a` is the state's arithmetic
/// ([`TrainState::arith`]); the remembered formats live in `state` between calls. After an
/// error `state` is part-way through a step: drop it.
pub fn run_steps<P: Products>(
    a: &mut Fixed<P>,
    state: &mut TrainState,
    data: &DataSet,
    order: &[usize],
    req: &RunSteps,
    each: &mut dyn FnMut(StepResult),
) -> Result<(), P::Error> {
    if !req.fits(order.len()) {
        return Err(StepError::Shape {
            op: String::from("run steps"),
            msg: format!(
                "batches {}..{} of an epoch of {} batches",
                req.first_batch,
                req.first_batch.saturating_add(req.steps),
                req.batches(order.len())
            ),
        }
        .into());
    }
    a.fracs = core::mem::take(&mut state.fracs);
    for b in req.first_batch..req.first_batch + req.steps {
        let idx = &order[b * req.batch..((b + 1) * req.batch).min(order.len())];
        let (images, labels) = {
            let _images = section(Section::BatchImages);
            let labels: Vec<u8> = idx.iter().map(|&i| data.labels[i]).collect();
            (data.images(idx), labels)
        };
        let batch = Batch {
            layers: &state.layers,
            classes: state.classes,
            images: &images,
            labels: &labels,
        };
        let (loss, correct) = train_step(
            a,
            &batch,
            &mut state.params,
            &mut state.velocity,
            (state.step, req.lr, state.momentum),
        )?;
        state.step += 1;
        each(StepResult { loss, correct });
    }
    state.fracs = core::mem::take(&mut a.fracs);
    Ok(())
}
