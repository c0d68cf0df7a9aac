//! What every AWS deploy target has (a name, a region, an optional role to assume and an
//! optional endpoint), and the checks on those fields. Choosing an app's target is the core's
//! ([`gannet_sdk::targets::pick`]); these are only the AWS-specific parts.

use gannet_config::typed::FieldError;
use gannet_sdk::targets::Named;

/// An AWS deploy target as the controller config writes it (`plugins.ecs.deployTargets[i]`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AwsTarget {
    pub name: String,
    /// Such as `us-east-1`.
    pub region: String,
    /// A role to assume for every call.
    #[serde(default)]
    pub role_arn: Option<String>,
    /// Another endpoint for the AWS APIs (a local AWS API server).
    #[serde(default)]
    pub endpoint: Option<String>,
}

impl AwsTarget {
    /// A target in `region` with nothing else set.
    pub fn new(name: impl Into<String>, region: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            region: region.into(),
            role_arn: None,
            endpoint: None,
        }
    }

    pub fn fields(&self) -> AwsFields<'_> {
        AwsFields {
            name: &self.name,
            region: &self.region,
            role_arn: self.role_arn.as_deref(),
            endpoint: self.endpoint.as_deref(),
        }
    }
}

impl Named for AwsTarget {
    fn name(&self) -> &str {
        &self.name
    }
}

/// The fields every AWS deploy target has, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct AwsFields<'a> {
    pub name: &'a str,
    pub region: &'a str,
    pub role_arn: Option<&'a str>,
    pub endpoint: Option<&'a str>,
}

/// Checks the AWS target at `at`: a region, a role ARN and an endpoint that look like ones.
pub fn check_target(at: &str, t: AwsFields<'_>) -> Result<(), FieldError> {
    let error = |field: &str, message: String| FieldError {
        path: format!("{at}.{field}"),
        message,
    };
    let region = t.region;
    let region_ok = region.contains('-')
        && region.ends_with(|c: char| c.is_ascii_digit())
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !region_ok {
        return Err(error(
            "region",
            format!("{region:?} is not an AWS region such as us-east-1"),
        ));
    }
    if let Some(role) = t.role_arn {
        if !(role.starts_with("arn:") && role.contains(":role/")) {
            return Err(error(
                "roleArn",
                format!(
                    "{role:?} is not a role ARN such as arn:aws:iam::123456789012:role/deployer"
                ),
            ));
        }
    }
    if let Some(endpoint) = t.endpoint {
        let host = endpoint
            .strip_prefix("http://")
            .or_else(|| endpoint.strip_prefix("https://"));
        if host.is_none_or(str::is_empty) {
            return Err(error(
                "endpoint",
                format!("{endpoint:?} is not an http(s) URL such as http://127.0.0.1:5000"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use gannet_sdk::registry::{PluginSettings, RuntimeInfo};
    use serde_json::json;

    use super::*;

    fn check(targets: serde_json::Value) -> Result<usize, String> {
        let value = json!({ "deployTargets": targets });
        let runtime = RuntimeInfo::default();
        PluginSettings::new("t", &value, &runtime)
            .deploy_targets(|at, t: &AwsTarget| check_target(at, t.fields()))
            .map(|list| list.len())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn targets_are_checked_field_by_field() {
        assert_eq!(check(json!([])), Ok(0));
        assert_eq!(
            check(
                json!([{"name": "a", "region": "us-east-1", "roleArn": "arn:aws:iam::1:role/d", "endpoint": "http://127.0.0.1:5000"}])
            ),
            Ok(1)
        );
        let cases = [
            (
                json!([{"name": "a"}]),
                "t.deployTargets[0]: missing field `region`",
            ),
            (
                json!([{"name": "a", "regoin": "x"}]),
                "t.deployTargets[0].regoin: unknown field `regoin`; did you mean `region`?",
            ),
            (
                json!([{"name": " ", "region": "us-east-1"}]),
                "t.deployTargets[0].name: must not be empty",
            ),
            (
                json!([{"name": "a", "region": "us-east-1"}, {"name": "a", "region": "eu-west-1"}]),
                "t.deployTargets[1].name: a is listed twice",
            ),
            (
                json!([{"name": "a", "region": "Mars"}]),
                "t.deployTargets[0].region: \"Mars\"",
            ),
            (
                json!([{"name": "a", "region": "us-east-1", "roleArn": "deployer"}]),
                "t.deployTargets[0].roleArn:",
            ),
            (
                json!([{"name": "a", "region": "us-east-1", "endpoint": "localhost:5000"}]),
                "t.deployTargets[0].endpoint:",
            ),
        ];
        for (targets, want) in cases {
            let got = check(targets.clone()).unwrap_err();
            assert!(got.starts_with(want), "{targets}: {got}");
        }
    }
}
