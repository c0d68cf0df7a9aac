//! Limits on the YAML and JSON gannet reads from a repository (app configs, function manifests,
//! task and service definitions). A repository is untrusted input: a file of a few kilobytes
//! built from nested YAML aliases expands to gigabytes when it is loaded, and deep nesting
//! exhausts the stack. The limits live here; [`crate::yaml`] parses every YAML text under a
//! budget made of them (the parser refuses a text past one while it reads it), and
//! [`check_json`] measures a JSON text.

/// The largest file read from a repository.
pub const MAX_BYTES: usize = 1024 * 1024;
/// The most nodes (scalars, lists, maps) a YAML file may hold once its aliases are expanded.
/// Real configs and manifests hold a few hundred.
pub const MAX_NODES: usize = 50_000;
/// The deepest nesting of lists and maps.
pub const MAX_DEPTH: usize = 64;
/// The most nodes the anchored parts of a YAML file (`&name ...`) may hold once the aliases
/// inside them are expanded: the parser keeps a copy of each anchored node to replay it, about
/// 200 bytes a node. A billion-laughs bomb passes this one first.
pub const MAX_ANCHORED_NODES: usize = 10_000;
/// The most bytes of scalar text a YAML file may hold once its aliases are expanded (an alias
/// of a long string repeats the string).
pub const MAX_EXPANDED_BYTES: usize = 8 * MAX_BYTES;

/// Why [`read_file`] refused a file.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("does not exist")]
    NotFound,
    #[error("is a symlink; gannet reads only regular files, not links")]
    Symlink,
    #[error("is not a regular file")]
    NotAFile,
    #[error("is {size} bytes, larger than the {max} bytes gannet reads")]
    TooLarge { size: u64, max: u64 },
    #[error("cannot be read: {0}")]
    Read(#[source] std::io::Error),
}

/// Reads a file gannet does not control (a repository's file, a secret file an operator names)
/// the checked way: a regular file, not a symlink (a link could read any file of the machine),
/// and no larger than `max` bytes, measured before it is read. The error says which rule the
/// file broke, without its path.
pub fn read_file(path: &std::path::Path, max: u64) -> Result<String, FileError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => FileError::NotFound,
        _ => FileError::Read(e),
    })?;
    if meta.file_type().is_symlink() {
        return Err(FileError::Symlink);
    }
    if !meta.is_file() {
        return Err(FileError::NotAFile);
    }
    if meta.len() > max {
        return Err(FileError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    std::fs::read_to_string(path).map_err(FileError::Read)
}

/// A file past one of the limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("too large: {size} bytes, the limit is {} bytes (1 MB)", MAX_BYTES)]
    TooLarge { size: usize },
    #[error("too many aliases: it expands to more than {} nodes", MAX_NODES)]
    TooManyNodes,
    #[error(
        "too many aliases: its anchors expand to more than {} nodes",
        MAX_ANCHORED_NODES
    )]
    TooManyAnchoredNodes,
    #[error("nested deeper than {} levels", MAX_DEPTH)]
    TooDeep,
    #[error(
        "too many aliases: its text expands to more than {} bytes (8 MB)",
        MAX_EXPANDED_BYTES
    )]
    TooLargeExpanded,
}

/// Checks a JSON text's size (serde_json itself refuses nesting past 128 levels, and JSON has
/// no aliases, so its size bounds what loading it costs).
pub fn check_json(text: &str) -> Result<(), LimitError> {
    check_size(text)
}

/// Checks a text's size against [`MAX_BYTES`], before it is parsed.
pub(crate) fn check_size(text: &str) -> Result<(), LimitError> {
    if text.len() > MAX_BYTES {
        return Err(LimitError::TooLarge { size: text.len() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_measured() {
        let big = format!("{{\"a\": \"{}\"}}", "x".repeat(MAX_BYTES));
        assert!(matches!(check_json(&big), Err(LimitError::TooLarge { .. })));
        assert_eq!(check_json("{\"a\": 1}"), Ok(()));
    }
}
