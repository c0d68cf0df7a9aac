use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};

use super::*;
use crate::bounded::MAX_BYTES;
use crate::fixture::yaml_bomb as laughs;

fn value(text: &str) -> Result<Value, Error> {
    from_str(text)
}

fn limit(text: &str) -> Option<LimitError> {
    value(text).err().and_then(|e| e.limit())
}

#[test]
fn real_documents_pass_and_bombs_do_not() {
    assert_eq!(
        value("a: [1, 2, {b: c}]\nd: &x {e: f}\ng: *x\n").unwrap(),
        json!({"a": [1, 2, {"b": "c"}], "d": {"e": "f"}, "g": {"e": "f"}})
    );
    assert_eq!(documents("---\na: 1\n---\nb: 2\n").unwrap().len(), 2);
    assert_eq!(value("key: !Ref thing\n").unwrap(), json!({"key": "thing"}));
    let syntax = value("not: [valid").unwrap_err();
    assert_eq!(syntax.limit(), None, "syntax is not a limit: {syntax}");
    assert!(value(&laughs(3)).is_ok(), "1,110 nodes");
    // A bomb's anchors hold its expansion: that limit trips first.
    assert_eq!(limit(&laughs(9)), Some(LimitError::TooManyAnchoredNodes));
    assert_eq!(
        limit(&laughs(4)),
        Some(LimitError::TooManyAnchoredNodes),
        "11,110 nodes, 13,556 of them kept for its anchors"
    );
    // Aliases outside anchors: the node limit.
    let list = |aliases: usize| {
        format!(
            "a: &a [{}]\nb: [{}]\n",
            ["x"; 1000].join(", "),
            vec!["*a"; aliases].join(", ")
        )
    };
    assert!(value(&list(40)).is_ok(), "41,000 nodes");
    assert_eq!(limit(&list(60)), Some(LimitError::TooManyNodes));
    let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    assert_eq!(limit(&deep), Some(LimitError::TooDeep));
    let mut block = String::new();
    for i in 0..100 {
        block.push_str(&format!("{}k:\n", " ".repeat(i)));
    }
    assert_eq!(limit(&block), Some(LimitError::TooDeep));
    let big = format!("a: \"{}\"\n", "x".repeat(20 * MAX_BYTES));
    assert!(matches!(limit(&big), Some(LimitError::TooLarge { .. })));
    assert!(matches!(
        documents(&big).unwrap_err().limit(),
        Some(LimitError::TooLarge { .. })
    ));
    let message = value(&laughs(9)).unwrap_err();
    assert_eq!(
        (message.line(), message.to_string().as_str()),
        (
            None,
            "too many aliases: its anchors expand to more than 10000 nodes"
        )
    );
}

#[test]
fn depth_counts_what_aliases_expand_to() {
    // Each half nests 40 deep; the alias puts one inside the other.
    let (open, close) = ("[".repeat(40), "]".repeat(40));
    let text = format!("a: &a {open}1{close}\nb: {open}*a{close}\n");
    assert_eq!(limit(&text), Some(LimitError::TooDeep));
}

#[test]
fn long_strings_repeated_by_aliases_are_refused() {
    let text = format!(
        "a: &a \"{}\"\nb: [{}]\n",
        "x".repeat(600_000),
        vec!["*a"; 20].join(", ")
    );
    assert!(text.len() < MAX_BYTES);
    assert_eq!(limit(&text), Some(LimitError::TooLargeExpanded));
}

#[test]
fn the_stream_shares_one_budget() {
    // Each document alone is within the limits; together they are not.
    let one = format!("[{}]\n", ["x"; 10_000].join(", "));
    let stream = [one.as_str(); 6].join("---\n");
    assert!(documents(&one).is_ok());
    assert_eq!(
        documents(&stream).unwrap_err().limit(),
        Some(LimitError::TooManyNodes)
    );
}

#[test]
fn a_bomb_is_refused_quickly() {
    let started = std::time::Instant::now();
    assert_eq!(limit(&laughs(30)), Some(LimitError::TooManyAnchoredNodes));
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn scalars_resolve_as_the_yaml_1_2_core_schema() {
    let text = "a: yes\nb: no\nc: on\nd: off\ne: True\nf: TRUE\ng: false\nh: 012\ni: 1_000\nj: 0x1F\nk: 0o17\nl: 1.5\nm: .inf\nn: ~\no: '1'\np: 2024-01-01\n";
    assert_eq!(
        value(text).unwrap(),
        json!({"a": "yes", "b": "no", "c": "on", "d": "off", "e": true, "f": true, "g": false,
               "h": "012", "i": "1_000", "j": 31, "k": 15, "l": 1.5, "m": null, "n": null,
               "o": "1", "p": "2024-01-01"})
    );
    // A ConfigMap's data keeps what YAML makes of it: the API server, not gannet, says that
    // a number is not a string there (as kubectl's sigs.k8s.io/yaml leaves it).
    assert_eq!(
        value("data: {a: 1, b: 'true', c: yes}").unwrap(),
        json!({"data": {"a": 1, "b": "true", "c": "yes"}})
    );
    // A typed field reads what it can: a number or boolean as written text for a string
    // field, as serde_yaml did.
    let strings: BTreeMap<String, String> = from_str("a: 1\nb: true\nc: yes\nd: 1.50\n").unwrap();
    assert_eq!(strings["a"], "1");
    assert_eq!(strings["b"], "true");
    assert_eq!(strings["d"], "1.50");
    // A boolean field takes true and false only (not yes or on, which Go's yaml.v3 takes).
    let yes = from_str::<BTreeMap<String, bool>>("a: yes").unwrap_err();
    assert_eq!(
        (yes.line(), yes.message()),
        (Some(1), "invalid boolean (strict mode expects true/false)")
    );
    // Unlike serde_yaml (and yaml.v3), a quoted number reads as a number field.
    let quoted: BTreeMap<String, i64> = from_str("a: '5'").unwrap();
    assert_eq!(quoted["a"], 5);
    // So does a quoted boolean for a boolean field.
    let quoted: BTreeMap<String, bool> = from_str("a: 'true'").unwrap();
    assert!(quoted["a"]);
    // An integer past u64 is a float in a value (serde_yaml refused it: out of range).
    assert_eq!(
        value("a: 99999999999999999999").unwrap(),
        json!({"a": 1e20})
    );
}

#[test]
fn merge_keys_are_merged_as_go_yaml_does() {
    // serde_yaml kept `<<` as a key; PipeCD's and kubectl's YAML libraries merge it.
    let text = "base: &b {x: 1, y: 2}\nthing:\n  <<: *b\n  y: 3\nlist:\n  <<: [*b, {z: 4}]\n";
    assert_eq!(
        value(text).unwrap(),
        json!({"base": {"x": 1, "y": 2}, "thing": {"x": 1, "y": 3}, "list": {"x": 1, "y": 2, "z": 4}})
    );
}

#[test]
fn a_duplicate_key_is_an_error() {
    // serde_yaml kept the last one in a value (and refused it in a struct); yaml.v3 refuses it.
    let err = value("a: 1\nb: 2\na: 3\n").unwrap_err();
    assert_eq!(err.line(), Some(3));
    assert!(
        err.message().starts_with("duplicate mapping key: a"),
        "{err}"
    );
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Outer {
    #[allow(dead_code)]
    name: String,
    #[allow(dead_code)]
    inner: Option<Inner>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Inner {
    #[allow(dead_code)]
    count: u32,
}

#[test]
fn errors_carry_the_line_and_the_field() {
    let err = from_str::<Outer>("name: a\ninner:\n  count: many\n").unwrap_err();
    assert_eq!(
        (err.line(), err.path(), err.message()),
        (Some(3), "inner.count", "invalid u32")
    );
    let err = from_str::<Outer>("name: a\ninner:\n  count: 1\n  extra: 2\n").unwrap_err();
    assert_eq!((err.line(), err.path()), (Some(4), "inner.extra"));
    assert!(
        err.message().starts_with("unknown field `extra`"),
        "{}",
        err.message()
    );
    let err = from_str::<Outer>("name: a\nextra: 2\n").unwrap_err();
    assert_eq!((err.line(), err.path()), (Some(2), "extra"));
    let err = value("name: a\ninner: {count: [1\n").unwrap_err();
    assert_eq!(
        (err.line(), err.path(), err.message()),
        (Some(2), "inner.count", "unclosed bracket '['")
    );
    let err = from_str::<Outer>("name: a\n  bad: indent\n").unwrap_err();
    assert_eq!(
        (err.line(), err.message()),
        (Some(2), "mapping values are not allowed in this context")
    );
    let err = from_str::<Outer>("name: a\n---\nname: b\n").unwrap_err();
    assert!(
        err.message().starts_with("multiple YAML documents"),
        "{err}"
    );
}

#[test]
fn documents_come_with_their_lines_and_empty_ones_are_skipped() {
    let text = "a: 1\n---\n# a comment only\n---\n\nb: 2\n---\n";
    assert_eq!(
        documents(text).unwrap(),
        vec![(1, json!({"a": 1})), (6, json!({"b": 2}))]
    );
    let err = documents("a: 1\n---\nb: [\n").unwrap_err();
    assert_eq!(err.line(), Some(3));
    assert_eq!(from_str::<Option<Value>>("# nothing\n").unwrap(), None);
}

#[test]
fn a_typed_read_is_refused_for_the_limit_before_its_fields() {
    // Outer knows no field `a0`; the limits still come first.
    let err = from_str::<Outer>(&laughs(9)).unwrap_err();
    assert_eq!(err.limit(), Some(LimitError::TooManyAnchoredNodes));
    // A type that ignores the fields it does not know still reads them under the budget.
    #[derive(Debug, Deserialize)]
    struct Lenient {}
    let err = from_str::<Lenient>(&laughs(9)).unwrap_err();
    assert_eq!(err.limit(), Some(LimitError::TooManyAnchoredNodes));
    let aliases = format!(
        "a: &a [{}]\nb: [{}]\n",
        ["x"; 1000].join(", "),
        ["*a"; 60].join(", ")
    );
    let err = from_str::<Lenient>(&aliases).unwrap_err();
    assert_eq!(err.limit(), Some(LimitError::TooManyNodes));
    let deep = format!("name: {}1{}", "[".repeat(80), "]".repeat(80));
    assert_eq!(
        from_str::<Outer>(&deep).unwrap_err().limit(),
        Some(LimitError::TooDeep)
    );
}
