//! What a saved plan changes, read from `terraform show -json`: the resources by address, the
//! actions, and the attributes that change, with sensitive values hidden. The deployment keeps
//! this view (never the raw JSON, which holds sensitive values in the clear), and drift is
//! read from it.

use gannet_domain::drift::Health;
use gannet_domain::drift::{DriftField, LiveResource, UNSET};
use gannet_sdk::presentation::{AttributeChange, Detail, ResourceChange};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The view kept in stage metadata is cut to stay under this many bytes.
pub const MAX_KEPT_BYTES: usize = 32 * 1024;
/// An attribute's value is cut to this many characters.
const MAX_VALUE_CHARS: usize = 200;
/// Shown in place of a sensitive value.
pub const SENSITIVE: &str = "(sensitive)";
/// Shown in place of a value known only after apply.
pub const UNKNOWN: &str = "(known after apply)";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub add: usize,
    pub change: usize,
    pub destroy: usize,
    /// The resources the plan changes (no-ops left out).
    pub changes: Vec<Change>,
    /// Changes left out to keep the view small.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: usize,
    /// The resources in the state before the plan, by address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A resource the plan changes, kept as the clients show it: its address, Terraform's actions
/// (`create`, `update`, `delete`, or `delete`+`create`, a replace), and each changed attribute
/// (`before` is `<unset>` when absent).
pub type Change = ResourceChange;

impl Plan {
    /// Reads `terraform show -json` of a saved plan.
    pub fn parse(json: &[u8]) -> Result<Self, String> {
        let doc: Value = serde_json::from_slice(json)
            .map_err(|e| format!("terraform show -json printed no plan: {e}"))?;
        let mut plan = Self::default();
        for rc in doc["resource_changes"].as_array().into_iter().flatten() {
            let change = &rc["change"];
            let actions: Vec<String> = change["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect();
            let creates = actions.iter().any(|a| a == "create");
            let deletes = actions.iter().any(|a| a == "delete");
            let updates = actions.iter().any(|a| a == "update");
            if !(creates || deletes || updates) {
                continue;
            }
            plan.add += usize::from(creates);
            plan.destroy += usize::from(deletes);
            plan.change += usize::from(updates);
            plan.changes.push(Change {
                address: rc["address"].as_str().unwrap_or("?").to_owned(),
                attributes: attributes(change),
                actions,
            });
        }
        collect_addresses(
            &doc["prior_state"]["values"]["root_module"],
            &mut plan.resources,
        );
        Ok(plan)
    }

    pub fn has_changes(&self) -> bool {
        !self.changes.is_empty() || self.omitted > 0
    }

    /// The plan as a person reads it: resource by resource, with what changes in each.
    pub fn detail(&self) -> Detail {
        Detail::Resources {
            title: "Plan".into(),
            summary: self.summary(),
            items: self.changes.clone(),
            omitted: self.omitted,
        }
    }

    /// Terraform's summary line: `Plan: 1 to add, 0 to change, 0 to destroy.`
    pub fn summary(&self) -> String {
        if !self.has_changes() {
            return "No changes.".into();
        }
        format!(
            "Plan: {} to add, {} to change, {} to destroy.",
            self.add, self.change, self.destroy
        )
    }

    /// The view as kept in stage metadata: JSON under [`MAX_KEPT_BYTES`], dropping attribute
    /// values, then whole changes (counted in `omitted`), until it fits.
    pub fn kept(&self) -> String {
        let mut view = self.clone();
        view.resources.clear();
        let fits = |v: &Self| serde_json::to_string(v).unwrap_or_default();
        let mut text = fits(&view);
        if text.len() > MAX_KEPT_BYTES {
            for c in &mut view.changes {
                for a in &mut c.attributes {
                    a.before.clear();
                    a.after.clear();
                }
            }
            text = fits(&view);
        }
        while text.len() > MAX_KEPT_BYTES && !view.changes.is_empty() {
            let drop = view.changes.len().div_ceil(4);
            view.changes.truncate(view.changes.len() - drop);
            view.omitted += drop;
            text = fits(&view);
        }
        text
    }

    /// The plan as drift: each attribute the plan would change, with Git's value (after) and
    /// the live one (before); a resource to create or destroy as a whole. Attributes known only
    /// after apply are left out: they follow from the others, Git does not set them.
    pub fn drift(&self) -> Vec<DriftField> {
        let mut out = Vec::new();
        for c in &self.changes {
            let set: Vec<&AttributeChange> =
                c.attributes.iter().filter(|a| a.after != UNKNOWN).collect();
            let creates = c.actions.iter().any(|a| a == "create");
            let deletes = c.actions.iter().any(|a| a == "delete");
            match (creates, deletes) {
                (true, false) => out.push(DriftField {
                    field: c.address.clone(),
                    git: "(in the configuration)".into(),
                    live: UNSET.into(),
                }),
                (false, true) => out.push(DriftField {
                    field: c.address.clone(),
                    git: "(not in the configuration)".into(),
                    live: "(exists)".into(),
                }),
                _ if set.is_empty() => out.push(DriftField {
                    field: c.address.clone(),
                    git: format!("({})", c.actions.join(", ")),
                    live: "(differs)".into(),
                }),
                _ => out.extend(set.iter().map(|a| DriftField {
                    field: format!("{}.{}", c.address, a.name),
                    git: a.after.clone(),
                    live: a.before.clone(),
                })),
            }
        }
        out
    }

    /// The resources in the state, for the app's live view.
    pub fn live_resources(&self) -> Vec<LiveResource> {
        self.resources
            .iter()
            .map(|address| {
                let differs = self.changes.iter().any(|c| &c.address == address);
                LiveResource {
                    kind: "TerraformResource".into(),
                    id: address.clone(),
                    health: Health::Healthy,
                    summary: if differs {
                        "differs from the configuration".into()
                    } else {
                        "matches the configuration".into()
                    },
                }
            })
            .collect()
    }
}

/// The attributes whose value changes, sensitive ones hidden.
fn attributes(change: &Value) -> Vec<AttributeChange> {
    let empty = Map::new();
    let before = change["before"].as_object().unwrap_or(&empty);
    let after = change["after"].as_object().unwrap_or(&empty);
    let unknown = change["after_unknown"].as_object().unwrap_or(&empty);
    let mut names: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .chain(unknown.keys())
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let is_unknown = unknown.get(name).is_some_and(is_marked);
        let (b, a) = (before.get(name), after.get(name));
        if !is_unknown && b == a {
            continue;
        }
        let hidden =
            |mask: &Value| mask.as_bool() == Some(true) || mask.get(name).is_some_and(is_marked);
        let shown = |v: Option<&Value>, sensitive: bool| match v {
            _ if sensitive => SENSITIVE.to_owned(),
            None | Some(Value::Null) => UNSET.to_owned(),
            Some(v) => cut(&v.to_string()),
        };
        out.push(AttributeChange {
            name: name.clone(),
            before: shown(b, hidden(&change["before_sensitive"])),
            after: if is_unknown {
                UNKNOWN.to_owned()
            } else {
                shown(a, hidden(&change["after_sensitive"]))
            },
        });
    }
    out
}

/// True when a sensitivity (or unknown) mask marks anything: `true`, or a structure holding it.
fn is_marked(mask: &Value) -> bool {
    match mask {
        Value::Bool(b) => *b,
        Value::Array(items) => items.iter().any(is_marked),
        Value::Object(map) => map.values().any(is_marked),
        _ => false,
    }
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text.to_owned();
    }
    let head: String = text.chars().take(MAX_VALUE_CHARS).collect();
    format!("{head}…")
}

fn collect_addresses(module: &Value, out: &mut Vec<String>) {
    for r in module["resources"].as_array().into_iter().flatten() {
        if let Some(address) = r["address"].as_str() {
            out.push(address.to_owned());
        }
    }
    for child in module["child_modules"].as_array().into_iter().flatten() {
        collect_addresses(child, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn show(changes: Value) -> Vec<u8> {
        json!({
            "format_version": "1.2",
            "prior_state": {"values": {"root_module": {"resources": [
                {"address": "terraform_data.app"},
            ], "child_modules": [{"resources": [{"address": "module.db.terraform_data.db"}]}]}}},
            "resource_changes": changes,
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn counts_actions_as_terraform_does_and_hides_sensitive_values() {
        let plan = Plan::parse(&show(json!([
            {"address": "terraform_data.app", "change": {
                "actions": ["update"],
                "before": {"input": "nginx:1", "id": "x", "token": "old-secret"},
                "after": {"input": "nginx:2", "id": "x", "token": "new-secret"},
                "after_unknown": {"output": true},
                "before_sensitive": {"token": true},
                "after_sensitive": {"token": true},
            }},
            {"address": "terraform_data.new", "change": {"actions": ["create"], "after": {"input": 1}}},
            {"address": "terraform_data.old", "change": {"actions": ["delete", "create"],
                "before": {"input": 1}, "after": {"input": 2}}},
            {"address": "terraform_data.same", "change": {"actions": ["no-op"]}},
        ])))
        .expect("plan");
        assert_eq!((plan.add, plan.change, plan.destroy), (2, 1, 1));
        assert_eq!(plan.summary(), "Plan: 2 to add, 1 to change, 1 to destroy.");
        assert_eq!(plan.changes.len(), 3);
        let app = &plan.changes[0].attributes;
        let names: Vec<&str> = app.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["input", "output", "token"]);
        assert_eq!(app[2].before, SENSITIVE);
        assert_eq!(app[2].after, SENSITIVE);
        assert_eq!(app[1].after, UNKNOWN);
        let kept = plan.kept();
        assert!(!kept.contains("secret"), "{kept}");
        let drift = plan.drift();
        assert_eq!(drift[0].field, "terraform_data.app.input");
        assert_eq!(
            (drift[0].git.as_str(), drift[0].live.as_str()),
            ("\"nginx:2\"", "\"nginx:1\"")
        );
        assert!(drift
            .iter()
            .all(|d| !d.git.contains("secret") && !d.live.contains("secret")));
        assert_eq!(
            plan.resources,
            ["terraform_data.app", "module.db.terraform_data.db"]
        );
    }

    #[test]
    fn no_changes_and_bad_json() {
        let plan = Plan::parse(&show(json!([]))).expect("plan");
        assert!(!plan.has_changes());
        assert_eq!(plan.summary(), "No changes.");
        assert!(Plan::parse(b"not json").unwrap_err().contains("no plan"));
    }

    #[test]
    fn a_huge_plan_is_cut_to_fit_and_says_how_much_was_left_out() {
        let changes: Vec<Value> = (0..3000)
            .map(|i| json!({"address": format!("terraform_data.r{i}"), "change": {
                "actions": ["update"], "before": {"input": "a".repeat(150)}, "after": {"input": "b".repeat(150)}}}))
            .collect();
        let plan = Plan::parse(&show(Value::Array(changes))).expect("plan");
        let kept = plan.kept();
        assert!(kept.len() <= MAX_KEPT_BYTES, "{}", kept.len());
        let back: Plan = serde_json::from_str(&kept).expect("kept view parses");
        assert_eq!(back.change, 3000);
        assert!(back.omitted > 0 && back.omitted + back.changes.len() == 3000);
    }
}
