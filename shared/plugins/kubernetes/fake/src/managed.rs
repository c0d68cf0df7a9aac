//! `metadata.managedFields`: which manager owns which fields, server-side apply's conflicts
//! and give-ups, and the ownership an Update operation takes.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::fields::{self, FieldSet, Path};

/// One managedFields entry.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub manager: String,
    /// "Apply" or "Update".
    pub operation: &'static str,
    pub subresource: Option<&'static str>,
    pub api_version: String,
    pub time: String,
    pub fields: FieldSet,
}

/// A field another manager owns with a different value than the one applied.
pub(crate) type Conflict = (Path, String);

impl Entry {
    /// The same manager: name, operation and subresource (as the real server keys entries).
    fn same_owner(&self, other: &Entry) -> bool {
        (&self.manager, self.operation, self.subresource)
            == (&other.manager, other.operation, other.subresource)
    }

    /// How conflicts name a manager: `"m"` for Apply, `"m" using apps/v1` for Update.
    fn describe(&self) -> String {
        let mut text = format!("{:?}", self.manager);
        if let Some(subresource) = self.subresource {
            text.push_str(&format!(" with subresource {subresource:?}"));
        }
        if self.operation == "Update" {
            text.push_str(&format!(" using {}", self.api_version));
        }
        text
    }

    fn render(&self) -> Value {
        let fields = fields::to_fields_v1(&self.fields);
        let mut entry = json!({
            "manager": self.manager, "operation": self.operation, "apiVersion": self.api_version,
            "time": self.time, "fieldsType": "FieldsV1", "fieldsV1": fields
        });
        if let Some(subresource) = self.subresource {
            entry["subresource"] = json!(subresource);
        }
        entry
    }
}

/// Server-side apply's ownership change for `me` (whose fields are the applied set).
/// A field of the set that another manager owns and whose live value differs from the applied
/// one is a conflict: an error, unless forced, when the field moves to `me`. Equal values are
/// shared. Returns the fields `me` owned before, gave up now, and nobody else owns (nor any
/// field below them): the caller removes those from the object.
pub(crate) fn apply(
    entries: &mut Vec<Entry>,
    me: Entry,
    live: &Value,
    applied: &Value,
    force: bool,
) -> Result<Vec<Path>, Vec<Conflict>> {
    let mut conflicts = Vec::new();
    for path in me.fields.iter().filter(|path| !fields::is_item(path)) {
        let live_value = fields::get(live, path);
        if live_value.is_none() || live_value == fields::get(applied, path) {
            continue;
        }
        let owners = entries
            .iter()
            .filter(|e| !e.same_owner(&me) && e.fields.contains(path));
        conflicts.extend(owners.map(|owner| (path.clone(), owner.describe())));
    }
    if !conflicts.is_empty() && !force {
        conflicts.sort_by(|a, b| a.1.cmp(&b.1));
        return Err(conflicts);
    }
    for entry in entries.iter_mut().filter(|e| !e.same_owner(&me)) {
        entry
            .fields
            .retain(|path| !conflicts.iter().any(|(conflict, _)| conflict == path));
    }
    let previous = match entries.iter().position(|e| e.same_owner(&me)) {
        Some(index) => entries.remove(index).fields,
        None => FieldSet::new(),
    };
    let kept: Vec<&Path> = entries
        .iter()
        .flat_map(|e| &e.fields)
        .chain(&me.fields)
        .collect();
    let kept_below = |path: &Path| kept.iter().any(|k| k.starts_with(path));
    let given_up = previous.difference(&me.fields);
    let removed = given_up.filter(|p| !fields::is_key_field(p) && !kept_below(p));
    let removed = removed.cloned().collect();
    entries.push(me);
    Ok(removed)
}

/// An Update operation: the fields it changed move to `me` (merged into its earlier entry).
pub(crate) fn update(entries: &mut Vec<Entry>, me: Entry) {
    for entry in entries.iter_mut().filter(|e| !e.same_owner(&me)) {
        entry.fields.retain(|path| !me.fields.contains(path));
    }
    match entries.iter_mut().find(|e| e.same_owner(&me)) {
        Some(entry) => {
            entry.fields.extend(me.fields);
            entry.api_version = me.api_version;
            entry.time = me.time;
        }
        None => entries.push(me),
    }
}

/// Drops owned fields the object no longer has, then empty entries; sorts as the real server
/// does (Apply before Update, then by time and manager).
pub(crate) fn tidy(entries: &mut Vec<Entry>, object: &Value) {
    for entry in entries.iter_mut() {
        entry
            .fields
            .retain(|path| fields::get(object, path).is_some());
    }
    entries.retain(|entry| !entry.fields.is_empty());
    entries.sort_by(|a, b| {
        (a.operation, &a.time, &a.manager).cmp(&(b.operation, &b.time, &b.manager))
    });
}

/// Whether two lists of entries own the same fields, whatever their times.
pub(crate) fn same_ownership(a: &[Entry], b: &[Entry]) -> bool {
    let untimed = |e: &Entry| Entry {
        time: String::new(),
        ..e.clone()
    };
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| untimed(a) == untimed(b))
}

/// `metadata.managedFields` as the API returns it.
pub(crate) fn render(entries: &[Entry]) -> Value {
    Value::Array(entries.iter().map(Entry::render).collect())
}

/// The 409 of an apply with conflicts, worded like the real server's.
pub(crate) fn conflict_status(conflicts: &[Conflict]) -> Value {
    let mut by_manager: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (path, manager) in conflicts {
        by_manager
            .entry(manager)
            .or_default()
            .push(fields::display(path));
    }
    let parts: Vec<String> = by_manager
        .iter()
        .map(|(manager, paths)| match paths.as_slice() {
            [one] => format!("conflict with {manager}: {one}"),
            many => format!("conflicts with {manager}:\n- {}", many.join("\n- ")),
        })
        .collect();
    let plural = if conflicts.len() == 1 { "" } else { "s" };
    let message = format!(
        "Apply failed with {} conflict{plural}: {}",
        conflicts.len(),
        parts.join("\n")
    );
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(path, manager)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with {manager}"),
                   "field": fields::display(path)})
        })
        .collect();
    crate::status::failure(409, "Conflict", &message, Some(json!({"causes": causes})))
}
