//! Label selectors: the `labelSelector` query string and `LabelSelector` objects.

use serde_json::{Map, Value};

#[derive(Debug, PartialEq)]
enum Op {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One requirement on one label; a selector matches when all of its requirements do.
#[derive(Debug, PartialEq)]
pub(crate) struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: &Map<String, Value>) -> bool {
        let value = labels.get(&self.key).and_then(Value::as_str);
        let listed = value.is_some_and(|v| self.values.iter().any(|w| w == v));
        match self.op {
            Op::Equals | Op::In => listed,
            Op::NotEquals | Op::NotIn => !listed,
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
        }
    }
}

/// Whether `labels` (a JSON map, or absent) satisfies every requirement.
pub(crate) fn matches(requirements: &[Requirement], labels: Option<&Value>) -> bool {
    let empty = Map::new();
    let labels = labels.and_then(Value::as_object).unwrap_or(&empty);
    requirements.iter().all(|r| r.matches(labels))
}

/// Parses a `labelSelector` query: comma-separated `k=v`, `k==v`, `k!=v`, `k`, `!k`,
/// `k in (a,b)` and `k notin (a)`.
pub(crate) fn parse(selector: &str) -> Result<Vec<Requirement>, String> {
    let mut terms = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
        .into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(term)
        .collect()
}

fn term(text: &str) -> Result<Requirement, String> {
    let (key, op, values) = split_term(text)?;
    let key = key.trim();
    let valid = |text: &str, extra: char| {
        text.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c) || c == extra)
    };
    if key.is_empty() || !valid(key, '/') || !values.iter().all(|v| valid(v, '-')) {
        return Err(format!(
            "unable to parse requirement: invalid term {text:?}"
        ));
    }
    let values = values.into_iter().map(String::from).collect();
    Ok(Requirement {
        key: key.to_string(),
        op,
        values,
    })
}

/// A term's key, operator and values, not yet checked.
fn split_term(text: &str) -> Result<(&str, Op, Vec<&str>), String> {
    if let Some(key) = text.strip_prefix('!') {
        return Ok((key, Op::DoesNotExist, vec![]));
    }
    for (token, op) in [("!=", Op::NotEquals), ("==", Op::Equals), ("=", Op::Equals)] {
        if let Some((key, value)) = text.split_once(token) {
            return Ok((key, op, vec![value.trim()]));
        }
    }
    let Some((key, rest)) = text.split_once(char::is_whitespace) else {
        return Ok((text, Op::Exists, vec![]));
    };
    let rest = rest.trim();
    let (op, set) = match (rest.strip_prefix("notin"), rest.strip_prefix("in")) {
        (Some(set), _) => (Op::NotIn, set),
        (None, Some(set)) => (Op::In, set),
        _ => {
            return Err(format!(
                "unable to parse requirement: no operator in {text:?}"
            ))
        }
    };
    let set = set
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'));
    let set = set.ok_or_else(|| format!("unable to parse requirement: no (values) in {text:?}"))?;
    Ok((
        key,
        op,
        set.split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect(),
    ))
}

/// The fields every kind can be selected by; a real server indexes a few more per kind
/// (`spec.nodeName` of Pods, `type` of Secrets, ...), which the fake refuses.
const SELECTABLE_FIELDS: [&str; 2] = ["metadata.name", "metadata.namespace"];

/// Parses a `fieldSelector` query: comma-separated `f=v`, `f==v` and `f!=v` on the fields in
/// [`SELECTABLE_FIELDS`]; any other field is refused as the real server refuses it.
pub(crate) fn parse_fields(selector: &str) -> Result<Vec<Requirement>, String> {
    let terms = selector.split(',').map(str::trim).filter(|t| !t.is_empty());
    terms
        .map(|text| {
            let (key, op, values) = split_term(text)?;
            if !matches!(op, Op::Equals | Op::NotEquals) {
                return Err(format!(
                    "invalid selector: '{selector}'; can't understand '{text}'"
                ));
            }
            let key = key.trim();
            if !SELECTABLE_FIELDS.contains(&key) {
                return Err(format!("field label not supported: {key}"));
            }
            let values = values.into_iter().map(String::from).collect();
            Ok(Requirement {
                key: key.to_string(),
                op,
                values,
            })
        })
        .collect()
}

/// Whether an object's selectable fields satisfy every requirement of a field selector.
pub(crate) fn fields_match(requirements: &[Requirement], object: &Value) -> bool {
    let metadata = &object["metadata"];
    let mut fields = Map::new();
    for (field, value) in SELECTABLE_FIELDS
        .iter()
        .zip([&metadata["name"], &metadata["namespace"]])
    {
        let value = value.as_str().unwrap_or_default();
        fields.insert(field.to_string(), Value::from(value));
    }
    requirements.iter().all(|r| r.matches(&fields))
}

/// The requirements of a `LabelSelector` object (`matchLabels` and `matchExpressions`).
pub(crate) fn from_object(selector: &Value) -> Vec<Requirement> {
    let mut requirements = Vec::new();
    for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
        let values = vec![value.as_str().unwrap_or_default().to_string()];
        requirements.push(Requirement {
            key: key.clone(),
            op: Op::Equals,
            values,
        });
    }
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let op = match expression["operator"].as_str() {
            Some("In") => Op::In,
            Some("NotIn") => Op::NotIn,
            Some("Exists") => Op::Exists,
            _ => Op::DoesNotExist,
        };
        let values = expression["values"].as_array().into_iter().flatten();
        let values = values.filter_map(Value::as_str).map(String::from).collect();
        let key = expression["key"].as_str().unwrap_or_default().to_string();
        requirements.push(Requirement { key, op, values });
    }
    requirements
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_form_selects_as_the_real_server_does() {
        let web = json!({"app": "web", "tier": "front"});
        let db = json!({"app": "db"});
        let cases = [
            ("app=web", true, false),
            ("app==web", true, false),
            ("app!=web", false, true),
            ("tier", true, false),
            ("!tier", false, true),
            ("app in (web, db)", true, true),
            ("app notin (web)", false, true),
            ("app in (web,db),tier", true, false),
            ("", true, true),
        ];
        for (selector, on_web, on_db) in cases {
            let parsed = parse(selector).unwrap();
            assert_eq!(matches(&parsed, Some(&web)), on_web, "{selector} on web");
            assert_eq!(matches(&parsed, Some(&db)), on_db, "{selector} on db");
        }
    }

    #[test]
    fn bad_selectors_are_errors() {
        for selector in ["app in web", "app=a b", "app ~ x", "=x"] {
            assert!(parse(selector).is_err(), "{selector}");
        }
    }
}
