//! Whose files the store uses, and how open the files it makes are: the
//! rules for sharing a directory with other users (world-writable or sticky
//! directories on shared machines and clusters).
//!
//! - A symlink anywhere on the cache path (a directory as well as the file)
//!   is followed only where the kernel's `protected_symlinks` would follow
//!   it: outside a sticky world-writable directory, or when the link is
//!   owned by the caller or by the directory's owner ([`resolve`]), whatever
//!   the sysctl says. Links are resolved one hop at a time, each judged in
//!   the real directory that holds it, never with `canonicalize`.
//! - Every file and directory made next to a cache (spool directory, spool
//!   files, lock file, a rewritten cache) is no more open than the cache;
//!   for a new cache, the umask decides ([`SideModes`]).
//! - An existing spool directory or lock file is used only if it is not a
//!   symlink, is owned by the caller or by the owner of the cache's
//!   directory, and nobody else can write it ([`check_side`]); a load,
//!   which changes nothing, reads a spool directory the cache file's owner
//!   owns too, never narrowing its mode ([`check_spool_to_read`]).
//! - Where `flock` may be node-local (NFS, Lustre, GPFS, CIFS, …), the
//!   store says so once per process ([`warn_if_node_local_locks`]).
//!
//! This module decides; it must never create, move or remove anything
//! (apart from narrowing the mode of a side file the caller owns).

use super::sys::{self, FsKind};
use crate::CacheError;
use ranktune_core::atomic_file;
use std::fs::Metadata;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How many symlinks a cache path may go through (the kernel's limit).
const MAX_HOPS: usize = 40;

/// Where the cache at `path` really is: every symlink on the path — in any
/// component, not only the last — resolved one hop at a time, each allowed
/// only where the kernel's `protected_symlinks` would follow it, judged in
/// the real directory that holds it (whatever the sysctl says: a machine
/// may have it off). Returns the path (unchanged when no link was followed)
/// and whether a link was followed.
///
/// A directory link matters as much as a file link: in a sticky shared
/// directory, `shared/proj -> shared/evil` (a world-writable directory of
/// another user) whose `c.json` links into the caller's private home would
/// otherwise make a save create files there under a name someone else
/// chose, and make the side files' owner check trust that user.
pub(crate) fn resolve(path: &Path) -> Result<(PathBuf, bool), CacheError> {
    use std::collections::VecDeque;
    use std::path::Component;
    // `pending`: the components still to walk (a link's target puts its
    // own in front); `done`: the real path so far, with no link in it.
    let mut pending: VecDeque<PathBuf> = path.components().map(|c| c.as_os_str().into()).collect();
    let mut done = PathBuf::new();
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        match part.components().next() {
            Some(Component::RootDir) | Some(Component::Prefix(_)) => {
                done = part;
                continue;
            }
            Some(Component::CurDir) | None => continue,
            Some(Component::ParentDir) => {
                // `done` holds no links, so its parent is the real one.
                match done.components().next_back() {
                    Some(Component::Normal(_)) => {
                        done.pop();
                    }
                    Some(Component::RootDir) => {}
                    _ => done.push(".."),
                }
                continue;
            }
            Some(Component::Normal(_)) => {}
        }
        let candidate = done.join(&part);
        let meta = match std::fs::symlink_metadata(&candidate) {
            Ok(m) if m.file_type().is_symlink() => m,
            _ => {
                done = candidate;
                continue;
            }
        };
        hops += 1;
        if hops > MAX_HOPS {
            return Err(CacheError::Invalid(format!(
                "{} goes through more than {MAX_HOPS} symbolic links; point it at the cache file",
                path.display()
            )));
        }
        let dir = if done.as_os_str().is_empty() { PathBuf::from(".") } else { done.clone() };
        check_follow(&candidate, &meta, &dir)?;
        let target =
            std::fs::read_link(&candidate).map_err(crate::error::io("reading link", &candidate))?;
        for c in target.components().rev() {
            pending.push_front(c.as_os_str().into());
        }
    }
    if hops == 0 {
        return Ok((path.to_path_buf(), false));
    }
    Ok((done, true))
}

/// The kernel's `protected_symlinks` rule for the link `link` (metadata
/// `meta`) in `dir`.
fn check_follow(link: &Path, meta: &Metadata, dir: &Path) -> Result<(), CacheError> {
    let Ok(d) = std::fs::metadata(dir) else { return Ok(()) };
    let sticky_world_writable = d.mode() & 0o1002 == 0o1002;
    let me = sys::euid();
    if !sticky_world_writable || meta.uid() == me || meta.uid() == d.uid() {
        return Ok(());
    }
    Err(CacheError::Invalid(format!(
        "refusing to follow the symbolic link {} : it is owned by {} in {}, a sticky \
         world-writable directory owned by {}, where the kernel follows only links of the caller \
         ({}) or of the directory's owner (protected_symlinks); someone else may have planted it. \
         Give the real cache path, or use a directory only you can write",
        link.display(),
        sys::user_label(meta.uid()),
        dir.display(),
        sys::user_label(d.uid()),
        sys::user_label(me),
    )))
}

/// The modes for files and directories made next to a cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SideModes {
    /// The cache's permission bits; `None` when there is no cache yet (the
    /// umask decides).
    pub cache: Option<u32>,
}

impl SideModes {
    /// The modes for the cache at `path` as it is now.
    /// When the cache is missing (e.g. set aside as corrupt), its lock file
    /// (made no more open than the cache, never removed) stands for it, so
    /// the rewritten cache keeps the mode the old one had.
    pub(crate) fn of(path: &Path) -> SideModes {
        let lock = super::lock::lock_path(path);
        let cache = std::fs::metadata(path)
            .ok()
            .or_else(|| std::fs::symlink_metadata(lock).ok().filter(|m| m.is_file()))
            .map(|m| m.mode() & 0o666);
        SideModes { cache }
    }

    /// The mode to create a side file with (the umask applies on top).
    pub(crate) fn file(self) -> u32 {
        self.cache.unwrap_or(0o666)
    }

    /// The mode to create a side directory with: the cache's bits, plus
    /// search (x) wherever read is allowed (the umask applies on top).
    pub(crate) fn dir(self) -> u32 {
        match self.cache {
            Some(m) => m | ((m & 0o444) >> 2),
            None => 0o777,
        }
    }

    /// Whether `mode` lets anyone the cache's mode does not let write.
    fn too_writable(self, mode: u32) -> bool {
        if mode & 0o002 != 0 {
            return true;
        }
        let cache_group_writable = self.cache.is_some_and(|m| m & 0o020 != 0);
        mode & 0o020 != 0 && !cache_group_writable
    }
}

/// Checks an existing side file or directory `path` (a spool directory, a
/// lock file) before it is used: not a symlink, owned by the caller or the
/// owner of the cache's directory, writable by nobody the cache's mode
/// does not allow. `meta` is its metadata (not following a link); `what`
/// names it in the error. A side file the caller owns that is more open
/// than the cache is narrowed to the cache's bits.
pub(crate) fn check_side(
    path: &Path,
    meta: &Metadata,
    what: &str,
    cache: &Path,
    modes: SideModes,
) -> Result<(), CacheError> {
    let fix = if meta.is_dir() { "rm -r" } else { "rm" };
    if meta.file_type().is_symlink() {
        return Err(CacheError::Invalid(format!(
            "{what} {} is a symbolic link (owned by {}); ranktune makes it itself and never \
             follows a link there: remove the link ({fix} {}) and save again",
            path.display(),
            sys::user_label(meta.uid()),
            path.display()
        )));
    }
    let me = sys::euid();
    let dir = atomic_file::parent_dir(cache);
    let dir_owner = std::fs::metadata(&dir).map(|m| m.uid()).ok();
    let owner = meta.uid();
    if owner != me && Some(owner) != dir_owner {
        return Err(CacheError::Invalid(format!(
            "{what} {} is owned by {}, not by you ({}) nor by the owner of {}; ranktune will not \
             use a {what} another user controls. If no save of theirs is running, remove it \
             ({fix} {}) or ask its owner to; to share a cache between users, use a redis:// \
             cache",
            path.display(),
            sys::user_label(owner),
            sys::user_label(me),
            dir.display(),
            path.display()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if modes.too_writable(mode) {
        if owner == me {
            let narrowed = mode & !0o022 & (modes.dir() | 0o7000);
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(narrowed))
                .map_err(crate::error::io("narrowing permissions of", path))?;
            return Ok(());
        }
        return Err(CacheError::Invalid(format!(
            "{what} {} (owned by {}) is writable by other users (mode {mode:o}); ranktune will \
             not use it: remove it ({fix} {}) or ask its owner to (chmod go-w)",
            path.display(),
            sys::user_label(owner),
            path.display()
        )));
    }
    if owner == me {
        let allowed = if meta.is_dir() { modes.dir() } else { modes.file() };
        if modes.cache.is_some() && mode & 0o777 & !allowed != 0 {
            let narrowed = mode & (allowed | 0o7000);
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(narrowed))
                .map_err(crate::error::io("narrowing permissions of", path))?;
        }
    }
    Ok(())
}

/// Checks an existing spool directory before a load reads it, changing
/// nothing (a load, `cache show` among them, writes nothing): not a
/// symlink, owned by the caller, the owner of the cache's directory or the
/// owner of the cache file itself (its saves are as trustworthy as its
/// cache, for a reader who is someone else), and writable by nobody the
/// cache's mode does not allow. `Err` says why it is not read.
pub(crate) fn check_spool_to_read(
    path: &Path,
    meta: &Metadata,
    cache: &Path,
    modes: SideModes,
) -> Result<(), CacheError> {
    let owner = meta.uid();
    let cache_owner = std::fs::metadata(cache).map(|m| m.uid()).ok();
    let dir_owner = std::fs::metadata(atomic_file::parent_dir(cache)).map(|m| m.uid()).ok();
    let trusted = owner == sys::euid() || Some(owner) == dir_owner || Some(owner) == cache_owner;
    let why = if meta.file_type().is_symlink() {
        "it is a symbolic link".to_string()
    } else if !trusted {
        format!(
            "it is owned by {}, who owns neither the cache nor its directory",
            sys::user_label(owner)
        )
    } else if modes.too_writable(meta.mode() & 0o7777) {
        format!("other users can write it (mode {:o})", meta.mode() & 0o7777)
    } else {
        return Ok(());
    };
    Err(CacheError::Invalid(format!(
        "spool directory {} is not read: {why}; ranktune did not make it so. Remove it (rm -r {}) \
         if no save is running",
        path.display(),
        path.display()
    )))
}

/// Says once per process, when the cache's directory is on a filesystem
/// whose locks may be granted per node, that ranks on several nodes can
/// lose each other's saves there and that `redis://` is the way out.
/// Returns the warning the first time (the caller logs it).
pub(crate) fn warn_if_node_local_locks(cache: &Path) -> Option<String> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let kind: FsKind = sys::fs_kind(&atomic_file::parent_dir(cache)).ok()?;
    if !kind.node_local_locks {
        return None;
    }
    let mut msg = None;
    WARNED.call_once(|| msg = Some(node_local_locks_warning(cache, kind)));
    msg
}

/// The text of [`warn_if_node_local_locks`]'s warning.
pub(crate) fn node_local_locks_warning(cache: &Path, kind: FsKind) -> String {
    format!(
        "{} is on {kind}, where file locks may not span nodes: ranks on several nodes saving \
         into it at once can lose each other's saves. On one node this is safe; across nodes \
         use a redis:// cache (--cache redis://HOST:PORT/0?prefix=NAME) or a local file per node",
        cache.display()
    )
}

/// The filesystem holding the cache at `cache`, in words, for messages.
pub(crate) fn fs_name(cache: &Path) -> String {
    match sys::fs_kind(&atomic_file::parent_dir(cache)) {
        Ok(k) => k.to_string(),
        Err(_) => "an unknown filesystem".to_string(),
    }
}
