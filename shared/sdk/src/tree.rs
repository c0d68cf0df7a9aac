//! Reading a file of a checked-out tree (a repository at a commit) without ever leaving it.
//!
//! A repository is untrusted, and so are its symbolic links: each may look as if it stays
//! inside while a chain of them (`a -> b/c`, `b -> d`, `d -> ../..`) reaches a file of the
//! host. [`read`] walks the path one component at a time from the tree's root, through
//! directory handles (`openat` with `O_NOFOLLOW`, never a path the kernel resolves), follows a
//! link only by reading its target and walking that too, and refuses the path as soon as a
//! link would take it above the root. Links that stay inside are followed: PipeCD repositories
//! share manifests between apps that way. The file finally opened is the one checked (no
//! window between a check and an open), and nothing here ever quotes a file's contents.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use gannet_domain::ids::AppId;

/// The most symbolic links one path may go through (Linux's own limit is 40).
pub(crate) const MAX_LINKS: usize = 40;

/// Why a file of a tree was not read. It never quotes the file, nor a host path.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("is not a path inside the repository: name a file relative to the app's directory, without a leading / and without climbing out with `..`")]
    OutsidePath,
    #[error("does not exist")]
    NotFound,
    #[error("goes through the symbolic link {link}, which leads outside the repository; gannet follows only links that stay inside")]
    LinkLeaves { link: String },
    #[error("goes through more than {MAX_LINKS} symbolic links")]
    TooManyLinks,
    #[error("is not a regular file")]
    NotAFile,
    #[error("is {size} bytes, larger than the {max} bytes gannet reads")]
    TooLarge { size: u64, max: u64 },
    #[error("is not UTF-8 text")]
    NotText,
    #[error("cannot be read: {0}")]
    Read(#[source] io::Error),
}

impl TreeError {
    fn from_errno(e: rustix::io::Errno) -> Self {
        match e {
            rustix::io::Errno::NOENT => Self::NotFound,
            // A component that is not a directory, where one was needed: it names nothing.
            rustix::io::Errno::NOTDIR => Self::NotFound,
            e => Self::Read(e.into()),
        }
    }
}

/// The text of the file at `rel` (relative to `root`, `/`-separated, no `..`), read the
/// checked way: every link on the way stays inside `root`, the file is a regular file, and it
/// is at most `max` bytes, measured before it is read.
pub fn read(root: &Path, rel: &str, max: u64) -> Result<String, TreeError> {
    read_bytes(root, rel, max).and_then(|b| String::from_utf8(b).map_err(|_| TreeError::NotText))
}

/// [`read`] for a file that need not be text (a zip archive).
pub fn read_bytes(root: &Path, rel: &str, max: u64) -> Result<Vec<u8>, TreeError> {
    let found = Walker::new(root, rel)?.run()?;
    let Kind::File(size) = found.kind else {
        return Err(TreeError::NotAFile);
    };
    if size > max {
        return Err(TreeError::TooLarge { size, max });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // A file that grew since it was measured is still cut at the limit.
    File::from(found.fd)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(TreeError::Read)?;
    let read = bytes.len() as u64;
    if read > max {
        return Err(TreeError::TooLarge { size: read, max });
    }
    Ok(bytes)
}

/// Where `rel` really is under `root`, every link on the way resolved and each checked to stay
/// inside: a `/`-separated path with no link in it (`""` for the root itself), and whether it
/// is a directory.
pub fn resolve(root: &Path, rel: &str) -> Result<Resolved, TreeError> {
    let found = Walker::new(root, rel)?.run()?;
    Ok(Resolved {
        path: found.path,
        is_dir: matches!(found.kind, Kind::Dir),
    })
}

/// The directory `rel` under `root` on disk, when it is one and every link on the way stays
/// inside `root` ([`resolve`]): an app's directory to hand a plugin.
pub fn dir_in(root: &Path, rel: &str) -> Option<std::path::PathBuf> {
    resolve(root, rel)
        .ok()
        .filter(|r| r.is_dir)
        .map(|r| root.join(r.path))
}

/// A path of a tree with its links resolved ([`resolve`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub path: String,
    pub is_dir: bool,
}

/// An app's directory in a checked-out tree, as a step or a check reads the files its config
/// names: paths are relative to the app's directory and may climb with `..` as long as they
/// stay inside the repository; links are resolved from the tree's root.
#[derive(Clone, Debug)]
pub struct AppFiles {
    root: PathBuf,
    dir: String,
}

impl AppFiles {
    /// The files of `app` whose directory in a checkout is `app_dir` (the checkout's root
    /// joined with `app.dir()`, as every runtime lays it out).
    pub fn new(app_dir: &Path, app: &AppId) -> Self {
        Self::at(app_dir, app.dir())
    }

    /// The files of the app directory `dir` (`/`-separated, relative to the root) whose path on
    /// disk is `app_dir`. When `app_dir` does not end with `dir`, the app's directory itself is
    /// taken as the root, which is stricter.
    pub fn at(app_dir: &Path, dir: &str) -> Self {
        let depth = dir.split('/').filter(|p| !p.is_empty()).count();
        let root = app_dir.ancestors().nth(depth);
        match root {
            Some(root) if app_dir.ends_with(dir) => Self {
                root: root.to_owned(),
                dir: dir.trim_matches('/').to_owned(),
            },
            _ => Self {
                root: app_dir.to_owned(),
                dir: String::new(),
            },
        }
    }

    /// The checkout's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `rel` (relative to the app's directory) as a path relative to the root, its `..`
    /// applied; `None` when it climbs above the root or is absolute.
    pub fn in_repo(&self, rel: &str) -> Option<String> {
        in_repo(&self.dir, rel)
    }

    /// The text of the file `rel` names (relative to the app's directory), read as [`read`]
    /// reads it, at most [`gannet_config::bounded::MAX_BYTES`].
    pub fn read(&self, rel: &str) -> Result<String, TreeError> {
        self.read_at_most(rel, gannet_config::bounded::MAX_BYTES as u64)
    }

    /// [`AppFiles::read`] with another limit.
    pub(crate) fn read_at_most(&self, rel: &str, max: u64) -> Result<String, TreeError> {
        let path = self.in_repo(rel).ok_or(TreeError::OutsidePath)?;
        read(&self.root, &path, max)
    }

    /// [`AppFiles::read`] for a file that need not be text.
    pub fn read_bytes(&self, rel: &str, max: u64) -> Result<Vec<u8>, TreeError> {
        let path = self.in_repo(rel).ok_or(TreeError::OutsidePath)?;
        read_bytes(&self.root, &path, max)
    }

    /// Where `rel` (relative to the app's directory) really is, relative to the root.
    pub fn resolve(&self, rel: &str) -> Result<Resolved, TreeError> {
        let path = self.in_repo(rel).ok_or(TreeError::OutsidePath)?;
        resolve(&self.root, &path)
    }
}

/// `rel`, relative to the directory `dir` of a repository, as a path relative to the
/// repository's root with its `..` applied; `None` when it is absolute or climbs above the root.
/// (Lexical: the walk that reads the path checks the links on it.)
pub fn in_repo(dir: &str, rel: &str) -> Option<String> {
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    if rel.is_empty() || rel.contains('\0') {
        return None;
    }
    for part in Path::new(rel).components() {
        match part {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.join("/"))
}

/// What a walk ended at.
enum Kind {
    File(u64),
    Dir,
}

struct Found {
    fd: OwnedFd,
    /// The real path, `/`-separated.
    path: String,
    kind: Kind,
}

/// A name still to walk, and the link whose target it came from (`None` for the path given).
struct Pending {
    name: OsString,
    from_link: Option<String>,
}

/// One walk from a tree's root: the directories opened so far (each a real directory, none a
/// link, each opened from the one before), and the names still to walk.
struct Walker {
    root: OwnedFd,
    dirs: Vec<(OwnedFd, OsString)>,
    pending: VecDeque<Pending>,
    links: usize,
}

impl Walker {
    fn new(root: &Path, rel: &str) -> Result<Self, TreeError> {
        let path = Path::new(rel);
        if rel.contains('\0') || path.is_absolute() {
            return Err(TreeError::OutsidePath);
        }
        let mut pending = VecDeque::new();
        for part in path.components() {
            match part {
                Component::Normal(name) => pending.push_back(Pending {
                    name: name.to_owned(),
                    from_link: None,
                }),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(TreeError::OutsidePath)
                }
            }
        }
        // The root is gannet's own (a checkout directory, an operator's path): the only path
        // here the kernel resolves.
        let root = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(TreeError::from_errno)?;
        Ok(Self {
            root,
            dirs: Vec::new(),
            pending,
            links: 0,
        })
    }

    /// The real path of the directory reached so far, `/`-separated.
    fn here(&self) -> String {
        let names: Vec<OsString> = self.dirs.iter().map(|(_, n)| n.clone()).collect();
        join(&names)
    }

    fn at(&self) -> &OwnedFd {
        self.dirs.last().map_or(&self.root, |(fd, _)| fd)
    }

    fn run(mut self) -> Result<Found, TreeError> {
        while let Some(Pending { name, from_link }) = self.pending.pop_front() {
            if name.as_bytes() == b".." {
                // Only a link's target climbs (the path given may not); never above the root.
                if self.dirs.pop().is_none() {
                    return Err(TreeError::LinkLeaves {
                        link: from_link.unwrap_or_default(),
                    });
                }
                continue;
            }
            let stat = rustix::fs::statat(self.at(), &name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(TreeError::from_errno)?;
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Symlink => self.follow(&name)?,
                FileType::Directory => {
                    let fd = rustix::fs::openat(
                        self.at(),
                        &name,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(TreeError::from_errno)?;
                    same_file(&fd, &stat)?;
                    self.dirs.push((fd, name));
                }
                FileType::RegularFile if self.pending.is_empty() => {
                    // NOFOLLOW: a link swapped in since the stat is not followed; NONBLOCK: a
                    // FIFO swapped in does not hang the read.
                    let fd = rustix::fs::openat(
                        self.at(),
                        &name,
                        OFlags::RDONLY
                            | OFlags::NOFOLLOW
                            | OFlags::NONBLOCK
                            | OFlags::NOCTTY
                            | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(TreeError::from_errno)?;
                    let opened = same_file(&fd, &stat)?;
                    let here = self.here();
                    let name = name.to_string_lossy();
                    return Ok(Found {
                        fd,
                        path: if here.is_empty() {
                            name.into_owned()
                        } else {
                            format!("{here}/{name}")
                        },
                        kind: Kind::File(u64::try_from(opened.st_size).unwrap_or(u64::MAX)),
                    });
                }
                // A file with more path after it names nothing.
                FileType::RegularFile => return Err(TreeError::NotFound),
                // A device, a socket, a FIFO.
                _ => return Err(TreeError::NotAFile),
            }
        }
        let path = self.here();
        let fd = match self.dirs.pop() {
            Some((fd, _)) => fd,
            None => self.root,
        };
        Ok(Found {
            fd,
            path,
            kind: Kind::Dir,
        })
    }

    /// Walks on through the link `name` in the current directory: its target's names come
    /// next, read from that directory. An absolute target leaves the tree.
    fn follow(&mut self, name: &OsString) -> Result<(), TreeError> {
        self.links += 1;
        if self.links > MAX_LINKS {
            return Err(TreeError::TooManyLinks);
        }
        let link = match self.here() {
            here if here.is_empty() => name.to_string_lossy().into_owned(),
            here => format!("{here}/{}", name.to_string_lossy()),
        };
        let target =
            rustix::fs::readlinkat(self.at(), name, Vec::new()).map_err(TreeError::from_errno)?;
        let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
        let mut names = Vec::new();
        for part in target.components() {
            match part {
                Component::Normal(n) => names.push(n.to_owned()),
                Component::CurDir => {}
                Component::ParentDir => names.push(OsString::from("..")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(TreeError::LinkLeaves { link })
                }
            }
        }
        for name in names.into_iter().rev() {
            self.pending.push_front(Pending {
                name,
                from_link: Some(link.clone()),
            });
        }
        Ok(())
    }
}

/// The opened file's metadata, when it is the file that was checked (same device and inode):
/// something swapped in between the check and the open is refused.
fn same_file(fd: &OwnedFd, checked: &rustix::fs::Stat) -> Result<rustix::fs::Stat, TreeError> {
    let opened = rustix::fs::fstat(fd).map_err(TreeError::from_errno)?;
    if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino) {
        return Err(TreeError::Read(io::Error::other(
            "it changed while it was being read",
        )));
    }
    Ok(opened)
}

fn join(names: &[OsString]) -> String {
    names
        .iter()
        .map(|n| n.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Why a step could not read its app's config from the app's directory.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the app config {path} {source}")]
    Read {
        path: String,
        #[source]
        source: TreeError,
    },
    #[error("invalid app config: {0}")]
    Config(#[from] gannet_config::ConfigError),
}

/// The config of app `app` from the app's directory (in a checkout of some commit), as a
/// platform plugin's step reads it: through this module, so no link leads out of the
/// checkout.
pub fn load_app_config(
    app_dir: &std::path::Path,
    app: &gannet_domain::ids::AppId,
) -> Result<gannet_config::AppConfig, LoadError> {
    let config_path = app.config_path();
    let file_name = config_path.rsplit('/').next().unwrap_or(config_path);
    let text = AppFiles::new(app_dir, app)
        .read(file_name)
        .map_err(|source| LoadError::Read {
            path: config_path.to_owned(),
            source,
        })?;
    Ok(gannet_config::parse_app_config(config_path, &text)?)
}

/// A file the app config names (a manifest), read from the app's directory in a checkout as a
/// plugin must read it (this module): the path stays inside the directory (no absolute
/// path, no `..`), every link on the way stays inside the directory, the file is a regular
/// file, and it is no larger than the YAML limit ([`gannet_config::bounded::MAX_BYTES`]), checked
/// before it is read. The error says which rule the file broke, never what it holds.
pub fn read_app_file(app_dir: &std::path::Path, rel: &str) -> Result<String, String> {
    use std::path::{Component, Path};
    let path = Path::new(rel);
    if rel.is_empty()
        || path.is_absolute()
        || path.components().any(|c| matches!(c, Component::ParentDir))
    {
        return Err(format!("{rel:?}: name a file inside the app's directory"));
    }
    read(app_dir, rel, gannet_config::bounded::MAX_BYTES as u64).map_err(|e| match e {
        TreeError::NotFound => "does not exist in the app directory".to_owned(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests;
