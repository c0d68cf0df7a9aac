//! The settings both runtimes take, through both loaders: `gannet up`'s from gannet.yaml and
//! the functions' from their environment. Each runtime names the place its own way
//! (`repos[0].github`, `GANNET_REPOS: [0].github`); the verdict and the reason are the same.

use std::collections::BTreeMap;
use std::path::Path;

use gannet_cli::settings::UpConfig;
use gannet_controller::FirstSight;
use gannet_functions::config::{self as aws, FunctionConfig};

/// Each loader's refusal, split into the place it names and the reason after it.
#[derive(Debug)]
struct Refusals {
    local: String,
    aws: String,
}

/// gannet.yaml `yaml` through `gannet up`'s loader.
fn local_config(yaml: &str) -> Result<UpConfig, String> {
    UpConfig::parse(
        yaml,
        Path::new("/etc/gannet"),
        &|_| None,
        &gannet_plugins::registry(),
    )
}

fn local(yaml: &str) -> Result<(), String> {
    local_config(yaml).map(drop)
}

fn on_aws(vars: &[(&str, &str)]) -> Result<(), String> {
    aws_config(vars).map(drop)
}

/// A function's environment, a working one with `vars` set, through the functions' loader.
fn aws_config(vars: &[(&str, &str)]) -> Result<FunctionConfig, String> {
    let queues = r#"{"trigger":{"queue":"https://q/t","dead_letter":"https://q/t-dlq"}}"#;
    let mut env: BTreeMap<&str, &str> = [
        (aws::REGION, "us-east-1"),
        (aws::TABLE, "gannet"),
        (aws::QUEUES, queues),
        (aws::REPOS, r#"[{"id":"shop","github":"acme/shop"}]"#),
    ]
    .into_iter()
    .collect();
    env.extend(vars.iter().copied());
    FunctionConfig::from_lookup(
        &|name| env.get(name).map(|v| (*v).to_owned()),
        Some(&gannet_plugins::registry()),
    )
    .map_err(|e| e.to_string())
}

/// Both loaders refuse, `gannet up` naming `local_at` and the functions `aws_at`.
fn refused(yaml: &str, vars: &[(&str, &str)], local_at: &str, aws_at: &str) -> Refusals {
    let reason = |verdict: Result<(), String>, at: &str| {
        let err = verdict
            .err()
            .unwrap_or_else(|| panic!("accepted; {at} should be refused"));
        match err.strip_prefix(&format!("{at}: ")) {
            Some(reason) => reason.to_owned(),
            None => panic!("the error should name {at}: {err}"),
        }
    };
    Refusals {
        local: reason(local(yaml), local_at),
        aws: reason(on_aws(vars), aws_at),
    }
}

/// Both loaders accept.
fn accepted(yaml: &str, vars: &[(&str, &str)]) {
    assert_eq!(local(yaml), Ok(()), "gannet up: {yaml}");
    assert_eq!(on_aws(vars), Ok(()), "functions: {vars:?}");
}

#[test]
fn a_drift_interval_under_100ms_is_refused_by_both() {
    for short in ["99ms", "1ms", "0s"] {
        let r = refused(
            &format!("intervals: {{drift: {short}}}"),
            &[(aws::DRIFT_INTERVAL, short)],
            "intervals.drift",
            "GANNET_DRIFT_INTERVAL",
        );
        assert_eq!(r.local, r.aws);
        assert!(r.local.ends_with("is too short (at least 100ms)"), "{r:?}");
    }
    accepted(
        "intervals: {drift: 100ms}",
        &[(aws::DRIFT_INTERVAL, "100ms")],
    );
}

#[test]
fn github_is_owner_name_on_both() {
    for github in ["acme", "acme/", "/shop", "acme/shop/extra"] {
        let r = refused(
            &format!("repos: [{{id: shop, path: ., github: '{github}'}}]"),
            &[(
                aws::REPOS,
                &format!(r#"[{{"id":"shop","github":"{github}"}}]"#),
            )],
            "repos[0].github",
            "GANNET_REPOS: [0].github",
        );
        assert_eq!(r.local, r.aws);
        assert_eq!(r.local, format!("{github:?} is not owner/name"));
    }
    accepted(
        "repos: [{id: shop, path: ., github: acme/shop}]",
        &[(aws::REPOS, r#"[{"id":"shop","github":"acme/shop"}]"#)],
    );
}

#[test]
fn a_repository_listed_twice_is_refused_by_both() {
    // The same GitHub repository under two ids (GitHub's names ignore case).
    let r = refused(
        "repos: [{id: a, path: x, github: Acme/Shop}, {id: b, path: y, github: acme/shop}]",
        &[(
            aws::REPOS,
            r#"[{"id":"a","github":"Acme/Shop"},{"id":"b","github":"acme/shop"}]"#,
        )],
        "repos[1].github",
        "GANNET_REPOS: [1].github",
    );
    assert_eq!(
        r.local,
        "acme/shop is listed twice (also repos[0]); one GitHub repository is one entry"
    );
    assert_eq!(
        r.aws,
        "acme/shop is listed twice (also GANNET_REPOS[0]); one GitHub repository is one entry"
    );
    // The same id twice.
    let r = refused(
        "repos: [{id: a, path: x}, {id: a, url: 'https://git.example.com/a.git'}]",
        &[(
            aws::REPOS,
            r#"[{"id":"a","url":"/r"},{"id":"a","url":"/s"}]"#,
        )],
        "repos[1].id",
        "GANNET_REPOS: [1].id",
    );
    assert_eq!(r.local, r.aws);
    assert_eq!(r.local, "a is listed twice");
    accepted(
        "repos: [{id: a, path: x, github: acme/a}, {id: b, path: y, github: acme/b}]",
        &[(
            aws::REPOS,
            r#"[{"id":"a","github":"acme/a"},{"id":"b","github":"acme/b"}]"#,
        )],
    );
}

#[test]
fn receiver_urls_are_checked_on_both() {
    let cases = [
        (
            "hooks.example.com/x",
            "\"hooks.example.com/x\" is not a URL",
        ),
        (
            "http://hooks.example.com/x",
            "\"http://hooks.example.com/x\" must be an https:// URL",
        ),
        (
            "https://u:pw@hooks.example.com/x",
            "\"https://***@hooks.example.com/x\" has a user name or password in it",
        ),
        (
            "http://evil.example#@localhost/",
            "\"http://evil.example#@localhost/\" has a #fragment",
        ),
    ];
    for (url, reason) in cases {
        let r = refused(
            &format!("notifications: {{receivers: [{{name: ops, webhook: {{url: '{url}'}}}}]}}"),
            &[(
                aws::RECEIVERS,
                &format!(r#"[{{"name":"ops","url":"{url}"}}]"#),
            )],
            "notifications.receivers[0].webhook.url",
            "GANNET_RECEIVERS: [0].url",
        );
        assert_eq!(r.local, r.aws);
        assert!(r.local.starts_with(reason), "{url}: {r:?}");
        assert!(!r.local.contains("pw"), "a password never shows: {r:?}");
    }
    for url in [
        "https://hooks.example.com/x",
        "http://127.0.0.1:9000/events",
    ] {
        accepted(
            &format!("notifications: {{receivers: [{{name: ops, webhook: {{url: '{url}'}}}}]}}"),
            &[(
                aws::RECEIVERS,
                &format!(r#"[{{"name":"ops","url":"{url}"}}]"#),
            )],
        );
    }
}

#[test]
fn an_unknown_plugin_is_refused_alike() {
    let r = refused(
        "plugins: {appengine: {deployTargets: []}}",
        &[(aws::PLUGINS, r#"{"appengine":{"deployTargets":[]}}"#)],
        "plugins.appengine",
        "GANNET_PLUGINS: appengine",
    );
    assert_eq!(r.local, r.aws);
    assert!(
        r.local
            .starts_with("no compiled-in plugin is named \"appengine\" (compiled in: wait, "),
        "{r:?}"
    );
}

#[test]
fn the_first_sight_of_a_repository_is_adopt_unless_set_on_both() {
    let first_sight = |yaml: &str, repos: &str| {
        let up = local_config(yaml).expect("gannet up accepts");
        let functions = aws_config(&[(aws::REPOS, repos)]).expect("the functions accept");
        (
            up.settings.repos[0].on_first_sight,
            functions.repos[0].on_first_sight,
        )
    };
    assert_eq!(
        first_sight(
            "repos: [{id: shop, path: ., github: acme/shop}]",
            r#"[{"id":"shop","github":"acme/shop"}]"#
        ),
        (FirstSight::Adopt, FirstSight::Adopt),
        "adopt is the default"
    );
    assert_eq!(
        first_sight(
            "repos: [{id: shop, path: ., github: acme/shop, onFirstSight: deploy}]",
            r#"[{"id":"shop","github":"acme/shop","onFirstSight":"deploy"}]"#
        ),
        (FirstSight::Deploy, FirstSight::Deploy)
    );
    let local_err = local("repos: [{id: shop, path: ., onFirstSight: always}]")
        .expect_err("gannet up refuses an unknown value");
    let aws_err = on_aws(&[(
        aws::REPOS,
        r#"[{"id":"shop","github":"acme/shop","onFirstSight":"always"}]"#,
    )])
    .expect_err("the functions refuse an unknown value");
    for err in [&local_err, &aws_err] {
        assert!(
            err.contains("onFirstSight") && err.contains("always"),
            "names the field and the value: {err}"
        );
    }
}
