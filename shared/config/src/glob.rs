//! Docker-style path patterns, matched the way PipeCD's `pkg/filematcher` matches them.
//!
//! A pattern is relative to the repository root. `*` matches within one path component, `?`
//! one character other than `/`, `**` any number of components (`**/` included), and `\`
//! escapes the next character. Every other character is passed to the regular expression
//! as it is, so, as in PipeCD, character classes (`[a-z]`) and other regular expression
//! syntax work too. A pattern that matches one of a file's parent directories matches the
//! file: `apps/web` and `apps/*` both match `apps/web/deploy/app.yaml`. A leading `!` makes
//! the pattern an exclusion when several patterns are matched together ([`matches()`]).

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A pattern that does not compile.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid path pattern {pattern:?}: {reason}")]
pub struct GlobError {
    pattern: String,
    reason: String,
}

/// One compiled path pattern.
#[derive(Clone)]
pub struct Glob {
    source: String,
    negative: bool,
    /// How many path components the (cleaned) pattern has.
    components: usize,
    regex: Regex,
}

impl Glob {
    pub fn parse(pattern: &str) -> Result<Self, GlobError> {
        let err = |reason: &str| GlobError {
            pattern: pattern.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = pattern.trim();
        if trimmed.is_empty() {
            return Err(err("the pattern is empty"));
        }
        let cleaned = clean(trimmed);
        let (negative, body) = match cleaned.strip_prefix('!') {
            Some("") => return Err(err("`!` alone excludes nothing")),
            Some(rest) => (true, rest.to_owned()),
            None => (false, cleaned),
        };
        let regex = Regex::new(&to_regex(&body)).map_err(|e| err(&first_line(&e.to_string())))?;
        Ok(Self {
            source: pattern.to_owned(),
            negative,
            components: body.split('/').count(),
            regex,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// True when `file`, or one of its parent directories, matches this pattern, ignoring `!`.
    pub(crate) fn matches_path(&self, file: &str) -> bool {
        if self.regex.is_match(file) {
            return true;
        }
        let parent = parent_dir(file);
        if parent == "." {
            return false;
        }
        let dirs: Vec<&str> = parent.split('/').collect();
        self.components <= dirs.len() && self.regex.is_match(&dirs[..self.components].join("/"))
    }
}

/// PipeCD's `PatternMatcher.Matches`: `file` matches one of the patterns and no exclusion.
pub fn matches(patterns: &[Glob], file: &str) -> bool {
    let excluded = patterns.iter().any(|p| p.negative && p.matches_path(file));
    !excluded && patterns.iter().any(|p| !p.negative && p.matches_path(file))
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.source)
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Serialize for Glob {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Glob::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The regular expression for a cleaned pattern, as filematcher builds it.
fn to_regex(pattern: &str) -> String {
    let mut out = String::from("^");
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if chars.peek() == Some(&'/') {
                    chars.next();
                }
                if chars.peek().is_none() {
                    out.push_str(".*");
                } else {
                    out.push_str("(.*/)?");
                }
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '.' | '$' => {
                out.push('\\');
                out.push(c);
            }
            '\\' => match chars.next() {
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push_str("\\\\"),
            },
            other => out.push(other),
        }
    }
    out.push('$');
    out
}

/// Go's `filepath.Clean` for slash-separated paths.
pub fn clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Go's `filepath.Dir`.
fn parent_dir(file: &str) -> String {
    match file.rfind('/') {
        Some(0) => "/".to_owned(),
        Some(i) => clean(&file[..i]),
        None => ".".to_owned(),
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or(text)
        .trim()
        .trim_start_matches("error: ")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(patterns: &[&str], file: &str, want: bool) {
        let globs: Vec<Glob> = patterns.iter().map(|p| Glob::parse(p).unwrap()).collect();
        assert_eq!(matches(&globs, file), want, "{patterns:?} vs {file}");
    }

    #[test]
    fn matches_like_filematcher() {
        let cases: &[(&[&str], &str, bool)] = &[
            (&["apps/web/*"], "apps/web/app.yaml", true),
            (&["apps/web/*"], "apps/web/deep/app.yaml", true), // parent dir apps/web/deep matches
            (&["apps/web/*"], "apps/webx/app.yaml", false),
            (&["apps/web"], "apps/web/a/b/c.yaml", true),
            (&["apps/web/"], "apps/web/a.yaml", true), // cleaned
            (&["./apps/web"], "apps/web/a.yaml", true),
            (&["*.yaml"], "a.yaml", true),
            (&["*.yaml"], "dir/a.yaml", false), // * stays in one component
            (&["**/*.yaml"], "dir/sub/a.yaml", true),
            (&["**"], "anything/at/all", true),
            (&["docs/**"], "docs/a/b.md", true),
            (&["a?c"], "abc", true),
            (&["a?c"], "a/c", false),
            (&["[ab].txt"], "b.txt", true),
            (&["[ab].txt"], "c.txt", false),
            (&["a.c"], "abc", false), // the dot is literal
            (&["a\\*b"], "a*b", true),
            (&["a\\*b"], "axb", false),
            (&["(foo|bar)/x"], "bar/x", true), // regular expression syntax passes through
            (&["apps/*", "!apps/secret"], "apps/secret/x", false),
            (&["apps/*", "!apps/secret"], "apps/public/x", true),
            (&["!apps/secret"], "apps/public/x", false), // exclusions alone match nothing
            (&["**/foo"], "a/b/foo/x.yaml", false),      // only as many parents as the pattern has
            (&["**/foo"], "a/b/foo", true),
        ];
        for (patterns, file, want) in cases {
            check(patterns, file, *want);
        }
    }

    #[test]
    fn rejects_bad_patterns() {
        for p in ["", "  ", "!", "[a-", "a(b"] {
            assert!(Glob::parse(p).is_err(), "{p:?} should not compile");
        }
    }

    #[test]
    fn cleans_like_go() {
        let cases = [
            ("a/b/../c", "a/c"),
            ("./a//b/", "a/b"),
            ("", "."),
            ("..", ".."),
            ("/../a", "/a"),
            ("a/../..", ".."),
        ];
        for (input, want) in cases {
            assert_eq!(clean(input), want, "{input}");
        }
    }
}
