//! PipeCD's sealed secrets (`spec.encryption`): values encrypted for gannet's public key and
//! kept in Git, decrypted only into the files `decryptionTargets` names, in a private copy of
//! the checkout that lives as long as one step ([`Unsealed`]).
//!
//! The scheme is PipeCD's (its `HybridEncrypter`, after Bitnami's sealed secrets), so a secret
//! encrypted for a piped decrypts here with the same private key: base64 (standard, padded) of
//! the RSA ciphertext's length (2 bytes, big-endian), the RSA-OAEP (SHA-256, no label)
//! encryption of a random 32-byte key, and the AES-256-GCM encryption of the text under that
//! key with a zero nonce (the key is used once). The key pair is PipeCD's too: an RSA private
//! key in PKCS#8 PEM (`openssl genpkey -algorithm RSA`), and its public key in PKIX PEM.
//!
//! In a decryption target, `{{ .encryptedSecrets.NAME }}` is replaced by the secret's value,
//! as PipeCD's template renders it; any other template action is refused naming the file and
//! line, so a file never reaches a platform half rendered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use gannet_config::{Attachment, SecretEncryption};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};

use crate::tree;

/// The smallest RSA key accepted, in bits (PipeCD's default is 2048).
const MIN_KEY_BITS: usize = 2048;

/// The largest sealed value read, in bytes of base64 (a secret is a credential, not a file).
const MAX_SEALED: usize = 256 * 1024;

/// Why a key or a sealed value does not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error(
        "is not an RSA private key in PEM (PKCS#8 `PRIVATE KEY` or PKCS#1 `RSA PRIVATE KEY`): {0}"
    )]
    PrivateKey(String),
    #[error("is not an RSA public key in PEM (`PUBLIC KEY`): {0}")]
    PublicKey(String),
    #[error("is a {0}-bit key; gannet takes RSA keys of 2048 bits or more")]
    WeakKey(usize),
    #[error("is not base64 ({0})")]
    Base64(String),
    #[error("is {0} bytes long; a sealed secret is at most 256 KiB")]
    TooLarge(usize),
    #[error("is too short to be a sealed secret")]
    TooShort,
    #[error("cannot be opened with gannet's private key: it was encrypted for another key, or it is corrupt")]
    WrongKey,
    #[error("was altered after it was encrypted (its AES-GCM tag does not match)")]
    Corrupt,
    #[error("is not UTF-8 text once decrypted")]
    NotText,
}

/// gannet's private key for sealed secrets.
pub struct SealingKey {
    private: RsaPrivateKey,
}

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealingKey({} bits)", self.private.size() * 8)
    }
}

impl SealingKey {
    /// The key in `pem`: PKCS#8 (as `openssl genpkey` and PipeCD write it) or PKCS#1.
    pub fn from_pem(pem: &str) -> Result<Self, SealError> {
        let pem = pem.trim();
        let private = RsaPrivateKey::from_pkcs8_pem(pem)
            .or_else(|e| RsaPrivateKey::from_pkcs1_pem(pem).map_err(|_| e))
            .map_err(|e| SealError::PrivateKey(e.to_string()))?;
        let bits = private.size() * 8;
        if bits < MIN_KEY_BITS {
            return Err(SealError::WeakKey(bits));
        }
        Ok(Self { private })
    }

    /// The public key, PKIX PEM: what `gannet encrypt` and PipeCD's tooling encrypt with.
    pub fn public_pem(&self) -> String {
        RsaPublicKey::from(&self.private)
            .to_public_key_pem(LineEnding::LF)
            .unwrap_or_default()
    }

    /// The text `sealed` holds.
    pub fn open(&self, sealed: &str) -> Result<String, SealError> {
        let sealed = sealed.trim();
        if sealed.len() > MAX_SEALED {
            return Err(SealError::TooLarge(sealed.len()));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .map_err(|e| SealError::Base64(e.to_string()))?;
        let [hi, lo, rest @ ..] = bytes.as_slice() else {
            return Err(SealError::TooShort);
        };
        let rsa_len = usize::from(u16::from_be_bytes([*hi, *lo]));
        if rest.len() < rsa_len {
            return Err(SealError::TooShort);
        }
        let (wrapped, body) = rest.split_at(rsa_len);
        let key = self
            .private
            .decrypt(Oaep::new::<sha2::Sha256>(), wrapped)
            .map_err(|_| SealError::WrongKey)?;
        let cipher = aes(&key).ok_or(SealError::WrongKey)?;
        let mut body = body.to_vec();
        let text = cipher
            .open_in_place(zero_nonce(), Aad::empty(), &mut body)
            .map_err(|_| SealError::Corrupt)?;
        String::from_utf8(text.to_vec()).map_err(|_| SealError::NotText)
    }
}

/// AES-256-GCM under `key` (32 bytes).
fn aes(key: &[u8]) -> Option<LessSafeKey> {
    UnboundKey::new(&AES_256_GCM, key)
        .ok()
        .map(LessSafeKey::new)
}

/// The key is random and used once, so the nonce is zero (as PipeCD's is).
fn zero_nonce() -> Nonce {
    Nonce::assume_unique_for_key([0; 12])
}

/// `text` sealed for the public key `public_pem` (PKIX PEM), as PipeCD seals it.
pub fn seal(public_pem: &str, text: &str) -> Result<String, SealError> {
    let public = RsaPublicKey::from_public_key_pem(public_pem.trim())
        .map_err(|e| SealError::PublicKey(e.to_string()))?;
    let bits = public.size() * 8;
    if bits < MIN_KEY_BITS {
        return Err(SealError::WeakKey(bits));
    }
    let mut rng = rsa::rand_core::OsRng;
    let mut key = [0u8; 32];
    rsa::rand_core::RngCore::fill_bytes(&mut rng, &mut key);
    let wrapped = public
        .encrypt(&mut rng, Oaep::new::<sha2::Sha256>(), &key)
        .map_err(|e| SealError::PublicKey(e.to_string()))?;
    let cipher = aes(&key).ok_or(SealError::Corrupt)?;
    let mut body = text.as_bytes().to_vec();
    cipher
        .seal_in_place_append_tag(zero_nonce(), Aad::empty(), &mut body)
        .map_err(|_| SealError::Corrupt)?;
    let len = u16::try_from(wrapped.len()).map_err(|_| SealError::TooShort)?;
    let mut out = len.to_be_bytes().to_vec();
    out.extend_from_slice(&wrapped);
    out.extend_from_slice(&body);
    Ok(base64::engine::general_purpose::STANDARD.encode(out))
}

/// A private copy of a checkout with the app's decryption targets rendered: removed (with
/// the plaintext in it) when dropped.
#[derive(Debug)]
pub struct Unsealed {
    root: PathBuf,
    /// The values decrypted, for [`redact`].
    pub values: Vec<String>,
}

impl Drop for Unsealed {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Unsealed {
    /// The copy's root: the checkout's root, rendered.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// What an app's files are filled in from: its sealed secrets (`spec.encryption`) and its
/// attachments (`spec.attachment`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Templates<'a> {
    pub encryption: Option<&'a SecretEncryption>,
    pub attachment: Option<&'a Attachment>,
}

impl<'a> Templates<'a> {
    pub fn is_empty(&self) -> bool {
        self.encryption.is_none() && self.attachment.is_none()
    }

    /// The files to fill in, in PipeCD's order: each decryption target with the secrets,
    /// then, at last, each attachment target with the attachments. Each leaves alone the
    /// actions of a later pass; with `as_in_git` (checking files no pass has touched), an
    /// attachment target leaves the secrets' too.
    fn fills(&self, as_in_git: bool) -> Vec<Fill<'a>> {
        let attachment_targets: Vec<&str> = self
            .attachment
            .map(|a| a.targets.iter().map(|t| relative(t)).collect())
            .unwrap_or_default();
        let decrypting = self.encryption.iter().flat_map(|e| {
            e.decryption_targets
                .iter()
                .enumerate()
                .map(|(i, target)| Fill {
                    field: format!("spec.encryption.decryptionTargets[{i}]"),
                    target,
                    namespace: ENCRYPTED,
                    later: if attachment_targets.contains(&relative(target)) {
                        &[ATTACHMENT]
                    } else {
                        &[]
                    },
                })
        });
        let sealed_too = as_in_git && self.encryption.is_some();
        let attaching = self.attachment.iter().flat_map(|a| {
            a.targets.iter().enumerate().map(move |(i, target)| Fill {
                field: format!("spec.attachment.targets[{i}]"),
                target,
                namespace: ATTACHMENT,
                later: if sealed_too { &[ENCRYPTED] } else { &[] },
            })
        });
        decrypting.chain(attaching).collect()
    }
}

/// One file of the app to fill in: the field naming it, the file, the namespace of the
/// actions filled in, and the namespaces left for a later pass.
struct Fill<'a> {
    field: String,
    target: &'a str,
    namespace: &'static str,
    later: &'static [&'static str],
}

/// A path the app config names, relative to the app's directory (PipeCD writes `./x` too).
fn relative(path: &str) -> &str {
    path.trim_start_matches("./")
}

/// Copies the checkout at `checkout` into a new directory under `under` (hard links, so the
/// copy is cheap and the checkout is never written), and fills in the app's (at `app_dir`,
/// relative to the checkout's root) templates there, as PipeCD does: first each decryption
/// target with the secrets `key` opens, then, at last, each attachment target with the
/// attachments' contents (a decrypted file may be one). The error names the field or the file,
/// never a value.
pub fn unseal(
    checkout: &Path,
    app_dir: &str,
    templates: Templates<'_>,
    key: Option<&SealingKey>,
    under: &Path,
) -> Result<Unsealed, String> {
    let mut secrets = BTreeMap::new();
    if let Some(encryption) = templates.encryption {
        let key = key.ok_or("spec.encryption: the app seals secrets, and this gannet has no key to open them: set secretManagement in gannet.yaml, or on AWS the stack's SealingKeyArn (docs: README, Sealed secrets)")?;
        for (name, sealed) in &encryption.encrypted_secrets {
            let value = key
                .open(sealed)
                .map_err(|e| format!("spec.encryption.encryptedSecrets.{name} {e}"))?;
            secrets.insert(name.clone(), value);
        }
    }
    std::fs::create_dir_all(under).map_err(|e| format!("{}: {e}", under.display()))?;
    restrict(under);
    let root = tempdir_in(under)?;
    let unsealed = Unsealed {
        root,
        values: secrets
            .values()
            .filter(|v| !v.is_empty())
            .cloned()
            .collect(),
    };
    link_tree(checkout, &unsealed.root).map_err(|e| format!("copying the checkout: {e}"))?;
    let app = unsealed.root.join(app_dir);
    // Attachments are read when their pass comes, after the secrets' (a decrypted file may be
    // attached).
    let mut contents: Option<BTreeMap<String, String>> = None;
    for f in templates.fills(false) {
        let vars = if f.namespace == ENCRYPTED {
            &secrets
        } else {
            match &mut contents {
                Some(read) => &*read,
                none => &*none.insert(attachments(&app, templates.attachment)?),
            }
        };
        fill(&app, &f.field, f.target, (f.namespace, vars), f.later)?;
    }
    Ok(unsealed)
}

/// What is wrong with the app's templates as Git has them, each as (field, message): a target
/// or source that does not read, a `{{ … }}` naming nothing, another template action. `read`
/// reads a file of the app's directory. No key is needed: only the names are checked.
pub fn check(
    templates: Templates<'_>,
    read: &dyn Fn(&str) -> Result<String, tree::TreeError>,
) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    let names = |keys: Vec<&String>| -> BTreeMap<String, String> {
        keys.into_iter()
            .map(|k| (k.clone(), String::new()))
            .collect()
    };
    let secrets = names(
        templates
            .encryption
            .iter()
            .flat_map(|e| e.encrypted_secrets.keys())
            .collect(),
    );
    let sources = names(
        templates
            .attachment
            .iter()
            .flat_map(|a| a.sources.keys())
            .collect(),
    );
    for f in templates.fills(true) {
        let vars = if f.namespace == ENCRYPTED {
            &secrets
        } else {
            &sources
        };
        match read(relative(f.target)) {
            Ok(text) => {
                if let Err(e) = render(&text, (f.namespace, vars), f.later) {
                    problems.push((f.field, format!("{}:{e}", f.target)));
                }
            }
            Err(e) => problems.push((f.field, format!("{} {e}", f.target))),
        }
    }
    for (name, source) in templates.attachment.iter().flat_map(|a| &a.sources) {
        if let Err(e) = read(relative(source)) {
            problems.push((
                format!("spec.attachment.sources.{name}"),
                format!("{source} {e}"),
            ));
        }
    }
    problems
}

/// The contents of the attachments' sources, by name, read in the (private copy of the) app's
/// directory `app`.
fn attachments(
    app: &Path,
    attachment: Option<&Attachment>,
) -> Result<BTreeMap<String, String>, String> {
    let mut contents = BTreeMap::new();
    for (name, source) in attachment.iter().flat_map(|a| &a.sources) {
        let text = tree::read(app, relative(source), tree_limit())
            .map_err(|e| format!("spec.attachment.sources.{name}: {source} {e}"))?;
        contents.insert(name.clone(), text);
    }
    Ok(contents)
}

/// The namespaces of template actions: `{{ .encryptedSecrets.NAME }}`, `{{ .attachment.NAME }}`.
const ENCRYPTED: &str = "encryptedSecrets";
const ATTACHMENT: &str = "attachment";

/// Fills in the file `target` of `app` (named by `field`) with `vars`, leaving the actions of
/// the namespaces in `later` as they are; writes it as a new file in place of the link.
fn fill(
    app: &Path,
    field: &str,
    target: &str,
    vars: (&str, &BTreeMap<String, String>),
    later: &[&str],
) -> Result<(), String> {
    let rel = relative(target);
    let text = tree::read(app, rel, tree_limit()).map_err(|e| format!("{field}: {target} {e}"))?;
    let rendered = render(&text, vars, later).map_err(|e| format!("{field}: {target}:{e}"))?;
    let path = app.join(rel);
    // A new file in place of the link: the checkout's own stays as Git has it.
    std::fs::remove_file(&path).map_err(|e| format!("{field}: {target}: {e}"))?;
    write_private(&path, &rendered).map_err(|e| format!("{field}: {target}: {e}"))
}

fn tree_limit() -> u64 {
    gannet_config::bounded::MAX_BYTES as u64
}

/// `text` with each `{{ .NAMESPACE.NAME }}` of `vars`' namespace replaced by its value, and
/// those of the namespaces in `later` left as written; `Err` names the line (`12: …`) of an
/// unknown name or any other template action.
fn render(
    text: &str,
    (namespace, vars): (&str, &BTreeMap<String, String>),
    later: &[&str],
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let at = text.len() - rest.len() + start;
        let line = text[..at].matches('\n').count() + 1;
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("{line}: a template action is not closed with }}}}"))?;
        let action = after[..end].trim_matches(|c: char| c.is_whitespace() || c == '-');
        let (space, name) = action
            .strip_prefix('.')
            .and_then(|a| a.split_once('.'))
            .filter(|(_, n)| {
                !n.is_empty()
                    && n.chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
            })
            .unwrap_or(("", ""));
        if later.contains(&space) {
            out.push_str(&rest[start..start + 2 + end + 2]);
        } else if space == namespace {
            let value = vars.get(name).ok_or_else(|| {
                format!(
                    "{line}: {{{{ .{namespace}.{name} }}}} names nothing in {}",
                    match namespace {
                        ENCRYPTED => "spec.encryption.encryptedSecrets",
                        _ => "spec.attachment.sources",
                    }
                )
            })?;
            out.push_str(value);
        } else {
            return Err(format!(
                "{line}: only {{{{ .{namespace}.NAME }}}} is filled in here, not {{{{ {action} }}}}"
            ));
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `text` with every value of `values` replaced by `***`: what a log line, a metadata value or
/// a drift field may show of a step that unsealed them.
pub fn redact(text: &str, values: &[String]) -> String {
    let mut out = text.to_owned();
    for v in values {
        if out.contains(v.as_str()) {
            out = out.replace(v.as_str(), "***");
        }
    }
    out
}

/// Owner-only access to `dir` (best effort: it may be the caller's to set).
fn restrict(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
}

/// A new directory under `under`, named at random, owner-only.
fn tempdir_in(under: &Path) -> Result<PathBuf, String> {
    for _ in 0..16 {
        let mut name = [0u8; 8];
        rsa::rand_core::RngCore::fill_bytes(&mut rsa::rand_core::OsRng, &mut name);
        let dir = under.join(hex::encode(name));
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                restrict(&dir);
                return Ok(dir);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        }
    }
    Err(format!(
        "{}: no free name for a private copy",
        under.display()
    ))
}

/// `from`'s tree under `to`: directories made, files hard-linked (copied across file systems),
/// symbolic links kept as links, `.git` left out.
fn link_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() {
            std::fs::create_dir(&dst)?;
            link_tree(&src, &dst)?;
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Writes `text` to a new file only its owner can read.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::pkcs8::EncodePrivateKey;

    fn new_key() -> (SealingKey, String) {
        let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).expect("key");
        let pem = private
            .to_pkcs8_pem(LineEnding::LF)
            .expect("pem")
            .to_string();
        let key = SealingKey::from_pem(&pem).expect("a key");
        let public = key.public_pem();
        (key, public)
    }

    #[test]
    fn a_sealed_value_opens_with_the_key_only_and_an_altered_one_is_refused() {
        let (key, public) = new_key();
        let sealed = seal(&public, "s3cr3t: with 'quotes'\n").unwrap();
        assert_eq!(key.open(&sealed).unwrap(), "s3cr3t: with 'quotes'\n");
        assert_ne!(
            seal(&public, "x").unwrap(),
            seal(&public, "x").unwrap(),
            "a new key each time"
        );

        let (other, _) = new_key();
        assert_eq!(other.open(&sealed), Err(SealError::WrongKey));
        let mut bytes = base64::engine::general_purpose::STANDARD
            .decode(&sealed)
            .unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let altered = base64::engine::general_purpose::STANDARD.encode(bytes);
        assert_eq!(key.open(&altered), Err(SealError::Corrupt));
        assert_eq!(key.open("AQ=="), Err(SealError::TooShort));
        assert!(matches!(key.open("not base64!"), Err(SealError::Base64(_))));
        assert!(matches!(
            key.open(&"A".repeat(300_000)),
            Err(SealError::TooLarge(_))
        ));
        assert!(matches!(
            SealingKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"),
            Err(SealError::PrivateKey(_))
        ));
        let small = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).unwrap();
        let small = small.to_pkcs8_pem(LineEnding::LF).unwrap();
        assert_eq!(
            SealingKey::from_pem(&small).unwrap_err(),
            SealError::WeakKey(1024)
        );
        assert!(!format!("{key:?}").contains("PRIVATE"));
    }

    fn sealed(encryption: &SecretEncryption) -> Templates<'_> {
        Templates {
            encryption: Some(encryption),
            attachment: None,
        }
    }

    #[test]
    fn attachments_are_filled_in_last_with_decrypted_sources_and_need_no_key() {
        let (key, public) = new_key();
        let checkout = tempfile::tempdir().unwrap();
        let app = checkout.path().join("app");
        std::fs::create_dir_all(&app).unwrap();
        std::fs::write(
            app.join("config.yaml"),
            "db: \"{{ .encryptedSecrets.db }}\"\n",
        )
        .unwrap();
        std::fs::write(
            app.join("taskdef.yaml"),
            "command: [\"echo {{ .attachment.config }}\"]\nsecret: {{ .encryptedSecrets.db }}\n",
        )
        .unwrap();
        let encryption = SecretEncryption {
            encrypted_secrets: [("db".to_owned(), seal(&public, "s3").unwrap())].into(),
            decryption_targets: vec!["config.yaml".into(), "taskdef.yaml".into()],
        };
        let attachment = Attachment {
            sources: [("config".to_owned(), "config.yaml".to_owned())].into(),
            targets: vec!["taskdef.yaml".into()],
        };
        let under = tempfile::tempdir().unwrap();
        let both = Templates {
            encryption: Some(&encryption),
            attachment: Some(&attachment),
        };
        let unsealed = unseal(checkout.path(), "app", both, Some(&key), under.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(unsealed.root().join("app/taskdef.yaml")).unwrap(),
            "command: [\"echo db: \"s3\"\n\"]\nsecret: s3\n"
        );
        // Attachments alone need no key; a source that is missing is named.
        let only = Templates {
            encryption: None,
            attachment: Some(&attachment),
        };
        std::fs::write(app.join("taskdef.yaml"), "x: {{ .attachment.config }}\n").unwrap();
        let unsealed = unseal(checkout.path(), "app", only, None, under.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(unsealed.root().join("app/taskdef.yaml")).unwrap(),
            "x: db: \"{{ .encryptedSecrets.db }}\"\n\n"
        );
        assert!(unsealed.values.is_empty());
        let missing = Attachment {
            sources: [("config".to_owned(), "nope.yaml".to_owned())].into(),
            ..attachment.clone()
        };
        let e = unseal(
            checkout.path(),
            "app",
            Templates {
                encryption: None,
                attachment: Some(&missing),
            },
            None,
            under.path(),
        )
        .unwrap_err();
        assert!(
            e.starts_with("spec.attachment.sources.config: nope.yaml "),
            "{e}"
        );
        let e = unseal(
            checkout.path(),
            "app",
            sealed(&encryption),
            None,
            under.path(),
        )
        .unwrap_err();
        assert!(
            e.starts_with("spec.encryption: the app seals secrets"),
            "{e}"
        );
    }

    #[test]
    fn the_templates_are_checked_by_name_without_a_key() {
        let files: BTreeMap<&str, &str> = [
            (
                "secret.yaml",
                "a: \"{{ .encryptedSecrets.db }}\"\nb: {{ .attachment.conf }}\n",
            ),
            ("bad.yaml", "x: 1\ny: {{ .encryptedSecrets.nope }}\n"),
            ("conf.txt", "mode=fast"),
        ]
        .into();
        let read = |rel: &str| {
            files
                .get(rel)
                .map(|t| (*t).to_owned())
                .ok_or(tree::TreeError::NotFound)
        };
        let encryption = SecretEncryption {
            encrypted_secrets: [("db".to_owned(), "sealed".to_owned())].into(),
            decryption_targets: vec!["secret.yaml".into(), "bad.yaml".into(), "gone.yaml".into()],
        };
        let attachment = Attachment {
            sources: [
                ("conf".to_owned(), "conf.txt".to_owned()),
                ("x".to_owned(), "nope.txt".to_owned()),
            ]
            .into(),
            targets: vec!["secret.yaml".into()],
        };
        let both = Templates {
            encryption: Some(&encryption),
            attachment: Some(&attachment),
        };
        let problems = check(both, &read);
        let fields: Vec<&str> = problems.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.encryption.decryptionTargets[1]",
                "spec.encryption.decryptionTargets[2]",
                "spec.attachment.sources.x"
            ],
            "{problems:?}"
        );
        assert!(problems[0].1.starts_with("bad.yaml:2: "), "{problems:?}");
        assert_eq!(problems[1].1, "gone.yaml does not exist");
    }

    #[test]
    fn targets_are_rendered_in_a_private_copy_and_the_checkout_is_untouched() {
        let (key, public) = new_key();
        let checkout = tempfile::tempdir().unwrap();
        let app = checkout.path().join("apps/web");
        std::fs::create_dir_all(&app).unwrap();
        let template =
            "password: \"{{ .encryptedSecrets.password }}\"\ntoken: {{.encryptedSecrets.token}}\n";
        std::fs::write(app.join("secret.yaml"), template).unwrap();
        std::fs::write(
            app.join("other.yaml"),
            "plain: {{ .encryptedSecrets.password }}\n",
        )
        .unwrap();
        std::fs::create_dir(checkout.path().join(".git")).unwrap();
        let encryption = SecretEncryption {
            encrypted_secrets: [
                ("password".to_owned(), seal(&public, "hunter2").unwrap()),
                ("token".to_owned(), seal(&public, "t0k").unwrap()),
            ]
            .into(),
            decryption_targets: vec!["./secret.yaml".to_owned()],
        };
        let under = tempfile::tempdir().unwrap();
        let unsealed = unseal(
            checkout.path(),
            "apps/web",
            sealed(&encryption),
            Some(&key),
            under.path(),
        )
        .unwrap();
        let copy = unsealed.root().join("apps/web");
        assert_eq!(
            std::fs::read_to_string(copy.join("secret.yaml")).unwrap(),
            "password: \"hunter2\"\ntoken: t0k\n"
        );
        assert_eq!(
            std::fs::read_to_string(copy.join("other.yaml")).unwrap(),
            "plain: {{ .encryptedSecrets.password }}\n",
            "only the targets are rendered"
        );
        assert_eq!(
            std::fs::read_to_string(app.join("secret.yaml")).unwrap(),
            template
        );
        assert!(!unsealed.root().join(".git").exists());
        assert_eq!(redact("x hunter2 y t0k", &unsealed.values), "x *** y ***");
        let root = unsealed.root().to_owned();
        drop(unsealed);
        assert!(!root.exists(), "the plaintext goes with the copy");

        // A wrong key names the secret; an unknown name or another action names the line.
        let (other, _) = new_key();
        let e = unseal(
            checkout.path(),
            "apps/web",
            sealed(&encryption),
            Some(&other),
            under.path(),
        )
        .unwrap_err();
        assert!(
            e.starts_with("spec.encryption.encryptedSecrets.password cannot be opened"),
            "{e}"
        );
        std::fs::write(
            app.join("secret.yaml"),
            "a: 1\nb: {{ .encryptedSecrets.nope }}\n",
        )
        .unwrap();
        let e = unseal(
            checkout.path(),
            "apps/web",
            sealed(&encryption),
            Some(&key),
            under.path(),
        )
        .unwrap_err();
        assert!(
            e.starts_with("spec.encryption.decryptionTargets[0]: ./secret.yaml:2: "),
            "{e}"
        );
        std::fs::write(app.join("secret.yaml"), "{{ .Values.x }}").unwrap();
        let e = unseal(
            checkout.path(),
            "apps/web",
            sealed(&encryption),
            Some(&key),
            under.path(),
        )
        .unwrap_err();
        assert!(e.contains("not {{ .Values.x }}"), "{e}");
        // A target outside the app, or a link out of the repository, is refused.
        let outside = SecretEncryption {
            decryption_targets: vec!["../../etc/passwd".to_owned()],
            ..encryption.clone()
        };
        let e = unseal(
            checkout.path(),
            "apps/web",
            sealed(&outside),
            Some(&key),
            under.path(),
        )
        .unwrap_err();
        assert!(
            e.starts_with("spec.encryption.decryptionTargets[0]: ../../etc/passwd "),
            "{e}"
        );
        assert_eq!(
            std::fs::read_dir(under.path()).unwrap().count(),
            0,
            "no copy is left behind"
        );
    }
}
