//! How gannet authenticates to GitHub: a token, or a GitHub App installation; and the JSON the
//! secret holding either is stored as. Errors name the field at fault, never its value.

use std::fmt;

use serde_json::{Map, Value};

/// A secret value. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// The credentials for GitHub's API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GithubAuth {
    /// A personal access token (classic or fine-grained), sent as `Authorization: Bearer`.
    Token(Secret),
    /// A GitHub App: octocrab signs a JWT with the private key, exchanges it for an
    /// installation token, and keeps that token until shortly (30 s) before it expires.
    App {
        app_id: u64,
        installation_id: u64,
        /// The App's private key, PEM (`-----BEGIN RSA PRIVATE KEY-----`, as GitHub issues it).
        private_key: Secret,
    },
}

/// The secret's JSON is not one of the two accepted shapes.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The text is not JSON. The parser's position is kept; its message is not, since it could
    /// quote the secret.
    #[error("GitHub secret is not valid JSON (line {line}, column {column})")]
    NotJson { line: usize, column: usize },
    #[error("GitHub secret must be a JSON object with \"token\", or \"appId\", \"installationId\" and \"privateKey\"")]
    NotAnObject,
    #[error("GitHub secret has both \"token\" and \"appId\"; give one kind of credentials")]
    Ambiguous,
    #[error("GitHub secret is missing {field:?}")]
    Missing { field: &'static str },
    #[error("GitHub secret field {field:?} must be {expected}")]
    Invalid {
        field: &'static str,
        expected: &'static str,
    },
}

impl GithubAuth {
    /// Parses the secret as stored in Secrets Manager: `{"token":"..."}` or
    /// `{"appId":123,"installationId":456,"privateKey":"-----BEGIN..."}` (ids may be numbers or
    /// strings of digits). Other fields are ignored.
    pub fn from_secret_json(text: &str) -> Result<Self, AuthError> {
        let value: Value = serde_json::from_str(text).map_err(|e| AuthError::NotJson {
            line: e.line(),
            column: e.column(),
        })?;
        let Value::Object(fields) = value else {
            return Err(AuthError::NotAnObject);
        };
        match (fields.contains_key("token"), fields.contains_key("appId")) {
            (true, true) => Err(AuthError::Ambiguous),
            (true, false) => Ok(Self::Token(Secret::new(token(&fields)?))),
            (false, true) => Ok(Self::App {
                app_id: id(&fields, "appId")?,
                installation_id: id(&fields, "installationId")?,
                private_key: Secret::new(private_key(&fields)?),
            }),
            (false, false) => Err(AuthError::NotAnObject),
        }
    }
}

/// A token goes into an HTTP header as it is: visible ASCII, no spaces.
pub(crate) fn is_token(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic())
}

fn token(fields: &Map<String, Value>) -> Result<String, AuthError> {
    match fields.get("token") {
        Some(Value::String(s)) if is_token(s) => Ok(s.clone()),
        _ => Err(AuthError::Invalid {
            field: "token",
            expected: "a non-empty string of visible ASCII characters",
        }),
    }
}

fn id(fields: &Map<String, Value>, field: &'static str) -> Result<u64, AuthError> {
    let invalid = AuthError::Invalid {
        field,
        expected: "a positive integer",
    };
    let id = match fields.get(field) {
        None => return Err(AuthError::Missing { field }),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) if s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        Some(_) => None,
    };
    id.filter(|id| *id > 0).ok_or(invalid)
}

fn private_key(fields: &Map<String, Value>) -> Result<String, AuthError> {
    match fields.get("privateKey") {
        None => Err(AuthError::Missing {
            field: "privateKey",
        }),
        Some(Value::String(pem)) if pem.contains("-----BEGIN") && pem.contains("PRIVATE KEY") => {
            Ok(pem.clone())
        }
        Some(_) => Err(AuthError::Invalid {
            field: "privateKey",
            expected: "a PEM-encoded RSA private key",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\\nMIIB\\n-----END RSA PRIVATE KEY-----\\n";

    fn check(text: &str, want: Result<GithubAuth, AuthError>) {
        assert_eq!(GithubAuth::from_secret_json(text), want, "{text}");
    }

    #[test]
    fn secret_shapes() {
        let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n";
        let app = GithubAuth::App {
            app_id: 12,
            installation_id: 34,
            private_key: Secret::new(key.into()),
        };
        check(
            r#"{"token":"ghp_abc"}"#,
            Ok(GithubAuth::Token(Secret::new("ghp_abc".into()))),
        );
        check(
            &format!(r#"{{"appId":12,"installationId":34,"privateKey":"{PEM}"}}"#),
            Ok(app.clone()),
        );
        check(
            &format!(r#"{{"appId":"12","installationId":"34","privateKey":"{PEM}"}}"#),
            Ok(app),
        );
    }

    #[test]
    fn errors_name_the_field_and_never_the_secret() {
        let invalid = |field, expected| Err(AuthError::Invalid { field, expected });
        let cases = [
            (
                "{\"token\":",
                Err(AuthError::NotJson { line: 1, column: 9 }),
            ),
            ("\"ghp_abc\"", Err(AuthError::NotAnObject)),
            ("{}", Err(AuthError::NotAnObject)),
            (
                r#"{"token":"ghp_abc","appId":1}"#,
                Err(AuthError::Ambiguous),
            ),
            (
                r#"{"token":"ghp abc"}"#,
                invalid("token", "a non-empty string of visible ASCII characters"),
            ),
            (
                r#"{"token":7}"#,
                invalid("token", "a non-empty string of visible ASCII characters"),
            ),
            (
                r#"{"appId":1,"privateKey":"x"}"#,
                Err(AuthError::Missing {
                    field: "installationId",
                }),
            ),
            (
                r#"{"appId":-1,"installationId":2}"#,
                invalid("appId", "a positive integer"),
            ),
            (
                r#"{"appId":"x1","installationId":2}"#,
                invalid("appId", "a positive integer"),
            ),
            (
                r#"{"appId":1,"installationId":2}"#,
                Err(AuthError::Missing {
                    field: "privateKey",
                }),
            ),
            (
                r#"{"appId":1,"installationId":2,"privateKey":"hunter2"}"#,
                invalid("privateKey", "a PEM-encoded RSA private key"),
            ),
        ];
        for (text, want) in cases {
            let got = GithubAuth::from_secret_json(text);
            if let Err(e) = &got {
                for secret in ["ghp", "hunter2"] {
                    assert!(!e.to_string().contains(secret), "{e} shows the secret");
                }
            }
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn debug_hides_secrets() {
        let auth = GithubAuth::Token(Secret::new("ghp_abc".into()));
        assert!(!format!("{auth:?}").contains("ghp_abc"));
    }
}
