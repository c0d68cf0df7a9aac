//! The AWS runtime's [`Callers`]: the IAM principal that signed the request to the
//! IAM-authorised HTTP API. IAM has already decided what the principal may call (the template's
//! read, deploy and approve policies); what this adds is its name, the person recorded for a
//! sync, a cancel or an approval, and its gannet role: the one its entry names, or `viewer`.
//! A principal gets more than reading only by an entry saying so (`"role": "admin"`), so a
//! principal whose IAM policy is broader than meant (an account-wide `execute-api:Invoke`, a
//! wildcard role) still cannot change anything until it is mapped. The role is enforced by the
//! API as on `gannet up`, and tells the web console which controls to show.
//!
//! The name of a principal ARN is, in order:
//! 1. its entry in the configured table (`GANNET_CALLER_NAMES`, `{"<ARN>": "<name>"}` (a
//!    viewer) or `{"<ARN>": {"name": "<name>", "role": "admin"}}`; an entry may end in `*` to
//!    match every ARN that starts with the rest, and the longest such prefix wins);
//! 2. an IAM user's user name (`arn:aws:iam::1:user/ops/alice` → `alice`);
//! 3. an assumed role's role and session name (`arn:aws:sts::1:assumed-role/Dev/alice` →
//!    `Dev/alice`): the session name alone is chosen by whoever assumes the role, so it is
//!    never trusted alone;
//! 4. the ARN itself.

use std::collections::BTreeMap;

use gannet_domain::callers::{Caller, CallerError, Callers, Credentials, Role};
use serde::Deserialize;

/// One entry of the table: a name (a viewer), or a name and a role.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum CallerEntry {
    Name(String),
    Named { name: String, role: Role },
}

impl CallerEntry {
    fn name(&self) -> &str {
        match self {
            Self::Name(name) | Self::Named { name, .. } => name,
        }
    }

    fn role(&self) -> Role {
        match self {
            Self::Name(_) => Role::Viewer,
            Self::Named { role, .. } => *role,
        }
    }
}

/// Names IAM principals.
#[derive(Clone, Debug, Default)]
pub struct IamCallers {
    entries: BTreeMap<String, CallerEntry>,
}

impl IamCallers {
    /// `entries` maps principal ARNs (or ARN prefixes ending in `*`) to people's names, and
    /// optionally their roles.
    pub fn new(entries: BTreeMap<String, CallerEntry>) -> Self {
        Self { entries }
    }

    /// The entry for `arn`: its own, or the longest prefix's.
    fn entry(&self, arn: &str) -> Option<&CallerEntry> {
        self.entries.get(arn).or_else(|| {
            self.entries
                .iter()
                .filter_map(|(k, v)| Some((k.strip_suffix('*')?, v)))
                .filter(|(prefix, _)| arn.starts_with(prefix))
                .max_by_key(|(prefix, _)| prefix.len())
                .map(|(_, entry)| entry)
        })
    }

    /// The name the rule above gives `arn`.
    pub fn name_of(&self, arn: &str) -> String {
        if let Some(entry) = self.entry(arn) {
            return entry.name().to_owned();
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

    /// The role of `arn`: its entry's, or viewer.
    pub fn role_of(&self, arn: &str) -> Role {
        self.entry(arn).map_or(Role::Viewer, CallerEntry::role)
    }
}

impl Callers for IamCallers {
    fn identify(&self, credentials: &Credentials<'_>) -> Result<Caller, CallerError> {
        match credentials.iam_principal.filter(|p| !p.is_empty()) {
            Some(arn) => Ok(Caller {
                name: self.name_of(arn),
                role: self.role_of(arn),
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
        let callers: IamCallers = IamCallers::new(
            serde_json::from_str(
                r#"{
                    "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_Admin_1/alice@example.com": "alice",
                    "arn:aws:sts::111122223333:assumed-role/Release/*": "release-bot",
                    "arn:aws:iam::111122223333:user/ops/vic": {"name": "vic", "role": "viewer"}
                }"#,
            )
            .expect("a table"),
        );
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
                role: Role::Viewer
            }),
            "an unmapped principal reads only"
        );
        assert!(matches!(
            callers.identify(&Credentials::default()),
            Err(CallerError::Missing { .. })
        ));
    }

    #[test]
    fn a_principal_has_the_role_its_entry_gives_or_viewer() {
        let callers: IamCallers = IamCallers::new(
            serde_json::from_str(
                r#"{
                    "arn:aws:sts::111122223333:assumed-role/Admin*": {"name": "ops", "role": "admin"},
                    "arn:aws:sts::111122223333:assumed-role/AdminReadOnly/*": {"name": "audit", "role": "viewer"},
                    "arn:aws:sts::111122223333:assumed-role/Release/*": {"name": "release-bot", "role": "deployer"},
                    "arn:aws:iam::111122223333:user/ana": {"name": "ana", "role": "approver"},
                    "arn:aws:iam::111122223333:user/ops/vic": "vic"
                }"#,
            )
            .expect("a table"),
        );
        let cases = [
            // An admin is mapped by a prefix; the longest prefix wins.
            (
                "arn:aws:sts::111122223333:assumed-role/Admin/s1",
                Role::Admin,
            ),
            (
                "arn:aws:sts::111122223333:assumed-role/AdminEU/s2",
                Role::Admin,
            ),
            (
                "arn:aws:sts::111122223333:assumed-role/AdminReadOnly/s3",
                Role::Viewer,
            ),
            (
                "arn:aws:sts::111122223333:assumed-role/Release/run-42",
                Role::Deployer,
            ),
            ("arn:aws:iam::111122223333:user/ana", Role::Approver),
            // An entry with a name only names a viewer.
            ("arn:aws:iam::111122223333:user/ops/vic", Role::Viewer),
            // Unmapped: whatever its IAM policy allows, inside gannet it reads only.
            ("arn:aws:iam::111122223333:user/ana2", Role::Viewer),
            (
                "arn:aws:sts::111122223333:assumed-role/Dev/carol",
                Role::Viewer,
            ),
            ("arn:aws:iam::111122223333:root", Role::Viewer),
            (
                "arn:aws:sts::444455556666:assumed-role/Admin/s1",
                Role::Viewer,
            ),
        ];
        for (arn, want) in cases {
            assert_eq!(callers.role_of(arn), want, "{arn}");
        }
        let bad: Result<BTreeMap<String, CallerEntry>, _> =
            serde_json::from_str(r#"{"arn:x": {"name": "x", "role": "owner"}}"#);
        assert!(bad.is_err(), "an unknown role is refused");
    }
}
