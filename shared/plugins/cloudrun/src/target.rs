//! A Cloud Run deploy target (`plugins.cloudrun.deployTargets[i]`): the project and region
//! gannet deploys to, and how it gets Google credentials. Credentials are never written in
//! gannet.yaml: a file path (a service account key, or an external account configuration for
//! workload identity federation), a federation from the AWS identity gannet runs as, or the
//! metadata server of the machine gannet runs on.

use gannet_config::typed::FieldError;
use gannet_sdk::targets::Named;
use serde::Deserialize;

/// Google's Cloud Run Admin API.
pub const DEFAULT_API_ENDPOINT: &str = "https://run.googleapis.com";
/// Google's Security Token Service, which exchanges an AWS identity for a Google token.
pub const DEFAULT_STS_URL: &str = "https://sts.googleapis.com/v1/token";
/// Google's IAM credentials API, which issues a service account's token to a federated caller.
pub const DEFAULT_IAM_CREDENTIALS_URL: &str = "https://iamcredentials.googleapis.com";

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeployTarget {
    pub name: String,
    /// The Google Cloud project id.
    pub project: String,
    /// The Cloud Run region, such as `europe-west1`.
    pub region: String,
    /// PipeCD's `credentialsFile`: a service account key file, or an external account
    /// configuration (`gcloud iam workload-identity-pools create-cred-config` writes one).
    #[serde(default)]
    pub credentials_file: String,
    /// Workload identity federation from the AWS identity gannet runs as (the AWS runtime's
    /// stage and drift functions), without a file.
    #[serde(default)]
    pub workload_identity: Option<WorkloadIdentity>,
    /// Another Cloud Run API endpoint (a private endpoint; tests). HTTPS unless on loopback.
    #[serde(default)]
    pub api_endpoint: String,
}

/// `deployTargets[i].workloadIdentity`: the pool provider that trusts gannet's AWS account,
/// and the service account gannet acts as.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadIdentity {
    /// `//iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER`.
    pub audience: String,
    /// The service account to impersonate (`gannet@PROJECT.iam.gserviceaccount.com`); empty
    /// to use the federated identity itself.
    #[serde(default)]
    pub service_account: String,
    /// The AWS region whose STS endpoint the signed request names; `AWS_REGION` when empty.
    #[serde(default)]
    pub aws_region: String,
    /// Another STS token URL (tests).
    #[serde(default)]
    pub token_url: String,
    /// Another IAM credentials endpoint (tests).
    #[serde(default)]
    pub iam_credentials_endpoint: String,
}

impl Named for DeployTarget {
    fn name(&self) -> &str {
        &self.name
    }
}

impl DeployTarget {
    /// A target in `project` and `region` using the metadata server's credentials.
    pub fn new(name: &str, project: &str, region: &str) -> Self {
        Self {
            name: name.to_owned(),
            project: project.to_owned(),
            region: region.to_owned(),
            credentials_file: String::new(),
            workload_identity: None,
            api_endpoint: String::new(),
        }
    }

    /// The API endpoint, without a trailing slash.
    pub fn endpoint(&self) -> &str {
        match self.api_endpoint.as_str() {
            "" => DEFAULT_API_ENDPOINT,
            e => e.trim_end_matches('/'),
        }
    }

    /// Checks the target written at `at`.
    pub fn check(&self, at: &str) -> Result<(), FieldError> {
        let error = |field: &str, message: &str| FieldError {
            path: format!("{at}.{field}"),
            message: message.to_owned(),
        };
        if !is_project_id(&self.project) {
            return Err(error(
                "project",
                "must be a Google Cloud project id: 6 to 30 lowercase letters, digits and hyphens, starting with a letter",
            ));
        }
        if self.region.is_empty()
            || !self
                .region
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(error(
                "region",
                "must be a Cloud Run region such as europe-west1",
            ));
        }
        if !self.credentials_file.is_empty() && self.workload_identity.is_some() {
            return Err(error(
                "workloadIdentity",
                "credentialsFile and workloadIdentity exclude each other: keep one",
            ));
        }
        if let Some(w) = &self.workload_identity {
            if !w.audience.starts_with("//iam.googleapis.com/")
                || !w.audience.contains("/providers/")
            {
                return Err(error(
                    "workloadIdentity.audience",
                    "must be the pool provider's name: //iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/POOL/providers/PROVIDER",
                ));
            }
            if !w.service_account.is_empty() && !w.service_account.contains('@') {
                return Err(error(
                    "workloadIdentity.serviceAccount",
                    "must be a service account's email, such as gannet@my-project.iam.gserviceaccount.com",
                ));
            }
            for (field, url) in [
                ("workloadIdentity.tokenUrl", &w.token_url),
                (
                    "workloadIdentity.iamCredentialsEndpoint",
                    &w.iam_credentials_endpoint,
                ),
            ] {
                if !url.is_empty() {
                    check_url(url).map_err(|m| error(field, &m))?;
                }
            }
        }
        if !self.api_endpoint.is_empty() {
            check_url(&self.api_endpoint).map_err(|m| error("apiEndpoint", &m))?;
        }
        Ok(())
    }
}

/// Google's project id rules.
fn is_project_id(id: &str) -> bool {
    (6..=30).contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && !id.ends_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// An endpoint gannet sends a bearer token to: HTTPS, or plain HTTP on loopback only, with no
/// user name or password in it ([`gannet_sdk::targets::credentialed_url`]).
pub(crate) fn check_url(url: &str) -> Result<(), String> {
    match gannet_sdk::targets::credentialed_url(url) {
        Ok(_) => Ok(()),
        Err(why) => Err(format!(
            "{:?} {why}",
            gannet_domain::report::redact_urls(url)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(v: serde_json::Value) -> Result<(), FieldError> {
        let t: DeployTarget = serde_json::from_value(v).map_err(|e| FieldError {
            path: "parse".into(),
            message: e.to_string(),
        })?;
        t.check("plugins.cloudrun.deployTargets[0]")
    }

    #[test]
    fn targets_are_checked_field_by_field() {
        let wif = json!({"audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/aws/providers/gannet", "serviceAccount": "gannet@my-project.iam.gserviceaccount.com"});
        assert!(
            check(json!({"name": "a", "project": "my-project", "region": "europe-west1"})).is_ok()
        );
        assert!(check(json!({"name": "a", "project": "my-project", "region": "europe-west1", "workloadIdentity": wif})).is_ok());
        assert!(check(json!({"name": "a", "project": "my-project", "region": "us-central1", "apiEndpoint": "http://127.0.0.1:8080"})).is_ok());
        for (target, field) in [
            (
                json!({"name": "a", "project": "My_Project", "region": "x"}),
                "project",
            ),
            (
                json!({"name": "a", "project": "my-project", "region": "Europe West"}),
                "region",
            ),
            (
                json!({"name": "a", "project": "my-project", "region": "r", "credentialsFile": "/k.json", "workloadIdentity": wif}),
                "workloadIdentity",
            ),
            (
                json!({"name": "a", "project": "my-project", "region": "r", "workloadIdentity": {"audience": "aws"}}),
                "workloadIdentity.audience",
            ),
            (
                json!({"name": "a", "project": "my-project", "region": "r", "apiEndpoint": "http://run.example.com"}),
                "apiEndpoint",
            ),
            (
                json!({"name": "a", "project": "my-project", "region": "r", "apiEndpoint": "http://127.0.0.1.example.com"}),
                "apiEndpoint",
            ),
            (
                json!({"name": "a", "project": "my-project", "region": "r", "apiEndpoint": "http://localhost:x@run.example.com/"}),
                "apiEndpoint",
            ),
        ] {
            let e = check(target.clone()).unwrap_err();
            assert_eq!(
                e.path,
                format!("plugins.cloudrun.deployTargets[0].{field}"),
                "{target}: {e:?}"
            );
        }
        let userinfo = check(json!({"name": "a", "project": "my-project", "region": "r", "apiEndpoint": "http://localhost:pw@run.example.com/"})).unwrap_err();
        assert!(
            userinfo.message.contains("user name or password") && !userinfo.message.contains("pw"),
            "{userinfo:?}"
        );
        assert!(check(
            json!({"name": "a", "project": "my-project", "region": "r", "credentials": "{}"})
        )
        .unwrap_err()
        .message
        .contains("unknown field"));
    }
}
