//! What the benchmarks share: their settings from the environment, medians and ranges, and
//! commands run with a bound.
#![allow(dead_code)] // each benchmark uses a different part of these helpers

/// A whole number from the environment variable `name`, or `default` when it is not set.
pub fn env_number(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a whole number")),
        Err(_) => default,
    }
}

/// The median (the mean of the middle two for an even count); NaN for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The median of `values`, with the min–max range when there are several.
pub fn shown(values: &[f64], decimals: usize, unit: &str) -> String {
    let mid = median(values.to_vec());
    if values.len() < 2 {
        return format!("{mid:.decimals$}{unit}");
    }
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{mid:.decimals$}{unit} ({lo:.decimals$}–{hi:.decimals$})")
}

/// Runs `cmd` to its end, killing it (by its PID) if it takes longer than `limit`.
pub fn bounded(
    cmd: &mut std::process::Command,
    limit: std::time::Duration,
    what: &str,
) -> std::process::Output {
    let child = cmd.spawn().unwrap_or_else(|e| panic!("{what} starts: {e}"));
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            let _ = rx.recv_timeout(std::time::Duration::from_secs(5));
            panic!("{what} took longer than {limit:?}; killed it (pid {pid})");
        }
    }
}

/// The whole machine's (busy, total) CPU time so far, in ms (from /proc/stat).
pub fn machine_cpu_ms() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    (busy * 10, (busy + at(3) + at(4)) * 10)
}
