//! The comparison of a live alias and version with the manifest, case by case: what is drift
//! (named, with both values) and what is not (order where AWS gives it no meaning, computed
//! fields, tags that gannet and AWS add).

use std::collections::BTreeMap;

use super::*;

const MANIFEST: &str = "apiVersion: pipecd.dev/v1beta1
kind: LambdaFunction
spec:
  name: fn
  role: arn:aws:iam::123456789012:role/r
  handler: index.handler
  runtime: python3.12
  memory: 128
  timeout: 10
  zipFile: fn.zip
  environments: {MODE: prod}
  tags: {team: web}
  vpcConfig:
    subnetIds: [s-1, s-2]
    securityGroupIds: [sg-1, sg-2]
  layers: [arn:layer:a:1, arn:layer:b:1]
  architectures: [{name: arm64}]
";

const SHA: &str = "c2hhLW9mLXRoZS16aXA=";

fn manifest(text: &str) -> FunctionManifest {
    FunctionManifest::parse("function.yaml", text).expect("a valid manifest")
}

fn zip() -> GitCode {
    GitCode::Zip { sha256: SHA.into() }
}

/// Version 3 of the function exactly as [`MANIFEST`] asks, plus what AWS and gannet add.
fn matching() -> LiveFunction {
    LiveFunction {
        arn: "arn:aws:lambda:us-east-1:123456789012:function:fn:3".into(),
        state: Some(FunctionState::Active),
        update: Some(UpdateStatus::Successful),
        version: Some("3".into()),
        code_sha256: SHA.into(),
        revision_id: Some("rev-1".into()),
        role: "arn:aws:iam::123456789012:role/r".into(),
        handler: Some("index.handler".into()),
        runtime: Some("python3.12".into()),
        memory: Some(128),
        timeout: Some(10),
        environments: BTreeMap::from([("MODE".into(), "prod".into())]),
        ephemeral_storage: Some(512),
        subnet_ids: vec!["s-1".into(), "s-2".into()],
        security_group_ids: vec!["sg-1".into(), "sg-2".into()],
        layers: vec!["arn:layer:a:1".into(), "arn:layer:b:1".into()],
        architectures: vec!["arm64".into()],
        tags: BTreeMap::from([
            ("team".into(), "web".into()),
            ("gannet.dev/commit".into(), "abc".into()),
            ("aws:cloudformation:stack-name".into(), "s".into()),
        ]),
        ..LiveFunction::default()
    }
}

fn served(f: LiveFunction) -> Live {
    Live::Alias {
        routing: AliasRouting::all_to("3"),
        function: Box::new(f),
    }
}

/// The drift found, as (field, git, live).
fn check(text: &str, code: GitCode, live: Live, expected: &[(&str, &str, &str)]) {
    let got = compare(&manifest(text), &code, "Service", &live);
    let got: Vec<(&str, &str, &str)> = got
        .drift
        .iter()
        .map(|f| (f.field.as_str(), f.git.as_str(), f.live.as_str()))
        .collect();
    assert_eq!(got, expected, "live: {live:#?}");
}

fn with(change: impl FnOnce(&mut LiveFunction)) -> Live {
    let mut f = matching();
    change(&mut f);
    served(f)
}

#[test]
fn what_is_not_drift() {
    check(MANIFEST, zip(), served(matching()), &[]);
    // Reordered subnets and security groups (pipecd #6529).
    check(
        MANIFEST,
        zip(),
        with(|f| {
            f.subnet_ids.reverse();
            f.security_group_ids.reverse();
        }),
        &[],
    );
    // Computed fields and fields the manifest leaves to the function.
    check(
        MANIFEST,
        zip(),
        with(|f| {
            f.revision_id = Some("rev-9".into());
            f.ephemeral_storage = Some(2048);
            f.tags.insert("owner".into(), "someone".into());
        }),
        &[],
    );
    // No routing weight, or a zero one, is one version.
    check(
        MANIFEST,
        zip(),
        Live::Alias {
            routing: AliasRouting {
                version: "3".into(),
                weights: BTreeMap::from([("2".into(), 0.0)]),
            },
            function: Box::new(matching()),
        },
        &[],
    );
    // Code from S3 cannot be compared; it is not drift.
    check(
        MANIFEST,
        GitCode::NotCompared { why: "S3".into() },
        with(|f| f.code_sha256 = "other".into()),
        &[],
    );
}

#[test]
fn each_field_that_differs_is_named_with_both_values() {
    check(
        MANIFEST,
        zip(),
        with(|f| {
            f.memory = Some(1024);
            f.timeout = None;
        }),
        &[
            ("spec.memory", "128", "1024"),
            ("spec.timeout", "10", UNSET),
        ],
    );
    check(
        MANIFEST,
        zip(),
        with(|f| {
            f.environments.insert("MODE".into(), "debug".into());
            f.environments.insert("EXTRA".into(), "1".into());
        }),
        &[
            ("spec.environments.MODE", r#""prod""#, r#""debug""#),
            ("spec.environments.EXTRA", UNSET, r#""1""#),
        ],
    );
    check(
        MANIFEST,
        zip(),
        with(|f| f.subnet_ids = vec!["s-1".into(), "s-9".into()]),
        &[(
            "spec.vpcConfig.subnetIds",
            r#"["s-1","s-2"]"#,
            r#"["s-1","s-9"]"#,
        )],
    );
    // Layer order decides which files win: reordered layers are drift.
    check(
        MANIFEST,
        zip(),
        with(|f| f.layers.reverse()),
        &[
            ("spec.layers[0]", r#""arn:layer:a:1""#, r#""arn:layer:b:1""#),
            ("spec.layers[1]", r#""arn:layer:b:1""#, r#""arn:layer:a:1""#),
        ],
    );
    check(
        MANIFEST,
        zip(),
        with(|f| {
            f.architectures = vec!["x86_64".into()];
            f.tags.insert("team".into(), "ops".into());
            f.role = "arn:aws:iam::123456789012:role/other".into();
        }),
        // In key order.
        &[
            ("spec.architectures[0].name", r#""arm64""#, r#""x86_64""#),
            (
                "spec.role",
                r#""arn:aws:iam::123456789012:role/r""#,
                r#""arn:aws:iam::123456789012:role/other""#,
            ),
            ("spec.tags.team", r#""web""#, r#""ops""#),
        ],
    );
    // A VPC set by hand on a function Git keeps out of one.
    let no_vpc = MANIFEST.replace(
        "  vpcConfig:\n    subnetIds: [s-1, s-2]\n    securityGroupIds: [sg-1, sg-2]\n",
        "",
    );
    check(
        &no_vpc,
        zip(),
        served(matching()),
        &[
            (
                "spec.vpcConfig.securityGroupIds",
                "[]",
                r#"["sg-1","sg-2"]"#,
            ),
            ("spec.vpcConfig.subnetIds", "[]", r#"["s-1","s-2"]"#),
        ],
    );
}

#[test]
fn the_alias_must_serve_gits_code_on_one_version() {
    // Re-pointed at a version with other code (an older deployment).
    check(
        MANIFEST,
        zip(),
        with(|f| {
            f.version = Some("1".into());
            f.code_sha256 = "b2xkLWNvZGU=".into();
        }),
        &[(
            "spec.zipFile",
            &format!(r#""CodeSha256 {SHA}""#),
            r#""CodeSha256 b2xkLWNvZGU=""#,
        )],
    );
    // A canary left behind.
    check(
        MANIFEST,
        zip(),
        Live::Alias {
            routing: AliasRouting {
                version: "3".into(),
                weights: BTreeMap::from([("2".into(), 0.9)]),
            },
            function: Box::new(matching()),
        },
        &[(
            "alias.routing",
            r#""all traffic to one version""#,
            r#""version 3 10%, version 2 90%""#,
        )],
    );
    // Missing things are named, not errors.
    check(
        MANIFEST,
        zip(),
        Live::NoAlias {
            latest: Box::new(matching()),
        },
        &[("alias", r#""Service""#, UNSET)],
    );
    check(
        MANIFEST,
        zip(),
        Live::NoFunction,
        &[("function", r#""fn""#, UNSET)],
    );
}

#[test]
fn images_compare_by_uri_or_by_pinned_digest() {
    let image = |uri: &str| {
        MANIFEST
            .replace("  zipFile: fn.zip\n", &format!("  image: {uri}\n"))
            .replace("  handler: index.handler\n  runtime: python3.12\n", "")
    };
    let repo = "123456789012.dkr.ecr.us-east-1.amazonaws.com/web";
    let live_image = |f: &mut LiveFunction| {
        f.image_uri = Some(format!("{repo}:v2"));
        f.resolved_image_uri = Some(format!("{repo}@sha256:beef"));
        // An image function has no handler or runtime of its own.
        f.handler = None;
        f.runtime = None;
    };
    let by_uri = |uri: &str| GitCode::Image { uri: uri.into() };
    check(
        &image(&format!("{repo}:v2")),
        by_uri(&format!("{repo}:v2")),
        with(live_image),
        &[],
    );
    check(
        &image(&format!("{repo}@sha256:beef")),
        by_uri(&format!("{repo}@sha256:beef")),
        with(live_image),
        &[],
    );
    check(
        &image(&format!("{repo}:v3")),
        by_uri(&format!("{repo}:v3")),
        with(live_image),
        &[(
            "spec.image",
            &format!(r#""{repo}:v3""#),
            &format!(r#""{repo}:v2""#),
        )],
    );
    check(
        &image(&format!("{repo}@sha256:cafe")),
        by_uri(&format!("{repo}@sha256:cafe")),
        with(live_image),
        &[(
            "spec.image",
            &format!(r#""{repo}@sha256:cafe""#),
            &format!(r#""{repo}@sha256:beef""#),
        )],
    );
}

#[test]
fn live_resources_say_what_serves_and_how_it_is() {
    let state = compare(
        &manifest(MANIFEST),
        &GitCode::NotCompared {
            why: "code from S3 is not compared".into(),
        },
        "Service",
        &Live::Alias {
            routing: AliasRouting::all_to("3"),
            function: Box::new(matching()),
        },
    );
    let got: Vec<(&str, &str, Health, &str)> = state
        .resources
        .iter()
        .map(|r| (r.kind.as_str(), r.id.as_str(), r.health, r.summary.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "LambdaAlias",
                "fn:Service",
                Health::Healthy,
                "version 3 100%"
            ),
            (
                "LambdaFunction",
                "fn:3",
                Health::Healthy,
                "version 3, python3.12, 128 MB (code from S3 is not compared)"
            ),
        ]
    );
    let failed = compare(
        &manifest(MANIFEST),
        &zip(),
        "Service",
        &with(|f| f.update = Some(UpdateStatus::Failed)),
    );
    assert_eq!(failed.resources[1].health, Health::Unhealthy);
}

#[test]
fn the_git_code_is_read_from_the_app_directory() {
    let root = tempfile::tempdir().expect("tempdir");
    let app_dir = root.path().join("app");
    std::fs::create_dir(&app_dir).expect("mkdir");
    std::fs::write(app_dir.join("fn.zip"), b"PK\x03\x04code").expect("write zip");
    std::fs::write(root.path().join("shared.zip"), b"PK\x03\x04shared").expect("write zip");
    let app = gannet_config::parse_app_config(
        "app/app.pipecd.yaml",
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: web\n",
    )
    .expect("app config");
    let code = |text: &str| git_code(&manifest(text), &app, "app", &app_dir);
    let sha = |bytes: &[u8]| match Code::zip(bytes.to_vec()) {
        Code::Zip { sha256, .. } => GitCode::Zip { sha256 },
        _ => panic!("zip code"),
    };
    assert_eq!(code(MANIFEST).expect("read"), sha(b"PK\x03\x04code"));
    // Twice from the cache, the same.
    assert_eq!(code(MANIFEST).expect("read"), code(MANIFEST).expect("read"));
    // A zip elsewhere in the repository is compared too.
    let above = MANIFEST.replace("zipFile: fn.zip", "zipFile: ../shared.zip");
    assert_eq!(code(&above).expect("read"), sha(b"PK\x03\x04shared"));
    let outside = MANIFEST.replace("zipFile: fn.zip", "zipFile: ../../fn.zip");
    let err = code(&outside).expect_err("a zip outside the repository is an error");
    assert!(
        err.to_string().contains("leads out of the repository"),
        "{err}"
    );
    let missing = MANIFEST.replace("zipFile: fn.zip", "zipFile: gone.zip");
    let err = code(&missing).expect_err("a missing zip is an error");
    assert!(err.to_string().contains("cannot read gone.zip"), "{err}");
}
