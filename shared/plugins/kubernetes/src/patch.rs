//! PipeCD's canary `patches` (`K8S_CANARY_ROLLOUT.with.patches`): changes made to the canary's
//! copies of the manifests only, so the canary can run with, say, other weights in its
//! ConfigMap than the primary has.
//!
//! Each patch names a manifest of the app by `kind` and `name`, and lists `ops` applied in
//! order. The one op PipeCD runs is `yaml-replace`: the value at `path` (`$.data.key`,
//! `$.spec.template.spec.containers[0].image`, `$.data.'envoy-config.yaml'` for a key with
//! dots) becomes `value`. With `documentRoot`, the ops apply to the YAML document held in that
//! string field (a config file in a ConfigMap), which is then written back. A replaced string
//! stays a string; a replaced number or boolean takes `value` as YAML reads it (`"90"` → 90),
//! so a weight stays a number. PipeCD accepts the other op names in its schema but fails them
//! at runtime; gannet refuses them when the config is checked.

use gannet_sdk::plugin::StageConfigError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::manifest::Manifest;

/// The only op PipeCD runs.
pub const YAML_REPLACE: &str = "yaml-replace";

/// One patch of `with.patches`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestPatch {
    pub target: PatchTarget,
    #[serde(default)]
    pub ops: Vec<PatchOp>,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchTarget {
    pub kind: String,
    pub name: String,
    /// A string field holding a YAML document to patch instead of the manifest itself.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub document_root: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PatchOp {
    #[serde(default = "yaml_replace")]
    pub op: String,
    pub path: String,
    #[serde(default)]
    pub value: String,
}

fn yaml_replace() -> String {
    YAML_REPLACE.to_owned()
}

/// One step of a path: a key of a map, or an index of a list.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Checks `patches` as the config checker does: each op is `yaml-replace` and each path
/// (and document root) reads. `field` is where the patches were written.
pub fn check(patches: &[ManifestPatch]) -> Result<(), StageConfigError> {
    for (i, p) in patches.iter().enumerate() {
        let at = |rest: &str| format!("patches[{i}].{rest}");
        if p.target.kind.is_empty() || p.target.name.is_empty() {
            return Err(StageConfigError::new(
                at("target"),
                "names the manifest to patch by kind and name",
            ));
        }
        if !p.target.document_root.is_empty() {
            parse_path(&p.target.document_root)
                .map_err(|e| StageConfigError::new(at("target.documentRoot"), e))?;
        }
        for (j, op) in p.ops.iter().enumerate() {
            if op.op != YAML_REPLACE {
                return Err(StageConfigError::new(
                    at(&format!("ops[{j}].op")),
                    format!(
                        "{:?} is not supported: PipeCD runs only {YAML_REPLACE} (its other op names fail when the stage runs)",
                        op.op
                    ),
                ));
            }
            parse_path(&op.path)
                .map_err(|e| StageConfigError::new(at(&format!("ops[{j}].path")), e))?;
        }
    }
    Ok(())
}

/// `manifests` with `patches` applied, in order; each must find its manifest.
pub fn apply(manifests: &mut [Manifest], patches: &[ManifestPatch]) -> Result<(), String> {
    for p in patches {
        let m = manifests
            .iter_mut()
            .find(|m| m.kind == p.target.kind && m.name == p.target.name)
            .ok_or_else(|| {
                format!(
                    "no manifest matches the patch of {} {}",
                    p.target.kind, p.target.name
                )
            })?;
        let what = format!("{} {} ({}:{})", m.kind, m.name, m.file, m.line);
        patch_one(&mut m.body, p).map_err(|e| format!("patching {what}: {e}"))?;
    }
    Ok(())
}

fn patch_one(body: &mut Value, p: &ManifestPatch) -> Result<(), String> {
    if p.target.document_root.is_empty() {
        return replace_all(body, &p.ops);
    }
    let root = parse_path(&p.target.document_root)?;
    let field = at(body, &root).ok_or_else(|| {
        format!(
            "documentRoot {} is not in the manifest",
            p.target.document_root
        )
    })?;
    let Value::String(text) = field else {
        return Err(format!(
            "documentRoot {} must be a string holding a YAML document",
            p.target.document_root
        ));
    };
    let mut document: Value = gannet_config::yaml::from_str(text)
        .map_err(|e| format!("documentRoot {}: {e}", p.target.document_root))?;
    replace_all(&mut document, &p.ops)?;
    *field = Value::String(
        serde_saphyr::to_string(&document).map_err(|e| format!("writing the document: {e}"))?,
    );
    Ok(())
}

fn replace_all(doc: &mut Value, ops: &[PatchOp]) -> Result<(), String> {
    for op in ops {
        let path = parse_path(&op.path)?;
        let old = at(doc, &path).ok_or_else(|| format!("{} is not in the document", op.path))?;
        *old = match old {
            Value::String(_) | Value::Null => Value::String(op.value.clone()),
            _ => scalar(&op.value),
        };
    }
    Ok(())
}

/// `text` as YAML reads a plain scalar: a number, a boolean, or else the string.
fn scalar(text: &str) -> Value {
    if let Ok(n) = text.parse::<i64>() {
        return Value::from(n);
    }
    if let Some(n) = text
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
    {
        return Value::Number(n);
    }
    match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(text.to_owned()),
    }
}

fn at<'v>(mut doc: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    for step in path {
        doc = match step {
            Step::Key(k) => doc.as_object_mut()?.get_mut(k)?,
            Step::Index(i) => doc.as_array_mut()?.get_mut(*i)?,
        };
    }
    Some(doc)
}

/// `$`, then `.key`, `.'key.with.dots'` (or double quotes) and `[n]`, as PipeCD's paths are
/// written. Recursive descent (`..`) and wildcards select several places, which a replace
/// cannot mean, so they are refused.
fn parse_path(path: &str) -> Result<Vec<Step>, String> {
    let bad = |why: &str| format!("path {path:?}: {why}");
    let mut rest = path
        .strip_prefix('$')
        .ok_or_else(|| bad("starts with $ (the document's root)"))?;
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let (index, after) = r.split_once(']').ok_or_else(|| bad("a [ is not closed"))?;
            let index = index
                .trim()
                .parse()
                .map_err(|_| bad("an index is a whole number, such as [0]"))?;
            steps.push(Step::Index(index));
            rest = after;
        } else if let Some(r) = rest.strip_prefix('.') {
            if r.starts_with('.') || r.starts_with('*') {
                return Err(bad("recursive descent and wildcards are not supported"));
            }
            let (key, after) = match r.chars().next() {
                Some(q @ ('\'' | '"')) => {
                    let body = &r[1..];
                    let end = body
                        .find(q)
                        .ok_or_else(|| bad("a quoted key is not closed"))?;
                    (&body[..end], &body[end + 1..])
                }
                _ => {
                    let end = r.find(['.', '[']).unwrap_or(r.len());
                    (&r[..end], &r[end..])
                }
            };
            if key.is_empty() {
                return Err(bad("a key is empty"));
            }
            steps.push(Step::Key(key.to_owned()));
            rest = after;
        } else {
            return Err(bad("expected .key or [index]"));
        }
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(kind: &str, name: &str, body: Value) -> Manifest {
        Manifest {
            file: "m.yaml".into(),
            line: 1,
            api_version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            namespace: None,
            body,
        }
    }

    fn patch(kind: &str, name: &str, root: &str, ops: &[(&str, &str)]) -> ManifestPatch {
        ManifestPatch {
            target: PatchTarget {
                kind: kind.into(),
                name: name.into(),
                document_root: root.into(),
            },
            ops: ops
                .iter()
                .map(|(path, value)| PatchOp {
                    op: YAML_REPLACE.into(),
                    path: (*path).into(),
                    value: (*value).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn paths_read_keys_quoted_keys_and_indexes() {
        assert_eq!(
            parse_path("$.data.'envoy-config.yaml'").unwrap(),
            [
                Step::Key("data".into()),
                Step::Key("envoy-config.yaml".into())
            ]
        );
        assert_eq!(
            parse_path("$.a[0].b[12]").unwrap(),
            [
                Step::Key("a".into()),
                Step::Index(0),
                Step::Key("b".into()),
                Step::Index(12)
            ]
        );
        assert_eq!(parse_path("$").unwrap(), []);
        for bad in ["a.b", "$..a", "$.*", "$.a[x]", "$.a[0", "$.'a", "$.", "$a"] {
            assert!(parse_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_replace_keeps_a_numbers_type_and_a_strings() {
        let mut m = vec![manifest(
            "Deployment",
            "web",
            json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [{"image": "web:1"}]}}}}),
        )];
        let p = patch(
            "Deployment",
            "web",
            "",
            &[
                ("$.spec.replicas", "1"),
                ("$.spec.template.spec.containers[0].image", "web:canary"),
            ],
        );
        apply(&mut m, &[p]).unwrap();
        assert_eq!(m[0].body["spec"]["replicas"], 1);
        assert_eq!(
            m[0].body["spec"]["template"]["spec"]["containers"][0]["image"],
            "web:canary"
        );
    }

    /// PipeCD's canary-patch example: the weights in an Envoy config held in a ConfigMap.
    #[test]
    fn a_document_root_patches_the_yaml_inside_a_field() {
        let envoy = "static_resources:\n  clusters:\n    - name: primary\n      weight: 50\n    - name: canary\n      weight: 50\n";
        let mut m = vec![manifest(
            "ConfigMap",
            "envoy",
            json!({"data": {"envoy-config.yaml": envoy, "other": "x"}}),
        )];
        let p = patch(
            "ConfigMap",
            "envoy",
            "$.data.'envoy-config.yaml'",
            &[
                ("$.static_resources.clusters[0].weight", "90"),
                ("$.static_resources.clusters[1].weight", "10"),
            ],
        );
        apply(&mut m, &[p]).unwrap();
        let text = m[0].body["data"]["envoy-config.yaml"].as_str().unwrap();
        let doc: Value = gannet_config::yaml::from_str(text).unwrap();
        assert_eq!(doc["static_resources"]["clusters"][0]["weight"], 90);
        assert_eq!(doc["static_resources"]["clusters"][1]["weight"], 10);
        assert_eq!(doc["static_resources"]["clusters"][1]["name"], "canary");
        assert_eq!(m[0].body["data"]["other"], "x");
    }

    #[test]
    fn a_patch_that_finds_nothing_fails_naming_it() {
        let mut m = vec![manifest("ConfigMap", "envoy", json!({"data": {"a": "1"}}))];
        let missing = patch("ConfigMap", "other", "", &[("$.data.a", "2")]);
        assert_eq!(
            apply(&mut m, &[missing]).unwrap_err(),
            "no manifest matches the patch of ConfigMap other"
        );
        let no_field = patch("ConfigMap", "envoy", "", &[("$.data.b", "2")]);
        assert_eq!(
            apply(&mut m, &[no_field]).unwrap_err(),
            "patching ConfigMap envoy (m.yaml:1): $.data.b is not in the document"
        );
        let not_text = patch("ConfigMap", "envoy", "$.data", &[("$.x", "2")]);
        assert!(apply(&mut m, &[not_text])
            .unwrap_err()
            .contains("must be a string holding a YAML document"));
    }

    #[test]
    fn the_check_refuses_other_ops_and_bad_paths_naming_the_field() {
        let mut p = patch("ConfigMap", "c", "", &[("$.data.a", "1")]);
        assert!(check(std::slice::from_ref(&p)).is_ok());
        p.ops[0].op = "json-replace".into();
        assert_eq!(
            check(&[p.clone()]).unwrap_err().field,
            "patches[0].ops[0].op"
        );
        p.ops[0].op = YAML_REPLACE.into();
        p.ops[0].path = "data.a".into();
        assert_eq!(
            check(&[p.clone()]).unwrap_err().field,
            "patches[0].ops[0].path"
        );
        p.target.name.clear();
        assert_eq!(check(&[p]).unwrap_err().field, "patches[0].target");
    }
}
