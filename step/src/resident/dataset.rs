//! A data set on the board ([`DataSet`]): each image's pixels packed at the bits its values
//! need (digits' 0..=16 in 5 bits, Fashion-MNIST's bytes in 8), one label byte each. A pixel
//! is exact: its value is `pixel as f32 / divisor as f32`, one IEEE division, the very value
//! the host trains with, so packing changes no result.
//!
//! Packing (the wire form of a record and the board's memory alike): image `i` is
//! [`DataSet::image_bytes`] bytes, `ceil(features · bits / 8)`; pixel `j` is the `bits`-bit
//! field starting at bit `j · bits` of them, bit `b` of the image being bit `b % 8` of its
//! byte `b / 8` (least significant first); unused bits of the last byte are 0. At 8 bits this
//! is a byte per pixel (the first protocol's records).

use super::TrainState;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Images packed at `bits` bits a pixel, and their labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataSet {
    /// Pixels per image.
    pub features: usize,
    /// What a pixel is divided by (16 for digits, 255 for Fashion-MNIST).
    pub divisor: u16,
    /// Bits a pixel (1..=8).
    pub bits: u8,
    /// The packed images, [`DataSet::image_bytes`] each.
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
    /// The records' bytes, the feature count, the bits or the divisor do not make a data set.
    #[error("the data set's records are malformed (features {features}, divisor {divisor}, {bits} bits a pixel, {bytes} bytes)")]
    Records {
        /// Pixels per image.
        features: usize,
        /// Divisor.
        divisor: u16,
        /// Bits a pixel.
        bits: u8,
        /// Bytes given.
        bytes: usize,
    },
    /// The data set does not fit the model.
    #[error("{0}")]
    Model(String),
}

/// The fewest bits that hold every pixel up to `max` (at least 1).
pub fn bits_for(max: u8) -> u8 {
    (8 - max.leading_zeros() as u8).max(1)
}

/// Bytes of one image of `features` pixels at `bits` bits each.
pub fn image_bytes(features: usize, bits: u8) -> usize {
    (features * usize::from(bits)).div_ceil(8)
}

/// Appends `pixels` (each below `1 << bits`) packed at `bits` bits to `out`.
fn pack(pixels: &[u8], bits: u8, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + image_bytes(pixels.len(), bits), 0);
    for (j, &p) in pixels.iter().enumerate() {
        let at = j * usize::from(bits);
        let field = u16::from(p) << (at % 8);
        out[start + at / 8] |= field as u8;
        if let Some(next) = out.get_mut(start + at / 8 + 1) {
            *next |= (field >> 8) as u8;
        }
    }
}

/// Pixel `j` of an image packed at `bits` bits.
fn unpack(image: &[u8], bits: u8, j: usize) -> u8 {
    let at = j * usize::from(bits);
    let lo = u16::from(image[at / 8]);
    let hi = image.get(at / 8 + 1).map_or(0, |&b| u16::from(b));
    (((hi << 8 | lo) >> (at % 8)) & ((1 << bits) - 1)) as u8
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

    /// From byte pixels (`len() · features`, one a pixel) packed at `bits` bits; `None` when a
    /// pixel does not fit them or the lengths do not match.
    pub fn from_pixels(
        features: usize,
        divisor: u16,
        bits: u8,
        pixels: &[u8],
        labels: &[u8],
    ) -> Option<DataSet> {
        if !(1..=8).contains(&bits)
            || features == 0
            || pixels.len() != labels.len() * features
            || pixels.iter().any(|&p| u16::from(p) >> bits != 0)
        {
            return None;
        }
        let mut packed = Vec::with_capacity(labels.len() * image_bytes(features, bits));
        for img in pixels.chunks_exact(features) {
            pack(img, bits, &mut packed);
        }
        Some(DataSet {
            features,
            divisor,
            bits,
            pixels: packed,
            labels: labels.to_vec(),
        })
    }

    /// From the host's values (`images`, row-major, `features` each), each of which must be a
    /// byte divided by `divisor` exactly (checked: nothing is uploaded that the board would
    /// turn into other values), packed at the bits their largest pixel needs.
    pub fn from_values(
        images: &[f32],
        labels: &[u8],
        features: usize,
        divisor: u16,
    ) -> Result<DataSet, DataError> {
        let bad = DataError::Records {
            features,
            divisor,
            bits: 8,
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
        let bits = bits_for(pixels.iter().copied().max().unwrap_or(0));
        DataSet::from_pixels(features, divisor, bits, &pixels, labels).ok_or(bad)
    }

    /// Pixel `j` of image `i`.
    pub fn pixel(&self, i: usize, j: usize) -> u8 {
        let n = self.image_bytes();
        unpack(&self.pixels[i * n..(i + 1) * n], self.bits, j)
    }

    /// Bytes of one packed image.
    pub fn image_bytes(&self) -> usize {
        image_bytes(self.features, self.bits)
    }

    /// Bytes of one record on the wire: the packed image, then the label.
    pub fn record_bytes(&self) -> usize {
        self.image_bytes() + 1
    }

    /// Bytes the data set takes in the board's memory: the packed images and the labels.
    pub fn memory_bytes(&self) -> usize {
        self.pixels.len() + self.labels.len()
    }

    /// The records on the wire, image after image.
    pub fn encode_records(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() * self.record_bytes());
        for (img, &l) in self
            .pixels
            .chunks_exact(self.image_bytes())
            .zip(&self.labels)
        {
            out.extend_from_slice(img);
            out.push(l);
        }
        out
    }

    /// From records ([`DataSet::encode_records`]).
    pub fn from_records(
        features: usize,
        divisor: u16,
        bits: u8,
        bytes: &[u8],
    ) -> Result<DataSet, DataError> {
        let n = image_bytes(features, bits);
        if features == 0
            || divisor == 0
            || !(1..=8).contains(&bits)
            || !bytes.len().is_multiple_of(n + 1)
        {
            return Err(DataError::Records {
                features,
                divisor,
                bits,
                bytes: bytes.len(),
            });
        }
        let mut pixels = Vec::with_capacity(bytes.len() / (n + 1) * n);
        let mut labels = Vec::with_capacity(bytes.len() / (n + 1));
        for r in bytes.chunks_exact(n + 1) {
            pixels.extend_from_slice(&r[..n]);
            labels.push(r[n]);
        }
        Ok(DataSet {
            features,
            divisor,
            bits,
            pixels,
            labels,
        })
    }

    /// The images `idx`, in that order, as a data set of their own (a request's batches).
    pub fn select(&self, idx: &[usize]) -> DataSet {
        let n = self.image_bytes();
        DataSet {
            features: self.features,
            divisor: self.divisor,
            bits: self.bits,
            pixels: idx
                .iter()
                .flat_map(|&i| self.pixels[i * n..(i + 1) * n].iter().copied())
                .collect(),
            labels: idx.iter().map(|&i| self.labels[i]).collect(),
        }
    }

    /// The same images packed at `bits` (at least the bits they need; 8 for a board that takes
    /// only byte pixels); `None` when a pixel does not fit.
    pub fn repacked(&self, bits: u8) -> Option<DataSet> {
        let bytes: Vec<u8> = (0..self.len())
            .flat_map(|i| (0..self.features).map(move |j| self.pixel(i, j)))
            .collect();
        DataSet::from_pixels(self.features, self.divisor, bits, &bytes, &self.labels)
    }

    /// The images `idx` as the host's values, row after row. Each pixel value's quotient is
    /// divided once (a soft-float division costs the board's CPU over a hundred cycles; digits
    /// has 17 pixel values).
    pub fn images(&self, idx: &[usize]) -> Vec<f32> {
        let d = f32::from(self.divisor);
        let n = self.image_bytes();
        // The quotients' bits; all ones (a NaN, which no quotient of a byte by a positive
        // divisor is): not divided yet.
        let mut quotient = [u32::MAX; 256];
        let mut x = Vec::with_capacity(idx.len() * self.features);
        for &i in idx {
            let img = &self.pixels[i * n..(i + 1) * n];
            x.extend((0..self.features).map(|j| {
                let p = unpack(img, self.bits, j);
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
        let inputs = state.graph.input.features();
        if inputs != self.features {
            return Err(DataError::Model(format!(
                "the data set's images have {} values, the model takes {inputs}",
                self.features
            )));
        }
        if let Some(i) = self
            .labels
            .iter()
            .position(|&l| usize::from(l) >= state.graph.classes)
        {
            return Err(DataError::Model(format!(
                "label {} of image {i} is not one of the model's {} classes",
                self.labels[i], state.graph.classes
            )));
        }
        Ok(())
    }
}
