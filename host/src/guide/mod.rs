//! The hardware programming guide (docs/HARDWARE.md): its prose is written in the document,
//! its tables and worked examples are generated here from the definitions in `systole_core`
//! (register map, bit fields, gather layout, limits, numeric constants), `systole_hdl::ports`
//! and the golden model, so they cannot drift from the code.
//!
//! A generated part sits between two marker lines:
//!
//! ```text
//! <!-- generated: NAME -->
//! ...
//! <!-- end: NAME -->
//! ```
//!
//! [`render`] replaces every such part with what [`generate`] makes for `NAME` and leaves the
//! rest untouched. `systole guide --write` rewrites the document in place; the test
//! `guide_is_current` fails when the committed document differs from its rendering.

mod examples;
mod soc_mm;
mod tables;
mod timing;

/// Why the guide could not be rendered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuideError {
    /// A marker names no generator.
    #[error("line {line}: no generated part is called `{name}` (known: {known})")]
    Unknown {
        /// The name in the marker.
        name: String,
        /// 1-based line of the marker.
        line: usize,
        /// The names [`generate`] knows.
        known: String,
    },
    /// A part has no end marker.
    #[error("line {line}: `<!-- generated: {name} -->` has no `<!-- end: {name} -->` after it")]
    Unterminated {
        /// The part.
        name: String,
        /// 1-based line of the start marker.
        line: usize,
    },
    /// A generator found its definitions inconsistent (an internal error; the message says
    /// which definition disagrees with which).
    #[error("generating `{name}`: {reason}")]
    Inconsistent {
        /// The part.
        name: &'static str,
        /// What disagrees.
        reason: String,
    },
    /// The golden model refused an example.
    #[error("worked example `{name}`")]
    Golden {
        /// The example.
        name: &'static str,
        /// The golden model's error.
        #[source]
        source: systole_golden::NumericError,
    },
    /// The HDL generator refused a configuration the guide describes.
    #[error("generating `{name}`")]
    Hdl {
        /// The part.
        name: &'static str,
        /// The generator's error.
        #[source]
        source: systole_hdl::HdlError,
    },
}

/// Generated parts, by marker name.
pub const PARTS: [&str; 16] = [
    "ports",
    "registers",
    "fields",
    "gather-words",
    "gather-fields",
    "limits",
    "contract-constants",
    "contract-checks",
    "lr-schedule",
    "example-matmul",
    "example-ksplit",
    "example-conv-forward",
    "example-conv-backward",
    "soc-dma",
    "soc-mm",
    "timing",
];

/// The text of generated part `name`.
pub fn generate(name: &str) -> Result<String, GuideError> {
    match name {
        "ports" => tables::ports(),
        "registers" => Ok(tables::registers()),
        "fields" => Ok(tables::fields()),
        "gather-words" => Ok(tables::gather_words()),
        "gather-fields" => Ok(tables::gather_fields()),
        "limits" => Ok(tables::limits()),
        "contract-constants" => Ok(tables::contract_constants()),
        "contract-checks" => Ok(tables::contract_checks()),
        "lr-schedule" => Ok(tables::lr_schedule()),
        "example-matmul" => examples::matmul(),
        "example-ksplit" => examples::ksplit(),
        "example-conv-forward" => examples::conv_forward(),
        "example-conv-backward" => examples::conv_backward(),
        "soc-dma" => Ok(tables::soc_dma()),
        "soc-mm" => Ok(soc_mm::soc_mm()),
        "timing" => Ok(timing::timing()),
        _ => Err(GuideError::Unknown {
            name: name.to_string(),
            line: 0,
            known: PARTS.join(", "),
        }),
    }
}

const START: &str = "<!-- generated: ";
const END: &str = "<!-- end: ";

/// `doc` with every generated part replaced by its current text.
pub fn render(doc: &str) -> Result<String, GuideError> {
    let mut out = String::with_capacity(doc.len());
    let mut lines = doc.split_inclusive('\n').enumerate();
    while let Some((i, line)) = lines.next() {
        out.push_str(line);
        let Some(rest) = line.trim_end().strip_prefix(START) else {
            continue;
        };
        let name = rest.trim_end_matches("-->").trim().to_string();
        let text = generate(&name).map_err(|e| match e {
            GuideError::Unknown { name, known, .. } => GuideError::Unknown {
                name,
                line: i + 1,
                known,
            },
            e => e,
        })?;
        let end = format!("{END}{name} -->");
        let closed = lines.by_ref().find(|(_, l)| l.trim_end() == end);
        let Some((_, end_line)) = closed else {
            return Err(GuideError::Unterminated { name, line: i + 1 });
        };
        out.push_str(&text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(end_line);
    }
    Ok(out)
}

/// A Markdown table from a header and rows (cells must not contain `|`).
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n|", header.join(" | "));
    for _ in header {
        s.push_str("---|");
    }
    s.push('\n');
    for r in rows {
        s.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    s
}

#[cfg(test)]
mod tests;
