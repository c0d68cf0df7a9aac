//! API tokens, the embedded runtime's [`Callers`]: each token names a person or robot and
//! gives it a role. They are read from a file or an environment variable (never from
//! gannet.yaml), kept only as SHA-256 digests, and compared in constant time.
//!
//! The text is YAML (JSON is YAML too), a list of entries. Write each token as its SHA-256
//! digest (`printf %s "$TOKEN" | sha256sum`), so the file holds nothing a reader could send;
//! a plaintext `token:` is still accepted, and [`ApiTokens::plaintext_names`] lets start-up
//! warn about it:
//!
//! ```yaml
//! - {name: alice, role: admin, sha256: "…hex SHA-256 of alice's token…"}
//! - {name: ci, role: deployer, sha256: "…hex SHA-256 of the robot's token…"}
//! ```

use gannet_domain::callers::{Caller, CallerError, Callers, Credentials, Role};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The shortest token accepted: 24 characters of a random token are well beyond guessing.
pub const MIN_TOKEN_LEN: usize = 24;

/// The configured tokens.
#[derive(Clone, Default)]
pub struct ApiTokens {
    entries: Vec<Entry>,
}

#[derive(Clone)]
struct Entry {
    name: String,
    role: Role,
    digest: [u8; 32],
    written: Form,
}

/// How an entry's token is written in the text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `token:`, the token itself: whoever reads the text can use it.
    Plaintext,
    /// `sha256:`, its digest only.
    Digest,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Written {
    name: String,
    role: Role,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    sha256: Option<String>,
}

impl std::fmt::Debug for ApiTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names and roles only: the digests stay out of every log.
        f.debug_list()
            .entries(
                self.entries
                    .iter()
                    .map(|e| format!("{}:{}", e.name, e.role)),
            )
            .finish()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl ApiTokens {
    /// Reads the tokens in `text`; errors name the entry and field (`[1].role: …`) and never
    /// quote a token.
    pub fn parse(text: &str) -> Result<Self, String> {
        let written: Vec<Written> = gannet_config::yaml::from_str(text).map_err(|e| {
            if e.limit().is_some() {
                return e.to_string();
            }
            // The parser's messages quote the offending value, which may be a token: only
            // the line and the field's path are said.
            let at = e.line().map(|l| format!("line {l}: ")).unwrap_or_default();
            let kind = if e.path().is_empty() {
                "invalid"
            } else {
                e.path()
            };
            format!("{at}{kind}: expected a list of {{name, role, token | sha256}}")
        })?;
        let mut entries: Vec<Entry> = Vec::with_capacity(written.len());
        for (i, w) in written.into_iter().enumerate() {
            let at = |field: &str, message: &str| format!("[{i}].{field}: {message}");
            let name = w.name.trim();
            if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
                return Err(at("name", "must be 1 to 64 printable characters"));
            }
            let (digest, written) = match (w.token, w.sha256) {
                (Some(token), None) if token.chars().count() >= MIN_TOKEN_LEN => {
                    (digest(&token), Form::Plaintext)
                }
                (Some(_), None) => {
                    return Err(at(
                        "token",
                        &format!("too short: use at least {MIN_TOKEN_LEN} random characters"),
                    ))
                }
                (None, Some(hex_digest)) => {
                    let bytes = hex::decode(hex_digest.trim()).ok();
                    match bytes.and_then(|b| <[u8; 32]>::try_from(b).ok()) {
                        Some(d) => (d, Form::Digest),
                        None => return Err(at("sha256", "is not a hex SHA-256 digest")),
                    }
                }
                _ => return Err(format!("[{i}]: give exactly one of token or sha256")),
            };
            if entries.iter().any(|e| e.digest == digest) {
                return Err(at("token", "is the same as an earlier entry's"));
            }
            entries.push(Entry {
                name: name.to_owned(),
                role: w.role,
                digest,
                written,
            });
        }
        Ok(Self { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The names of the entries written with a plaintext `token:` rather than its `sha256:`
    /// digest (never the tokens themselves).
    pub fn plaintext_names(&self) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|e| e.written == Form::Plaintext)
            .map(|e| e.name.as_str())
            .collect()
    }
}

impl Callers for ApiTokens {
    fn identify(&self, credentials: &Credentials<'_>) -> Result<Caller, CallerError> {
        if self.entries.is_empty() {
            return Err(CallerError::Missing {
                how: "this server has no API tokens; add some under api.tokens in gannet.yaml (see SECURITY.md)".into(),
            });
        }
        let Some(token) = credentials.bearer else {
            return Err(CallerError::Missing {
                how: "send `Authorization: Bearer <token>`; the gannet CLI sends $GANNET_TOKEN"
                    .into(),
            });
        };
        let sent = digest(token);
        // Every entry is compared, in constant time, so timing says nothing of which matched.
        let mut found = None;
        for entry in &self.entries {
            if bool::from(entry.digest.ct_eq(&sent)) {
                found = Some(entry);
            }
        }
        found
            .map(|e| Caller {
                name: e.name.clone(),
                role: e.role,
            })
            .ok_or(CallerError::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "alice-token-0123456789abcdef";

    fn identify(tokens: &ApiTokens, bearer: Option<&str>) -> Result<Caller, CallerError> {
        tokens.identify(&Credentials {
            bearer,
            iam_principal: None,
        })
    }

    #[test]
    fn a_token_names_its_caller() {
        let ci_digest = hex::encode(digest("ci-token-0123456789abcdefgh"));
        let tokens = ApiTokens::parse(&format!(
            "- {{name: alice, role: admin, token: {ALICE}}}\n- {{name: ci, role: deployer, sha256: {ci_digest}}}\n"
        ))
        .unwrap();
        assert_eq!(
            identify(&tokens, Some(ALICE)),
            Ok(Caller {
                name: "alice".into(),
                role: Role::Admin
            })
        );
        assert_eq!(
            identify(&tokens, Some("ci-token-0123456789abcdefgh")).map(|c| c.name),
            Ok("ci".into())
        );
        assert_eq!(
            identify(&tokens, Some("alice-token-0123456789abcdeX")),
            Err(CallerError::Unknown)
        );
        assert!(matches!(
            identify(&tokens, None),
            Err(CallerError::Missing { how }) if how.contains("GANNET_TOKEN")
        ));
        assert!(!format!("{tokens:?}").contains(ALICE));
        assert_eq!(
            tokens.plaintext_names(),
            ["alice"],
            "ci is written as a digest"
        );
        assert!(matches!(
            identify(&ApiTokens::default(), Some(ALICE)),
            Err(CallerError::Missing { how }) if how.contains("api.tokens")
        ));
    }

    #[test]
    fn bad_files_say_where_and_never_quote_a_token() {
        let cases = [
            ("- {name: a, role: root, token: abcdefghijklmnopqrstuvwxyz}", "line 1: "),
            ("- {name: a, role: admin, token: tiny1}", "[0].token: too short"),
            ("- {name: '', role: admin, token: abcdefghijklmnopqrstuvwxyz}", "[0].name:"),
            ("- {name: a, role: admin}", "[0]: give exactly one of token or sha256"),
            ("- {name: a, role: admin, sha256: zz}", "[0].sha256:"),
            (
                "- {name: a, role: admin, token: abcdefghijklmnopqrstuvwxyz}\n- {name: b, role: viewer, token: abcdefghijklmnopqrstuvwxyz}",
                "[1].token: is the same",
            ),
            ("{name: a}", ""),
        ];
        for (text, want) in cases {
            let err = ApiTokens::parse(text).err().unwrap_or_default();
            assert!(err.starts_with(want) && !err.is_empty(), "{text}: {err}");
            assert!(!err.contains("abcdefghijklmnopqrstuvwxyz"), "{err}");
            assert!(!err.contains("tiny1"), "the token is not quoted: {err}");
        }
    }

    #[test]
    fn a_file_past_a_yaml_limit_is_refused_for_the_limit() {
        // Each level's list holds the previous level ten times: 10^6 nodes once expanded.
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for level in ["b", "c", "d", "e", "f"] {
            let prev = (b'a' + (level.as_bytes()[0] - b'b')) as char;
            let refs = vec![format!("*{prev}"); 10].join(", ");
            bomb.push_str(&format!("{level}: &{level} [{refs}]\n"));
        }
        let deep = format!("{}x{}", "[".repeat(100), "]".repeat(100));
        for (text, want) in [
            (bomb.as_str(), "too many aliases"),
            (deep.as_str(), "nested deeper than"),
        ] {
            let err = ApiTokens::parse(text).err().unwrap_or_default();
            assert!(err.starts_with(want), "{err}");
        }
    }
}
