//! Publishing a file atomically: a reader of the target sees the old file or
//! the whole new one, never a part, and a failed write leaves the target as
//! it was and nothing behind.
//!
//! Every writer of a file that others read while it is replaced goes through
//! [`Publish`]: the cache store (its main file and its spool files), the trace
//! export, the trace merge and the collective's message files. The steps:
//!
//! 1. create a temp file **exclusively** in the target's directory
//!    (`O_CREAT|O_EXCL|O_NOFOLLOW`), named `.<target>.tmp-<pid>-<thread>-<n>`:
//!    unique per process, thread and call, so concurrent publishers never
//!    share one; anything already at that name (a symlink planted there, a
//!    file of another host with the same pid on a shared filesystem) is never
//!    opened, another name is tried;
//! 2. let the caller write it (bytes, or a writer callback);
//! 3. with [`Publish::durable`], fsync the file;
//! 4. rename it over the target (atomic within one filesystem);
//! 5. with [`Publish::durable`], fsync the directory, so the rename survives
//!    a power cut.
//!
//! On any error before the rename, and on a panic in the writer callback,
//! the temp file is removed and the target is untouched.
//!
//! This module owns the temp naming rule, so it alone says what is a temp
//! file ([`is_temp_name`], [`is_temp_of`]); callers decide when one is stale
//! (they know who may be writing). It must never write the target in place,
//! never follow a symlink at a temp path, never remove anything but its own
//! temp file, and never turn an error into a message: it returns the step and
//! the path, and each caller converts that into its own error type. Platform
//! calls live in its `sys` part.
//!
//! ```
//! use ranktune_core::atomic_file::Publish;
//! use std::io::Write;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("out.json");
//! Publish::new(&path).durable().bytes(b"{}\n").unwrap();
//! let n = Publish::new(&path)
//!     .write_with(|f| f.write_all(b"[1, 2]\n").map(|()| 2))
//!     .unwrap();
//! assert_eq!((n, std::fs::read(&path).unwrap()), (2, b"[1, 2]\n".to_vec()));
//! ```

mod sys;

use std::cell::Cell;
use std::convert::Infallible;
use std::ffi::{OsStr, OsString};
use std::fs::{File, FileType};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How many temp names a publish tries when each is already taken before
/// giving up.
const NAME_TRIES: u32 = 16;

/// A step of publishing, to say in an error what failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Creating the temp file (the error's path is the temp file).
    CreateTemp,
    /// Giving the temp file the target's permissions (path: the temp file).
    SetPermissions,
    /// Writing the bytes of [`Publish::bytes`] (path: the temp file).
    Write,
    /// fsyncing the temp file (path: the temp file).
    Sync,
    /// Renaming the temp file over the target (path: the target).
    Rename,
    /// fsyncing the directory after the rename (path: the directory). The
    /// target has been replaced; only its durability is in doubt.
    SyncDir,
}

impl Step {
    /// The step as the start of a message, followed by the error's path:
    /// "creating temp file", "setting permissions of", "writing",
    /// "fsyncing", "renaming temp file over", "fsyncing directory".
    pub fn action(self) -> &'static str {
        match self {
            Step::CreateTemp => "creating temp file",
            Step::SetPermissions => "setting permissions of",
            Step::Write => "writing",
            Step::Sync => "fsyncing",
            Step::Rename => "renaming temp file over",
            Step::SyncDir => "fsyncing directory",
        }
    }
}

/// Why a publish failed. `E` is the writer callback's error type
/// ([`Infallible`] for [`Publish::bytes`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError<E = Infallible> {
    /// An OS call failed; the OS error is the source.
    #[error("{} {path}", .step.action())]
    Io {
        /// What was being done.
        step: Step,
        /// The file or directory involved (see [`Step`] for which).
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The target path has no file name (`/`, `..`, an empty path).
    #[error("{path} does not name a file")]
    NoFileName {
        /// The target.
        path: PathBuf,
    },
    /// With [`Publish::regular_target_only`]: the target is neither a
    /// regular file nor a symlink, and was left alone.
    #[error("{path} is not a regular file, so it was not replaced")]
    NotReplaceable {
        /// The target.
        path: PathBuf,
        /// What is there (not following a symlink).
        file_type: FileType,
    },
    /// The writer callback failed.
    #[error(transparent)]
    Writer(E),
}

impl<E> PublishError<E> {
    /// True when the target was replaced and only the directory fsync that
    /// makes the rename durable failed: readers see the new file.
    pub fn published(&self) -> bool {
        matches!(self, PublishError::Io { step: Step::SyncDir, .. })
    }
}

impl PublishError<Infallible> {
    /// This error with the writer error type `E` (for callers of
    /// [`Publish::bytes`] that share a conversion with
    /// [`Publish::write_with`]).
    pub fn widen<E>(self) -> PublishError<E> {
        match self {
            PublishError::Io { step, path, source } => PublishError::Io { step, path, source },
            PublishError::NoFileName { path } => PublishError::NoFileName { path },
            PublishError::NotReplaceable { path, file_type } => {
                PublishError::NotReplaceable { path, file_type }
            }
            PublishError::Writer(never) => match never {},
        }
    }
}

/// The temp file a writer callback fills: a [`Write`] over the open file,
/// with its path for error messages.
#[derive(Debug)]
pub struct TempFile {
    file: File,
    path: PathBuf,
}

impl TempFile {
    /// Where the temp file is (it moves to the target after the callback).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, e.g. to wrap in a `BufWriter` or an encoder (`&mut
    /// File` is a writer).
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }
}

impl Write for TempFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.file.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// One atomic replacement of the file at a path; see the module docs.
/// Options default to: atomic but not durable, new permissions (0666 less
/// the umask), any target replaced.
#[derive(Clone, Copy, Debug)]
#[must_use = "nothing is written until .bytes() or .write_with()"]
pub struct Publish<'a> {
    target: &'a Path,
    durable: bool,
    keep_permissions: bool,
    regular_only: bool,
}

impl<'a> Publish<'a> {
    /// A publish of the file at `target` (its directory must exist).
    pub fn new(target: &'a Path) -> Publish<'a> {
        Publish { target, durable: false, keep_permissions: false, regular_only: false }
    }

    /// Also fsync the file before the rename and the directory after it, so
    /// that once the publish returns the new file survives a power cut.
    /// Without it the file is still never seen half-written by a reader,
    /// but a power cut may lose it.
    pub fn durable(mut self) -> Publish<'a> {
        self.durable = true;
        self
    }

    /// Give the new file the permission bits of the file it replaces (when
    /// there is one; a symlink's target counts).
    pub fn keep_permissions(mut self) -> Publish<'a> {
        self.keep_permissions = true;
        self
    }

    /// Refuse to replace anything but a regular file or a symlink (a rename
    /// replaces the link, never touching what it points to): never a
    /// device, a FIFO, a socket or a directory. Checked before the temp
    /// file is made and again just before the rename.
    pub fn regular_target_only(mut self) -> Publish<'a> {
        self.regular_only = true;
        self
    }

    /// Publishes `bytes` as the whole file.
    pub fn bytes(self, bytes: &[u8]) -> Result<(), PublishError> {
        self.write_with(|temp| {
            temp.write_all(bytes).map_err(|source| PublishError::Io {
                step: Step::Write,
                path: temp.path.clone(),
                source,
            })
        })
        .map_err(|e| match e {
            PublishError::Writer(inner) => inner,
            PublishError::Io { step, path, source } => PublishError::Io { step, path, source },
            PublishError::NoFileName { path } => PublishError::NoFileName { path },
            PublishError::NotReplaceable { path, file_type } => {
                PublishError::NotReplaceable { path, file_type }
            }
        })
    }

    /// Publishes what `write` writes into the temp file, and returns what
    /// it returns. `write` must have written everything (flushed any
    /// buffer of its own) when it returns `Ok`; on `Err` or a panic the
    /// temp file is removed and the target is left as it was.
    pub fn write_with<T, E>(
        self,
        write: impl FnOnce(&mut TempFile) -> Result<T, E>,
    ) -> Result<T, PublishError<E>> {
        let target = self.target;
        self.check_target()?;
        let name = target
            .file_name()
            .ok_or_else(|| PublishError::NoFileName { path: target.to_path_buf() })?;
        let dir = parent_dir(target);
        let mut temp = create_temp(&dir, name)?;
        let mut cleanup = RemoveOnDrop(Some(temp.path.clone()));
        let io_err = |step, path: &Path| {
            let path = path.to_path_buf();
            move |source| PublishError::Io { step, path, source }
        };
        if self.keep_permissions {
            if let Ok(meta) = std::fs::metadata(target) {
                let mode = meta.permissions().mode() & 0o7777;
                temp.file
                    .set_permissions(std::fs::Permissions::from_mode(mode))
                    .map_err(io_err(Step::SetPermissions, &temp.path))?;
            }
        }
        let value = write(&mut temp).map_err(PublishError::Writer)?;
        if self.durable {
            temp.file.sync_all().map_err(io_err(Step::Sync, &temp.path))?;
        }
        let TempFile { file, path: temp_path } = temp;
        drop(file);
        self.check_target()?;
        std::fs::rename(&temp_path, target).map_err(io_err(Step::Rename, target))?;
        cleanup.0 = None;
        if self.durable {
            sys::fsync_dir(&dir).map_err(io_err(Step::SyncDir, &dir))?;
        }
        Ok(value)
    }

    /// With [`Publish::regular_target_only`], an error unless the target is
    /// missing, a regular file or a symlink.
    fn check_target<E>(&self) -> Result<(), PublishError<E>> {
        if !self.regular_only {
            return Ok(());
        }
        match std::fs::symlink_metadata(self.target) {
            Ok(m) if !m.file_type().is_file() && !m.file_type().is_symlink() => {
                Err(PublishError::NotReplaceable {
                    path: self.target.to_path_buf(),
                    file_type: m.file_type(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// Removes the temp file when a publish ends before its rename, by error
/// or by a panic in the writer.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The directory that holds `path` (`.` for a bare file name): where its
/// temp files go.
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// fsyncs the directory `dir`, making renames and unlinks in it durable
/// (tolerated where the filesystem cannot fsync a directory). For callers
/// that rename or remove files themselves and need that to last.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    sys::fsync_dir(dir)
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's number in the process, and its count of temp names.
    static THREAD: (u64, Cell<u64>) = (NEXT_THREAD.fetch_add(1, Ordering::Relaxed), Cell::new(0));
}

/// The next temp file name for target file name `name` (this thread's
/// counter moves on).
fn next_temp_name(name: &OsStr) -> OsString {
    let (thread, seq) = THREAD.with(|(t, n)| {
        let seq = n.get();
        n.set(seq.wrapping_add(1));
        (*t, seq)
    });
    temp_name(name, std::process::id(), thread, seq)
}

fn temp_name(name: &OsStr, pid: u32, thread: u64, seq: u64) -> OsString {
    let mut s = OsString::with_capacity(name.len() + 32);
    s.push(".");
    s.push(name);
    s.push(format!(".tmp-{pid}-{thread}-{seq}"));
    s
}

/// Creates the temp file in `dir`, trying another name when one is taken.
fn create_temp<E>(dir: &Path, name: &OsStr) -> Result<TempFile, PublishError<E>> {
    let mut path = dir.join(next_temp_name(name));
    for _ in 1..NAME_TRIES {
        match sys::create_exclusive(&path) {
            Ok(file) => return Ok(TempFile { file, path }),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                path = dir.join(next_temp_name(name));
            }
            Err(source) => return Err(PublishError::Io { step: Step::CreateTemp, path, source }),
        }
    }
    match sys::create_exclusive(&path) {
        Ok(file) => Ok(TempFile { file, path }),
        Err(source) => Err(PublishError::Io { step: Step::CreateTemp, path, source }),
    }
}

/// The target file name a temp file name belongs to, if `name` is one
/// (`.<target>.tmp-<pid>-<thread>-<n>`).
fn temp_target(name: &OsStr) -> Option<&OsStr> {
    let rest = name.as_bytes().strip_prefix(b".")?;
    let mut end = rest.len();
    for _ in 0..3 {
        let dash = rest[..end].iter().rposition(|&c| c == b'-')?;
        let digits = &rest[dash + 1..end];
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        end = dash;
    }
    let target = rest[..end].strip_suffix(b".tmp")?;
    (!target.is_empty()).then(|| OsStr::from_bytes(target))
}

/// Whether `name` (a file name, not a path) is a temp file name of a
/// publish, for any target: such a file is a publish in progress or left
/// by a killed process, never a finished file.
///
/// ```
/// use ranktune_core::atomic_file::is_temp_name;
/// assert!(is_temp_name(".tune.json.tmp-4242-0-7".as_ref()));
/// assert!(!is_temp_name("tune.json".as_ref()));
/// ```
pub fn is_temp_name(name: &OsStr) -> bool {
    temp_target(name).is_some()
}

/// Whether `name` is the name of a temp file of a publish to `target` (in
/// `target`'s directory).
///
/// ```
/// use ranktune_core::atomic_file::is_temp_of;
/// use std::path::Path;
/// assert!(is_temp_of(Path::new("out/tune.json"), ".tune.json.tmp-4242-0-7".as_ref()));
/// assert!(!is_temp_of(Path::new("out/tune.json"), ".other.json.tmp-4242-0-7".as_ref()));
/// ```
pub fn is_temp_of(target: &Path, name: &OsStr) -> bool {
    target.file_name().is_some_and(|t| temp_target(name) == Some(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    /// The next `n` temp names this thread will try for `name`.
    fn upcoming(name: &str, n: u64) -> Vec<OsString> {
        let (thread, seq) = THREAD.with(|(t, s)| (*t, s.get()));
        (seq..seq + n).map(|s| temp_name(name.as_ref(), std::process::id(), thread, s)).collect()
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn publishes_bytes_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        Publish::new(&path).bytes(b"one").unwrap();
        Publish::new(&path).durable().bytes(b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(names(dir.path()), ["a.json"]);
    }

    #[test]
    fn a_writer_error_removes_the_temp_and_leaves_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, b"old").unwrap();
        for durable in [false, true] {
            let mut p = Publish::new(&path).keep_permissions().regular_target_only();
            if durable {
                p = p.durable();
            }
            let mut seen = None;
            let err = p
                .write_with(|t| {
                    t.write_all(b"half")?;
                    seen = Some(t.path().to_path_buf());
                    Err::<(), _>(io::Error::other("disk on fire"))
                })
                .unwrap_err();
            assert!(matches!(&err, PublishError::Writer(e) if e.to_string() == "disk on fire"));
            assert!(!err.published());
            let temp = seen.unwrap();
            assert!(is_temp_of(&path, temp.file_name().unwrap()), "{}", temp.display());
            assert!(!temp.exists());
            assert_eq!(std::fs::read(&path).unwrap(), b"old");
            assert_eq!(names(dir.path()), ["a.json"]);
        }
    }

    #[test]
    fn a_panicking_writer_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        let r = std::panic::catch_unwind(|| {
            Publish::new(&path).write_with(|t| -> io::Result<()> {
                t.write_all(b"half").unwrap();
                panic!("writer bug")
            })
        });
        assert!(r.is_err());
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn a_symlink_at_the_temp_path_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        // Links at the next names this thread will try, one dangling.
        let planted = upcoming("a.json", 3);
        for (i, n) in planted.iter().enumerate() {
            let to = if i == 1 { dir.path().join("nowhere") } else { victim.clone() };
            std::os::unix::fs::symlink(to, dir.path().join(n)).unwrap();
        }
        Publish::new(&path).bytes(b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!dir.path().join("nowhere").exists());
        for n in &planted {
            let m = std::fs::symlink_metadata(dir.path().join(n)).unwrap();
            assert!(m.file_type().is_symlink(), "not ours to remove");
        }
        // With every name it would try taken, it gives up with an error.
        let blocked = upcoming("a.json", u64::from(NAME_TRIES));
        for n in &blocked {
            std::os::unix::fs::symlink(&victim, dir.path().join(n)).unwrap();
        }
        let err = Publish::new(&path).bytes(b"newer").unwrap_err();
        assert!(
            matches!(&err, PublishError::Io { step: Step::CreateTemp, source, .. }
                if source.kind() == io::ErrorKind::AlreadyExists),
            "{err:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    }

    #[test]
    fn concurrent_publishers_leave_a_complete_file() {
        const THREADS: usize = 6;
        const ROUNDS: usize = 40;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shared.bin");
        // Each content is 64 KiB of one byte value, told apart by writer.
        let content = |t: usize, r: usize| vec![(t * ROUNDS + r) as u8 % 251; 64 << 10];
        let complete =
            |bytes: &[u8]| bytes.len() == 64 << 10 && bytes.iter().all(|b| *b == bytes[0]);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) {
                    if let Ok(bytes) = std::fs::read(&path) {
                        assert!(complete(&bytes), "a reader saw a partial file");
                        reads += 1;
                    }
                }
                reads
            });
            let writers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (path, content) = (&path, &content);
                    s.spawn(move || {
                        for r in 0..ROUNDS {
                            let bytes = content(t, r);
                            let p = Publish::new(path);
                            // A few durable ones: fsync is slow on disks.
                            let p = if r % 10 == 0 { p.durable() } else { p };
                            if r % 2 == 0 {
                                p.bytes(&bytes).unwrap();
                            } else {
                                p.write_with(|f| {
                                    let (a, b) = bytes.split_at(1000);
                                    f.write_all(a)?;
                                    f.write_all(b)
                                })
                                .unwrap();
                            }
                        }
                    })
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
            reader.join().unwrap();
        });
        assert!(complete(&std::fs::read(&path).unwrap()));
        assert_eq!(names(dir.path()), ["shared.bin"], "no temp file left");
    }

    #[test]
    fn permissions_are_kept_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, b"old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        Publish::new(&path).keep_permissions().bytes(b"new").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // SAFETY: umask takes no pointers, cannot fail and touches no Rust
        // memory: it only swaps the process-wide file-mode mask, and the
        // second call puts the old mask back at once (a file another test
        // thread creates in between gets 0o022, a usual default).
        let mask = unsafe {
            let m = libc::umask(0o022);
            libc::umask(m);
            m
        };
        Publish::new(&path).bytes(b"newer").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !(mask as u32));
    }

    #[test]
    fn a_special_target_is_refused_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo.json");
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated string (CString) that outlives the
        // call; mkfifo only reads it.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = Publish::new(&path).regular_target_only().bytes(b"x").unwrap_err();
        assert!(matches!(&err, PublishError::NotReplaceable { file_type, .. }
            if file_type.is_fifo()));
        assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_fifo());
        assert_eq!(names(dir.path()), ["fifo.json"]);
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let err = Publish::new(&sub).regular_target_only().bytes(b"x").unwrap_err();
        assert!(matches!(err, PublishError::NotReplaceable { .. }));
        // A symlink is replaced by the rename, its target untouched.
        let link = dir.path().join("link.json");
        std::fs::write(dir.path().join("real"), b"real").unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), &link).unwrap();
        Publish::new(&link).regular_target_only().bytes(b"x").unwrap();
        assert_eq!(std::fs::read(dir.path().join("real")).unwrap(), b"real");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
    }

    #[test]
    fn a_missing_directory_is_a_not_found_error_at_create() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone/a.json");
        let err = Publish::new(&path).bytes(b"x").unwrap_err();
        assert!(matches!(&err, PublishError::Io { step: Step::CreateTemp, source, .. }
            if source.kind() == io::ErrorKind::NotFound));
        assert!(err.to_string().starts_with("creating temp file "), "{err}");
        let err = Publish::new(Path::new("")).bytes(b"x").unwrap_err();
        assert!(matches!(err, PublishError::NoFileName { .. }), "{err:?}");
    }

    #[test]
    fn temp_names_are_recognised_exactly() {
        let t = next_temp_name("tune.json".as_ref());
        assert!(is_temp_name(&t) && is_temp_of(Path::new("x/tune.json"), &t), "{t:?}");
        assert!(!is_temp_of(Path::new("tune.json.bak"), &t));
        for not in [
            "tune.json",
            ".tune.json",
            ".tune.json.tmp-1-2",
            ".tune.json.tmp-1-2-x",
            ".tune.json.tmp--1-2",
            "tune.json.tmp-1-2-3",
            ".tmp-1-2-3",
            ".tmp-abc-1",
            ".123-4-5.tmp",
        ] {
            assert!(!is_temp_name(not.as_ref()), "{not}");
        }
        // A target whose own name looks like a temp name still matches
        // only its own temps.
        let odd = next_temp_name(".a.tmp-1-2-3".as_ref());
        assert!(is_temp_of(Path::new(".a.tmp-1-2-3"), &odd));
        assert!(!is_temp_of(Path::new("a"), &odd));
    }
}
