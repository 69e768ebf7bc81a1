//! numpy `.npz` archives holding `x_train`, `y_train`, `x_test` and `y_test`, as
//! `np.savez(FILE, x_train=..., y_train=..., x_test=..., y_test=...)` (or `savez_compressed`)
//! writes them.

use super::array::{assemble, Array, Parts};
use super::{npy, zip, DataError, Dataset, Scaling};
use std::path::Path;
use systole_core::limits::MAX_DATA_FILE_BYTES;

/// The members an npz set must hold, in [`Parts`] order.
pub const KEYS: [&str; 4] = ["x_train", "y_train", "x_test", "y_test"];

/// The set in the npz file `path`, named `name`.
pub fn load(path: &Path, name: &str, scaling: Scaling) -> Result<Dataset, DataError> {
    if !path.is_file() {
        return Err(DataError::Missing {
            path: path.to_path_buf(),
            looked_for: "an .npz file".into(),
        });
    }
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let what = path.display().to_string();
    if std::fs::metadata(path).map_err(io)?.len() > MAX_DATA_FILE_BYTES {
        return Err(DataError::Format {
            what,
            why: format!("larger than the {MAX_DATA_FILE_BYTES} bytes systole reads"),
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    parse(&bytes, &what, name, scaling)
}

/// The set in an npz archive's bytes (`what` names the file in errors), named `name`.
pub fn parse(bytes: &[u8], what: &str, name: &str, scaling: Scaling) -> Result<Dataset, DataError> {
    let bad = |why: String| DataError::Format {
        what: what.to_string(),
        why,
    };
    let members = zip::members(bytes).map_err(|e| {
        bad(format!(
            "{e}: an .npz archive from np.savez or np.savez_compressed is needed"
        ))
    })?;
    let mut arrays = Vec::with_capacity(4);
    for key in KEYS {
        let file = format!("{key}.npy");
        let m = members
            .iter()
            .find(|m| m.name == file)
            .or_else(|| members.iter().find(|m| m.name == key))
            .ok_or_else(|| {
                let held: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
                bad(format!(
                    "no array {key} (member {file}); it holds {}: an npz set needs x_train, y_train, x_test and y_test (np.savez(FILE, x_train=..., y_train=..., x_test=..., y_test=...))",
                    if held.is_empty() { "nothing".to_string() } else { held.join(", ") }
                ))
            })?;
        let data = zip::extract(bytes, m, MAX_DATA_FILE_BYTES).map_err(bad)?;
        arrays.push(npy::parse(data, &format!("{key} in {what}"))?);
    }
    let [x_train, y_train, x_test, y_test]: [Array; 4] = arrays
        .try_into()
        .map_err(|_| bad("an npz set is four arrays".into()))?;
    let parts = Parts {
        x_train,
        y_train,
        x_test,
        y_test,
    };
    assemble(name, &parts, scaling)
}
