//! Where each field of a block-style YAML document sits: field path → 1-based line.
//!
//! A parsed document (a JSON value) keeps no positions, so errors found after parsing
//! (an unknown stage, a bad duration) would have no line. This is a small indentation scanner
//! for the block style that app configs and platform manifests use. It records the line of every mapping key and
//! sequence item under a path written the way `serde_path_to_error` writes it
//! (`spec.pipeline.stages[1].with.duration`). Flow collections (`{a: 1}`, `[1, 2]`) and
//! block scalars are leaves: a path inside one resolves to its nearest indexed ancestor.

use std::collections::HashMap;

#[derive(Clone, Debug, Default)]
pub struct LineIndex {
    lines: HashMap<String, usize>,
}

impl LineIndex {
    pub fn build(text: &str) -> Self {
        let mut scanner = Scanner::default();
        for (no, raw) in text.lines().enumerate() {
            if !scanner.line(no + 1, raw) {
                break;
            }
        }
        Self {
            lines: scanner.lines,
        }
    }

    /// True when the document writes `path` itself (not only an ancestor of it).
    pub fn contains(&self, path: &str) -> bool {
        self.lines.contains_key(path)
    }

    /// The line of `path`, or of its nearest ancestor that is indexed; 1 when none is.
    pub fn line_of(&self, path: &str) -> usize {
        let mut path = path;
        loop {
            if let Some(&line) = self.lines.get(path) {
                return line;
            }
            match parent_path(path) {
                Some(parent) => path = parent,
                None => return 1,
            }
        }
    }
}

/// `a.b[2].c` → `a.b[2]` → `a.b` → `a` → none.
fn parent_path(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '['])?;
    Some(&path[..cut])
}

#[derive(Debug)]
enum Kind {
    Map,
    Seq { next: usize },
}

#[derive(Debug)]
struct Frame {
    indent: usize,
    path: String,
    kind: Kind,
}

/// A key or item whose value has not started yet (`key:` at the end of a line).
#[derive(Debug)]
struct Pending {
    path: String,
    indent: usize,
    /// A mapping value may be a sequence at the key's own indentation.
    seq_at_same_indent: bool,
}

#[derive(Debug, Default)]
struct Scanner {
    lines: HashMap<String, usize>,
    stack: Vec<Frame>,
    pending: Option<Pending>,
    /// Skip lines indented deeper than this: they continue a scalar.
    skip_deeper: Option<usize>,
    started: bool,
}

impl Scanner {
    /// Scans one line; false once the first document has ended.
    fn line(&mut self, no: usize, raw: &str) -> bool {
        let content = raw.trim_start_matches(' ');
        let indent = raw.len() - content.len();
        if content.trim().is_empty() {
            return true;
        }
        if let Some(limit) = self.skip_deeper {
            if indent > limit {
                return true;
            }
            self.skip_deeper = None;
        }
        if content.starts_with('#') {
            return true;
        }
        if indent == 0 && (is_marker(content, "---") || is_marker(content, "...")) {
            return !self.started;
        }
        self.started = true;
        self.node(no, indent, content.trim_end());
        true
    }

    fn node(&mut self, no: usize, col: usize, content: &str) {
        while self.stack.last().is_some_and(|f| f.indent > col) {
            self.stack.pop();
        }
        let dash = is_dash(content);
        if let Some(p) = self.pending.take() {
            if dash && (col > p.indent || (col == p.indent && p.seq_at_same_indent)) {
                self.push(col, p.path, Kind::Seq { next: 0 });
            } else if !dash && col > p.indent {
                if split_key(content).is_none() {
                    // A plain scalar value on the following lines.
                    self.skip_deeper = Some(p.indent);
                    return;
                }
                self.push(col, p.path, Kind::Map);
            }
        }
        // A frame at this indentation of the other kind has ended (`key:` after a compact list).
        while self
            .stack
            .last()
            .is_some_and(|f| f.indent == col && matches!(f.kind, Kind::Map) == dash)
        {
            self.stack.pop();
        }
        let at_col = self.stack.last().is_some_and(|f| f.indent == col);
        if !at_col {
            if !self.stack.is_empty() {
                // Deeper than any open collection and not a value: a scalar continuation.
                return;
            }
            let kind = if dash {
                Kind::Seq { next: 0 }
            } else {
                Kind::Map
            };
            self.push(col, String::new(), kind);
        }
        if dash {
            self.item(no, col, content);
        } else {
            self.entry(no, col, content);
        }
    }

    fn push(&mut self, indent: usize, path: String, kind: Kind) {
        self.stack.push(Frame { indent, path, kind });
    }

    fn item(&mut self, no: usize, col: usize, content: &str) {
        let Some(frame) = self.stack.last_mut() else {
            return;
        };
        let Kind::Seq { next } = &mut frame.kind else {
            return;
        };
        let path = format!("{}[{}]", frame.path, *next);
        *next += 1;
        self.lines.insert(path.clone(), no);
        let after_dash = &content[1..];
        let rest = after_dash.trim_start_matches(' ');
        let rest_col = col + 1 + (after_dash.len() - rest.len());
        let value = strip_props(strip_comment(rest));
        if value.is_empty() {
            self.pending = Some(Pending {
                path,
                indent: col,
                seq_at_same_indent: false,
            });
        } else if is_dash(rest) {
            self.push(rest_col, path, Kind::Seq { next: 0 });
            self.node(no, rest_col, rest);
        } else if split_key(rest).is_some() {
            self.push(rest_col, path, Kind::Map);
            self.node(no, rest_col, rest);
        } else {
            self.skip_deeper = Some(col);
        }
    }

    fn entry(&mut self, no: usize, col: usize, content: &str) {
        let Some(frame) = self.stack.last() else {
            return;
        };
        let Some((key, rest)) = split_key(content) else {
            self.skip_deeper = Some(col);
            return;
        };
        let path = if frame.path.is_empty() {
            key
        } else {
            format!("{}.{key}", frame.path)
        };
        self.lines.insert(path.clone(), no);
        if strip_props(strip_comment(rest)).is_empty() {
            self.pending = Some(Pending {
                path,
                indent: col,
                seq_at_same_indent: true,
            });
        } else {
            self.skip_deeper = Some(col);
        }
    }
}

fn is_marker(content: &str, marker: &str) -> bool {
    content
        .strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '#']))
}

fn is_dash(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

/// `value  # comment` → `value`; a `#` inside quotes or a word is kept.
fn strip_comment(text: &str) -> &str {
    let bytes = text.as_bytes();
    let mut quote: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if (b == b'"' || b == b'\'') && (i == 0 || bytes[i - 1] == b' ') => {
                quote = Some(b)
            }
            None if b == b'#' && (i == 0 || bytes[i - 1] == b' ') => return text[..i].trim_end(),
            None => {}
        }
    }
    text.trim_end()
}

/// Drops leading anchors (`&a`) and tags (`!!str`), which do not change the structure.
fn strip_props(mut text: &str) -> &str {
    while text.starts_with(['&', '!']) {
        text = text
            .find(' ')
            .map_or("", |i| text[i..].trim_start_matches(' '));
    }
    text
}

/// `key: rest` → (`key`, `rest`); `None` when the line is not a mapping entry.
fn split_key(content: &str) -> Option<(String, &str)> {
    let first = content.chars().next()?;
    if first == '"' || first == '\'' {
        let (key, len) = quoted(content, first)?;
        let after = content[len..].trim_start_matches(' ');
        let rest = after.strip_prefix(':')?;
        return (rest.is_empty() || rest.starts_with(' ')).then_some((key, rest));
    }
    if matches!(first, '[' | '{' | '#' | '|' | '>' | '?' | '%' | '@' | '`') {
        return None;
    }
    let searchable = strip_comment(content);
    let bytes = searchable.as_bytes();
    let colon = (0..bytes.len())
        .find(|&i| bytes[i] == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' '))?;
    let key = searchable[..colon].trim_end();
    (!key.is_empty()).then(|| (key.to_owned(), &content[colon + 1..]))
}

/// A quoted scalar at the start of `text`: its value and the bytes it spans.
fn quoted(text: &str, quote: char) -> Option<(String, usize)> {
    let mut value = String::new();
    let mut chars = text.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if quote == '"' => {
                if let Some((_, escaped)) = chars.next() {
                    value.push(escaped);
                }
            }
            '\'' if quote == '\'' && chars.peek().is_some_and(|&(_, n)| n == '\'') => {
                chars.next();
                value.push('\'');
            }
            c if c == quote => return Some((value, i + c.len_utf8())),
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"# leading comment
apiVersion: pipecd.dev/v1beta1
kind: KubernetesApp
spec:
  name: demo   # trailing comment
  labels:
    env: dev
  description: |
    text: that looks like a key
    - and a list item
  pipeline:
    stages:
      - name: K8S_CANARY_ROLLOUT
        with:
          replicas: 10%
          patches:
          - target:
              kind: ConfigMap
            ops:
            - op: yaml-replace
              value: "90"

      - name: WAIT
        with: {duration: 30s}
      -
        id: approve
        name: WAIT_APPROVAL
  trigger:
    onCommit:
      paths:
      - a/*
      - "b/*"
    onOutOfSync:
      minWindow: 5m
  "quoted.key": x
  plain: multi
    line scalar
  after: 1
"#;

    #[test]
    fn indexes_block_yaml() {
        let index = LineIndex::build(DOC);
        let cases = [
            ("apiVersion", 2),
            ("kind", 3),
            ("spec", 4),
            ("spec.name", 5),
            ("spec.labels.env", 7),
            ("spec.description", 8),
            ("spec.pipeline.stages", 12),
            ("spec.pipeline.stages[0]", 13),
            ("spec.pipeline.stages[0].name", 13),
            ("spec.pipeline.stages[0].with.replicas", 15),
            ("spec.pipeline.stages[0].with.patches[0].target.kind", 18),
            ("spec.pipeline.stages[0].with.patches[0].ops[0].op", 20),
            ("spec.pipeline.stages[0].with.patches[0].ops[0].value", 21),
            ("spec.pipeline.stages[1].name", 23),
            ("spec.pipeline.stages[1].with.duration", 24), // inside a flow map: its parent
            ("spec.pipeline.stages[2]", 25),
            ("spec.pipeline.stages[2].id", 26),
            ("spec.pipeline.stages[2].name", 27),
            ("spec.trigger.onCommit.paths[1]", 32),
            ("spec.trigger.onOutOfSync.minWindow", 34),
            ("spec.quoted.key", 35),
            ("spec.plain", 36),
            ("spec.after", 38),
            ("spec.nothing.here", 4),
            ("unknown", 1),
        ];
        for (path, line) in cases {
            assert_eq!(index.line_of(path), line, "{path}");
        }
    }

    #[test]
    fn block_scalars_do_not_leak_keys() {
        let index = LineIndex::build(DOC);
        assert_eq!(index.line_of("spec.description.text"), 8);
        assert!(!index.contains("spec.text"));
        assert!(index.contains("spec.description"));
    }

    #[test]
    fn stops_at_the_second_document() {
        let index = LineIndex::build("---\na: 1\n---\nb: 2\n");
        assert_eq!(index.line_of("a"), 2);
        assert_eq!(index.lines.get("b"), None);
    }
}
