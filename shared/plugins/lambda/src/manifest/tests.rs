//! Tests for the function manifest: every field, the code sources, and errors that name the
//! field at fault.

use super::*;

const HEAD: &str = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\n";

/// A valid zip manifest's spec fields, as `key: value` YAML.
const BASE: [(&str, &str); 7] = [
    ("name", "hello"),
    ("role", "arn:aws:iam::123456789012:role/lambda"),
    ("handler", "index.handler"),
    ("runtime", "python3.12"),
    ("memory", "128"),
    ("timeout", "10"),
    ("zipFile", "fn.zip"),
];

/// The base manifest with `changes` applied: `Some` sets a spec field, `None` removes it.
fn manifest(changes: &[(&str, Option<&str>)]) -> String {
    let mut fields: Vec<(String, String)> = BASE
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    for (key, value) in changes {
        fields.retain(|(k, _)| k != key);
        if let Some(v) = value {
            fields.push(((*key).to_owned(), (*v).to_owned()));
        }
    }
    let mut text = format!("{HEAD}spec:\n");
    for (k, v) in fields {
        text.push_str(&format!("  {k}: {v}\n"));
    }
    text
}

/// Parses `text`; `Ok` is the code source, `Err` the field the error names.
fn check(text: &str, expected: Result<CodeSource, &str>) {
    let got = FunctionManifest::parse("function.yaml", text)
        .map(|m| m.code)
        .map_err(|e| e.field);
    assert_eq!(got, expected.map_err(str::to_owned), "manifest:\n{text}");
}

fn zip(path: &str) -> CodeSource {
    CodeSource::ZipFile { path: path.into() }
}

const NO_ZIP: (&str, Option<&str>) = ("zipFile", None);

#[test]
fn code_sources() {
    let image = "123.dkr.ecr.us-east-1.amazonaws.com/web:v1.2";
    let s3 = |version: Option<&str>| CodeSource::S3 {
        bucket: "code".into(),
        key: "fn.zip".into(),
        object_version: version.map(str::to_owned),
    };
    type Changes<'a> = Vec<(&'a str, Option<&'a str>)>;
    let cases: Vec<(Changes, Result<CodeSource, &str>)> = vec![
        (vec![], Ok(zip("fn.zip"))),
        (
            vec![("zipFile", Some("../shared/fn.zip"))],
            Ok(zip("../shared/fn.zip")),
        ),
        (
            vec![NO_ZIP, ("image", Some(image))],
            Ok(CodeSource::Image { uri: image.into() }),
        ),
        (
            vec![
                NO_ZIP,
                ("s3Bucket", Some("code")),
                ("s3Key", Some("fn.zip")),
                ("s3ObjectVersion", Some("v7")),
            ],
            Ok(s3(Some("v7"))),
        ),
        (
            vec![
                NO_ZIP,
                ("s3Bucket", Some("code")),
                ("s3Key", Some("fn.zip")),
            ],
            Ok(s3(None)),
        ),
        (vec![NO_ZIP], Err("spec")),
        (vec![NO_ZIP, ("s3Bucket", Some("code"))], Err("spec.s3Key")),
        (
            vec![NO_ZIP, ("s3Key", Some("fn.zip"))],
            Err("spec.s3Bucket"),
        ),
        (
            vec![NO_ZIP, ("s3ObjectVersion", Some("v1"))],
            Err("spec.s3Bucket"),
        ),
        (vec![("image", Some("web:v1"))], Err("spec.zipFile")),
        (
            vec![
                NO_ZIP,
                ("image", Some("web:v1")),
                ("s3Bucket", Some("b")),
                ("s3Key", Some("k")),
            ],
            Err("spec.s3Bucket"),
        ),
        (vec![("s3Key", Some("k"))], Err("spec.zipFile")),
        (vec![("zipFile", Some("fn.tar.gz"))], Err("spec.zipFile")),
        (vec![("zipFile", Some("/abs/fn.zip"))], Err("spec.zipFile")),
        (
            vec![
                NO_ZIP,
                (
                    "source",
                    Some("{git: 'git@github.com:org/fn.git', ref: v1, path: ./fn/}"),
                ),
            ],
            Ok(CodeSource::Git {
                remote: "git@github.com:org/fn.git".into(),
                git_ref: "v1".into(),
                path: "fn".into(),
            }),
        ),
        (
            vec![
                NO_ZIP,
                ("source", Some("{git: 'https://h/r.git', ref: v1}")),
            ],
            Ok(CodeSource::Git {
                remote: "https://h/r.git".into(),
                git_ref: "v1".into(),
                path: String::new(),
            }),
        ),
        (
            vec![("source", Some("{git: 'https://h/r.git', ref: v1}"))],
            Err("spec.source"),
        ),
        (
            vec![NO_ZIP, ("source", Some("{git: '', ref: v1}"))],
            Err("spec.source.git"),
        ),
        (
            vec![
                NO_ZIP,
                (
                    "source",
                    Some("{git: 'https://h/r.git', ref: '--upload-pack=x'}"),
                ),
            ],
            Err("spec.source.ref"),
        ),
        (
            vec![
                NO_ZIP,
                (
                    "source",
                    Some("{git: 'https://h/r.git', ref: v1, path: ../up}"),
                ),
            ],
            Err("spec.source.path"),
        ),
        (
            vec![
                NO_ZIP,
                ("source", Some("{git: 'https://h/r.git', branch: v1}")),
            ],
            Err("spec.source.branch"),
        ),
    ];
    for (changes, expected) in cases {
        check(&manifest(&changes), expected);
    }
}

#[test]
fn fields_are_validated_by_name() {
    let cases = [
        ("memory", Some("64"), "spec.memory"),
        ("memory", Some("20000"), "spec.memory"),
        ("memory", None, "spec.memory"),
        ("timeout", Some("0"), "spec.timeout"),
        ("timeout", Some("901"), "spec.timeout"),
        ("timeout", Some("soon"), "spec.timeout"),
        ("timeout", None, "spec.timeout"),
        ("name", None, "spec.name"),
        ("name", Some("''"), "spec.name"),
        ("role", None, "spec.role"),
        ("handler", None, "spec.handler"),
        ("runtime", None, "spec.runtime"),
        (
            "ephemeralStorage",
            Some("{size: 100}"),
            "spec.ephemeralStorage.size",
        ),
        (
            "architectures",
            Some("[{name: sparc}]"),
            "spec.architectures[0].name",
        ),
        (
            "architectures",
            Some("[{name: arm64}, {name: x86_64}]"),
            "spec.architectures",
        ),
        ("layers", Some("['']"), "spec.layers[0]"),
        ("memroy", Some("256"), "spec.memroy"),
        (
            "vpcConfig",
            Some("{subnets: [a]}"),
            "spec.vpcConfig.subnets",
        ),
        ("environments", Some("[A]"), "spec.environments"),
    ];
    for (key, value, field) in cases {
        check(&manifest(&[(key, value)]), Err(field));
    }
    // An image needs no handler or runtime.
    let image = manifest(&[
        NO_ZIP,
        ("handler", None),
        ("runtime", None),
        ("image", Some("web:v1")),
    ]);
    check(
        &image,
        Ok(CodeSource::Image {
            uri: "web:v1".into(),
        }),
    );
}

#[test]
fn header_is_checked() {
    let body = manifest(&[]);
    check(&body.replace("v1beta1", "v1"), Err("apiVersion"));
    check(
        &body.replace("kind: LambdaFunction", "kind: ECSService"),
        Err("kind"),
    );
    check(&body.replace("kind: LambdaFunction\n", ""), Err("kind"));
    check(HEAD, Err("spec"));
    check("apiVersion: [", Err("apiVersion"));
    check("- a\n- b\n", Err(""));
    check(&format!("{body}extra: 1\n"), Err("extra"));
}

#[test]
fn every_field_is_read() {
    let text = manifest(&[
        ("tags", Some("{team: web}")),
        ("environments", Some("{MODE: prod, PORT: '80'}")),
        ("ephemeralStorage", Some("{size: 1024}")),
        (
            "vpcConfig",
            Some("{securityGroupIds: [sg-1], subnetIds: [s-1, s-2]}"),
        ),
        (
            "layers",
            Some("['arn:aws:lambda:us-east-1:123456789012:layer:x:3']"),
        ),
        ("architectures", Some("[{name: arm64}]")),
    ]);
    let m = FunctionManifest::parse("function.yaml", &text).unwrap();
    assert_eq!(m.name, "hello");
    assert_eq!(m.role, "arn:aws:iam::123456789012:role/lambda");
    assert_eq!(m.handler.as_deref(), Some("index.handler"));
    assert_eq!(m.runtime.as_deref(), Some("python3.12"));
    assert_eq!((m.memory, m.timeout), (128, 10));
    assert_eq!(m.tags["team"], "web");
    assert_eq!(m.environments["PORT"], "80");
    assert_eq!(m.ephemeral_storage, Some(1024));
    let vpc = m.vpc_config.unwrap();
    assert_eq!(vpc.subnet_ids, ["s-1", "s-2"]);
    assert_eq!(vpc.security_group_ids, ["sg-1"]);
    assert_eq!(
        m.layers,
        ["arn:aws:lambda:us-east-1:123456789012:layer:x:3"]
    );
    assert_eq!(m.architecture.as_deref(), Some("arm64"));
}

#[test]
fn errors_read_well() {
    let err = FunctionManifest::parse("function.yaml", &manifest(&[("memory", Some("lots"))]))
        .unwrap_err();
    assert_eq!(err.field, "spec.memory");
    assert!(err.line.is_some(), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("function.yaml:"), "{text}");
    assert!(text.contains("spec.memory: "), "{text}");
    assert!(
        !text.contains(" at line "),
        "the line is reported once: {text}"
    );
}

#[test]
fn artifact_versions() {
    let version = |code: CodeSource, zip: Option<&str>| {
        let mut m = FunctionManifest::parse("f", &manifest(&[])).unwrap();
        m.code = code;
        let v = m.artifact_version(zip);
        (v.kind, v.name, v.version)
    };
    let image = |uri: &str| CodeSource::Image { uri: uri.into() };
    let s3 = |v: Option<&str>| CodeSource::S3 {
        bucket: "b".into(),
        key: "fns/web.zip".into(),
        object_version: v.map(str::to_owned),
    };
    let img = ArtifactKind::ContainerImage;
    let obj = ArtifactKind::S3Object;
    let cases = [
        (
            image("123.dkr.ecr/team/web:v1.2"),
            None,
            (img, "web", "v1.2"),
        ),
        (image("localhost:5000/web:v3"), None, (img, "web", "v3")),
        (image("web"), None, (img, "web", "latest")),
        (
            image("repo/web@sha256:abc"),
            None,
            (img, "web", "sha256:abc"),
        ),
        (s3(Some("3HL4k")), None, (obj, "fns/web.zip", "3HL4k")),
        (s3(None), None, (obj, "fns/web.zip", "unversioned")),
        (
            zip("fn.zip"),
            Some("0123456789abcdef0123"),
            (ArtifactKind::ZipFile, "fn.zip", "sha256:0123456789ab"),
        ),
    ];
    for (code, digest, (kind, name, v)) in cases {
        assert_eq!(
            version(code.clone(), digest),
            (kind, name.to_owned(), v.to_owned()),
            "{code:?}"
        );
    }
}

#[test]
fn a_manifest_past_the_limits_is_refused_naming_the_file() {
    let bomb = gannet_config::fixture::yaml_bomb(30);
    let err = FunctionManifest::parse("function.yaml", &bomb).unwrap_err();
    assert_eq!(
        err.to_string(),
        // The bomb's anchors hold its expansion: their limit trips before the node limit.
        "function.yaml: too many aliases: its anchors expand to more than 10000 nodes"
    );
    let deep = format!("{}1{}", "[".repeat(80), "]".repeat(80));
    let err = FunctionManifest::parse("function.yaml", &deep).unwrap_err();
    assert_eq!(
        err.to_string(),
        "function.yaml: nested deeper than 64 levels"
    );
}
