//! A Helm chart repository on loopback for tests: charts made on disk, `helm package` and
//! `helm repo index` (the pinned helm of `scripts/kube.sh`, or `GANNET_HELM`), served by
//! Python's `http.server`, stopped by its PID when dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A chart to serve: every chart's values are `image: web:1`.
pub struct Chart<'a> {
    pub name: &'a str,
    pub version: &'a str,
    /// `templates/main.yaml`.
    pub template: &'a str,
}

/// The running repository; [`ChartServer::url`] is what `helm repo add` takes.
pub struct ChartServer {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

fn helm() -> PathBuf {
    std::env::var_os("GANNET_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::tools_dir().join("helm"))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

impl ChartServer {
    /// Serves `charts`.
    ///
    /// # Panics
    /// If helm fails, or the server does not answer within 10 s.
    pub fn start(charts: &[Chart<'_>]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let helm = |args: &[&str]| {
            let out = Command::new(helm())
                .args(args)
                .current_dir(dir.path())
                .env("HOME", dir.path())
                .env("HELM_CACHE_HOME", dir.path().join(".helm"))
                .env("HELM_CONFIG_HOME", dir.path().join(".helm"))
                .env("HELM_DATA_HOME", dir.path().join(".helm"))
                .output()
                .expect("helm runs");
            assert!(
                out.status.success(),
                "helm {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        for c in charts {
            let src = dir.path().join("src").join(c.name);
            write(
                &src.join("Chart.yaml"),
                &format!("apiVersion: v2\nname: {}\nversion: {}\n", c.name, c.version),
            );
            write(&src.join("values.yaml"), "image: web:1\n");
            write(&src.join("templates/main.yaml"), c.template);
            helm(&["package", &src.to_string_lossy(), "-d", "served"]);
        }
        helm(&["repo", "index", "served", "--url", &url]);
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .current_dir(dir.path().join("served"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let server = Self {
            child,
            url,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the chart server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl Drop for ChartServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
