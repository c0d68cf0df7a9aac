//! Who is calling the API, and what they may do: the `Callers` port. `gannet up` knows its
//! callers by API token (name + role); the AWS runtime by the IAM principal that signed the
//! request. Either way the person recorded for a sync, a cancel or an approval is the one
//! identified here, never a name in the request body.

use std::fmt;

/// What a caller may do. Every role may read; each higher one adds one kind of change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read apps, deployments and logs.
    Viewer,
    /// Also sync apps and cancel deployments.
    Deployer,
    /// Also approve stages (but not sync or cancel).
    Approver,
    /// Everything.
    Admin,
}

/// What one API call needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Read,
    Deploy,
    Approve,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Deployer, Role::Approver, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Deployer => "deployer",
            Self::Approver => "approver",
            Self::Admin => "admin",
        }
    }

    pub fn allows(self, need: Need) -> bool {
        match need {
            Need::Read => true,
            Need::Deploy => matches!(self, Self::Deployer | Self::Admin),
            Need::Approve => matches!(self, Self::Approver | Self::Admin),
        }
    }
}

impl Need {
    /// The roles that may do it, as an error message lists them.
    pub fn roles(self) -> &'static str {
        match self {
            Self::Read => "viewer, deployer, approver or admin",
            Self::Deploy => "deployer or admin",
            Self::Approve => "approver or admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An identified caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The person or robot: a token's name, or the name an IAM principal maps to.
    pub name: String,
    pub role: Role,
}

/// What a request carries that may identify its caller.
#[derive(Clone, Copy, Debug, Default)]
pub struct Credentials<'a> {
    /// `Authorization: Bearer <token>`.
    pub bearer: Option<&'a str>,
    /// The IAM principal API Gateway authorised (its user ARN).
    pub iam_principal: Option<&'a str>,
}

/// The caller could not be identified.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallerError {
    /// Nothing identifies the caller; the message says what to send.
    #[error("no token: {how}")]
    Missing { how: String },
    /// A token was sent but is not one of the configured ones.
    #[error("the token is not valid for this server")]
    Unknown,
}

/// Identifies API callers.
pub trait Callers: Send + Sync {
    fn identify(&self, credentials: &Credentials<'_>) -> Result<Caller, CallerError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_allow_what_they_say() {
        let table = [
            (Role::Viewer, [true, false, false]),
            (Role::Deployer, [true, true, false]),
            (Role::Approver, [true, false, true]),
            (Role::Admin, [true, true, true]),
        ];
        for (role, allowed) in table {
            for (need, want) in [Need::Read, Need::Deploy, Need::Approve]
                .iter()
                .zip(allowed)
            {
                assert_eq!(role.allows(*need), want, "{role} {need:?}");
            }
        }
    }
}
