//! gannet's sealed secrets against PipeCD's scheme as Go's standard library computes it
//! (`tests/pipecd-seal`, built here with the machine's Go: the calls PipeCD's pkg/crypto
//! makes): a secret sealed there opens in gannet, and one gannet seals opens there.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use gannet_sdk::sealed::{seal, SealingKey};

/// The Go program, built once into the test's target directory.
fn pipecd_seal() -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pipecd-seal");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/pipecd-seal");
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(&src)
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("Go runs (the machines have Go; scripts/kube.sh needs it too)");
    assert!(
        built.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

fn run(tool: &Path, verb: &str, key: &Path, input: &str) -> String {
    let mut child = Command::new(tool)
        .args([verb, &key.to_string_lossy()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pipecd-seal runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "pipecd-seal {verb}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn secrets_sealed_as_pipecd_seals_them_open_in_gannet_and_the_other_way_round() {
    use rsa::pkcs8::{EncodePrivateKey, LineEnding};
    let private = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).expect("key");
    let private_pem = private
        .to_pkcs8_pem(LineEnding::LF)
        .expect("pem")
        .to_string();
    let key = SealingKey::from_pem(&private_pem).expect("gannet reads it");
    let dir = tempfile::tempdir().expect("tempdir");
    let (private_file, public_file) = (dir.path().join("private"), dir.path().join("public"));
    std::fs::write(&private_file, &private_pem).expect("write");
    std::fs::write(&public_file, key.public_pem()).expect("write");
    let tool = pipecd_seal();

    let text = "{\"type\": \"service_account\", \"private_key\": \"-----BEGIN…\\n\"}\nünïcode\n";
    let by_pipecd = run(&tool, "seal", &public_file, text);
    assert_eq!(key.open(&by_pipecd).expect("opens in gannet"), text);

    let by_gannet = seal(&key.public_pem(), text).expect("seal");
    assert_eq!(run(&tool, "open", &private_file, &by_gannet), text);
}
