//! HTTPS for `gannet up` (`api.tls: {certFile, keyFile}`): the certificate chain and private
//! key read once at start (PEM), checked before the port opens, and served with rustls on
//! ring. A key file other users may read is refused, as is a file that holds no certificate or
//! no key; each error names the setting and the file.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The largest certificate or key file read: a chain is a few kilobytes.
const MAX_PEM_FILE: u64 = 1024 * 1024;

/// The server's certificate and key, ready to accept TLS connections.
#[derive(Clone)]
pub struct ServerTls {
    acceptor: TlsAcceptor,
    cert_file: PathBuf,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("cert_file", &self.cert_file)
            .finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Reads `cert_file` (the server's certificate, then its chain) and `key_file` (its
    /// private key: PKCS#8, PKCS#1 or SEC1), both PEM. Errors start with the setting's name.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Self, String> {
        let cert_at = |m: String| format!("api.tls.certFile: {}: {m}", cert_file.display());
        let key_at = |m: String| format!("api.tls.keyFile: {}: {m}", key_file.display());
        let key_meta = std::fs::metadata(key_file).map_err(|e| key_at(e.to_string()))?;
        let mode = key_meta.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(key_at(format!(
                "other users may read the private key (mode {:o}); chmod 600 it",
                mode & 0o777
            )));
        }
        let certs = read_pem(cert_file)
            .map_err(cert_at)
            .and_then(|text| parse_certs(&text).map_err(cert_at))?;
        let key = read_pem(key_file)
            .map_err(key_at)
            .and_then(|text| parse_key(&text).map_err(key_at))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("api.tls: {e}"))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| {
                format!(
                    "api.tls: the key in {} does not go with the certificate in {} ({e})",
                    key_file.display(),
                    cert_file.display()
                )
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            cert_file: cert_file.to_owned(),
        })
    }

    pub(crate) fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}

fn read_pem(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.len() > MAX_PEM_FILE {
        return Err(format!("{} bytes is too large (at most 1 MB)", meta.len()));
    }
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

fn parse_certs(text: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate chain ({e})"))?;
    if certs.is_empty() {
        return Err("holds no certificate (-----BEGIN CERTIFICATE-----)".into());
    }
    Ok(certs)
}

fn parse_key(text: &str) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            "holds no private key (-----BEGIN PRIVATE KEY-----)".to_owned()
        }
        other => format!("not a PEM private key ({other})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn bad_files_are_refused_naming_the_setting_and_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let garbage = "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n";
        let cases = [
            // (cert text, key text, key mode, expected)
            ("", "", 0o640, "api.tls.keyFile: {key}: other users may read the private key (mode 640); chmod 600 it"),
            ("", "", 0o604, "(mode 604)"),
            ("hello\n", "", 0o600, "api.tls.certFile: {cert}: holds no certificate"),
            (garbage, "", 0o600, "api.tls.certFile: {cert}: not a PEM certificate chain"),
        ];
        for (i, (cert, key, mode, expected)) in cases.into_iter().enumerate() {
            let cert = write(dir.path(), &format!("cert{i}.pem"), cert, 0o644);
            let key = write(dir.path(), &format!("key{i}.pem"), key, mode);
            let expected = expected
                .replace("{cert}", &cert.display().to_string())
                .replace("{key}", &key.display().to_string());
            let err = ServerTls::load(&cert, &key).unwrap_err();
            assert!(err.contains(&expected), "case {i}: {err}");
        }
        let missing = dir.path().join("missing.pem");
        let err = ServerTls::load(&missing, &missing).unwrap_err();
        assert!(err.starts_with("api.tls.keyFile: "), "{err}");
        assert!(err.contains("missing.pem"), "{err}");
    }

    #[test]
    fn a_key_file_without_a_key_is_refused() {
        assert!(parse_key("").unwrap_err().contains("holds no private key"));
        let err =
            parse_key("-----BEGIN PRIVATE KEY-----\n!!\n-----END PRIVATE KEY-----\n").unwrap_err();
        assert!(err.contains("not a PEM private key"), "{err}");
    }
}
