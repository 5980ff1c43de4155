//! Reading a small file the user names without trusting its size.

use std::io::Read;
use std::path::Path;

/// The text of `path`, refused with an error that says so when it is larger than `max` bytes;
/// never more than `max + 1` bytes are read, whatever the file grows to meanwhile.
pub fn read_to_string(path: &Path, max: u64) -> std::io::Result<String> {
    let mut text = String::new();
    let read = std::fs::File::open(path)?
        .take(max + 1)
        .read_to_string(&mut text)?;
    if read as u64 > max {
        return Err(std::io::Error::other(format!(
            "it is larger than {max} bytes"
        )));
    }
    Ok(text)
}
