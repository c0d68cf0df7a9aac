//! Google access tokens for a deploy target, made the way Google's own libraries make them,
//! from one of three sources:
//!
//! - **a service account key file**: a JWT signed with the key (RS256) exchanged at the key's
//!   `token_uri` (the OAuth2 JWT-bearer grant);
//! - **workload identity federation from AWS** (a `workloadIdentity` block, or an
//!   `external_account` file): an STS `GetCallerIdentity` request signed (SigV4) with the AWS
//!   credentials gannet runs with, exchanged at Google's STS for a federated token, then, when a
//!   service account is named, exchanged at IAM credentials for that account's token. The AWS
//!   secret never leaves gannet: Google receives the signature, and calls AWS with it;
//! - **the metadata server** of the machine (Cloud Run, GCE, GKE), `GCE_METADATA_HOST` or
//!   `metadata.google.internal`.
//!
//! A token is kept until five minutes before it expires; a 401 forgets it. Tokens are never
//! logged, and [`Token`] has no `Debug` that shows one.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use gannet_plugin_aws_common::{sdk_config, AwsFields};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::{read, ApiError};
use crate::target::{
    check_url, DeployTarget, WorkloadIdentity, DEFAULT_IAM_CREDENTIALS_URL, DEFAULT_STS_URL,
};

/// What every token is asked for.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Google's OAuth2 token endpoint, for a key file that names none.
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// A credentials file is a few kilobytes.
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// A token is renewed this long before it expires.
const RENEW_BEFORE: Duration = Duration::from_secs(300);
const AWS_TOKEN_TYPE: &str = "urn:ietf:params:aws:token-type:aws4_request";

/// An access token. Its value is only reachable through [`Token::secret`].
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token(String);

impl Token {
    pub(crate) fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(hidden)")
    }
}

/// Where a target's tokens come from.
enum Source {
    Key {
        email: String,
        key_id: String,
        key: jsonwebtoken::EncodingKey,
        token_uri: String,
    },
    Federated {
        identity: WorkloadIdentity,
        /// Fixed AWS credentials (tests); the standard AWS chain otherwise.
        aws: Option<SharedCredentialsProvider>,
    },
    Metadata {
        base: String,
    },
}

/// A deploy target's token source and its current token.
pub(crate) struct Auth {
    target: String,
    source: Source,
    cached: tokio::sync::Mutex<Option<(Token, Instant)>>,
}

impl Auth {
    /// The source `target` names. A file is read now; its problems name the field.
    pub(crate) fn for_target(
        target: &DeployTarget,
        aws: Option<SharedCredentialsProvider>,
    ) -> Result<Self, String> {
        let source = if !target.credentials_file.is_empty() {
            from_file(Path::new(&target.credentials_file), aws).map_err(|m| {
                format!(
                    "Cloud Run deploy target {:?}: credentialsFile {}: {m}",
                    target.name, target.credentials_file
                )
            })?
        } else if let Some(identity) = &target.workload_identity {
            Source::Federated {
                identity: identity.clone(),
                aws,
            }
        } else {
            let host = std::env::var("GCE_METADATA_HOST")
                .unwrap_or_else(|_| "metadata.google.internal".to_owned());
            Source::Metadata {
                base: format!("http://{host}"),
            }
        };
        Ok(Self {
            target: target.name.clone(),
            source,
            cached: tokio::sync::Mutex::new(None),
        })
    }

    /// A token valid for a while yet.
    pub(crate) async fn token(&self, http: &reqwest::Client) -> Result<Token, ApiError> {
        let mut cached = self.cached.lock().await;
        if let Some((token, until)) = cached.as_ref() {
            if Instant::now() + RENEW_BEFORE < *until {
                return Ok(token.clone());
            }
        }
        let (token, lifetime) = self.fetch(http).await.map_err(|mut e| {
            e.operation = format!(
                "get a Google access token for deploy target {:?} ({})",
                self.target, e.operation
            );
            e
        })?;
        *cached = Some((token.clone(), Instant::now() + lifetime));
        Ok(token)
    }

    /// Forgets `token` (the API refused it).
    pub(crate) async fn forget(&self, token: &Token) {
        let mut cached = self.cached.lock().await;
        if cached.as_ref().is_some_and(|(t, _)| t == token) {
            *cached = None;
        }
    }

    async fn fetch(&self, http: &reqwest::Client) -> Result<(Token, Duration), ApiError> {
        match &self.source {
            Source::Key {
                email,
                key_id,
                key,
                token_uri,
            } => {
                let now = unix_now();
                let claims = json!({
                    "iss": email, "scope": SCOPE, "aud": token_uri,
                    "iat": now, "exp": now + 3600,
                });
                let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
                header.kid = Some(key_id.clone());
                let assertion = jsonwebtoken::encode(&header, &claims, key).map_err(|e| {
                    ApiError::permanent("sign the service account's JWT", e.to_string())
                })?;
                let form = [
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", assertion.as_str()),
                ];
                let op = "service account key";
                let response = http.post(token_uri).form(&form).send().await;
                oauth_token(op, response).await
            }
            Source::Federated { identity, aws } => federate(http, identity, aws.clone()).await,
            Source::Metadata { base } => {
                let url =
                    format!("{base}/computeMetadata/v1/instance/service-accounts/default/token");
                let op = "metadata server";
                let response = http
                    .get(url)
                    .header("Metadata-Flavor", "Google")
                    .send()
                    .await;
                oauth_token(op, response).await
            }
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An OAuth2 token response: `{"access_token", "expires_in"}`. A refusal (`invalid_grant`)
/// is permanent, with Google's description.
async fn oauth_token(
    op: &str,
    response: Result<reqwest::Response, reqwest::Error>,
) -> Result<(Token, Duration), ApiError> {
    #[derive(Deserialize)]
    struct OAuth {
        access_token: String,
        #[serde(default)]
        expires_in: Option<u64>,
    }
    let response = response.map_err(|e| ApiError::transport(op, &e))?;
    let status = response.status();
    let value = match read(op, response).await {
        Ok(v) => v,
        Err(mut e) if status.is_client_error() => {
            // OAuth errors are `{"error": "invalid_grant", "error_description": "..."}`.
            e.retryable = status.as_u16() == 429;
            Err(e)?
        }
        Err(e) => Err(e)?,
    };
    let oauth: OAuth = serde_json::from_value(value).map_err(|e| {
        ApiError::permanent(op, format!("the token response has no access_token: {e}"))
    })?;
    let lifetime = Duration::from_secs(oauth.expires_in.unwrap_or(3600).clamp(60, 12 * 3600));
    Ok((Token(oauth.access_token), lifetime))
}

/// Reads a credentials file Google's tools write.
fn from_file(path: &Path, aws: Option<SharedCredentialsProvider>) -> Result<Source, String> {
    let text =
        gannet_config::bounded::read_file(path, MAX_FILE_BYTES).map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("is not JSON: {e}"))?;
    let field = |name: &str| v[name].as_str().unwrap_or_default().to_owned();
    match v["type"].as_str() {
        Some("service_account") => {
            let (email, pem) = (field("client_email"), field("private_key"));
            if email.is_empty() || pem.is_empty() {
                return Err("a service account key needs client_email and private_key".into());
            }
            let key = jsonwebtoken::EncodingKey::from_rsa_pem(pem.as_bytes())
                .map_err(|_| "private_key is not an RSA private key in PEM".to_owned())?;
            let token_uri = match field("token_uri") {
                u if u.is_empty() => DEFAULT_TOKEN_URI.to_owned(),
                u => u,
            };
            check_url(&token_uri).map_err(|m| format!("token_uri: {m}"))?;
            Ok(Source::Key {
                email,
                key_id: field("private_key_id"),
                key,
                token_uri,
            })
        }
        Some("external_account") => {
            if field("subject_token_type") != AWS_TOKEN_TYPE
                || !v["credential_source"]["environment_id"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("aws"))
            {
                return Err(format!(
                    "gannet federates identities from AWS only: subject_token_type must be {AWS_TOKEN_TYPE} with credential_source.environment_id aws1"
                ));
            }
            // `.../serviceAccounts/EMAIL:generateAccessToken`.
            let impersonation = field("service_account_impersonation_url");
            let service_account = impersonation
                .rsplit('/')
                .next()
                .and_then(|s| s.strip_suffix(":generateAccessToken"))
                .unwrap_or_default()
                .to_owned();
            let iam_credentials_endpoint = impersonation
                .split_once("/v1/")
                .map(|(base, _)| base.to_owned())
                .unwrap_or_default();
            let identity = WorkloadIdentity {
                audience: field("audience"),
                service_account,
                aws_region: String::new(),
                token_url: field("token_url"),
                iam_credentials_endpoint,
            };
            for url in [&identity.token_url, &identity.iam_credentials_endpoint] {
                if !url.is_empty() {
                    check_url(url)?;
                }
            }
            Ok(Source::Federated { identity, aws })
        }
        Some(other) => Err(format!(
            "type {other:?} is not supported: use a service_account key or an external_account configuration from AWS"
        )),
        None => Err("has no \"type\": it is not a Google credentials file".into()),
    }
}

/// Workload identity federation from AWS (Google's `aws1` external account).
async fn federate(
    http: &reqwest::Client,
    identity: &WorkloadIdentity,
    aws: Option<SharedCredentialsProvider>,
) -> Result<(Token, Duration), ApiError> {
    let region = match identity.aws_region.as_str() {
        "" => std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".to_owned()),
        r => r.to_owned(),
    };
    let provider = match aws {
        Some(p) => p,
        None => {
            let fields = AwsFields {
                name: "workloadIdentity",
                region: &region,
                role_arn: None,
                endpoint: None,
            };
            sdk_config(fields, None)
                .await
                .credentials_provider()
                .ok_or_else(|| {
                    ApiError::permanent("AWS credentials", "no AWS credentials are configured")
                })?
        }
    };
    let credentials = provider.provide_credentials().await.map_err(|e| ApiError {
        retryable: true,
        ..ApiError::permanent("AWS credentials", e.to_string())
    })?;
    let subject = aws_subject_token(&identity.audience, &region, &credentials, SystemTime::now())
        .map_err(|e| ApiError::permanent("sign the AWS GetCallerIdentity request", e))?;
    let token_url = match identity.token_url.as_str() {
        "" => DEFAULT_STS_URL,
        u => u,
    };
    let form = [
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange",
        ),
        ("audience", identity.audience.as_str()),
        ("scope", SCOPE),
        (
            "requested_token_type",
            "urn:ietf:params:oauth:token-type:access_token",
        ),
        ("subject_token_type", AWS_TOKEN_TYPE),
        ("subject_token", subject.as_str()),
    ];
    let response = http.post(token_url).form(&form).send().await;
    let (federated, lifetime) = oauth_token("Google STS", response).await?;
    if identity.service_account.is_empty() {
        return Ok((federated, lifetime));
    }
    let base = match identity.iam_credentials_endpoint.as_str() {
        "" => DEFAULT_IAM_CREDENTIALS_URL,
        u => u.trim_end_matches('/'),
    };
    let url = format!(
        "{base}/v1/projects/-/serviceAccounts/{}:generateAccessToken",
        identity.service_account
    );
    let op = "impersonate the service account";
    let response = http
        .post(url)
        .bearer_auth(federated.secret())
        .json(&json!({"scope": [SCOPE], "lifetime": "3600s"}))
        .send()
        .await
        .map_err(|e| ApiError::transport(op, &e))?;
    let value = read(op, response).await?;
    let token = value["accessToken"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::permanent(op, "the response has no accessToken"))?;
    Ok((Token(token.to_owned()), Duration::from_secs(3600)))
}

/// The subject token Google's STS takes from AWS: the JSON of a signed STS
/// `GetCallerIdentity` request (URL, method, headers), URL-encoded. The request names the
/// audience in `x-goog-cloud-target-resource`, so it is good for that pool provider only.
pub(crate) fn aws_subject_token(
    audience: &str,
    region: &str,
    credentials: &aws_credential_types::Credentials,
    now: SystemTime,
) -> Result<String, String> {
    let host = format!("sts.{region}.amazonaws.com");
    let url = format!("https://{host}?Action=GetCallerIdentity&Version=2011-06-15");
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(now)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let headers = [
        ("host", host.as_str()),
        ("x-goog-cloud-target-resource", audience),
    ];
    let request = SignableRequest::new("POST", &url, headers.into_iter(), SignableBody::Bytes(&[]))
        .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(request, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    let mut all: Vec<Value> = headers
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    for (k, v) in instructions.headers() {
        all.push(json!({"key": k, "value": v}));
    }
    let request = json!({"url": url, "method": "POST", "headers": all});
    Ok(percent_encode(&request.to_string()))
}

/// RFC 3986 percent-encoding of everything but the unreserved characters.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aws_subject_token_is_a_signed_get_caller_identity_for_the_audience() {
        let credentials = aws_credential_types::Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("session".into()),
            None,
            "test",
        );
        let audience = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/aws";
        let token = aws_subject_token(audience, "eu-west-1", &credentials, UNIX_EPOCH).unwrap();
        let decoded: String = {
            let bytes = token.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'%' {
                    out.push(u8::from_str_radix(&token[i + 1..i + 3], 16).unwrap());
                    i += 3;
                } else {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
            String::from_utf8(out).unwrap()
        };
        let v: Value = serde_json::from_str(&decoded).unwrap();
        assert_eq!(v["method"], "POST");
        assert_eq!(
            v["url"],
            "https://sts.eu-west-1.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"
        );
        let header = |k: &str| {
            v["headers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["key"].as_str().unwrap().eq_ignore_ascii_case(k))
                .map(|h| h["value"].as_str().unwrap().to_owned())
        };
        assert_eq!(
            header("x-goog-cloud-target-resource").as_deref(),
            Some(audience)
        );
        let auth = header("authorization").unwrap();
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/19700101/eu-west-1/sts/aws4_request"
            ),
            "{auth}"
        );
        assert!(
            auth.contains("x-goog-cloud-target-resource"),
            "the audience is signed: {auth}"
        );
        assert_eq!(header("x-amz-security-token").as_deref(), Some("session"));
        assert!(
            !decoded.contains("wJalrXUtnFEMI"),
            "the secret key never leaves gannet"
        );
    }

    #[test]
    fn credentials_files_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let cases = [
            (write("a.json", "{}"), "has no \"type\""),
            (
                write("b.json", r#"{"type": "authorized_user"}"#),
                "type \"authorized_user\" is not supported",
            ),
            (
                write(
                    "c.json",
                    r#"{"type": "service_account", "client_email": "a@b", "private_key": "x"}"#,
                ),
                "not an RSA private key",
            ),
            (
                write(
                    "d.json",
                    r#"{"type": "external_account", "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "credential_source": {"file": "/t"}}"#,
                ),
                "from AWS only",
            ),
            (write("e.json", "not json"), "is not JSON"),
        ];
        for (path, want) in cases {
            let err = from_file(&path, None).err().unwrap();
            assert!(err.contains(want), "{}: {err}", path.display());
        }
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(dir.path().join("a.json"), &link).unwrap();
        assert!(from_file(&link, None)
            .err()
            .unwrap()
            .contains("is a symlink"));
    }
}
