//! The fake's Google credentials and token endpoints: a service account key file, used as
//! Google's client libraries use it (a self-signed JWT sent as the bearer token, AIP-4111) or
//! through its OAuth2 JWT-bearer grant, STS's exchange of signed AWS requests (workload identity
//! federation), the impersonation of a service account, and the metadata server (as Google's
//! auth library reads it: the ping, the account listing, the recursive account, the token).
//! Each kind of credential gets one fixed token (a self-signed JWT is checked instead), so a
//! test can tell which path a caller took.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
use rsa::RsaPrivateKey;
use serde_json::{json, Value};

use crate::error::{self, Failure};
use crate::{random_hex, rfc3339, TokenKind};

pub(crate) const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The project's default compute service account: the metadata server's, and the one a
/// revision runs as when its template names none.
pub(crate) const COMPUTE_ACCOUNT: &str = "123-compute@developer.gserviceaccount.com";
pub(crate) const WIF_AUDIENCE: &str = "//iam.googleapis.com/projects/123/locations/global/\
                                        workloadIdentityPools/aws/providers/gannet";
/// The audience of a key file's JWT-bearer grant that Google's token endpoint takes, whatever
/// URL the grant is posted to (google-auth always signs for it).
const STANDARD_TOKEN_AUDIENCE: &str = "https://oauth2.googleapis.com/token";
/// The audience of a self-signed JWT for the Cloud Run Admin API.
const RUN_AUDIENCE: &str = "https://run.googleapis.com/";
/// The project's number, in the default compute account and in service URLs.
pub(crate) const PROJECT_NUMBER: &str = "123";
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
const AWS4_REQUEST: &str = "urn:ietf:params:aws:token-type:aws4_request";
const SHORT_LIVED: &str = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a \
                           reasonable timeframe. Check your iat and exp values in the JWT claim.";

/// The fields of a form body (or of a JSON object's strings).
pub(crate) type Fields = HashMap<String, String>;

pub(crate) struct Auth {
    pub(crate) project: String,
    key_id: String,
    private_key_pem: String,
    public_key: DecodingKey,
    tokens: Vec<(TokenKind, String)>,
    /// How many tokens of each kind were issued.
    pub(crate) issued: HashMap<TokenKind, usize>,
    /// The AWS access key ids of the STS exchanges, oldest first.
    pub(crate) aws_access_key_ids: Vec<String>,
}

impl Auth {
    /// New credentials for `project`, with a fresh 2048-bit RSA key pair.
    ///
    /// # Panics
    /// If the key pair cannot be made.
    pub(crate) fn new(project: &str) -> Auth {
        let key = RsaPrivateKey::new(&mut rand::thread_rng(), 2048).expect("an RSA key pair");
        let private_key_pem = key.to_pkcs8_pem(LineEnding::LF).expect("a PKCS#8 PEM");
        let public_key_pem = key.to_public_key().to_public_key_pem(LineEnding::LF);
        let public_key_pem = public_key_pem.expect("a public key PEM");
        let public_key = DecodingKey::from_rsa_pem(public_key_pem.as_bytes()).expect("a key");
        let tokens = TokenKind::FIXED.iter().map(|&kind| {
            let token = format!("ya29.fake-{}-{}", kind.as_str(), random_hex(12));
            (kind, token)
        });
        Auth {
            project: project.to_string(),
            key_id: random_hex(20),
            private_key_pem: private_key_pem.to_string(),
            public_key,
            tokens: tokens.collect(),
            issued: HashMap::new(),
            aws_access_key_ids: Vec::new(),
        }
    }

    /// The key file's account.
    pub(crate) fn key_email(&self) -> String {
        format!("gannet-deployer@{}.iam.gserviceaccount.com", self.project)
    }

    /// The account a federated AWS identity may impersonate.
    pub(crate) fn impersonated_email(&self) -> String {
        format!("gannet-cd@{}.iam.gserviceaccount.com", self.project)
    }

    /// The account a Cloud Run call with a token of that kind acts as.
    pub(crate) fn account(&self, kind: TokenKind) -> String {
        match kind {
            TokenKind::KeyFile | TokenKind::SelfSignedJwt => self.key_email(),
            TokenKind::Federated => "principal://iam.googleapis.com/aws".to_string(),
            TokenKind::Impersonated => self.impersonated_email(),
            TokenKind::Metadata => COMPUTE_ACCOUNT.to_string(),
        }
    }

    /// A service account key file, as the IAM console downloads it.
    pub(crate) fn key_file(&self, token_uri: &str) -> Value {
        let email = self.key_email();
        json!({
            "type": "service_account", "project_id": self.project,
            "private_key_id": self.key_id, "private_key": self.private_key_pem,
            "client_email": email, "client_id": "104776317364922718342",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": token_uri,
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": format!(
                "https://www.googleapis.com/robot/v1/metadata/x509/{}",
                email.replace('@', "%40")
            ),
            "universe_domain": "googleapis.com",
        })
    }

    pub(crate) fn token(&self, kind: TokenKind) -> &str {
        let found = self.tokens.iter().find(|(k, _)| *k == kind);
        found.map_or("", |(_, token)| token)
    }

    /// The kind of the token an `Authorization` header carries: one the fake issued, or a JWT
    /// the key file's key signed for the Cloud Run Admin API.
    pub(crate) fn kind_of(&self, authorization: Option<&str>) -> Option<TokenKind> {
        let token = authorization?.strip_prefix("Bearer ")?;
        let issued = self.tokens.iter().find(|(_, t)| t == token);
        match issued {
            Some((kind, _)) => Some(*kind),
            None => self.self_signed(token).then_some(TokenKind::SelfSignedJwt),
        }
    }

    /// True for a JWT that the key file's key signed (RS256) as its own account (`iss` and
    /// `sub`), for this API (`aud` `https://run.googleapis.com/`, or no audience and a `scope`
    /// with cloud-platform), valid now and for at most an hour: what Google's client libraries
    /// send instead of asking a token endpoint (google.aip.dev/auth/4111).
    fn self_signed(&self, token: &str) -> bool {
        let mut validation = Validation::new(Algorithm::RS256);
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["exp", "iat", "iss", "sub"]);
        let Ok(decoded) = jsonwebtoken::decode::<Value>(token, &self.public_key, &validation)
        else {
            return false;
        };
        let claims = decoded.claims;
        let email = self.key_email();
        let audience_ok = match claims.get("aud") {
            Some(aud) => aud == RUN_AUDIENCE,
            None => has_cloud_platform(claims["scope"].as_str().unwrap_or_default()),
        };
        let (iat, exp) = (
            claims["iat"].as_i64().unwrap_or(0),
            claims["exp"].as_i64().unwrap_or(0),
        );
        let now = i64::try_from(unix_now()).unwrap_or(i64::MAX);
        claims["iss"] == email.as_str()
            && claims["sub"] == email.as_str()
            && audience_ok
            && iat <= now + 60
            && exp > iat
            && exp - iat <= 3600
    }

    fn issue(&mut self, kind: TokenKind) -> String {
        *self.issued.entry(kind).or_default() += 1;
        self.token(kind).to_string()
    }

    /// `POST /token`: the OAuth2 grant of a JWT signed with the key file's key, for Google's
    /// standard token audience (or this endpoint's URL, which a real `token_uri` is).
    pub(crate) fn jwt_grant(&mut self, form: &Fields, token_url: &str) -> Result<Value, Failure> {
        let field = |name: &str| form.get(name).map_or("", String::as_str);
        if field("grant_type") != JWT_BEARER {
            let description = format!("Invalid grant_type: {}", field("grant_type"));
            return Err(error::oauth("unsupported_grant_type", &description));
        }
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_audience(&[token_url, STANDARD_TOKEN_AUDIENCE]);
        validation.set_issuer(&[self.key_email()]);
        validation.set_required_spec_claims(&["exp", "iat", "aud", "iss"]);
        let decoded =
            jsonwebtoken::decode::<Value>(field("assertion"), &self.public_key, &validation);
        let claims = decoded.map_err(|e| {
            let description = match e.kind() {
                ErrorKind::InvalidAudience => {
                    format!(
                        "Invalid JWT: Failed audience check. The right audience is \
                         {STANDARD_TOKEN_AUDIENCE}"
                    )
                }
                ErrorKind::InvalidIssuer => "Invalid grant: account not found".to_string(),
                ErrorKind::ExpiredSignature => SHORT_LIVED.to_string(),
                _ => "Invalid JWT Signature.".to_string(),
            };
            error::oauth("invalid_grant", &description)
        })?;
        let claims = claims.claims;
        let (iat, exp) = (
            claims["iat"].as_i64().unwrap_or(0),
            claims["exp"].as_i64().unwrap_or(0),
        );
        let now = i64::try_from(unix_now()).unwrap_or(i64::MAX);
        if iat > now + 60 || exp <= iat || exp - iat > 3600 {
            return Err(error::oauth("invalid_grant", SHORT_LIVED));
        }
        if !has_cloud_platform(claims["scope"].as_str().unwrap_or_default()) {
            let description = "Invalid OAuth scope or ID token audience provided.";
            return Err(error::oauth("invalid_scope", description));
        }
        let token = self.issue(TokenKind::KeyFile);
        Ok(json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}))
    }

    /// `POST /v1/token` of STS: a federated token for a signed AWS `GetCallerIdentity`.
    pub(crate) fn exchange(&mut self, fields: &Fields) -> Result<Value, Failure> {
        let field = |name: &str| fields.get(name).map_or("", String::as_str);
        let expected = [
            ("grant_type", TOKEN_EXCHANGE),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
            ("subject_token_type", AWS4_REQUEST),
        ];
        if let Some((name, _)) = expected.iter().find(|(name, value)| field(name) != *value) {
            let description = format!("Invalid value for \"{name}\".");
            return Err(error::oauth("invalid_request", &description));
        }
        if field("audience") != WIF_AUDIENCE {
            let description = "The target service indicated by the \"audience\" parameters is \
                invalid. This might either be because the pool or provider is disabled or \
                deleted or because it doesn't exist.";
            return Err(error::oauth("invalid_target", description));
        }
        if !has_cloud_platform(field("scope")) {
            return Err(error::oauth(
                "invalid_scope",
                "Invalid value for \"scope\".",
            ));
        }
        let access_key_id = aws_caller(field("subject_token")).map_err(|why| {
            let description = format!("The AWS subject token is invalid: {why}.");
            error::oauth("invalid_grant", &description)
        })?;
        self.aws_access_key_ids.push(access_key_id);
        let token = self.issue(TokenKind::Federated);
        Ok(
            json!({"access_token": token, "issued_token_type": ACCESS_TOKEN_TYPE,
                  "token_type": "Bearer", "expires_in": 3600}),
        )
    }

    /// `generateAccessToken` of the IAM credentials API: only a federated token may
    /// impersonate, and only [`Auth::impersonated_email`].
    pub(crate) fn impersonate(
        &mut self,
        bearer: Option<TokenKind>,
        email: &str,
        body: &Value,
    ) -> Result<Value, Failure> {
        match bearer {
            None => return Err(error::unauthenticated()),
            Some(TokenKind::Federated) if email == self.impersonated_email() => {}
            Some(_) => {
                let resource = format!("projects/-/serviceAccounts/{email}");
                let permission = "iam.serviceAccounts.getAccessToken";
                return Err(error::permission_denied(permission, &resource));
            }
        }
        let scopes = body["scope"].as_array().into_iter().flatten();
        if !scopes.filter_map(Value::as_str).any(has_cloud_platform) {
            return Err(error::iam_invalid("Scope required."));
        }
        let lifetime = body["lifetime"].as_str().unwrap_or("3600s");
        let seconds = lifetime
            .strip_suffix('s')
            .and_then(|s| s.parse::<u64>().ok());
        let Some(seconds) = seconds.filter(|s| (1..=3600).contains(s)) else {
            return Err(error::iam_invalid(
                "Lifetime must be in the range [1s, 3600s].",
            ));
        };
        let expire_time = rfc3339(SystemTime::now() + Duration::from_secs(seconds));
        let token = self.issue(TokenKind::Impersonated);
        Ok(json!({"accessToken": token, "expireTime": expire_time}))
    }

    /// `GET /computeMetadata/v1/{path}` of the metadata server (text answers as JSON strings),
    /// as Google's auth library reads it: the account listing, an account (`default` or its
    /// email) recursively as JSON or as its entries, its email, scopes and token, the project and
    /// the universe domain.
    pub(crate) fn metadata(
        &mut self,
        flavor: Option<&str>,
        path: &[&str],
        recursive: bool,
    ) -> Result<Value, Failure> {
        if flavor != Some("Google") {
            return Err(error::metadata_flavor_missing());
        }
        let account = |id: &str| id == "default" || id == COMPUTE_ACCOUNT;
        match path {
            ["instance", "service-accounts", ""] => {
                Ok(json!(format!("default/\n{COMPUTE_ACCOUNT}/\n")))
            }
            ["instance", "service-accounts", id, ""] if account(id) && recursive => Ok(json!({
                "aliases": ["default"], "email": COMPUTE_ACCOUNT, "scopes": [CLOUD_PLATFORM],
            })),
            ["instance", "service-accounts", id, ""] if account(id) => {
                Ok(json!("aliases\nemail\nidentity\nscopes\ntoken\n"))
            }
            ["instance", "service-accounts", id, "email"] if account(id) => {
                Ok(json!(COMPUTE_ACCOUNT))
            }
            ["instance", "service-accounts", id, "scopes"] if account(id) => {
                Ok(json!(format!("{CLOUD_PLATFORM}\n")))
            }
            ["instance", "service-accounts", id, "token"] if account(id) => {
                let token = self.issue(TokenKind::Metadata);
                Ok(json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}))
            }
            ["project", "project-id"] => Ok(json!(self.project)),
            ["project", "numeric-project-id"] => Ok(json!(PROJECT_NUMBER)),
            ["universe", "universe-domain"] => Ok(json!("googleapis.com")),
            _ => Err(error::no_such_method()),
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

fn has_cloud_platform(scopes: &str) -> bool {
    scopes
        .split_whitespace()
        .any(|scope| scope == CLOUD_PLATFORM)
}

/// The access key id of a signed AWS STS `GetCallerIdentity` request, serialized as Google's
/// client libraries do (URL-encoded JSON), after checking its shape. It is a fake: it cannot
/// check the SigV4 signature, having no AWS secret key.
fn aws_caller(subject_token: &str) -> Result<String, &'static str> {
    let decoded = if subject_token.starts_with('{') {
        subject_token.to_string()
    } else {
        crate::http::percent_decode(subject_token)
    };
    let request: Value = serde_json::from_str(&decoded).map_err(|_| "it is not JSON")?;
    if request["method"] != "POST" {
        return Err("the method is not POST");
    }
    let url = request["url"].as_str().unwrap_or_default();
    let host = url
        .strip_prefix("https://")
        .and_then(|rest| rest.split(['/', '?']).next());
    let host = host.unwrap_or_default();
    let sts = host.starts_with("sts.") && host.ends_with(".amazonaws.com");
    if !sts || !url.contains("Action=GetCallerIdentity") {
        return Err("the URL is not STS's GetCallerIdentity");
    }
    let headers = request["headers"].as_array().map_or(&[][..], Vec::as_slice);
    let header = |name: &str| {
        let found = headers.iter().find(|h| {
            h["key"]
                .as_str()
                .is_some_and(|k| k.eq_ignore_ascii_case(name))
        });
        found.and_then(|h| h["value"].as_str())
    };
    let authorization = header("authorization").unwrap_or_default();
    let credential = authorization.strip_prefix("AWS4-HMAC-SHA256 ");
    let credential = credential
        .and_then(|a| a.split_once("Credential="))
        .map(|(_, c)| c);
    let Some(credential) = credential.filter(|_| authorization.contains("Signature=")) else {
        return Err("no AWS4-HMAC-SHA256 Authorization with a Credential and a Signature");
    };
    if header("x-amz-date").is_none() {
        return Err("no x-amz-date header");
    }
    if header("host") != Some(host) {
        return Err("the host header is not the URL's host");
    }
    if header("x-goog-cloud-target-resource") != Some(WIF_AUDIENCE) {
        return Err("the x-goog-cloud-target-resource header is not the audience");
    }
    Ok(credential.split('/').next().unwrap_or_default().to_string())
}
