//! The AWS runtime's [`Callers`]: the IAM principal that signed the request to the
//! IAM-authorised HTTP API. IAM has already decided what the principal may call (the template's
//! read, deploy and approve policies), so every principal that arrives here acts with the
//! admin role; what this adds is its name, the person recorded for a sync, a cancel or an
//! approval.
//!
//! The name of a principal ARN is, in order:
//! 1. its entry in the configured table (`GANNET_CALLER_NAMES`, `{"<ARN>": "<name>"}`; an
//!    entry may end in `*` to match every ARN that starts with the rest);
//! 2. an IAM user's user name (`arn:aws:iam::1:user/ops/alice` → `alice`);
//! 3. an assumed role's role and session name (`arn:aws:sts::1:assumed-role/Dev/alice` →
//!    `Dev/alice`): the session name alone is chosen by whoever assumes the role, so it is
//!    never trusted alone;
//! 4. the ARN itself.

use std::collections::BTreeMap;

use gannet_core::callers::{Caller, CallerError, Callers, Credentials, Role};

/// Names IAM principals.
#[derive(Clone, Debug, Default)]
pub struct IamCallers {
    names: BTreeMap<String, String>,
}

impl IamCallers {
    /// `names` maps principal ARNs (or ARN prefixes ending in `*`) to people's names.
    pub fn new(names: BTreeMap<String, String>) -> Self {
        Self { names }
    }

    /// The name the rule above gives `arn`.
    pub fn name_of(&self, arn: &str) -> String {
        if let Some(name) = self.names.get(arn) {
            return name.clone();
        }
        let by_prefix = self
            .names
            .iter()
            .filter_map(|(k, v)| Some((k.strip_suffix('*')?, v)))
            .filter(|(prefix, _)| arn.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len());
        if let Some((_, name)) = by_prefix {
            return name.clone();
        }
        let resource = arn.splitn(6, ':').nth(5).unwrap_or("");
        if let Some(user) = resource.strip_prefix("user/") {
            return user.rsplit('/').next().unwrap_or(user).to_owned();
        }
        if let Some(session) = resource.strip_prefix("assumed-role/") {
            return session.to_owned();
        }
        arn.to_owned()
    }
}

impl Callers for IamCallers {
    fn identify(&self, credentials: &Credentials<'_>) -> Result<Caller, CallerError> {
        match credentials.iam_principal.filter(|p| !p.is_empty()) {
            Some(arn) => Ok(Caller {
                name: self.name_of(arn),
                role: Role::Admin,
            }),
            None => Err(CallerError::Missing {
                how: "call the API with SigV4-signed requests (IAM); see docs/deploy-aws.md".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_are_named_by_the_documented_rule() {
        let callers = IamCallers::new(BTreeMap::from([
            (
                "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_Admin_1/alice@example.com"
                    .to_owned(),
                "alice".to_owned(),
            ),
            (
                "arn:aws:sts::111122223333:assumed-role/Release/*".to_owned(),
                "release-bot".to_owned(),
            ),
        ]));
        let cases = [
            (
                "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_Admin_1/alice@example.com",
                "alice",
            ),
            (
                "arn:aws:sts::111122223333:assumed-role/Release/run-42",
                "release-bot",
            ),
            ("arn:aws:iam::111122223333:user/ops/bob", "bob"),
            (
                "arn:aws:sts::111122223333:assumed-role/Dev/carol",
                "Dev/carol",
            ),
            (
                "arn:aws:iam::111122223333:root",
                "arn:aws:iam::111122223333:root",
            ),
        ];
        for (arn, want) in cases {
            assert_eq!(callers.name_of(arn), want, "{arn}");
        }
        let signed = Credentials {
            bearer: None,
            iam_principal: Some("arn:aws:iam::111122223333:user/bob"),
        };
        assert_eq!(
            callers.identify(&signed),
            Ok(Caller {
                name: "bob".into(),
                role: Role::Admin
            })
        );
        assert!(matches!(
            callers.identify(&Credentials::default()),
            Err(CallerError::Missing { .. })
        ));
    }
}
