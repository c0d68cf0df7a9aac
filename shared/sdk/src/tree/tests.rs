use std::os::unix::fs::symlink;

use super::*;

const MARKER: &str = "gannet-test-marker: the host's secret first line";

/// A tree at `<tmp>/repo`, and a host file `<tmp>/secret.txt` outside it.
struct Lab {
    dir: tempfile::TempDir,
}

impl Lab {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("repo")).unwrap();
        std::fs::write(dir.path().join("secret.txt"), format!("{MARKER}\n")).unwrap();
        Self { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn file(&self, rel: &str, text: &str) {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn link(&self, rel: &str, target: &str) {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        symlink(target, path).unwrap();
    }

    /// What the kernel reads at `rel`, following every link: the setup really reaches out.
    fn kernel_reads(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap()
    }

    fn read(&self, rel: &str) -> Result<String, TreeError> {
        read(&self.root(), rel, 1024)
    }
}

fn refused(got: Result<String, TreeError>) -> TreeError {
    match got {
        Ok(text) => panic!("read {text:?}"),
        Err(e) => {
            assert!(!e.to_string().contains(MARKER), "{e}");
            e
        }
    }
}

#[test]
fn regular_files_and_links_that_stay_inside_are_read() {
    let lab = Lab::new();
    lab.file("app/app.pipecd.yaml", "kind: KubernetesApp\n");
    lab.file("shared/deployment.yaml", "kind: Deployment\n");
    lab.link("app/deployment.yaml", "../shared/deployment.yaml");
    lab.link("app/base", "../shared");
    lab.link("app/again", "./base/../app/base/deployment.yaml");
    assert_eq!(
        lab.read("app/app.pipecd.yaml").unwrap(),
        "kind: KubernetesApp\n"
    );
    assert_eq!(
        lab.read("./app//app.pipecd.yaml").unwrap(),
        "kind: KubernetesApp\n"
    );
    assert_eq!(
        lab.read("app/deployment.yaml").unwrap(),
        "kind: Deployment\n"
    );
    assert_eq!(
        lab.read("app/base/deployment.yaml").unwrap(),
        "kind: Deployment\n"
    );
    assert_eq!(lab.read("app/again").unwrap(), "kind: Deployment\n");
    assert_eq!(
        resolve(&lab.root(), "app/again").unwrap(),
        Resolved {
            path: "shared/deployment.yaml".into(),
            is_dir: false
        }
    );
    assert_eq!(
        resolve(&lab.root(), "app/base").unwrap(),
        Resolved {
            path: "shared".into(),
            is_dir: true
        }
    );
}

#[test]
fn a_chain_of_links_that_each_look_inside_is_refused() {
    let lab = Lab::new();
    // `a/b/up -> ../..` is the root; `a/b/c -> up/..` reads lexically as `a/b`, but is the
    // root's parent: `a/b/c/secret.txt` is the host file.
    lab.link("a/b/up", "../..");
    lab.link("a/b/c", "up/..");
    // And a chain of three, each short hop inside: x -> y/z, y -> d, d/z -> ../a/b/c.
    lab.link("x", "y/z");
    lab.link("y", "d");
    lab.link("d/z", "../a/b/c");
    for rel in ["a/b/c/secret.txt", "x/secret.txt"] {
        assert!(
            lab.kernel_reads(rel).contains(MARKER),
            "the setup reaches out"
        );
        match refused(lab.read(rel)) {
            TreeError::LinkLeaves { link } => assert_eq!(link, "a/b/c", "{rel}"),
            other => panic!("{rel}: {other}"),
        }
        assert!(matches!(
            resolve(&lab.root(), rel),
            Err(TreeError::LinkLeaves { .. })
        ));
    }
    let outside = refused(lab.read("a/b/c/secret.txt")).to_string();
    assert!(
        outside.contains("a/b/c") && outside.contains("outside"),
        "{outside}"
    );
}

#[test]
fn absolute_and_climbing_paths_and_links_are_refused() {
    let lab = Lab::new();
    let secret = lab.dir.path().join("secret.txt");
    lab.link("abs", secret.to_str().unwrap());
    lab.link("app/up", "../../secret.txt");
    lab.link("app/etc", "/etc");
    assert!(matches!(refused(lab.read("abs")), TreeError::LinkLeaves { link } if link == "abs"));
    assert!(
        matches!(refused(lab.read("app/up")), TreeError::LinkLeaves { link } if link == "app/up")
    );
    assert!(matches!(
        refused(lab.read("app/etc/passwd")),
        TreeError::LinkLeaves { .. }
    ));
    for rel in [
        secret.to_str().unwrap(),
        "/etc/passwd",
        "../secret.txt",
        "app/../../secret.txt",
        "app/../abs",
        "a\0b",
    ] {
        assert!(
            matches!(refused(lab.read(rel)), TreeError::OutsidePath),
            "{rel}"
        );
    }
}

#[test]
fn loops_directories_and_large_files_are_refused() {
    let lab = Lab::new();
    lab.link("loop1", "loop2");
    lab.link("loop2", "loop1");
    lab.file("dir/file", "x");
    lab.file("big", &"x".repeat(2000));
    assert!(matches!(
        refused(lab.read("loop1")),
        TreeError::TooManyLinks
    ));
    assert!(matches!(refused(lab.read("dir")), TreeError::NotAFile));
    assert!(matches!(refused(lab.read("")), TreeError::NotAFile));
    assert!(matches!(refused(lab.read("missing")), TreeError::NotFound));
    assert!(matches!(
        refused(lab.read("dir/file/more")),
        TreeError::NotFound
    ));
    assert!(matches!(
        refused(lab.read("big")),
        TreeError::TooLarge {
            size: 2000,
            max: 1024
        }
    ));
    std::fs::write(lab.root().join("binary"), [0xff, 0xfe]).unwrap();
    assert!(matches!(refused(lab.read("binary")), TreeError::NotText));
    assert_eq!(
        read_bytes(&lab.root(), "binary", 10).unwrap(),
        vec![0xff, 0xfe]
    );
    let fifo = std::process::Command::new("mkfifo")
        .arg(lab.root().join("fifo"))
        .status()
        .unwrap();
    assert!(fifo.success());
    assert!(matches!(refused(lab.read("fifo")), TreeError::NotAFile));
}

#[test]
fn an_app_reads_beside_itself_but_not_out_of_the_repository() {
    let lab = Lab::new();
    lab.file("apps/web/app.pipecd.yaml", "a");
    lab.file("apps/shared/values.yaml", "v");
    lab.link("apps/web/escape", "../../../secret.txt");
    let app = AppId::parse("repo:apps/web/app.pipecd.yaml").unwrap();
    let files = AppFiles::new(&lab.root().join("apps/web"), &app);
    assert_eq!(files.root(), lab.root());
    assert_eq!(files.read("app.pipecd.yaml").unwrap(), "a");
    assert_eq!(files.read("../shared/values.yaml").unwrap(), "v");
    assert!(matches!(
        refused(files.read("../../../secret.txt")),
        TreeError::OutsidePath
    ));
    assert!(matches!(
        refused(files.read("escape")),
        TreeError::LinkLeaves { .. }
    ));
    assert!(matches!(
        refused(files.read("/etc/passwd")),
        TreeError::OutsidePath
    ));
    // An app directory that is not where its id says is its own root.
    let alone = AppFiles::at(&lab.root().join("apps/web"), "other/place");
    assert_eq!(alone.root(), lab.root().join("apps/web"));
    assert!(matches!(
        refused(alone.read("../shared/values.yaml")),
        TreeError::OutsidePath
    ));
}
