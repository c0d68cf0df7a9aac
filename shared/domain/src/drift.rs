//! Drift: the desired state read from Git against the live state read from the platform,
//! as a list of the fields that differ, each with its Git value and its live value.
//!
//! The comparison walks the *desired* document. A field that Git does not set is never drift:
//! the platform fills in defaults and computed fields (ARNs, revision ids, timestamps) that Git
//! cannot know. Objects compare key by key, so key order never matters. Arrays compare by
//! position, except under the paths a plugin marks unordered (subnets, security groups, tag
//! lists), where AWS gives order no meaning: there they compare as multisets. Numbers compare by
//! value (`512` equals `512.0`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One field whose live value differs from Git's. Stored with each side as compact JSON
/// text; the API shows the sides as JSON values ([`as_values`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftField {
    /// Where, such as `spec.vpcConfig.subnetIds` or `containerDefinitions[0].image`.
    pub field: String,
    /// The value in Git, as compact JSON.
    pub git: String,
    /// The live value, as compact JSON; `<unset>` when the live state lacks the field.
    pub live: String,
}

/// The health of one live resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Health {
    Healthy,
    Unhealthy,
    #[default]
    Unknown,
}

/// One live resource of an app (a function alias, an ECS service, a task set).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveResource {
    /// Such as `LambdaAlias`, `EcsService`, `EcsTaskSet`.
    pub kind: String,
    /// The resource's name or ARN.
    pub id: String,
    pub health: Health,
    /// A short line a person can read, such as `version 7 at 100%`.
    pub summary: String,
}

/// What a plugin's live-state face found for one app.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveState {
    pub resources: Vec<LiveResource>,
    /// Empty when the live state matches Git.
    pub drift: Vec<DriftField>,
}

/// How one kind of resource compares. Paths are dot-separated keys from the document root;
/// `*` stands for any one key or array index.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rules<'a> {
    /// Arrays whose order means nothing.
    pub unordered: &'a [&'a str],
    /// Fields never compared, even when Git sets them.
    pub ignored: &'a [&'a str],
    /// Arrays whose items are told apart by a key field, `(path, key)`: an environment by
    /// variable name. Their items compare by key whatever the order, and are named by it
    /// (`env[name=LOG_LEVEL]`, as Kubernetes' keyed lists are); an item only the live state has
    /// is drift too. An array whose items lack the key compares by position.
    pub keyed: &'a [(&'a str, &'a str)],
}

/// The live value shown when the live state lacks a field that Git sets.
pub const UNSET: &str = "<unset>";

/// Values longer than this are cut in a [`DriftField`], so one huge field cannot swamp a diff.
const MAX_VALUE_CHARS: usize = 200;

/// The fields of `desired` whose value in `live` differs, in document order.
pub fn diff(desired: &Value, live: &Value, rules: &Rules<'_>) -> Vec<DriftField> {
    let mut out = Vec::new();
    walk(&mut Vec::new(), desired, Some(live), rules, &mut out);
    out
}

fn walk(
    path: &mut Vec<String>,
    desired: &Value,
    live: Option<&Value>,
    rules: &Rules<'_>,
    out: &mut Vec<DriftField>,
) {
    if matches_any(path, rules.ignored) {
        return;
    }
    let Some(live) = live.filter(|l| !l.is_null()) else {
        if !is_empty(desired) {
            out.push(field(path, desired, None));
        }
        return;
    };
    if let (Value::Array(want), Value::Array(have)) = (desired, live) {
        if let Some(key) = keyed_by(path, rules, want, have) {
            walk_keyed(path, key, want, have, rules, out);
            return;
        }
    }
    match (desired, live) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, value) in want {
                path.push(key.clone());
                walk(path, value, have.get(key), rules, out);
                path.pop();
            }
        }
        (Value::Array(want), Value::Array(have)) if matches_any(path, rules.unordered) => {
            if !same_multiset(want, have) {
                out.push(field(path, desired, Some(live)));
            }
        }
        (Value::Array(want), Value::Array(have)) if want.len() == have.len() => {
            for (i, (w, h)) in want.iter().zip(have).enumerate() {
                path.push(i.to_string());
                walk(path, w, Some(h), rules, out);
                path.pop();
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        (a, b) if a == b => {}
        _ => out.push(field(path, desired, Some(live))),
    }
}

/// Compares arrays whose items are told apart by `key`: each item of Git's by its key, and an
/// item only the live state has is drift too.
fn walk_keyed(
    path: &mut Vec<String>,
    key: &str,
    want: &[Value],
    have: &[Value],
    rules: &Rules<'_>,
    out: &mut Vec<DriftField>,
) {
    let key_of = |item: &Value| item.get(key).map(scalar).unwrap_or_default();
    for w in want {
        let k = key_of(w);
        path.push(format!("[{key}={k}]"));
        walk(path, w, have.iter().find(|h| key_of(h) == k), rules, out);
        path.pop();
    }
    for h in have
        .iter()
        .filter(|h| !want.iter().any(|w| key_of(w) == key_of(h)))
    {
        path.push(format!("[{key}={}]", key_of(h)));
        out.push(DriftField {
            field: display_path(path),
            git: UNSET.to_owned(),
            live: shown(h),
        });
        path.pop();
    }
}

/// The key field the items of the arrays at `path` are told apart by, when the rules key them
/// and every item on both sides has it.
fn keyed_by<'r>(
    path: &[String],
    rules: &Rules<'r>,
    want: &[Value],
    have: &[Value],
) -> Option<&'r str> {
    let key = rules
        .keyed
        .iter()
        .find(|(pattern, _)| matches_any(path, &[pattern]))
        .map(|(_, key)| *key)?;
    want.iter()
        .chain(have)
        .all(|item| item.get(key).is_some_and(|k| !k.is_null()))
        .then_some(key)
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Null, `""`, `[]` and `{}` in Git say nothing, so an absent live field matches them.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn same_multiset(a: &[Value], b: &[Value]) -> bool {
    let key = |v: &Value| canonical(v);
    let mut x: Vec<String> = a.iter().map(key).collect();
    let mut y: Vec<String> = b.iter().map(key).collect();
    x.sort();
    y.sort();
    x == y
}

/// JSON with object keys sorted (serde_json's map keeps them sorted) and numbers normalised.
fn canonical(v: &Value) -> String {
    match v {
        Value::Number(n) => n.as_f64().map_or_else(|| n.to_string(), |f| format!("{f}")),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", inner.join(","))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, String)> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            entries.sort();
            let inner: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}:{v}", Value::String((*k).clone())))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        other => other.to_string(),
    }
}

fn matches_any(path: &[String], patterns: &[&str]) -> bool {
    patterns.iter().any(|p| {
        let parts: Vec<&str> = p.split('.').collect();
        parts.len() == path.len() && parts.iter().zip(path).all(|(p, s)| *p == "*" || p == s)
    })
}

fn field(path: &[String], desired: &Value, live: Option<&Value>) -> DriftField {
    DriftField {
        field: display_path(path),
        git: shown(desired),
        live: live.map_or_else(|| UNSET.to_owned(), shown),
    }
}

/// `a.0.b` → `a[0].b`; the root is `.`.
fn display_path(path: &[String]) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let mut s = String::new();
    for part in path {
        if part.bytes().all(|b| b.is_ascii_digit()) {
            s.push('[');
            s.push_str(part);
            s.push(']');
        } else if part.starts_with('[') {
            s.push_str(part);
        } else {
            if !s.is_empty() {
                s.push('.');
            }
            s.push_str(part);
        }
    }
    s
}

fn shown(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text;
    }
    let cut: String = text.chars().take(MAX_VALUE_CHARS).collect();
    format!("{cut}…")
}

/// One line for a person: `2 fields differ from Git: memorySize (git 512, live 1024); ...`.
pub fn summary(fields: &[DriftField]) -> String {
    if fields.is_empty() {
        return "the live state matches Git".into();
    }
    let listed: Vec<String> = fields
        .iter()
        .take(3)
        .map(|f| format!("{} (git {}, live {})", f.field, f.git, f.live))
        .collect();
    let more = fields.len().saturating_sub(3);
    let tail = if more > 0 {
        format!("; and {more} more")
    } else {
        String::new()
    };
    let noun = if fields.len() == 1 {
        "field differs"
    } else {
        "fields differ"
    };
    format!(
        "{} {noun} from Git: {}{tail}",
        fields.len(),
        listed.join("; ")
    )
}

/// Drifted fields as the API shows them: each side a JSON value (`"git": 512`, not
/// `"git": "512"`), a side that lacks the field left out, and a side that is a description
/// for a person rather than a value (`in Git`, a hidden Secret's value, a value cut short)
/// a string named in `text`. For `#[serde(with = "...")]` on a `Vec<DriftField>`; reading it
/// back gives the stored form exactly.
pub mod as_values {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    use super::{DriftField, UNSET};

    #[derive(Serialize, Deserialize)]
    struct Shown {
        field: String,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        git: Option<Value>,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        live: Option<Value>,
        /// The sides (`git`, `live`) that are text for a person, not values.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        text: Vec<String>,
    }

    /// A side that is there, even as `null` (which is a value: the platform's null).
    fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
        Value::deserialize(d).map(Some)
    }

    /// A side as shown, and whether it is text.
    fn side(stored: &str) -> (Option<Value>, bool) {
        if stored == UNSET {
            return (None, false);
        }
        match serde_json::from_str::<Value>(stored) {
            Ok(v) => (Some(v), false),
            Err(_) => (Some(Value::String(stored.to_owned())), true),
        }
    }

    fn stored(side: Option<Value>, text: bool) -> String {
        match side {
            None => UNSET.to_owned(),
            Some(Value::String(s)) if text => s,
            Some(v) => v.to_string(),
        }
    }

    pub fn serialize<S: Serializer>(fields: &[DriftField], s: S) -> Result<S::Ok, S::Error> {
        let shown: Vec<Shown> = fields
            .iter()
            .map(|f| {
                let (git, git_text) = side(&f.git);
                let (live, live_text) = side(&f.live);
                let text = [("git", git_text), ("live", live_text)]
                    .into_iter()
                    .filter(|(_, t)| *t)
                    .map(|(name, _)| name.to_owned())
                    .collect();
                Shown {
                    field: f.field.clone(),
                    git,
                    live,
                    text,
                }
            })
            .collect();
        shown.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<DriftField>, D::Error> {
        let shown = Vec::<Shown>::deserialize(d)?;
        Ok(shown
            .into_iter()
            .map(|f| {
                let is_text = |side: &str| f.text.iter().any(|t| t == side);
                DriftField {
                    git: stored(f.git, is_text("git")),
                    live: stored(f.live, is_text("live")),
                    field: f.field,
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_api_shows_values_as_json_and_reads_them_back_exactly() {
        #[derive(Serialize, Deserialize)]
        struct View {
            #[serde(with = "as_values")]
            drift: Vec<DriftField>,
        }
        let f = |field: &str, git: &str, live: &str| DriftField {
            field: field.into(),
            git: git.into(),
            live: live.into(),
        };
        let stored = vec![
            f("memorySize", "512", "1024"),
            f("env.MODE", r#""blue""#, UNSET),
            f("tags", r#"{"a":[1,2]}"#, "null"),
            f("Secret/db", "in Git", "(hidden)"),
        ];
        let shown = serde_json::to_value(View {
            drift: stored.clone(),
        })
        .unwrap();
        assert_eq!(
            shown,
            serde_json::json!({"drift": [
                {"field": "memorySize", "git": 512, "live": 1024},
                {"field": "env.MODE", "git": "blue"},
                {"field": "tags", "git": {"a": [1, 2]}, "live": null},
                {"field": "Secret/db", "git": "in Git", "live": "(hidden)", "text": ["git", "live"]},
            ]})
        );
        let back: View = serde_json::from_value(shown).unwrap();
        assert_eq!(back.drift, stored);
    }

    const RULES: Rules<'static> = Rules {
        unordered: &["vpcConfig.subnetIds", "tags", "containers.*.ports"],
        ignored: &["revisionId"],
        keyed: &[("containers.*.env", "name")],
    };

    fn check(desired: Value, live: Value, expected: &[(&str, &str, &str)]) {
        let got = diff(&desired, &live, &RULES);
        let got: Vec<(&str, &str, &str)> = got
            .iter()
            .map(|f| (f.field.as_str(), f.git.as_str(), f.live.as_str()))
            .collect();
        assert_eq!(got, expected, "desired {desired} live {live}");
    }

    #[test]
    fn a_keyed_list_compares_and_names_items_by_key_whatever_the_order() {
        let env = |items: Value| json!({"containers": [{"image": "a", "env": items}]});
        // Reordered: no drift.
        check(
            env(json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])),
            env(json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}])),
            &[],
        );
        // Changed, missing live, and only live: each by its name.
        check(
            env(json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])),
            env(json!([{"name": "A", "value": "9"}, {"name": "C", "value": "3"}])),
            &[
                ("containers[0].env[name=A].value", "\"1\"", "\"9\""),
                (
                    "containers[0].env[name=B]",
                    "{\"name\":\"B\",\"value\":\"2\"}",
                    UNSET,
                ),
                (
                    "containers[0].env[name=C]",
                    UNSET,
                    "{\"name\":\"C\",\"value\":\"3\"}",
                ),
            ],
        );
        // Items without the key compare by position.
        check(
            env(json!([{"value": "1"}])),
            env(json!([{"value": "2"}])),
            &[("containers[0].env[0].value", "\"1\"", "\"2\"")],
        );
    }

    #[test]
    fn compares_what_git_sets() {
        // Same, with computed fields only on the live side.
        check(
            json!({"memorySize": 512, "environment": {"A": "1"}}),
            json!({"memorySize": 512.0, "environment": {"A": "1"}, "functionArn": "arn:x", "revisionId": "r"}),
            &[],
        );
        // A changed scalar and a missing field.
        check(
            json!({"memorySize": 512, "timeout": 30}),
            json!({"memorySize": 1024}),
            &[("memorySize", "512", "1024"), ("timeout", "30", UNSET)],
        );
        // Empty values in Git match an absent live field.
        check(json!({"layers": [], "description": ""}), json!({}), &[]);
        // Ignored even when Git sets it.
        check(json!({"revisionId": "a"}), json!({"revisionId": "b"}), &[]);
    }

    #[test]
    fn order_only_matters_where_it_means_something() {
        // Reordered subnets are not drift (pipecd #6529).
        check(
            json!({"vpcConfig": {"subnetIds": ["a", "b"]}}),
            json!({"vpcConfig": {"subnetIds": ["b", "a"]}}),
            &[],
        );
        // A replaced subnet is.
        check(
            json!({"vpcConfig": {"subnetIds": ["a", "b"]}}),
            json!({"vpcConfig": {"subnetIds": ["a", "c"]}}),
            &[("vpcConfig.subnetIds", r#"["a","b"]"#, r#"["a","c"]"#)],
        );
        // Unordered under a wildcard, objects as elements, keys in any order.
        check(
            json!({"containers": [{"ports": [{"p": 80, "proto": "tcp"}, {"p": 443}]}]}),
            json!({"containers": [{"ports": [{"p": 443.0}, {"proto": "tcp", "p": 80}]}]}),
            &[],
        );
        // Ordered arrays compare by position and name the index.
        check(
            json!({"containers": [{"image": "a:1"}, {"image": "b:1"}]}),
            json!({"containers": [{"image": "a:1"}, {"image": "b:2", "cpu": 0}]}),
            &[("containers[1].image", r#""b:1""#, r#""b:2""#)],
        );
        // A different length is one difference at the array.
        check(
            json!({"layers": ["x"]}),
            json!({"layers": ["x", "y"]}),
            &[("layers", r#"["x"]"#, r#"["x","y"]"#)],
        );
    }

    #[test]
    fn long_values_are_cut_and_summaries_read() {
        let long = "x".repeat(500);
        let d = diff(&json!({"a": long}), &json!({"a": "y"}), &Rules::default());
        assert_eq!(d[0].git.chars().count(), MAX_VALUE_CHARS + 1);
        assert!(d[0].git.ends_with('…'));

        assert_eq!(summary(&[]), "the live state matches Git");
        let f = |n: &str| DriftField {
            field: n.into(),
            git: "1".into(),
            live: "2".into(),
        };
        assert_eq!(
            summary(&[f("a")]),
            "1 field differs from Git: a (git 1, live 2)"
        );
        assert_eq!(
            summary(&[f("a"), f("b"), f("c"), f("d")]),
            "4 fields differ from Git: a (git 1, live 2); b (git 1, live 2); c (git 1, live 2); and 1 more"
        );
    }
}
