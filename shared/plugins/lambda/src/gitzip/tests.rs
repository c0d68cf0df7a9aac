//! The zip of a git source: the same tree gives the same bytes whatever the times and order
//! the tar has, modes and links are kept (read back by Python's zipfile, a reader gannet did
//! not write), and a tree that cannot be a function is refused naming why.

use std::process::Command;

use super::*;

/// A tar of `files` (name, mode, content; a mode of 0 makes a link to the content) with every
/// entry's time at `mtime`, in the given order.
fn tar_of(files: &[(&str, u32, &str)], mtime: u64) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, mode, content) in files {
        let mut h = tar::Header::new_gnu();
        h.set_mtime(mtime);
        if *mode == 0 {
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            h.set_mode(0o777);
            b.append_link(&mut h, name, content).expect("link");
        } else {
            h.set_size(content.len() as u64);
            h.set_mode(*mode);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, name, content.as_bytes())
                .expect("file");
        }
    }
    b.into_inner().expect("tar")
}

const FILES: [(&str, u32, &str); 4] = [
    ("app.py", 0o644, "def handler(e, c):\n    return 'hi'\n"),
    ("bin/run", 0o775, "#!/bin/sh\necho run\n"),
    ("lib/util.py", 0o600, "X = 1\n"),
    ("current", 0, "lib/util.py"),
];

#[test]
fn the_same_tree_zips_to_the_same_bytes_whatever_its_times_and_order() {
    let one = zip_of_tar(&tar_of(&FILES, 1_600_000_000)).expect("zip");
    let mut reversed = FILES;
    reversed.reverse();
    let two = zip_of_tar(&tar_of(&reversed, 1_700_000_000)).expect("zip");
    assert_eq!(one, two);
    let mut changed = FILES;
    changed[2].2 = "X = 2\n";
    assert_ne!(one, zip_of_tar(&tar_of(&changed, 1_600_000_000)).unwrap());
}

#[test]
fn a_zip_reader_sees_each_file_its_mode_and_the_link() {
    let zip = zip_of_tar(&tar_of(&FILES, 1_600_000_000)).expect("zip");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fn.zip");
    std::fs::write(&path, &zip).expect("write");
    let script = r#"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
for i in z.infolist():
    print(i.filename, oct(i.external_attr >> 16), i.date_time[0], z.read(i).decode())
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // Each entry's first line: its name, mode, year and the start of its content.
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" 0o")).collect();
    assert_eq!(
        lines,
        [
            "app.py 0o100644 1980 def handler(e, c):",
            "bin/run 0o100755 1980 #!/bin/sh",
            "current 0o120777 1980 lib/util.py",
            "lib/util.py 0o100644 1980 X = 1",
        ]
    );
}

#[test]
fn a_tree_that_cannot_be_a_function_is_refused_naming_why() {
    // The tar crate itself refuses to write `..`: make the entry by hand.
    let mut h = tar::Header::new_gnu();
    h.as_gnu_mut().unwrap().name[..4].copy_from_slice(b"../x");
    h.set_size(1);
    h.set_mode(0o644);
    h.set_cksum();
    let mut raw = h.as_bytes().to_vec();
    raw.extend(b"x");
    raw.resize(1024 + 512, 0);
    let why = zip_of_tar(&raw).unwrap_err();
    assert!(why.contains("leads out of the directory"), "{why}");

    let mut b = tar::Builder::new(Vec::new());
    let mut fifo = tar::Header::new_gnu();
    fifo.set_entry_type(tar::EntryType::Fifo);
    fifo.set_size(0);
    b.append_data(&mut fifo, "pipe", &[][..]).unwrap();
    let why = zip_of_tar(&b.into_inner().unwrap()).unwrap_err();
    assert!(why.contains("pipe is neither a file"), "{why}");

    let why = zip_of_tar(&tar::Builder::new(Vec::new()).into_inner().unwrap()).unwrap_err();
    assert!(why.contains("holds no file"), "{why}");
    assert!(zip_of_tar(b"not a tar at all, really").is_err());
}

#[test]
fn the_fetch_script_refuses_remotes_the_target_does_not_allow() {
    let git = GitSettings::default();
    let why = script(&git, "file:///srv/code.git", "v1", "").unwrap_err();
    assert!(why.contains("git.allowFileRemotes"), "{why}");
    let why = script(&git, "http://example.com/code.git", "v1", "").unwrap_err();
    assert!(why.contains("loopback"), "{why}");
    let (text, env) = script(&git, "https://example.com/o'k.git", "v1", "fn").expect("script");
    assert!(text.contains(r"'https://example.com/o'\''k.git'"), "{text}");
    assert!(env
        .iter()
        .any(|(k, v)| k == "GIT_TERMINAL_PROMPT" && v == "0"));
}
