//! Tests for the convergence decision: what to do next for each live state, and the code
//! digest Lambda compares.

use std::collections::BTreeMap;

use super::*;
use crate::manifest::CodeSource;

#[test]
fn base64_matches_lambdas_code_sha256() {
    let cases: [(&[u8], &str); 5] = [
        (b"", ""),
        (b"f", "Zg=="),
        (b"fo", "Zm8="),
        (b"foo", "Zm9v"),
        (b"foobar", "Zm9vYmFy"),
    ];
    for (input, want) in cases {
        assert_eq!(base64(input), want);
    }
    // sha256("") as Lambda would report it.
    match Code::zip(Vec::new()) {
        Code::Zip { sha256, hex, .. } => {
            assert_eq!(sha256, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
            assert!(hex.starts_with("e3b0c442"));
        }
        other => panic!("{other:?}"),
    }
}

fn desired(code: Code) -> Desired {
    let manifest = FunctionManifest {
        name: "fn".into(),
        role: "arn:aws:iam::123456789012:role/r".into(),
        code: CodeSource::ZipFile {
            path: "fn.zip".into(),
        },
        handler: Some("index.handler".into()),
        runtime: Some("python3.12".into()),
        memory: 128,
        timeout: 10,
        tags: BTreeMap::new(),
        environments: BTreeMap::from([("MODE".into(), "prod".into())]),
        ephemeral_storage: None,
        vpc_config: Some(VpcConfig {
            security_group_ids: vec!["sg-1".into()],
            subnet_ids: vec!["s-1".into(), "s-2".into()],
        }),
        layers: Vec::new(),
        architecture: None,
    };
    Desired {
        manifest,
        code,
        tags: BTreeMap::from([("gannet.dev/managed-by".into(), "gannet".into())]),
    }
}

fn zip_code() -> Code {
    Code::zip(b"PK\x03\x04code".to_vec())
}

/// A live function that matches `desired(zip_code())` exactly.
fn matching() -> LiveFunction {
    let want = desired(zip_code());
    let Code::Zip { sha256, .. } = &want.code else {
        unreachable!()
    };
    LiveFunction {
        arn: "arn:aws:lambda:us-east-1:123456789012:function:fn".into(),
        state: Some(FunctionState::Active),
        update: Some(UpdateStatus::Successful),
        code_sha256: sha256.clone(),
        role: want.manifest.role.clone(),
        handler: want.manifest.handler.clone(),
        runtime: want.manifest.runtime.clone(),
        memory: Some(128),
        timeout: Some(10),
        environments: want.manifest.environments.clone(),
        // Order means nothing.
        subnet_ids: vec!["s-2".into(), "s-1".into()],
        security_group_ids: vec!["sg-1".into()],
        tags: want.tags.clone(),
        ..LiveFunction::default()
    }
}

fn check(live: Option<LiveFunction>, want: &Desired, applied: &Applied, expected: Next) {
    assert_eq!(
        next_action(live.as_ref(), want, applied),
        expected,
        "live = {live:#?}"
    );
}

#[test]
fn decisions() {
    let want = desired(zip_code());
    let none = Applied::default();
    let with = |f: fn(&mut LiveFunction)| {
        let mut live = matching();
        f(&mut live);
        Some(live)
    };
    let wait = |why: &str| Next::Wait { why: why.into() };
    let ready = Next::Ready { ignored: vec![] };
    let cases = [
        (None, Next::Create),
        (Some(matching()), ready.clone()),
        (
            with(|l| l.state = Some(FunctionState::Pending)),
            wait("the function is being created (State Pending)"),
        ),
        (
            with(|l| l.update = Some(UpdateStatus::InProgress)),
            wait("an update is in progress (LastUpdateStatus InProgress)"),
        ),
        (
            with(|l| {
                l.state = Some(FunctionState::Failed);
                l.state_reason = "ENI limit".into();
            }),
            Next::Failed {
                reason: "the function is in state Failed: ENI limit".into(),
            },
        ),
        (with(|l| l.code_sha256 = "other".into()), Next::UpdateCode),
        (
            with(|l| {
                l.memory = Some(256);
                l.role = "arn:aws:iam::123456789012:role/old".into();
            }),
            Next::UpdateConfig {
                fields: vec!["role", "memory"],
            },
        ),
        (
            with(|l| l.subnet_ids = vec!["s-1".into()]),
            Next::UpdateConfig {
                fields: vec!["vpcConfig"],
            },
        ),
        (
            with(|l| {
                l.environments.clear();
            }),
            Next::UpdateConfig {
                fields: vec!["environments"],
            },
        ),
        (
            with(|l| l.tags.clear()),
            Next::Tag {
                tags: want.tags.clone(),
            },
        ),
        // Code first, then configuration: both differ.
        (
            with(|l| {
                l.code_sha256 = "other".into();
                l.timeout = Some(3);
            }),
            Next::UpdateCode,
        ),
        // Someone else's failed update is repaired by ours.
        (
            with(|l| {
                l.update = Some(UpdateStatus::Failed);
                l.timeout = Some(3);
            }),
            Next::UpdateConfig {
                fields: vec!["timeout"],
            },
        ),
        (
            with(|l| {
                l.update = Some(UpdateStatus::Failed);
                l.update_reason = "subnet gone".into();
            }),
            Next::Failed {
                reason: "the function's last update failed: subnet gone".into(),
            },
        ),
    ];
    for (live, expected) in cases {
        check(live, &want, &none, expected);
    }
}

#[test]
fn applied_configuration_is_not_sent_again() {
    let want = desired(zip_code());
    let applied = Applied {
        code: None,
        config: Some(want.config_digest()),
    };
    let mut live = matching();
    live.ephemeral_storage = Some(512);
    let mut want_more = want.clone();
    want_more.manifest.ephemeral_storage = Some(1024);
    // Not applied yet: update.
    check(
        Some(live.clone()),
        &want_more,
        &Applied::default(),
        Next::UpdateConfig {
            fields: vec!["ephemeralStorage"],
        },
    );
    // Applied, and the API kept 512: go on, and say so.
    let applied_more = Applied {
        config: Some(want_more.config_digest()),
        ..applied
    };
    check(
        Some(live),
        &want_more,
        &applied_more,
        Next::Ready {
            ignored: vec!["ephemeralStorage"],
        },
    );
}

#[test]
fn s3_code_is_known_by_what_this_stage_applied() {
    let want = desired(Code::S3 {
        bucket: "b".into(),
        key: "fn.zip".into(),
        object_version: Some("v2".into()),
    });
    let live = matching();
    let sha = live.code_sha256.clone();
    let applied = |identity: &str, sha: &str| Applied {
        code: Some((identity.into(), sha.into())),
        config: None,
    };
    check(
        Some(live.clone()),
        &want,
        &Applied::default(),
        Next::UpdateCode,
    );
    check(
        Some(live.clone()),
        &want,
        &applied("s3://b/fn.zip?versionId=v1", &sha),
        Next::UpdateCode,
    );
    check(
        Some(live.clone()),
        &want,
        &applied("s3://b/fn.zip?versionId=v2", "changed-since"),
        Next::UpdateCode,
    );
    check(
        Some(live),
        &want,
        &applied("s3://b/fn.zip?versionId=v2", &sha),
        Next::Ready { ignored: vec![] },
    );
}

#[test]
fn images_compare_by_uri_and_architecture_goes_with_the_code() {
    let mut want = desired(Code::Image {
        uri: "repo/web:v2".into(),
    });
    let mut live = matching();
    live.image_uri = Some("repo/web:v1".into());
    let none = Applied::default();
    check(Some(live.clone()), &want, &none, Next::UpdateCode);
    live.image_uri = Some("repo/web:v2".into());
    check(
        Some(live.clone()),
        &want,
        &none,
        Next::Ready { ignored: vec![] },
    );
    want.manifest.architecture = Some("arm64".into());
    live.architectures = vec!["x86_64".into()];
    check(Some(live.clone()), &want, &none, Next::UpdateCode);
    let sent = Applied {
        code: Some((want.code.identity(), live.code_sha256.clone())),
        config: None,
    };
    check(Some(live), &want, &sent, Next::Ready { ignored: vec![] });
}
