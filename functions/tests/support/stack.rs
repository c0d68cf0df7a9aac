//! gannet's own stack on the IAM-enforcing moto (`GANNET_MOTO_IAM_ENDPOINT`): created from
//! the SAM template or the CDK example's synthesised template by `scripts/stack.sh`, and each
//! function's credentials: its role from the stack, assumed by the harness, which plays the
//! Lambda service (scripts/moto_iam.py lets the admin assume a role trusted by a service).
//!
//! Every request a function makes goes through the IAM policy simulator with that role's
//! policies as the template wrote them; a permission the template forgot fails the call with
//! AWS's AccessDenied, naming the action and the resource.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};
use gannet_aws::{sdk_config, ClientOptions, JobsConfig, Provisioned, QueueUrls};
use gannet_domain::ports::QueueName;
use gannet_functions::Function;
use serde_json::Value;

use super::REGION;

/// Which template the stack comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Template {
    Sam,
    Cdk,
}

/// The IAM-enforcing moto and its admin (from `make test`; never skipped).
pub struct IamMoto {
    pub endpoint: String,
    pub admin: Credentials,
}

fn required(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: the stack tests need the IAM-enforcing moto_server (run \
             `make test`, or: eval \"$(scripts/moto.sh start-iam /tmp/moto-iam)\")"
        )
    })
}

impl IamMoto {
    pub fn from_env() -> Self {
        let endpoint = required("GANNET_MOTO_IAM_ENDPOINT");
        assert!(endpoint.starts_with("http://127.0.0.1:"), "{endpoint}");
        Self {
            endpoint,
            admin: Credentials::new(
                required("GANNET_MOTO_IAM_ADMIN_KEY_ID"),
                required("GANNET_MOTO_IAM_ADMIN_SECRET"),
                None,
                None,
                "admin",
            ),
        }
    }

    /// The SDK configuration on `endpoint` with `credentials`.
    pub async fn sdk(&self, endpoint: &str, credentials: Credentials) -> aws_config::SdkConfig {
        sdk_config(&ClientOptions {
            region: REGION.to_owned(),
            endpoint: Some(endpoint.to_owned()),
            credentials: Some(SharedCredentialsProvider::new(credentials)),
        })
        .await
    }

    /// The role `arn`'s credentials, assumed by the admin as Lambda assumes a function's role.
    pub async fn assume(&self, arn: &str, session: &str) -> Credentials {
        use aws_credential_types::provider::ProvideCredentials;
        let admin = self.sdk(&self.endpoint, self.admin.clone()).await;
        aws_config::sts::AssumeRoleProvider::builder(arn)
            .session_name(session)
            .configure(&admin)
            .build()
            .await
            .provide_credentials()
            .await
            .unwrap_or_else(|e| panic!("assume {arn}: {e:?}"))
    }
}

/// What `scripts/stack.sh create` made: scripts/stack.py describes the JSON.
pub struct Stack {
    pub template: Template,
    pub described: Value,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A zip the stack's functions are created with (never run: the harness runs the handlers).
fn code_zip(dir: &Path) -> PathBuf {
    let path = dir.join("bootstrap.zip");
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z: z.writestr('bootstrap', '')",
        ])
        .arg(&path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

impl Stack {
    /// Creates the stack `name` from `template` on `moto` as its admin, with `parameters`
    /// (the SAM template's) or `replace` (literal text of the CDK example's template).
    pub fn create(
        moto: &IamMoto,
        template: Template,
        name: &str,
        parameters: &[(&str, String)],
        replace: &[(&str, String)],
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = root().join("scripts/stack.sh");
        let mut command = Command::new(&script);
        command
            .arg("create")
            .args(["--endpoint", &moto.endpoint, "--name", name])
            .arg("--code-zip")
            .arg(code_zip(dir.path()))
            .env("AWS_ACCESS_KEY_ID", moto.admin.access_key_id())
            .env("AWS_SECRET_ACCESS_KEY", moto.admin.secret_access_key())
            .env_remove("AWS_SESSION_TOKEN")
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null");
        match template {
            Template::Sam => {
                command.arg("--sam").arg(root().join("infra/template.yaml"));
                for (key, value) in parameters {
                    command.arg("--param").arg(format!("{key}={value}"));
                }
            }
            Template::Cdk => {
                let path = Command::new(&script)
                    .arg("cdk-template")
                    .output()
                    .expect("stack.sh runs");
                assert!(
                    path.status.success(),
                    "{}",
                    String::from_utf8_lossy(&path.stderr)
                );
                command
                    .arg("--cdk")
                    .arg(String::from_utf8_lossy(&path.stdout).trim());
                for (old, new) in replace {
                    command.arg("--replace").arg(format!("{old}={new}"));
                }
            }
        }
        let out = command.output().expect("scripts/stack.sh runs");
        assert!(
            out.status.success(),
            "scripts/stack.sh create ({template:?}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let described = serde_json::from_slice(&out.stdout).expect("stack.py's JSON");
        Self {
            template,
            described,
        }
    }

    /// The stack function that runs `f` (its name is the stack's and the binary's).
    pub fn function(&self, f: Function) -> &Value {
        let suffix = format!("-{}", f.name());
        self.described["functions"]
            .as_object()
            .expect("functions")
            .values()
            .find(|v| v["name"].as_str().is_some_and(|n| n.ends_with(&suffix)))
            .unwrap_or_else(|| panic!("the {:?} stack has no {f} function", self.template))
    }

    /// `f`'s environment as the template gives it.
    pub fn environment(&self, f: Function) -> BTreeMap<String, String> {
        self.function(f)["environment"]
            .as_object()
            .expect("an environment")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect()
    }

    pub fn output(&self, key: &str) -> &str {
        self.described["outputs"][key]
            .as_str()
            .unwrap_or_else(|| panic!("the {:?} stack has no output {key}", self.template))
    }

    /// The table and queues, as the functions' environment names them.
    pub fn provisioned(&self) -> Provisioned {
        let queues = QueueName::ALL
            .into_iter()
            .map(|q| {
                let title = match q {
                    QueueName::Trigger => "Trigger",
                    QueueName::Plan => "Plan",
                    QueueName::Stage => "Stage",
                    QueueName::Notify => "Notify",
                    QueueName::Drift => "Drift",
                };
                let urls = QueueUrls {
                    queue: self.output(&format!("{title}QueueUrl")).to_owned(),
                    dead_letter: self
                        .output(&format!("{title}DeadLetterQueueUrl"))
                        .to_owned(),
                };
                (q, urls)
            })
            .collect();
        Provisioned {
            table: self.output("TableName").to_owned(),
            queues,
        }
    }

    /// The jobs' project, bucket and log group, from the stage function's environment.
    pub fn jobs(&self) -> JobsConfig {
        let env = self.environment(Function::Stage);
        JobsConfig {
            project: env["GANNET_JOBS_PROJECT"].clone(),
            bucket: env["GANNET_JOBS_BUCKET"].clone(),
            log_group: env["GANNET_JOBS_LOG_GROUP"].clone(),
        }
    }
}

/// One line of the IAM-enforcing moto's decision log (`GANNET_IAM_DECISIONS`, written by
/// scripts/moto_iam.py): who asked for what, and the simulator's answer.
#[derive(Debug, serde::Deserialize)]
pub struct Decision {
    pub principal: String,
    #[serde(default)]
    pub role: Option<String>,
    pub action: String,
    pub resource: String,
    pub decision: String,
}

/// The decision log.
pub struct Decisions {
    path: PathBuf,
}

impl Decisions {
    pub fn from_env() -> Self {
        Self {
            path: PathBuf::from(required("GANNET_IAM_DECISIONS")),
        }
    }

    /// Every decision about calls by sessions of the role `role` (its name).
    pub fn of_role(&self, role: &str) -> Vec<Decision> {
        let text = std::fs::read_to_string(&self.path)
            .unwrap_or_else(|e| panic!("{}: {e}", self.path.display()));
        text.lines()
            .map(|l| serde_json::from_str::<Decision>(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .filter(|d| d.role.as_deref() == Some(role))
            .collect()
    }

    /// The calls by the role `role` that were refused.
    pub fn denied(&self, role: &str) -> Vec<Decision> {
        self.of_role(role)
            .into_iter()
            .filter(|d| d.decision != "Allowed")
            .collect()
    }
}
