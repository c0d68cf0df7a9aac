//! Limits on the YAML and JSON gannet reads from a repository (app configs, function manifests,
//! task and service definitions). A repository is untrusted input: a file of a few kilobytes
//! built from nested YAML aliases expands to gigabytes when it is loaded, and deep nesting
//! exhausts the stack. [`check_yaml`] measures a text's expanded size and depth without
//! building anything, so the real parse that follows stays within a few megabytes.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};

/// The largest file read from a repository.
pub const MAX_BYTES: usize = 1024 * 1024;
/// The most nodes (scalars, lists, maps) a YAML file may hold once its aliases are expanded.
/// Real configs and manifests hold a few hundred.
pub const MAX_NODES: usize = 50_000;
/// The deepest nesting of lists and maps.
pub const MAX_DEPTH: usize = 64;

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
    #[error("nested deeper than {} levels", MAX_DEPTH)]
    TooDeep,
}

/// Checks a JSON text's size (serde_json itself refuses nesting past 128 levels, and JSON has
/// no aliases, so its size bounds what loading it costs).
pub fn check_json(text: &str) -> Result<(), LimitError> {
    check_size(text)
}

fn check_size(text: &str) -> Result<(), LimitError> {
    if text.len() > MAX_BYTES {
        return Err(LimitError::TooLarge { size: text.len() });
    }
    Ok(())
}

/// Checks a YAML text (every document in it) against the limits, counting nodes as serde_yaml
/// replays its aliases but keeping none of them. A syntax error is not reported here: the real
/// parse reports it, with its line.
pub fn check_yaml(text: &str) -> Result<(), LimitError> {
    check_size(text)?;
    let budget = Budget::default();
    for document in serde_yaml::Deserializer::from_str(text) {
        let node = Node {
            budget: &budget,
            depth: 0,
        };
        if let Err(err) = node.deserialize(document) {
            if let Some(limit) = budget.hit.get() {
                return Err(limit);
            }
            // serde_yaml's own guard against alias bombs, when it trips first.
            if err.to_string().contains("repetition limit") {
                return Err(LimitError::TooManyNodes);
            }
            return Ok(());
        }
    }
    Ok(())
}

/// Nodes seen so far, and the limit hit, if any.
#[derive(Default)]
struct Budget {
    nodes: Cell<usize>,
    hit: Cell<Option<LimitError>>,
}

/// One node at `depth`: counts itself and visits its children, building nothing.
#[derive(Clone, Copy)]
struct Node<'b> {
    budget: &'b Budget,
    depth: usize,
}

impl Node<'_> {
    fn enter<E: de::Error>(self) -> Result<Self, E> {
        let nodes = self.budget.nodes.get() + 1;
        self.budget.nodes.set(nodes);
        let hit = if nodes > MAX_NODES {
            Some(LimitError::TooManyNodes)
        } else if self.depth > MAX_DEPTH {
            Some(LimitError::TooDeep)
        } else {
            None
        };
        match hit {
            Some(limit) => {
                let message = limit.to_string();
                self.budget.hit.set(Some(limit));
                Err(E::custom(message))
            }
            None => Ok(Self {
                budget: self.budget,
                depth: self.depth + 1,
            }),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

macro_rules! scalar {
    ($($name:ident: $ty:ty),*) => {
        $(fn $name<E: de::Error>(self, _: $ty) -> Result<(), E> {
            self.enter::<E>().map(|_| ())
        })*
    };
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    scalar!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.enter::<E>().map(|_| ())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.enter::<E>().map(|_| ())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        let inner = self.enter::<D::Error>()?;
        inner.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let child = self.enter::<A::Error>()?;
        while seq.next_element_seed(child)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let child = self.enter::<A::Error>()?;
        while map.next_key_seed(child)?.is_some() {
            map.next_value_seed(child)?;
        }
        Ok(())
    }

    /// A tagged node (`!Tag value`).
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        use serde::de::VariantAccess;
        let child = self.enter::<A::Error>()?;
        let ((), variant) = data.variant_seed(child)?;
        variant.newtype_variant_seed(child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::fixture::yaml_bomb as laughs;

    #[test]
    fn real_documents_pass_and_bombs_do_not() {
        assert_eq!(
            check_yaml("a: [1, 2, {b: c}]\nd: &x {e: f}\ng: *x\n"),
            Ok(())
        );
        assert_eq!(check_yaml("---\na: 1\n---\nb: 2\n"), Ok(()));
        assert_eq!(check_yaml("key: !Ref thing\n"), Ok(()));
        assert_eq!(
            check_yaml("not: [valid"),
            Ok(()),
            "syntax is the parser's to report"
        );
        assert_eq!(check_yaml(&laughs(3)), Ok(()), "1,110 nodes");
        assert_eq!(check_yaml(&laughs(9)), Err(LimitError::TooManyNodes));
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(check_yaml(&deep), Err(LimitError::TooDeep));
        let big = format!("a: \"{}\"\n", "x".repeat(MAX_BYTES));
        assert!(matches!(check_yaml(&big), Err(LimitError::TooLarge { .. })));
        assert!(matches!(check_json(&big), Err(LimitError::TooLarge { .. })));
        assert_eq!(check_json("{\"a\": 1}"), Ok(()));
    }

    #[test]
    fn a_bomb_is_refused_quickly() {
        let started = std::time::Instant::now();
        assert_eq!(check_yaml(&laughs(30)), Err(LimitError::TooManyNodes));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
