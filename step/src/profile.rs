//! Where a step spends its CPU cycles (feature `profile`; without it every [`section`] is
//! nothing): the board's firmware gives its cycle counter ([`set_clock`]) and reads the table
//! back ([`encode`], `STEP_PROFILE`); the host decodes it ([`decode`]).
//!
//! Cycles are charged exclusively: a section's own cycles exclude those of the sections opened
//! inside it (the drivers' run of a product is `Drivers`, not `Product`), so the rows add up
//! to the step's cycles ([`Section::Step`] keeps only what no other section claims: the op
//! names, the remembered-format look-ups, the step's own allocations). Only plain atomic loads
//! and stores are used (no read-modify-write): the SoC's CPU has no AMO instructions, and the
//! board runs one step at a time.

/// A part of the step whose cycles are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Section {
    /// Time outside every section (between steps, the requests' own work): not reported.
    Outside = 0,
    /// The step's own glue: op names, remembered formats, allocations, the layer walk.
    Step,
    /// A batch's images from the resident bytes (`pixel / divisor`) and its labels.
    BatchImages,
    /// Host values into fixed point: the input batch and the loss gradient.
    Import,
    /// Fixed point to host values: the logits.
    ToHost,
    /// Softmax cross-entropy (`exp`, `ln`, the gradient).
    Softmax,
    /// A product's own work around the drivers: narrowing, bounds, format choice, saturation
    /// scans, retries' bookkeeping, chunk sums.
    Product,
    /// The products' backend: the board's tile and conv drivers (operand traffic and the array).
    Drivers,
    /// Bias add (format choice and conversion).
    BiasAdd,
    /// Bias gradient.
    BiasGrad,
    /// ReLU and its derivative.
    Relu,
    /// The SGD update with momentum.
    Sgd,
}

/// Sections, in table order.
pub const SECTIONS: usize = 12;

impl Section {
    /// Every section, in table order.
    pub const ALL: [Section; SECTIONS] = [
        Section::Outside,
        Section::Step,
        Section::BatchImages,
        Section::Import,
        Section::ToHost,
        Section::Softmax,
        Section::Product,
        Section::Drivers,
        Section::BiasAdd,
        Section::BiasGrad,
        Section::Relu,
        Section::Sgd,
    ];

    /// Its name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Section::Outside => "outside the step",
            Section::Step => "step glue (op names, formats map, allocations)",
            Section::BatchImages => "batch images from resident bytes",
            Section::Import => "import (input, loss gradient)",
            Section::ToHost => "logits to host values",
            Section::Softmax => "softmax cross-entropy",
            Section::Product => "products' own work (narrow, bounds, scans)",
            Section::Drivers => "drivers (operands, array, results)",
            Section::BiasAdd => "bias add",
            Section::BiasGrad => "bias gradient",
            Section::Relu => "ReLU and its derivative",
            Section::Sgd => "SGD update with momentum",
        }
    }
}

/// Bytes of one section's entry in [`encode`]'s form: cycles u32, entries u32.
pub const ENTRY_BYTES: usize = 8;

/// One section's total: its exclusive cycles and how often it was entered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SectionCycles {
    /// Exclusive cycles (wrapping at 2^32).
    pub cycles: u32,
    /// Times entered.
    pub entries: u32,
}

/// Reads [`encode`]'s form (one entry per section, in table order); `None` if it is not one.
pub fn decode(bytes: &[u8]) -> Option<[SectionCycles; SECTIONS]> {
    if bytes.len() != SECTIONS * ENTRY_BYTES {
        return None;
    }
    let mut out = [SectionCycles::default(); SECTIONS];
    for (o, e) in out.iter_mut().zip(bytes.chunks_exact(ENTRY_BYTES)) {
        o.cycles = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
        o.entries = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
    }
    Some(out)
}

// Compiled for the unit tests too (they call it directly; the step's sections stay no-ops).
#[cfg(any(feature = "profile", test))]
mod counting;
#[cfg(feature = "profile")]
pub use counting::{encode, reset, section, set_clock, totals, Open};

/// Without the feature: an open section is nothing.
#[cfg(not(feature = "profile"))]
pub struct Open;

/// Without the feature: a section is nothing.
#[cfg(not(feature = "profile"))]
#[inline(always)]
pub fn section(_s: Section) -> Open {
    Open
}
