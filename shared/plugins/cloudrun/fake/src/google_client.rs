//! Google's own Cloud Run client, run against the fake: `tests/google_client.py` with the
//! python of the venv `scripts/gcloud-client.sh` pins google-cloud-run and google-auth in
//! (`GANNET_GCLOUD_PYTHON`, which `make test` sets, else what the script installs).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The driver must be done well within this.
const LIMIT: Duration = Duration::from_secs(180);

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The python of the venv that holds Google's client.
fn python() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("GANNET_GCLOUD_PYTHON").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let script = crate_dir()
        .ancestors()
        .map(|dir| dir.join("scripts/gcloud-client.sh"))
        .find(|script| script.is_file())
        .ok_or("GANNET_GCLOUD_PYTHON is not set and scripts/gcloud-client.sh was not found")?;
    let output = Command::new(&script)
        .arg("path")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {} path: {e}", script.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("{} path: {}", script.display(), stderr.trim()));
    }
    Ok(PathBuf::from(
        String::from_utf8_lossy(&output.stdout).trim(),
    ))
}

/// Runs `google_client.py ARGS` (see its docstring) with only the environment given, no
/// configuration of the machine's, and every proxy pointing at a closed port, so it reaches
/// nothing but loopback; answers the JSON it prints, or its stderr.
pub fn run_google_client(args: &[&str], env: &[(&str, String)]) -> Result<Value, String> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let home =
        std::env::temp_dir().join(format!("gannet-google-client-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&home).map_err(|e| format!("{}: {e}", home.display()))?;
    let answer = run_in(&home, args, env);
    let _ = std::fs::remove_dir_all(&home);
    answer
}

fn run_in(home: &Path, args: &[&str], env: &[(&str, String)]) -> Result<Value, String> {
    let mut child = Command::new(python()?)
        .arg(crate_dir().join("tests/google_client.py"))
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("CLOUDSDK_CONFIG", home)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting google_client.py: {e}"))?;
    // Read both pipes as the driver runs, so a full pipe never stalls it.
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.as_mut().map(|o| o.read_to_string(&mut text));
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.as_mut().map(|e| e.read_to_string(&mut text));
        text
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("google_client.py {args:?} ran past {LIMIT:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("google_client.py {args:?}: {e}")),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        return Err(format!(
            "google_client.py {args:?} failed ({status}):\n{stderr}"
        ));
    }
    serde_json::from_str(&stdout).map_err(|e| format!("{e}: {stdout}\n{stderr}"))
}
