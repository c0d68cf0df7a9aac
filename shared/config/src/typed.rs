//! Typed reading of free-form settings (a stage's `with`, a deploy target, a plugin's
//! settings): serde into the reader's own struct, with errors that name the field's path and
//! suggest the closest known name for a misspelt one.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A value did not read as the expected type: the path of the field at fault (empty for the
/// value itself) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", at(path, message))]
pub struct FieldError {
    /// Such as `plugins.lambda.deployTargets[0].region`, or `percent`.
    pub path: String,
    pub message: String,
}

fn at(path: &str, message: &str) -> String {
    if path.is_empty() {
        message.to_owned()
    } else {
        format!("{path}: {message}")
    }
}

/// Reads `value` as a `T`. Errors name the field under `prefix` (`prefix` + `.region`, or
/// `prefix` + `[1]`), and an unknown field names the closest known one.
pub fn from_value<T: DeserializeOwned>(value: &Value, prefix: &str) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| FieldError {
        path: join_path(prefix, &e.path().to_string()),
        message: explain(&e.into_inner().to_string()),
    })
}

/// `spec` + `input.x` → `spec.input.x`; `spec.stages` + `[1]` → `spec.stages[1]`.
pub fn join_path(prefix: &str, inner: &str) -> String {
    match (prefix.is_empty(), inner) {
        (_, "" | "." | "?") => prefix.to_owned(),
        (true, _) => inner.to_owned(),
        (false, _) if inner.starts_with('[') => format!("{prefix}{inner}"),
        (false, _) => format!("{prefix}.{inner}"),
    }
}

/// The name in `known` closest to `word` (ignoring case), when it is close enough to be a
/// likely typo: at most 2 edits (a quarter of the word for longer words), or a known name
/// that contains the word (`targets` for `deployTargets`).
pub fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let word_lower = word.to_lowercase();
    let known: Vec<&str> = known.into_iter().collect();
    let typo = known
        .iter()
        .map(|k| (edit_distance(&word_lower, &k.to_lowercase()), *k))
        .min()
        .filter(|(d, _)| *d <= 2.max(word.len() / 4))
        .map(|(_, k)| k);
    typo.or_else(|| {
        let mut containing = known
            .iter()
            .filter(|k| word.len() >= 4 && k.to_lowercase().contains(&word_lower));
        match (containing.next(), containing.next()) {
            (Some(only), None) => Some(*only),
            _ => None,
        }
    })
}

/// serde's ``unknown field `triger`, expected one of …`` → a suggestion, or a short list.
pub(crate) fn explain(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return gannet_domain::report::bound_quotes(message);
    };
    let Some((field, expected)) = rest.split_once('`') else {
        return message.to_owned();
    };
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    match closest(field, known.iter().copied()) {
        Some(k) => format!("unknown field `{field}`; did you mean `{k}`?"),
        None if known.len() <= 8 && !known.is_empty() => {
            format!(
                "unknown field `{field}`; known fields: {}",
                known.join(", ")
            )
        }
        None if known.is_empty() => format!("unknown field `{field}`; there are no fields here"),
        None => format!("unknown field `{field}`"),
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use gannet_domain::GoDuration;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Target {
        name: String,
        region: String,
        #[serde(default)]
        timeout: Option<GoDuration>,
        #[serde(default)]
        labels: Vec<String>,
    }

    fn check(value: Value) -> Result<Target, String> {
        from_value::<Target>(&value, "plugins.x.deployTargets[0]").map_err(|e| e.to_string())
    }

    #[test]
    fn errors_name_the_path_and_suggest() {
        assert_eq!(
            check(json!({"name": "a", "region": "r"})),
            Ok(Target {
                name: "a".into(),
                region: "r".into(),
                timeout: None,
                labels: vec![],
            })
        );
        let cases = [
            (
                json!({"name": "a", "regoin": "r"}),
                "plugins.x.deployTargets[0].regoin: unknown field `regoin`; did you mean `region`?",
            ),
            (
                json!({"name": "a", "zzzzzzzz": "r"}),
                "plugins.x.deployTargets[0].zzzzzzzz: unknown field `zzzzzzzz`; known fields: name, region, timeout, labels",
            ),
            (
                json!({"name": "a"}),
                "plugins.x.deployTargets[0]: missing field `region`",
            ),
            (
                json!({"name": "a", "region": "r", "timeout": 30}),
                "plugins.x.deployTargets[0].timeout: 30 has no unit",
            ),
            (
                json!({"name": "a", "region": "r", "labels": ["x", 1]}),
                "plugins.x.deployTargets[0].labels[1]: invalid type: integer `1`, expected a string",
            ),
            (
                json!("x"),
                "plugins.x.deployTargets[0]: invalid type: string \"x\", expected struct Target",
            ),
        ];
        for (value, want) in cases {
            let got = check(value.clone()).unwrap_err();
            assert!(got.starts_with(want), "{value}: {got}");
        }
    }

    #[test]
    fn closest_names() {
        let known = ["WAIT", "WAIT_APPROVAL", "SCRIPT_RUN", "LAMBDA_PROMOTE"];
        assert_eq!(closest("WAITT", known), Some("WAIT"));
        assert_eq!(closest("wait", known), Some("WAIT"));
        assert_eq!(closest("SCRIPTRUN", known), Some("SCRIPT_RUN"));
        assert_eq!(closest("LAMBDA_PROMTE", known), Some("LAMBDA_PROMOTE"));
        assert_eq!(closest("DEPLOY", known), None);
        assert_eq!(
            closest("targets", ["name", "deployTargets"]),
            Some("deployTargets")
        );
        assert_eq!(
            closest("TARGET", ["A_TARGET_X", "B_TARGET_Y"]),
            None,
            "two contain it"
        );
    }
}
