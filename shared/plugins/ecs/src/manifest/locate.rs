//! The line of a field in a manifest's text, found from the field's path as the file spells
//! it. The parsed document keeps no positions, so the text is searched: each key after the one
//! before it, and for a list index `n`, the `n+1`th occurrence of the key that follows. That is
//! exact for unique keys and for lists whose items share their keys; when a key cannot be found
//! there is no line rather than a wrong one.

use super::schema::Seg;

/// The 1-based line of `path` in `text`, when it can be found.
pub(crate) fn line_of(text: &str, path: &[Seg]) -> Option<usize> {
    let mut pos = 0;
    let mut found = None;
    let mut skip = 0;
    // A top-level key stands no deeper than the document's first key; a nested key deeper than
    // its parent.
    let mut max_column = first_key_column(text);
    let mut min_column = 0;
    for seg in path {
        match seg {
            Seg::Index(n) => skip = *n,
            Seg::Key(key) => {
                let in_place = |at: usize| {
                    let c = column(text, at);
                    c >= min_column && max_column.is_none_or(|m| c <= m)
                };
                let mut at = find_key(text, key, pos, &in_place)?;
                for _ in 0..skip {
                    at = find_key(text, key, at + key.len(), &in_place)?;
                }
                skip = 0;
                pos = at + key.len();
                min_column = column(text, at) + 1;
                max_column = None;
                found = Some(at);
            }
        }
    }
    found.map(|at| text[..at].matches('\n').count() + 1)
}

/// The column of byte `at` on its line (a quote before a key counts as part of it).
fn column(text: &str, at: usize) -> usize {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[start..at]
        .trim_end_matches(['"', '\''])
        .chars()
        .count()
}

/// The column of the document's first key.
fn first_key_column(text: &str) -> Option<usize> {
    text.lines()
        .map(|l| l.trim_end())
        .find(|l| {
            let t = l.trim_start_matches([' ', '\t', '{', '-']);
            !t.is_empty() && !t.starts_with('#')
        })
        .map(|l| l.len() - l.trim_start_matches([' ', '\t', '{', '-', '"', '\'']).len())
}

/// The next place at or after `from` where `key` stands as a mapping key (at the start of a
/// line after indentation and list dashes, or after `{`/`,`; quoted or not; then `:`) and
/// `in_place` accepts.
fn find_key(text: &str, key: &str, from: usize, in_place: &dyn Fn(usize) -> bool) -> Option<usize> {
    let mut start = from;
    while start <= text.len() {
        let rel = text.get(start..)?.find(key)?;
        let at = start + rel;
        if is_key_at(text, key, at) && in_place(at) {
            return Some(at);
        }
        start = at + key.len().max(1);
    }
    None
}

fn is_key_at(text: &str, key: &str, at: usize) -> bool {
    let before = &text[..at];
    let quoted = before.ends_with('"') || before.ends_with('\'');
    let before = if quoted {
        &before[..before.len() - 1]
    } else {
        before
    };
    let lead_ok = before
        .trim_end_matches([' ', '\t', '-'])
        .chars()
        .last()
        .is_none_or(|c| matches!(c, '\n' | '{' | ','));
    let after = &text[at + key.len()..];
    let after = if quoted {
        match after.strip_prefix(['"', '\'']) {
            Some(rest) => rest,
            None => return false,
        }
    } else {
        after
    };
    lead_ok && after.trim_start_matches([' ', '\t']).starts_with(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Seg {
        Seg::Key(k.to_owned())
    }

    #[test]
    fn finds_fields_in_yaml_and_json() {
        let yaml = "family: web\ncontainerDefinitions:\n  - name: a\n    image: x\n    portMappings:\n      - containerPort: 80\n  - name: b\n    image: y\n    portMappings:\n      - containerPort: 81\n      - containerPort: 82\n";
        let json = "{\n  \"family\": \"web\",\n  \"containerDefinitions\": [\n    {\"name\": \"a\", \"image\": \"x\"},\n    {\"name\": \"b\",\n     \"image\": \"y\"}\n  ]\n}\n";
        let cases = [
            (yaml, vec![key("family")], Some(1)),
            (
                yaml,
                vec![key("containerDefinitions"), Seg::Index(1), key("image")],
                Some(8),
            ),
            (
                yaml,
                vec![
                    key("containerDefinitions"),
                    Seg::Index(1),
                    key("portMappings"),
                    Seg::Index(1),
                    key("containerPort"),
                ],
                Some(11),
            ),
            (yaml, vec![key("missing")], None),
            (
                json,
                vec![key("containerDefinitions"), Seg::Index(1), key("image")],
                Some(6),
            ),
            (json, vec![key("family")], Some(2)),
        ];
        for (text, path, want) in cases {
            assert_eq!(line_of(text, &path), want, "{path:?}");
        }
    }

    #[test]
    fn a_top_level_key_is_not_found_nested() {
        let text = "containers:\n  - cpu: 100\nfamily: x\n";
        assert_eq!(line_of(text, &[key("cpu")]), None);
        assert_eq!(line_of(text, &[key("family")]), Some(3));
    }

    #[test]
    fn a_value_that_contains_the_key_is_not_the_key() {
        let text = "name: image\nimage: x\n";
        assert_eq!(line_of(text, &[key("image")]), Some(2));
    }
}
