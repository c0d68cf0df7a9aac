//! `gannet-cloudrun-fake KEYFILE`: the fake Cloud Run Admin API as a process of its own, for
//! tests and benchmarks that run their client as another process. For tests only, like the
//! library.
//!
//! It starts the fake on 127.0.0.1 at a free port, writes its service account key file to
//! `KEYFILE` (the path given), prints the fake's URL and then the key file's path, one a line,
//! and serves until its stdin closes or it is sent SIGTERM (or killed). The request log is
//! served at `GET /fake/requests` (`gannet_cloudrun_fake::REQUESTS_PATH`), behind a token.

use std::io::{Read, Write};

use gannet_cloudrun_fake::FakeRun;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        eprintln!("usage: gannet-cloudrun-fake KEYFILE (the path to write its key file to)");
        std::process::exit(2);
    };
    let fake = FakeRun::start();
    if let Err(e) = std::fs::write(&path, fake.service_account_key()) {
        let path = path.to_string_lossy();
        eprintln!("gannet-cloudrun-fake: cannot write {path}: {e}");
        std::process::exit(1);
    }
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "{}\n{}", fake.url(), path.to_string_lossy());
    let _ = stdout.flush();
    // Serve until stdin closes; SIGTERM's default action ends the process as well.
    let mut sink = [0u8; 256];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    fake.stop();
}
