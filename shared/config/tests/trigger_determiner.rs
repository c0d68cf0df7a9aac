//! The trigger determiners, one table per trigger kind.

use gannet_config::trigger::{on_command, on_commit, on_out_of_sync, Decision};
use gannet_config::{parse_app_config, AppConfig};
use gannet_domain::duration::Millis;

/// An app whose `spec.trigger` is `trigger` (YAML indented under `trigger:`).
fn app(trigger: &str) -> AppConfig {
    let yaml = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: web\n  trigger:\n{trigger}"
    );
    parse_app_config("apps/web/app.pipecd.yaml", &yaml).unwrap_or_else(|e| panic!("{e}"))
}

/// Asserts the decision and that its reason contains `why`.
fn check(decision: Decision, deploy: bool, why: &str, case: &str) {
    assert_eq!(decision.should_deploy(), deploy, "{case}: {decision:?}");
    assert!(
        decision.reason().contains(why),
        "{case}: reason {:?} lacks {why:?}",
        decision.reason()
    );
}

const NONE: &str = "    {}\n";
const PATHS: &str = "    onCommit:\n      paths:\n        - shared/*\n        - local-modules/helm-charts/helloworld/*\n      ignores:\n        - apps/web/docs/**\n        - \"**/*.md\"\n";

#[test]
fn on_commit_table() {
    // (case, trigger, app dir, changed files, deploy?, reason contains)
    type Row<'a> = (
        &'a str,
        &'a str,
        &'a str,
        Option<&'a [&'a str]>,
        bool,
        &'a str,
    );
    let cases: &[Row] = &[
        (
            "disabled",
            "    onCommit:\n      disabled: true\n",
            "apps/web",
            None,
            false,
            "disabled",
        ),
        (
            "never triggered",
            NONE,
            "apps/web",
            None,
            true,
            "not been checked",
        ),
        (
            "nothing changed",
            NONE,
            "apps/web",
            Some(&[]),
            false,
            "no files changed",
        ),
        (
            "change in app dir",
            NONE,
            "apps/web",
            Some(&["apps/web/function.yaml"]),
            true,
            "in the app directory apps/web",
        ),
        (
            "deep change in app dir",
            NONE,
            "apps/web/",
            Some(&["README", "apps/web/a/b.yaml"]),
            true,
            "apps/web/a/b.yaml",
        ),
        (
            "sibling with the same prefix",
            NONE,
            "apps/web",
            Some(&["apps/web2/function.yaml"]),
            false,
            "none of the 1 changed files",
        ),
        (
            "change elsewhere",
            NONE,
            "apps/web",
            Some(&["apps/api/x.yaml", "README"]),
            false,
            "none of the 2",
        ),
        (
            "app at the repository root",
            NONE,
            "",
            Some(&["anything.txt"]),
            true,
            "repository root",
        ),
        (
            "paths match outside the app",
            PATHS,
            "apps/web",
            Some(&["shared/lib.yaml"]),
            true,
            "paths pattern shared/*",
        ),
        (
            "paths match a parent directory",
            PATHS,
            "apps/web",
            Some(&["local-modules/helm-charts/helloworld/templates/deployment.yaml"]),
            true,
            "helloworld/*",
        ),
        (
            "paths do not match",
            PATHS,
            "apps/web",
            Some(&["shared2/lib.yaml"]),
            false,
            "none of",
        ),
        (
            "ignored change in the app dir",
            PATHS,
            "apps/web",
            Some(&["apps/web/docs/guide/x.txt"]),
            false,
            "ignores pattern apps/web/docs/**",
        ),
        // PipeCD: one ignored file keeps the app untouched, whatever else changed.
        (
            "ignored file beside a real change",
            PATHS,
            "apps/web",
            Some(&["apps/web/function.yaml", "NOTES.md"]),
            false,
            "NOTES.md changed and matches trigger.onCommit.ignores pattern **/*.md",
        ),
        (
            "ignores beat paths",
            PATHS,
            "apps/web",
            Some(&["shared/lib.yaml", "shared/README.md"]),
            false,
            "ignores",
        ),
    ];
    for (case, trigger, dir, changed, deploy, why) in cases {
        let changed: Option<Vec<String>> =
            changed.map(|c| c.iter().map(|s| s.to_string()).collect());
        check(
            on_commit(&app(trigger), dir, changed.as_deref()),
            *deploy,
            why,
            case,
        );
    }
}

#[test]
fn on_command_table() {
    let cases = [
        ("default", NONE, true, "requested"),
        (
            "disabled",
            "    onCommand:\n      disabled: true\n",
            false,
            "onCommand.disabled",
        ),
    ];
    for (case, trigger, deploy, why) in cases {
        check(on_command(&app(trigger)), deploy, why, case);
    }
}

#[test]
fn on_out_of_sync_table() {
    const ON: &str = "    onOutOfSync:\n      disabled: false\n";
    const ON_10M: &str = "    onOutOfSync:\n      disabled: false\n      minWindow: 10m\n";
    let min = 60_000;
    let now = Millis(100 * min);
    // (case, trigger, deploying?, last finished, deploy?, reason contains)
    type Row<'a> = (&'a str, &'a str, bool, Option<u64>, bool, &'a str);
    let cases: &[Row] = &[
        ("off by default", NONE, false, None, false, "disabled"),
        ("deploying", ON, true, Some(0), false, "in progress"),
        (
            "never deployed",
            ON,
            false,
            None,
            true,
            "never been deployed",
        ),
        (
            "within the default 5m window",
            ON,
            false,
            Some(100 * min - 4 * min),
            false,
            "4m ago, within trigger.onOutOfSync.minWindow 5m",
        ),
        (
            "exactly the window",
            ON,
            false,
            Some(100 * min - 5 * min),
            true,
            "5m ago",
        ),
        ("past the window", ON, false, Some(0), true, "1h40m ago"),
        (
            "within a custom window",
            ON_10M,
            false,
            Some(100 * min - 9 * min),
            false,
            "minWindow 10m",
        ),
        (
            "past a custom window",
            ON_10M,
            false,
            Some(100 * min - 11 * min),
            true,
            "11m ago",
        ),
    ];
    for (case, trigger, deploying, finished, deploy, why) in cases {
        let decision = on_out_of_sync(&app(trigger), *deploying, finished.map(Millis), now);
        check(decision, *deploy, why, case);
    }
}
