//! Property-based tests: random and mutated YAML and JSON fed to the parsers of what a
//! repository holds (app configs and the manifests `config check` reads). None may panic, and
//! memory stays bounded (an alias bomb among the mutations is refused, not expanded).

use gannet_config::parse_app_config;
use gannet_sdk::check::check_app;
use gannet_sdk::plugin::Plugins;
use proptest::prelude::*;

/// How many cases each property runs; the test names say it too.
const CASES: u32 = 400;

const VALID: &str = "apiVersion: pipecd.dev/v1beta1
kind: LambdaApp
spec:
  name: web
  labels: {team: a}
  trigger:
    onCommit:
      paths: [apps/web/**]
      ignores: [\"**/*.md\"]
  pipeline:
    stages:
      - id: hold
        name: WAIT
        with: {duration: 30s}
      - name: SCRIPT_RUN
        with:
          run: echo hello
          env: {A: \"1\"}
  input:
    functionManifestFile: function.yaml
";

/// YAML-ish fragments that often break parsers: anchors, aliases, tags, nesting, odd scalars.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("&a [1, 2]".to_owned()),
        Just("*a".to_owned()),
        Just("!!binary aGk=".to_owned()),
        Just("{".to_owned()),
        Just("[[[[[[[[".to_owned()),
        Just("- - - -".to_owned()),
        Just("? complex\n: key".to_owned()),
        Just("<<: *a".to_owned()),
        Just("\"\\u0000\"".to_owned()),
        Just("1e999".to_owned()),
        Just("~".to_owned()),
        "\\PC{0,40}",
    ]
}

/// A valid config with a fragment inserted, a range deleted, or lines repeated.
fn mutated() -> impl Strategy<Value = String> {
    (0..VALID.len(), 0..40usize, fragment(), 0..3u8).prop_map(|(at, len, piece, how)| {
        let at = (0..=at)
            .rev()
            .find(|i| VALID.is_char_boundary(*i))
            .unwrap_or(0);
        let mut text = VALID.to_owned();
        match how {
            0 => text.insert_str(at, &piece),
            1 => {
                let end = (at + len).min(text.len());
                let end = (end..=text.len())
                    .find(|i| text.is_char_boundary(*i))
                    .unwrap_or(text.len());
                text.replace_range(at..end, "");
            }
            _ => {
                let line = text[at..].lines().next().unwrap_or("").to_owned();
                text.insert_str(at, &format!("{line}\n{line}\n"));
            }
        }
        text
    })
}

fn run_parsers(text: &str) {
    let _ = parse_app_config("apps/web/app.pipecd.yaml", text);
    let read = |rel: &str| (rel == "function.yaml").then(|| text.to_owned());
    let _ = check_app("apps/web/app.pipecd.yaml", text, &Plugins::default(), &read);
    let _ = gannet_config::yaml::documents(text);
    let _ = gannet_config::yaml::from_str::<serde_json::Value>(text);
    let _ = gannet_config::bounded::check_json(text);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_text_400_cases(text in "\\PC{0,300}") {
        run_parsers(&text);
    }

    #[test]
    fn mutated_configs_400_cases(text in mutated()) {
        run_parsers(&text);
    }

    #[test]
    fn random_json_400_cases(value in json_value()) {
        let text = value.to_string();
        run_parsers(&text);
        let read = |_: &str| Some(text.clone());
        let _ = check_app("apps/web/app.pipecd.yaml", VALID, &Plugins::default(), &read);
    }
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        "\\PC{0,20}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::from),
            prop::collection::btree_map("[a-zA-Z]{1,12}", inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn the_fuzzing_stays_within_bounded_memory() {
    // Alias bombs among the inputs, run directly: refused before they are expanded.
    let bomb = gannet_config::fixture::yaml_bomb(40);
    for _ in 0..20 {
        run_parsers(&bomb);
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    eprintln!("fuzz: {CASES} cases per property; peak RSS {peak_kib} KiB");
    assert!(peak_kib < 256 * 1024, "peak RSS {peak_kib} KiB");
}
