//! Deploy targets as the controller config lists them (`plugins.<plugin>.deployTargets` in
//! gannet.yaml, `GANNET_DEPLOY_TARGETS` on AWS): the parsing and the checks every runtime shares.
//! Each platform plugin declares its own target fields and calls these; every error starts
//! with the path of the field at fault, such as `plugins.lambda.deployTargets[1].region`.

use serde::de::DeserializeOwned;

/// Each entry of `values` as an `R`, with the path (`{at}[i]`) its errors should name.
pub fn parse_list<R: DeserializeOwned>(
    values: &[serde_json::Value],
    at: &str,
) -> Result<Vec<(String, R)>, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let at = format!("{at}[{i}]");
            serde_json::from_value(value.clone())
                .map(|t| (at.clone(), t))
                .map_err(|e| format!("{at}: {e}"))
        })
        .collect()
}

/// The fields every AWS deploy target has.
#[derive(Clone, Copy, Debug)]
pub struct AwsFields<'a> {
    pub name: &'a str,
    pub region: &'a str,
    pub role_arn: Option<&'a str>,
    pub endpoint: Option<&'a str>,
}

/// Checks an AWS target at `at`: a name not in `seen`, a region, a role ARN and an endpoint
/// that look like ones.
pub fn check_aws(at: &str, t: AwsFields<'_>, seen: &[&str]) -> Result<(), String> {
    let AwsFields {
        name,
        region,
        role_arn,
        endpoint,
    } = t;
    if name.trim().is_empty() {
        return Err(format!("{at}.name: must not be empty"));
    }
    if seen.contains(&name) {
        return Err(format!("{at}.name: {name} is listed twice"));
    }
    let region_ok = region.contains('-')
        && region.ends_with(|c: char| c.is_ascii_digit())
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !region_ok {
        return Err(format!(
            "{at}.region: {region:?} is not an AWS region such as us-east-1"
        ));
    }
    if let Some(role) = role_arn {
        if !(role.starts_with("arn:") && role.contains(":role/")) {
            return Err(format!(
                "{at}.roleArn: {role:?} is not a role ARN such as arn:aws:iam::123456789012:role/deployer"
            ));
        }
    }
    if let Some(endpoint) = endpoint {
        let host = endpoint
            .strip_prefix("http://")
            .or_else(|| endpoint.strip_prefix("https://"));
        if host.is_none_or(str::is_empty) {
            return Err(format!(
                "{at}.endpoint: {endpoint:?} is not an http(s) URL such as http://127.0.0.1:5000"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Raw {
        name: String,
        region: String,
        role_arn: Option<String>,
        endpoint: Option<String>,
    }

    fn check(values: serde_json::Value, expected: Result<usize, &str>) {
        let values = values.as_array().cloned().unwrap_or_default();
        let result = parse_list::<Raw>(&values, "t").and_then(|list| {
            let mut seen: Vec<&str> = Vec::new();
            for (at, r) in &list {
                let fields = AwsFields {
                    name: &r.name,
                    region: &r.region,
                    role_arn: r.role_arn.as_deref(),
                    endpoint: r.endpoint.as_deref(),
                };
                check_aws(at, fields, &seen)?;
                seen.push(&r.name);
            }
            Ok(list.len())
        });
        match (result, expected) {
            (Ok(n), Ok(m)) => assert_eq!(n, m),
            (Err(e), Err(prefix)) => assert!(e.starts_with(prefix), "{e}"),
            (got, want) => panic!("{values:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn targets_are_checked_field_by_field() {
        check(json!([]), Ok(0));
        check(
            json!([{"name": "a", "region": "us-east-1", "roleArn": "arn:aws:iam::1:role/d", "endpoint": "http://127.0.0.1:5000"}]),
            Ok(1),
        );
        check(json!([{"name": "a"}]), Err("t[0]: missing field `region`"));
        check(
            json!([{"name": "a", "regoin": "x"}]),
            Err("t[0]: unknown field `regoin`"),
        );
        check(
            json!([{"name": " ", "region": "us-east-1"}]),
            Err("t[0].name: must not be empty"),
        );
        check(
            json!([{"name": "a", "region": "us-east-1"}, {"name": "a", "region": "eu-west-1"}]),
            Err("t[1].name: a is listed twice"),
        );
        check(
            json!([{"name": "a", "region": "Mars"}]),
            Err("t[0].region: \"Mars\""),
        );
        check(
            json!([{"name": "a", "region": "us-east-1", "roleArn": "deployer"}]),
            Err("t[0].roleArn:"),
        );
        check(
            json!([{"name": "a", "region": "us-east-1", "endpoint": "localhost:5000"}]),
            Err("t[0].endpoint:"),
        );
    }
}
