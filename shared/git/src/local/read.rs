//! Reads of a repository's refs, commits and trees in this process, through gix: what `git
//! log`, `diff-tree`, `ls-tree`, `cat-file`, `merge-base` and `rev-list` printed before, with
//! the same answers (the differential test, `tests/git_conformance.rs`, holds them to it).
//!
//! Every function here is synchronous and takes a thread-local [`gix::Repository`]; the caller
//! runs it off the async runtime.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use gannet_domain::duration::Millis;
use gannet_domain::ids::CommitSha;
use gannet_domain::ports::CommitInfo;
use gix::objs::tree::EntryKind;
use gix::ObjectId;

/// Why a read failed. [`ReadError::NoCommit`] becomes [`GitError::NoCommit`]; the others are
/// the source of a [`GitError::Failed`].
///
/// [`GitError::NoCommit`]: gannet_domain::ports::GitError::NoCommit
/// [`GitError::Failed`]: gannet_domain::ports::GitError::Failed
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("commit {0} not found")]
    NoCommit(CommitSha),
    #[error("{} is not a git repository (opened as is, never a parent)", path.display())]
    NotARepository {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("could not {action}")]
    Gix {
        action: &'static str,
        #[source]
        source: gix::Error,
    },
    #[error("commit {commit} is malformed: {detail}")]
    Malformed { commit: CommitSha, detail: String },
}

impl ReadError {
    fn gix(action: &'static str) -> impl FnOnce(gix::Error) -> Self {
        move |source| Self::Gix { action, source }
    }
}

/// Opens the repository at exactly `path` (a work tree's `.git`, or `path` itself as a git
/// directory; never a parent), reading its own configuration only: no user or system file and
/// no `GIT_*` variable can point it elsewhere.
pub(crate) fn open(path: &Path) -> Result<gix::ThreadSafeRepository, ReadError> {
    gix::ThreadSafeRepository::open_opts(path, gix::open::Options::isolated()).map_err(|source| {
        ReadError::NotARepository {
            path: path.to_owned(),
            source,
        }
    })
}

/// A handle for one call on this thread, with no object cache: a deployment reads few objects
/// once each, and the controller keeps its memory small (`thread_local` of a
/// [`gix::ThreadSafeRepository`] is cheap: the object store and refs are shared).
pub(crate) fn local(repo: &gix::ThreadSafeRepository) -> gix::Repository {
    let mut local = repo.to_thread_local();
    local.object_cache_size(0);
    local
}

fn object_id(sha: &CommitSha) -> ObjectId {
    ObjectId::from_hex(sha.as_str().as_bytes()).expect("a CommitSha is 40 hex digits")
}

fn commit_sha(id: ObjectId) -> CommitSha {
    CommitSha::parse(&id.to_string()).expect("a sha1 object id is 40 hex digits")
}

/// The commit `sha` names (an annotated tag is followed to its commit, as `<sha>^{commit}`),
/// or [`ReadError::NoCommit`] when there is no such object or it leads to no commit.
pub(crate) fn commit<'r>(
    repo: &'r gix::Repository,
    sha: &CommitSha,
) -> Result<gix::Commit<'r>, ReadError> {
    let missing = || ReadError::NoCommit(sha.clone());
    let object = repo
        .try_find_object(object_id(sha))
        .map_err(ReadError::gix("read object"))?
        .ok_or_else(missing)?;
    object
        .peel_to_kind(gix::object::Kind::Commit)
        .map(gix::Object::into_commit)
        .map_err(|_| missing())
}

/// Fails with [`ReadError::NoCommit`] unless every one of `commits` is a commit here.
pub(crate) fn require(repo: &gix::Repository, commits: &[CommitSha]) -> Result<(), ReadError> {
    commits
        .iter()
        .try_for_each(|sha| commit(repo, sha).map(drop))
}

/// What `git log -1 --format=%an%x00%ct%x00%B` says of `sha`: the author's name as written
/// (no mailmap), the committer time in whole seconds, and the raw message without its
/// trailing newlines.
pub(crate) fn commit_info(
    repo: &gix::Repository,
    sha: &CommitSha,
) -> Result<CommitInfo, ReadError> {
    let commit = commit(repo, sha)?;
    info(sha.clone(), &commit)
}

fn info(sha: CommitSha, commit: &gix::Commit<'_>) -> Result<CommitInfo, ReadError> {
    let malformed = |detail: String| ReadError::Malformed {
        commit: sha.clone(),
        detail,
    };
    let author = commit
        .author()
        .map_err(|e| malformed(format!("its author: {e}")))?;
    let committer = commit
        .committer()
        .map_err(|e| malformed(format!("its committer: {e}")))?;
    let time = committer.time.split(' ').next().unwrap_or_default();
    let seconds: u64 = time
        .parse()
        .map_err(|_| malformed(format!("commit time {time:?} is not a number")))?;
    let message = commit
        .message_raw()
        .map_err(|e| malformed(format!("its message: {e}")))?;
    Ok(CommitInfo {
        message: String::from_utf8_lossy(message)
            .trim_end_matches('\n')
            .to_owned(),
        author: String::from_utf8_lossy(author.name).into_owned(),
        at: Millis(seconds.saturating_mul(1000)),
        sha,
    })
}

/// The commit `refs/heads/<branch>` leads to, or `None` when there is no such branch.
pub(crate) fn branch_head(
    repo: &gix::Repository,
    branch: &str,
) -> Result<Option<CommitInfo>, ReadError> {
    commit_at_ref(repo, &format!("refs/heads/{branch}"))?
        .map(|sha| commit_info(repo, &sha))
        .transpose()
}

/// The commit the reference `name` (a full name) leads to, or `None` when there is no such
/// reference.
pub(crate) fn commit_at_ref(
    repo: &gix::Repository,
    name: &str,
) -> Result<Option<CommitSha>, ReadError> {
    let Some(mut reference) = repo
        .try_find_reference(name)
        .map_err(ReadError::gix("read a reference"))?
    else {
        return Ok(None);
    };
    let commit = reference
        .peel_to_commit()
        .map_err(ReadError::gix("read the commit of a reference"))?;
    Ok(Some(commit_sha(commit.id)))
}

/// `git merge-base --is-ancestor commit head`: whether `commit` is `head` or one of its
/// ancestors.
pub(crate) fn is_ancestor(
    repo: &gix::Repository,
    commit: &CommitSha,
    head: &CommitSha,
) -> Result<bool, ReadError> {
    require(repo, &[commit.clone(), head.clone()])?;
    if commit == head {
        return Ok(true);
    }
    // The best merge base of an ancestor and its descendant is the ancestor itself.
    Ok(merge_base(repo, commit, head)?.as_ref() == Some(commit))
}

/// `git merge-base one two`: the best common ancestor (the first, as git's, when a criss-cross
/// history has several), or `None` when the histories share no commit.
pub(crate) fn merge_base(
    repo: &gix::Repository,
    one: &CommitSha,
    two: &CommitSha,
) -> Result<Option<CommitSha>, ReadError> {
    require(repo, &[one.clone(), two.clone()])?;
    let base = repo
        .merge_base(object_id(one), object_id(two))
        .map_err(ReadError::gix("find the merge base"))?;
    Ok(base.map(|id| commit_sha(id.detach())))
}

/// `git rev-list --count base..head`: the commits `head` reaches that `base` does not.
pub(crate) fn commits_ahead(
    repo: &gix::Repository,
    base: &CommitSha,
    head: &CommitSha,
) -> Result<u64, ReadError> {
    require(repo, &[base.clone(), head.clone()])?;
    let walk = repo
        .rev_walk([object_id(head)])
        .with_hidden([object_id(base)])
        .all()
        .map_err(ReadError::gix("walk the history"))?;
    let mut count = 0;
    for info in walk {
        info.map_err(ReadError::gix("walk the history"))?;
        count += 1;
    }
    Ok(count)
}

/// One entry of a tree, owned so that its tree's buffer can be let go.
struct Entry {
    name: Vec<u8>,
    kind: EntryKind,
    id: ObjectId,
}

impl Entry {
    fn is_tree(&self) -> bool {
        self.kind == EntryKind::Tree
    }

    /// A file as `ls-tree` calls it a blob: a regular or executable file, or a symbolic link
    /// (not a tree, and not a submodule's commit).
    fn is_blob(&self) -> bool {
        matches!(
            self.kind,
            EntryKind::Blob | EntryKind::BlobExecutable | EntryKind::Link
        )
    }

    /// Git's order of tree entries (`base_name_compare`): by name, a tree's name read as if it
    /// ended in `/`.
    fn tree_order(&self, other: &Self) -> Ordering {
        let end = |e: &Self| if e.is_tree() { Some(b'/') } else { None };
        let ours = self.name.iter().copied().chain(end(self));
        let theirs = other.name.iter().copied().chain(end(other));
        ours.cmp(theirs)
    }
}

/// The entries of tree `id`, in the order they are stored (git's).
fn entries(repo: &gix::Repository, id: ObjectId) -> Result<Vec<Entry>, ReadError> {
    let tree = repo.find_tree(id).map_err(ReadError::gix("read a tree"))?;
    let decoded = tree.decode().map_err(ReadError::gix("decode a tree"))?;
    Ok(decoded
        .entries
        .iter()
        .map(|e| Entry {
            name: e.filename.to_vec(),
            kind: e.mode.kind(),
            id: e.oid.to_owned(),
        })
        .collect())
}

fn tree_of(repo: &gix::Repository, sha: &CommitSha) -> Result<ObjectId, ReadError> {
    commit(repo, sha)?
        .tree_id()
        .map(gix::Id::detach)
        .map_err(|e| ReadError::Malformed {
            commit: sha.clone(),
            detail: format!("its tree: {e}"),
        })
}

fn path_of(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = prefix.to_vec();
    if !path.is_empty() {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

fn lossy(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// `git ls-tree -r --full-tree <commit>`'s blobs: every file and symbolic link, in git's order.
pub(crate) fn list_files(
    repo: &gix::Repository,
    sha: &CommitSha,
) -> Result<Vec<String>, ReadError> {
    let tree = tree_of(repo, sha)?;
    let mut files = Vec::new();
    walk(repo, tree, &[], &mut |path, entry| {
        if entry.is_blob() {
            files.push(lossy(path));
        }
    })?;
    Ok(files)
}

/// Calls `visit` with every entry under tree `id` that is not a tree, depth first in git's
/// order, with its path below `prefix`.
fn walk(
    repo: &gix::Repository,
    id: ObjectId,
    prefix: &[u8],
    visit: &mut dyn FnMut(&[u8], &Entry),
) -> Result<(), ReadError> {
    for entry in entries(repo, id)? {
        let path = path_of(prefix, &entry.name);
        if entry.is_tree() {
            walk(repo, entry.id, &path, visit)?;
        } else {
            visit(&path, &entry);
        }
    }
    Ok(())
}

/// `git diff-tree -r --no-renames --name-only from to`: every path whose entry differs (added,
/// removed, or another object or file mode), a rename as its old and its new path, in git's
/// order.
pub(crate) fn changed_files(
    repo: &gix::Repository,
    from: &CommitSha,
    to: &CommitSha,
) -> Result<Vec<String>, ReadError> {
    let (old, new) = (tree_of(repo, from)?, tree_of(repo, to)?);
    let mut paths = Vec::new();
    diff(repo, old, new, &[], &mut paths)?;
    Ok(paths)
}

fn diff(
    repo: &gix::Repository,
    old: ObjectId,
    new: ObjectId,
    prefix: &[u8],
    out: &mut Vec<String>,
) -> Result<(), ReadError> {
    if old == new {
        return Ok(());
    }
    let (old, new) = (entries(repo, old)?, entries(repo, new)?);
    let (mut a, mut b) = (old.iter().peekable(), new.iter().peekable());
    let every = |entry: &Entry, out: &mut Vec<String>| {
        let path = path_of(prefix, &entry.name);
        if entry.is_tree() {
            walk(repo, entry.id, &path, &mut |p, _| out.push(lossy(p)))
        } else {
            out.push(lossy(&path));
            Ok(())
        }
    };
    loop {
        let order = match (a.peek(), b.peek()) {
            (None, None) => return Ok(()),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(x), Some(y)) => x.tree_order(y),
        };
        match order {
            Ordering::Less => every(a.next().expect("peeked"), out)?,
            Ordering::Greater => every(b.next().expect("peeked"), out)?,
            Ordering::Equal => {
                let (x, y) = (a.next().expect("peeked"), b.next().expect("peeked"));
                if x.is_tree() {
                    diff(repo, x.id, y.id, &path_of(prefix, &x.name), out)?;
                } else if x.id != y.id || x.kind != y.kind {
                    out.push(lossy(&path_of(prefix, &x.name)));
                }
            }
        }
    }
}

/// The content of the file at `path` (a checked tree path) in `sha`, as `git cat-file blob
/// <sha>:<path>` prints it (a symbolic link's target); `None` when there is no such entry or it
/// is a directory or a submodule.
pub(crate) fn read_file(
    repo: &gix::Repository,
    sha: &CommitSha,
    path: &str,
) -> Result<Option<Vec<u8>>, ReadError> {
    let mut tree = tree_of(repo, sha)?;
    let mut parts = path.split('/').peekable();
    while let Some(part) = parts.next() {
        let entries = entries(repo, tree)?;
        let Some(entry) = entries.into_iter().find(|e| e.name == part.as_bytes()) else {
            return Ok(None);
        };
        match (parts.peek(), entry.is_tree()) {
            (Some(_), true) => tree = entry.id,
            (None, false) if entry.is_blob() => {
                let blob = repo
                    .find_object(entry.id)
                    .map_err(ReadError::gix("read a file"))?;
                return Ok(Some(blob.detach().data));
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// What [`crate::local::checkout`] writes: each entry of a commit's tree.
pub(crate) struct TreeFile {
    /// Relative, `/`-separated, its parts checked (see [`is_safe_name`]).
    pub(crate) path: Vec<u8>,
    pub(crate) kind: EntryKind,
    /// Empty for a directory or a submodule.
    pub(crate) content: Vec<u8>,
}

/// Every entry of the tree of `sha`, parents before children, each file with its content;
/// fails when an entry's name could leave the directory it is written into (`..`, `.git`, a
/// `/`), as `git read-tree` refuses such a tree.
pub(crate) fn tree_files(
    repo: &gix::Repository,
    sha: &CommitSha,
    visit: &mut dyn FnMut(TreeFile) -> std::io::Result<()>,
) -> Result<(), TreeFilesError> {
    let tree = tree_of(repo, sha)?;
    tree_files_under(repo, tree, &[], visit)
}

/// Why a tree could not be written out.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TreeFilesError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("the tree has an entry named {0:?}, which no checkout may write")]
    UnsafeName(String),
    #[error("could not write {path}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn tree_files_under(
    repo: &gix::Repository,
    tree: ObjectId,
    prefix: &[u8],
    visit: &mut dyn FnMut(TreeFile) -> std::io::Result<()>,
) -> Result<(), TreeFilesError> {
    for entry in entries(repo, tree)? {
        if !is_safe_name(&entry.name) {
            return Err(TreeFilesError::UnsafeName(lossy(&entry.name)));
        }
        let path = path_of(prefix, &entry.name);
        let content = if entry.is_blob() {
            repo.find_object(entry.id)
                .map_err(ReadError::gix("read a file"))?
                .detach()
                .data
        } else {
            Vec::new()
        };
        let file = TreeFile {
            path: path.clone(),
            kind: entry.kind,
            content,
        };
        visit(file).map_err(|source| TreeFilesError::Write {
            path: lossy(&path),
            source,
        })?;
        if entry.is_tree() {
            tree_files_under(repo, entry.id, &path, visit)?;
        }
    }
    Ok(())
}

/// Whether a tree entry's name can be written inside its directory and nowhere else: not
/// empty, `.` or `..`, no `/` or NUL, and not `.git` in any case (git's `verify_path`).
fn is_safe_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name != b"."
        && name != b".."
        && !name.contains(&b'/')
        && !name.contains(&0)
        && !name.eq_ignore_ascii_case(b".git")
}
