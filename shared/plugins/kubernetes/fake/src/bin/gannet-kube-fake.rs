//! `gannet-kube-fake KUBECONFIG`: the fake API server as a process of its own, for benchmarks
//! that measure the server's CPU apart from the client's (`make bench-kubernetes`). For tests
//! only, like the library.
//!
//! It starts the server on 127.0.0.1 at a free port, writes a kubeconfig for it to `KUBECONFIG`
//! (the path given), plays the Deployment controller with no delay (a Deployment is rolled out
//! within ~20 ms of its generation changing), prints the server's URL on one line, and serves
//! until its stdin closes or it is sent SIGTERM (or killed). The request log is served at
//! `GET /fake/requests` (`gannet_kube_fake::REQUESTS_PATH`), behind the same bearer token.

use std::io::{Read, Write};
use std::time::Duration;

use gannet_kube_fake::FakeKube;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        eprintln!("usage: gannet-kube-fake KUBECONFIG (the path to write its kubeconfig to)");
        std::process::exit(2);
    };
    let fake = FakeKube::start();
    if let Err(e) = std::fs::write(&path, fake.kubeconfig()) {
        eprintln!(
            "gannet-kube-fake: cannot write {}: {e}",
            path.to_string_lossy()
        );
        std::process::exit(1);
    }
    fake.play_deployment_controller(Duration::ZERO);
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "{}", fake.url());
    let _ = stdout.flush();
    // Serve until stdin closes; SIGTERM's default action ends the process as well.
    let mut sink = [0u8; 256];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    fake.stop_playing_deployment_controller();
    fake.stop();
}
