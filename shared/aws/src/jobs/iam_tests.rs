//! The jobs under enforced IAM: the template's `JobRole` and `JobsBucket`, made from
//! `infra/template.yaml` on the second moto_server `make test` starts (IAM enforced,
//! `GANNET_MOTO_IAM_ENDPOINT`), and the job's buildspec run by bash with the real AWS CLI
//! (`GANNET_AWS_CLI`, pinned by scripts/awscli.sh) and that role's credentials, as CodeBuild
//! runs it.
//!
//! The roles are made with the template's trust and inline policies, word for word, and
//! assumed by the server's admin user, which scripts/moto_iam.py lets stand in for the service
//! a role trusts (CodeBuild for `JobRole`: its trust policy, `aws:SourceAccount` condition
//! included, is evaluated with `codebuild.amazonaws.com` as the principal). The build's curl
//! sends the presigned URLs straight to that server, which checks them as S3 does (signature,
//! expiry) and authorizes them as their signer.
//!
//! What moto 5.2.5 cannot do, and what stands in for it: moto runs no build, and keeps no
//! build's variables; the runner's CodeBuild calls go to the fake of the unit tests, which
//! records them, and the test runs the buildspec's commands.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};
use gannet_domain::ids::{DeploymentId, StageId};
use gannet_domain::GoDuration;
use gannet_sdk::jobs::{JobError, JobInput, JobKey, JobRoleArn, JobRunner, JobSpec};
use serde_json::{json, Value};

use super::tests::{run_buildspec, started_env, FakeCodeBuild};
use super::CodeBuildJobs;
use crate::test_moto::unique;
use crate::{sdk_config, ClientOptions};

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";

/// The IAM-enforcing moto and its admin's key (from `make test`; never skipped).
struct IamMoto {
    endpoint: String,
    admin: (String, String),
    aws: PathBuf,
}

fn required(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: these tests need the IAM-enforcing moto_server and the AWS CLI \
             (run `make test`, or: eval \"$(scripts/moto.sh start-iam /tmp/moto-iam)\" and \
             export GANNET_AWS_CLI=$(scripts/awscli.sh path))"
        )
    })
}

impl IamMoto {
    fn from_env() -> Self {
        let endpoint = required("GANNET_MOTO_IAM_ENDPOINT");
        assert!(endpoint.starts_with("http://127.0.0.1:"), "{endpoint}");
        Self {
            endpoint,
            admin: (
                required("GANNET_MOTO_IAM_ADMIN_KEY_ID"),
                required("GANNET_MOTO_IAM_ADMIN_SECRET"),
            ),
            aws: PathBuf::from(required("GANNET_AWS_CLI")),
        }
    }

    /// The AWS CLI on this moto with `credentials` (key, secret, session token).
    fn aws(&self, credentials: &Keys, args: &[&str]) -> Output {
        Command::new(&self.aws)
            .args(args)
            .env_clear()
            .envs(credentials.env(&self.endpoint))
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .expect("the AWS CLI runs")
    }

    /// The AWS CLI as the admin; its JSON answer, or a panic with its error.
    fn admin(&self, args: &[&str]) -> Value {
        let out = self.aws(&self.admin_keys(), args);
        assert!(
            out.status.success(),
            "aws {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    fn admin_keys(&self) -> Keys {
        Keys {
            id: self.admin.0.clone(),
            secret: self.admin.1.clone(),
            token: None,
        }
    }

    async fn sdk(&self, keys: &Keys) -> aws_config::SdkConfig {
        sdk_config(&ClientOptions {
            region: REGION.to_owned(),
            endpoint: Some(self.endpoint.clone()),
            credentials: Some(SharedCredentialsProvider::new(Credentials::new(
                keys.id.clone(),
                keys.secret.clone(),
                keys.token.clone(),
                None,
                "iam-tests",
            ))),
        })
        .await
    }

    /// Makes the template's role `resource` (its trust and inline policies, resolved for
    /// `names`) and assumes it.
    fn role_from_template(&self, resource: &str, names: &Names) -> (String, Keys) {
        let template = Template::load();
        self.role(
            resource,
            &template.trust_policy(resource, names),
            template.role_policies(resource, names),
        )
    }

    /// Makes a role with `trust` and `policies` (names and documents) and assumes it as the
    /// admin, who stands in for the service `trust` names.
    fn role(
        &self,
        resource: &str,
        trust: &Value,
        policies: Vec<(String, Value)>,
    ) -> (String, Keys) {
        let role = unique(resource);
        self.admin(&[
            "iam",
            "create-role",
            "--role-name",
            &role,
            "--assume-role-policy-document",
            &trust.to_string(),
        ]);
        for (name, document) in policies {
            self.admin(&[
                "iam",
                "put-role-policy",
                "--role-name",
                &role,
                "--policy-name",
                &name,
                "--policy-document",
                &document.to_string(),
            ]);
        }
        let assumed = self.admin(&[
            "sts",
            "assume-role",
            "--role-arn",
            &format!("arn:aws:iam::{ACCOUNT}:role/{role}"),
            "--role-session-name",
            "job",
        ]);
        let c = &assumed["Credentials"];
        let keys = Keys {
            id: c["AccessKeyId"].as_str().expect("key").to_owned(),
            secret: c["SecretAccessKey"].as_str().expect("secret").to_owned(),
            token: c["SessionToken"].as_str().map(str::to_owned),
        };
        (role, keys)
    }
}

#[derive(Clone)]
struct Keys {
    id: String,
    secret: String,
    token: Option<String>,
}

impl Keys {
    /// The environment an AWS CLI (or a CodeBuild build) gets its credentials and endpoint from.
    fn env(&self, endpoint: &str) -> Vec<(String, String)> {
        let mut env = vec![
            ("AWS_ACCESS_KEY_ID".to_owned(), self.id.clone()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), self.secret.clone()),
            ("AWS_DEFAULT_REGION".to_owned(), REGION.to_owned()),
            ("AWS_ENDPOINT_URL".to_owned(), endpoint.to_owned()),
            ("AWS_EC2_METADATA_DISABLED".to_owned(), "true".to_owned()),
            ("AWS_CONFIG_FILE".to_owned(), "/dev/null".to_owned()),
            (
                "AWS_SHARED_CREDENTIALS_FILE".to_owned(),
                "/dev/null".to_owned(),
            ),
        ];
        if let Some(token) = &self.token {
            env.push(("AWS_SESSION_TOKEN".to_owned(), token.clone()));
        }
        env
    }
}

/// What the stack's names resolve to in the test.
struct Names {
    stack: String,
    bucket: String,
    log_group: String,
}

/// `infra/template.yaml`, and a small resolver for the intrinsics the jobs' roles use
/// (`!Ref`, `!GetAtt`, `!Sub`, `!If`); any other fails the test, naming it.
struct Template(Value);

impl Template {
    fn load() -> Self {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../infra/template.yaml");
        let text = std::fs::read_to_string(&path).expect("infra/template.yaml");
        let Tagged(template) = gannet_config::yaml::from_str(&text).expect("the template parses");
        Self(template)
    }

    /// One policy of the statements `sids` of the role `resource`'s inline policies, resolved.
    fn role_statements(&self, resource: &str, sids: &[&str], names: &Names) -> (String, Value) {
        let policies = self.0["Resources"][resource]["Properties"]["Policies"]
            .as_array()
            .unwrap_or_else(|| panic!("{resource} has no Policies in the template"));
        let statements: Vec<Value> = policies
            .iter()
            .flat_map(|p| p["PolicyDocument"]["Statement"].as_array().cloned())
            .flatten()
            .filter(|s| sid(s).is_some_and(|sid| sids.contains(&sid)))
            .map(|s| {
                let at = format!("Resources.{resource}.{}", sid(&s).unwrap_or("?"));
                resolve(&s, names, &at).expect("a statement")
            })
            .collect();
        assert_eq!(
            statements.len(),
            sids.len(),
            "{resource} has statements {sids:?}"
        );
        let document = json!({"Version": "2012-10-17", "Statement": statements});
        (sids.join("-"), document)
    }

    /// The trust policy of the role `resource`, resolved.
    fn trust_policy(&self, resource: &str, names: &Names) -> Value {
        let document = &self.0["Resources"][resource]["Properties"]["AssumeRolePolicyDocument"];
        let at = format!("Resources.{resource}.AssumeRolePolicyDocument");
        resolve(document, names, &at).unwrap_or_else(|| panic!("{at}: no trust policy"))
    }

    /// Each inline policy of the role `resource`: its name and document, resolved.
    fn role_policies(&self, resource: &str, names: &Names) -> Vec<(String, Value)> {
        let policies = &self.0["Resources"][resource]["Properties"]["Policies"];
        let policies = policies
            .as_array()
            .unwrap_or_else(|| panic!("{resource} has no Policies in the template"));
        policies
            .iter()
            .map(|p| {
                let name = p["PolicyName"].as_str().expect("PolicyName").to_owned();
                let at = format!("Resources.{resource}.Policies.{name}");
                let document = resolve(&p["PolicyDocument"], names, &at).expect("a document");
                (name, document)
            })
            .collect()
    }
}

/// A node of the template: CloudFormation's short forms (`!Ref x`) become one-key maps
/// (`{"!Ref": "x"}`), as its JSON form writes them (`{"Ref": "x"}`).
struct Tagged(Value);

impl<'de> serde::Deserialize<'de> for Tagged {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let gannet_config::yaml::Tagged(Untagged(value), tag) = serde::Deserialize::deserialize(d)?;
        Ok(Self(match tag {
            Some(tag) if tag.starts_with('!') && !tag.starts_with("!!") => json!({ tag: value }),
            _ => value,
        }))
    }
}

struct Untagged(Value);

impl<'de> serde::Deserialize<'de> for Untagged {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Untagged;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a YAML node")
            }
            fn visit_unit<E>(self) -> Result<Untagged, E> {
                Ok(Untagged(Value::Null))
            }
            fn visit_none<E>(self) -> Result<Untagged, E> {
                Ok(Untagged(Value::Null))
            }
            fn visit_bool<E>(self, b: bool) -> Result<Untagged, E> {
                Ok(Untagged(json!(b)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Untagged, E> {
                Ok(Untagged(json!(n)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Untagged, E> {
                Ok(Untagged(json!(n)))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Untagged, E> {
                Ok(Untagged(json!(n)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Untagged, E> {
                Ok(Untagged(json!(s)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Untagged, A::Error> {
                let mut items = Vec::new();
                while let Some(Tagged(item)) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Untagged(Value::Array(items)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Untagged, A::Error> {
                let mut out = serde_json::Map::new();
                while let Some((key, Tagged(value))) = map.next_entry::<String, Tagged>()? {
                    out.insert(key, value);
                }
                Ok(Untagged(Value::Object(out)))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// A statement's Sid, or that of a statement only some stacks have (`!If [condition, statement,
/// !Ref AWS::NoValue]`).
fn sid(statement: &Value) -> Option<&str> {
    statement["Sid"]
        .as_str()
        .or_else(|| statement["!If"][1]["Sid"].as_str())
}

/// The one Terraform deploy target's `jobRoleArn` of the stack as tested (`JobTargetRoleArns`).
fn job_target_role(names: &Names) -> String {
    format!("arn:aws:iam::{ACCOUNT}:role/{}-tf-prod", names.stack)
}

/// `value` with its intrinsics resolved; `None` for `!Ref AWS::NoValue`.
fn resolve(value: &Value, names: &Names, at: &str) -> Option<Value> {
    let attribute = |resource: &str, attribute: &str| -> String {
        match (resource, attribute) {
            ("JobsBucket", "Arn") => format!("arn:aws:s3:::{}", names.bucket),
            ("JobsProject", "Arn") => format!(
                "arn:aws:codebuild:{REGION}:{ACCOUNT}:project/{}-jobs",
                names.stack
            ),
            ("JobsLogGroup", "Arn") => format!(
                "arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{}:*",
                names.log_group
            ),
            _ => panic!("{at}: the test resolves no !GetAtt {resource}.{attribute}"),
        }
    };
    let reference = |name: &str| -> Option<Value> {
        Some(match name {
            "AWS::NoValue" => return None,
            "AWS::AccountId" => json!(ACCOUNT),
            "AWS::Region" => json!(REGION),
            "AWS::Partition" => json!("aws"),
            "AWS::StackName" => json!(names.stack),
            "JobsBucket" => json!(names.bucket),
            "JobsLogGroup" => json!(names.log_group),
            // The stack as tested: no role every job may assume, one per-target job role.
            "JobDeployTargetRoleArns" => json!([]),
            "JobTargetRoleArns" => json!([job_target_role(names)]),
            _ => panic!("{at}: the test resolves no !Ref {name}"),
        })
    };
    Some(match value {
        Value::Object(map) if map.len() == 1 && map.keys().all(|k| k.starts_with('!')) => {
            let (tag, arg) = map.iter().next().expect("one key");
            match tag.as_str() {
                "!Ref" => return reference(arg.as_str().expect("!Ref takes a name")),
                "!GetAtt" => {
                    let (r, a) = arg
                        .as_str()
                        .and_then(|s| s.split_once('.'))
                        .expect("!GetAtt Resource.Attribute");
                    json!(attribute(r, a))
                }
                "!Sub" => {
                    let mut text = arg.as_str().expect("!Sub takes a string").to_owned();
                    while let Some(start) = text.find("${") {
                        let end = start + text[start..].find('}').expect("a closing }");
                        let name = &text[start + 2..end];
                        let with = match name.split_once('.') {
                            Some((r, a)) => attribute(r, a),
                            None => match reference(name) {
                                Some(Value::String(s)) => s,
                                other => panic!("{at}: ${{{name}}} is {other:?}"),
                            },
                        };
                        text.replace_range(start..=end, &with);
                    }
                    json!(text)
                }
                "!If" => {
                    let branches = arg.as_array().expect("!If [condition, then, else]");
                    let condition = branches[0].as_str().expect("a condition's name");
                    // As the references above: JobTargetRoleArns only.
                    let holds = match condition {
                        "HasJobTargets" => false,
                        "HasJobTargetRoles" => true,
                        other => panic!("{at}: the test decides no condition {other}"),
                    };
                    return resolve(&branches[if holds { 1 } else { 2 }], names, at);
                }
                other => panic!("{at}: the test resolves no {other}"),
            }
        }
        Value::Array(items) => {
            Value::Array(items.iter().filter_map(|v| resolve(v, names, at)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .filter_map(|(k, v)| Some((k.clone(), resolve(v, names, at)?)))
                .collect(),
        ),
        scalar => scalar.clone(),
    })
}

fn key(stage: &str) -> JobKey {
    JobKey::new(
        &DeploymentId::parse("web-0123abcd").unwrap(),
        &StageId::parse(stage).unwrap(),
        1,
    )
}

fn s3_client(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(true)
            .build(),
    )
}

/// The jobs' bucket, log group and project on the IAM-enforcing moto, made by the admin, and
/// the runner on them: S3 with `stage`'s credentials (the stage function's role), CodeBuild
/// the fake at `codebuild`.
async fn jobs_on(
    moto: &IamMoto,
    names: &Names,
    role: &str,
    stage: &Keys,
    codebuild: &str,
) -> CodeBuildJobs {
    let sdk = moto.sdk(&moto.admin_keys()).await;
    let s3 = s3_client(&sdk);
    let logs = aws_sdk_cloudwatchlogs::Client::new(&sdk);
    let codebuild_on_moto = aws_sdk_codebuild::Client::new(&sdk);
    let config = crate::provision_jobs(
        &codebuild_on_moto,
        &s3,
        &logs,
        &names.stack,
        &format!("arn:aws:iam::{ACCOUNT}:role/{role}"),
    )
    .await
    .expect("the jobs' resources on the IAM-enforcing moto");
    assert_eq!(
        (config.bucket.as_str(), config.log_group.as_str()),
        (names.bucket.as_str(), names.log_group.as_str())
    );
    let codebuild = aws_sdk_codebuild::Client::from_conf(
        aws_sdk_codebuild::config::Builder::from(&sdk)
            .endpoint_url(codebuild)
            .build(),
    );
    let stage_s3 = s3_client(&moto.sdk(stage).await);
    CodeBuildJobs::new(codebuild, stage_s3, logs, config)
}

fn names() -> Names {
    let stack = unique("iam");
    Names {
        bucket: format!("{stack}-jobs"),
        log_group: format!("/gannet/{stack}/jobs"),
        stack,
    }
}

#[tokio::test]
async fn a_job_with_a_role_without_s3_rights_fetches_and_keeps_its_files_through_its_urls() {
    let moto = IamMoto::from_env();
    let names = names();
    let template = Template::load();
    let (role, job) = moto.role_from_template("JobRole", &names);
    // The stage function's rights on the jobs' files, as the template grants them.
    let (_, stage) = moto.role(
        "StageRole",
        &template.trust_policy("StageRole", &names),
        vec![template.role_statements("StageRole", &["JobFiles"], &names)],
    );
    let fake = FakeCodeBuild::new(Vec::new());
    let jobs = jobs_on(&moto, &names, &role, &stage, &fake.url).await;
    let cli_dir = moto
        .aws
        .parent()
        .expect("the AWS CLI's directory")
        .to_owned();
    // The build as CodeBuild runs it: its variables, its role's credentials.
    let build = |key: &JobKey| {
        let mut env: BTreeMap<String, String> = job.env(&moto.endpoint).into_iter().collect();
        env.extend(started_env(&fake, key));
        run_buildspec(&env.into_iter().collect::<Vec<_>>(), Some(&cli_dir))
    };

    // Terraform's hand-off: the plan job leaves plan.bin, the apply job is given it.
    let (plan, apply) = (key("plan"), key("apply"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.tf"), "# the app\n").unwrap();
    let spec = |key, script, inputs| JobSpec {
        key,
        script,
        dir: dir.path(),
        env: &[],
        timeout: GoDuration::from_secs(300),
        inputs,
        role: None,
        cache: None,
    };
    jobs.start(spec(
        &plan,
        "printf 'the plan' >\"$GANNET_JOB_OUT/plan.bin\"",
        &[],
    ))
    .await
    .expect("start the plan");
    assert_eq!(build(&plan), (0, String::new()));
    let inputs = [JobInput {
        job: &plan,
        file: "plan.bin",
    }];
    jobs.start(spec(
        &apply,
        "cp \"$GANNET_JOB_IN/plan.bin\" \"$GANNET_JOB_OUT/applied\" && echo applied",
        &inputs,
    ))
    .await
    .expect("start the apply");
    assert_eq!(build(&apply), (0, "applied\n".to_owned()));
    assert_eq!(
        jobs.output(&apply, "applied").await.expect("read"),
        Some(b"the plan".to_vec())
    );
    assert_eq!(
        jobs.read(&apply, "exit").await.expect("read"),
        Some("0".to_owned()),
        "the exit code the build put"
    );

    // The job's role reaches nothing in the bucket by itself (the CLI reads an object's head
    // first; S3 answers a HEAD's refusal with a bare 403).
    let source = format!("s3://{}/jobs/{plan}/source.tar.gz", names.bucket);
    let fetched = moto.aws(&job, &["s3", "cp", &source, "-"]);
    let said = String::from_utf8_lossy(&fetched.stderr);
    assert!(
        !fetched.status.success()
            && fetched.stdout.is_empty()
            && said.contains(&source)
            && said.contains("(403) when calling the HeadObject operation"),
        "{said}"
    );

    // A URL names one object: the apply job's source URL bent to the plan's is refused.
    let url = started_env(&fake, &apply)
        .into_iter()
        .find(|(k, _)| k == super::SOURCE_URL_VARIABLE)
        .expect("a source URL")
        .1;
    // Its answer's body, then its status.
    let curl = |url: &str| {
        let out = Command::new("curl")
            .args(["--silent", "--noproxy", "*", "--write-out", " %{http_code}"])
            .arg(url)
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(curl(&url).ends_with(" 200"));
    let bent = url.replace(&format!("/jobs/{apply}/"), &format!("/jobs/{plan}/"));
    assert_ne!(bent, url);
    let refused = curl(&bent);
    assert!(
        refused.ends_with(" 403") && refused.contains("<Code>SignatureDoesNotMatch</Code>"),
        "another job's source through this job's URL: {refused}"
    );
    let exit_url = started_env(&fake, &apply)
        .into_iter()
        .find(|(k, _)| k == super::EXIT_URL_VARIABLE)
        .expect("an exit URL")
        .1;
    assert!(
        exit_url.contains(&format!("/jobs/{apply}/exit?")),
        "{exit_url}"
    );
}

/// A Terraform deploy target's jobs run as its `jobRoleArn`: the stage and drift roles, as the
/// template grants them with one such role in `JobTargetRoleArns`, start a build as that role
/// (StartBuild's serviceRoleOverride, on the IAM-enforcing server's CodeBuild) and as the
/// project's own, and never as another; the refusal says where the role must be listed.
#[tokio::test]
async fn the_stage_and_drift_roles_start_builds_as_the_listed_job_target_roles_only() {
    let moto = IamMoto::from_env();
    let template = Template::load();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.tf"), "# the app\n").unwrap();
    for function in ["StageRole", "DriftRole"] {
        let names = names();
        let (job_role, _) = moto.role_from_template("JobRole", &names);
        let (_, caller) = moto.role(
            function,
            &template.trust_policy(function, &names),
            vec![template.role_statements(
                function,
                &["Jobs", "PassJobTargetRoles", "JobFiles"],
                &names,
            )],
        );
        let config = jobs_on(&moto, &names, &job_role, &caller, &moto.endpoint)
            .await
            .config;
        let sdk = moto.sdk(&caller).await;
        let jobs = CodeBuildJobs::new(
            aws_sdk_codebuild::Client::new(&sdk),
            s3_client(&sdk),
            aws_sdk_cloudwatchlogs::Client::new(&sdk),
            config,
        );
        let listed = JobRoleArn::parse(&job_target_role(&names)).expect("a role");
        let other = format!("arn:aws:iam::{ACCOUNT}:role/{}-tf-other", names.stack);
        let other = JobRoleArn::parse(&other).expect("a role");
        let start = |key: JobKey, role: Option<&JobRoleArn>| {
            let jobs = &jobs;
            let dir = dir.path().to_owned();
            let role = role.cloned();
            async move {
                jobs.start(JobSpec {
                    key: &key,
                    script: "true",
                    dir: &dir,
                    env: &[],
                    timeout: GoDuration::from_secs(300),
                    inputs: &[],
                    role: role.as_ref(),
                    cache: None,
                })
                .await
            }
        };
        start(key("as-project"), None)
            .await
            .unwrap_or_else(|e| panic!("{function}: as the project's role: {e}"));
        start(key("as-target"), Some(&listed))
            .await
            .unwrap_or_else(|e| panic!("{function}: as {listed}: {e}"));
        let err = start(key("as-other"), Some(&other)).await.unwrap_err();
        let said = err.to_string();
        assert!(
            matches!(err, JobError::Refused(_))
                && said.contains(&format!(
                    "is not authorized to perform: iam:PassRole on resource: {other}"
                ))
                && said.contains("JobTargetRoleArns"),
            "{function}: {said}"
        );
    }
}
