//! The lifecycle file: where it sits, what it holds, and its errors by line and field.

use super::*;

const GOOD: &str = "\
apiVersion: gannet.dev/v1
kind: Lifecycle
spec:
  preDeployment:
    tasks:
      - name: migrate
        run: ./migrate.sh
      - name: warm-cache
        run: ./warm.sh
        timeout: 5m
    evaluations:
      - name: upstream
        duration: 1m
        https:
          - url: https://upstream.example.com/healthz
            interval: 10s
  postDeployment:
    evaluations:
      - name: error-rate
        duration: 5m
";

#[test]
fn the_file_sits_beside_the_app_config() {
    assert_eq!(
        file_for("apps/web/app.pipecd.yaml"),
        "apps/web/app.gannet.yaml"
    );
    assert_eq!(file_for("web.pipecd.yaml"), "web.gannet.yaml");
    assert_eq!(file_for("old/app.pipe.yaml"), "old/app.gannet.yaml");
    assert!(!gannet_config::is_app_config_path(&file_for(
        "a/app.pipecd.yaml"
    )));
}

#[test]
fn phases_read_with_their_items_in_order() {
    let file = parse("app.gannet.yaml", GOOD).expect("valid");
    let pre = file.pre.as_ref().expect("pre");
    let names: Vec<&str> = pre.tasks.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["migrate", "warm-cache"]);
    assert_eq!(
        pre.tasks[1].with,
        serde_json::json!({"run": "./warm.sh", "timeout": "5m"})
    );
    assert_eq!(pre.evaluations[0].name, "upstream");
    let post = file.post.as_ref().expect("post");
    assert!(post.tasks.is_empty());
    assert_eq!(
        post.with(),
        serde_json::json!({"tasks": [], "evaluations": [
            {"name": "error-rate", "with": {"duration": "5m"}}]})
    );
}

#[test]
fn errors_name_the_line_and_the_field() {
    let cases: &[(&str, &str)] = &[
        (
            "apiVersion: pipecd.dev/v1beta1\nkind: Lifecycle\nspec: {}\n",
            "f.yaml:1: apiVersion: must be gannet.dev/v1, not \"pipecd.dev/v1beta1\"",
        ),
        (
            "apiVersion: gannet.dev/v1\nkind: LambdaApp\nspec: {}\n",
            "f.yaml:2: kind: must be Lifecycle, not \"LambdaApp\"",
        ),
        (
            "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec:\n  preDeploy:\n    tasks: []\n",
            "f.yaml:4: spec.preDeploy: unknown field `preDeploy`; did you mean `preDeployment`?",
        ),
        (
            "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec: {}\n",
            "f.yaml:3: spec: declares no phase",
        ),
        (
            "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec:\n  postDeployment:\n    tasks: []\n",
            "f.yaml:4: spec.postDeployment: has no tasks and no evaluations",
        ),
        (
            "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec:\n  preDeployment:\n    tasks:\n      - run: ./a.sh\n",
            "f.yaml:6: spec.preDeployment.tasks[0].name: missing",
        ),
        (
            "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec:\n  preDeployment:\n    tasks:\n      - name: a\n        run: x\n    evaluations:\n      - name: a\n        duration: 1m\n",
            "f.yaml:9: spec.preDeployment.evaluations[0].name: \"a\" names another item",
        ),
        (
            "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec:\n  preDeployment:\n    tasks:\n      - name: ../etc\n        run: x\n",
            "f.yaml:6: spec.preDeployment.tasks[0].name: \"../etc\": use 1 to 40 letters",
        ),
        (
            "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec:\n  preDeployment:\n    tasks: {name: a}\n",
            "f.yaml:5: spec.preDeployment.tasks: expected a list, got a map",
        ),
        // The parser names the bracket left open, at its line.
        ("spec: [unclosed\n", "f.yaml:1: unclosed bracket '['"),
    ];
    for (text, want) in cases {
        let err = parse("f.yaml", text).expect_err(text).to_string();
        assert!(err.starts_with(want), "{text}\n got: {err}\nwant: {want}");
    }
}

#[test]
fn hostile_files_are_refused_before_they_are_read() {
    let err = parse("f.yaml", &gannet_config::fixture::yaml_bomb(12)).expect_err("a bomb");
    assert_eq!(err.line, 1);
    assert!(
        err.message.contains("alias") || err.message.contains("nodes"),
        "{err}"
    );
    let big = format!(
        "apiVersion: gannet.dev/v1\nkind: Lifecycle\nspec:\n  x: \"{}\"\n",
        "a".repeat(2 << 20)
    );
    assert!(parse("f.yaml", &big).is_err());
}
