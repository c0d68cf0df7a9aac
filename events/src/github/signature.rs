//! GitHub's `X-Hub-Signature-256` header: an HMAC-SHA256 of the raw body, `sha256=<hex>`.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const PREFIX: &str = "sha256=";

/// Why a delivery's signature was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The delivery has no `X-Hub-Signature-256` header.
    #[error("the X-Hub-Signature-256 header is missing")]
    Missing,
    /// The header is not `sha256=` followed by 64 hex digits.
    #[error("the X-Hub-Signature-256 header is malformed: {0}")]
    Malformed(&'static str),
    /// The header is well formed but does not match the body and secret.
    #[error("the X-Hub-Signature-256 header does not match the body")]
    Mismatch,
    /// No secret is configured, so nothing can be verified.
    #[error("the webhook secret is empty")]
    EmptySecret,
}

/// Checks `header` (the `X-Hub-Signature-256` value) against `body`, in constant time.
pub fn verify_signature(
    secret: &[u8],
    body: &[u8],
    header: Option<&str>,
) -> Result<(), SignatureError> {
    verify_signature_parts(secret, [body], header)
}

/// [`verify_signature`] over a body received in parts, so a large one need not be joined to
/// be refused.
pub fn verify_signature_parts<'a>(
    secret: &[u8],
    parts: impl IntoIterator<Item = &'a [u8]>,
    header: Option<&str>,
) -> Result<(), SignatureError> {
    if secret.is_empty() {
        return Err(SignatureError::EmptySecret);
    }
    let header = header.ok_or(SignatureError::Missing)?.trim();
    let digits = header
        .strip_prefix(PREFIX)
        .ok_or(SignatureError::Malformed("expected the prefix sha256="))?;
    if digits.len() != 64 {
        return Err(SignatureError::Malformed("expected 64 hex digits"));
    }
    let expected =
        hex::decode(digits).map_err(|_| SignatureError::Malformed("expected hex digits"))?;
    let mut mac = keyed(secret);
    for part in parts {
        mac.update(part);
    }
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)
}

/// The `X-Hub-Signature-256` value GitHub would send for `body` (for tests and the demo).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let tag = keyed(secret).chain_update(body).finalize().into_bytes();
    format!("{PREFIX}{}", hex::encode(tag))
}

/// An HMAC-SHA256 keyed with `secret`. `hmac` brings a key of any length to the block size as
/// RFC 2104 says (hashed when longer, zero-padded), so it refuses none.
fn keyed(secret: &[u8]) -> HmacSha256 {
    HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GITHUB_SECRET: &[u8] = b"It's a Secret to Everybody";
    const GITHUB_BODY: &[u8] = b"Hello, World!";
    const GITHUB_HEADER: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    fn check(secret: &[u8], body: &[u8], header: Option<&str>, want: Result<(), SignatureError>) {
        assert_eq!(
            verify_signature(secret, body, header),
            want,
            "header {header:?}"
        );
    }

    #[test]
    fn github_test_vector_signs_and_verifies() {
        assert_eq!(sign(GITHUB_SECRET, GITHUB_BODY), GITHUB_HEADER);
        check(GITHUB_SECRET, GITHUB_BODY, Some(GITHUB_HEADER), Ok(()));
    }

    #[test]
    fn headers_are_told_apart() {
        use SignatureError::{Malformed, Mismatch, Missing};
        let upper = format!("sha256={}", GITHUB_HEADER[7..].to_ascii_uppercase());
        let padded = format!(" {GITHUB_HEADER} ");
        let flipped = GITHUB_HEADER.replace("757107", "757108");
        let not_hex = format!("sha256={}", "z".repeat(64));
        let cases = [
            (Some(upper.as_str()), Ok(())),
            (Some(padded.as_str()), Ok(())),
            (None, Err(Missing)),
            (Some(""), Err(Malformed("expected the prefix sha256="))),
            (
                Some("sha1=0123"),
                Err(Malformed("expected the prefix sha256=")),
            ),
            (
                Some("SHA256=757107"),
                Err(Malformed("expected the prefix sha256=")),
            ),
            (Some("sha256=abc"), Err(Malformed("expected 64 hex digits"))),
            (
                Some(not_hex.as_str()),
                Err(Malformed("expected hex digits")),
            ),
            (Some(flipped.as_str()), Err(Mismatch)),
        ];
        for (header, want) in cases {
            check(GITHUB_SECRET, GITHUB_BODY, header, want);
        }
    }

    #[test]
    fn the_body_and_the_secret_both_count() {
        let header = Some(GITHUB_HEADER);
        check(
            GITHUB_SECRET,
            b"Hello, World?",
            header,
            Err(SignatureError::Mismatch),
        );
        check(
            b"another secret",
            GITHUB_BODY,
            header,
            Err(SignatureError::Mismatch),
        );
        check(b"", GITHUB_BODY, header, Err(SignatureError::EmptySecret));
    }

    /// RFC 4231 test cases 2 (a short key) and 6 (a key longer than the block).
    #[test]
    fn rfc_4231_keys_of_every_length() {
        let cases: [(&[u8], &[u8], &str); 2] = [
            (
                b"Jefe",
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
        ];
        for (key, body, hex_tag) in cases {
            let header = format!("sha256={hex_tag}");
            assert_eq!(sign(key, body), header);
            check(key, body, Some(&header), Ok(()));
        }
    }
}
