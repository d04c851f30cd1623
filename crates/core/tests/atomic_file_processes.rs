//! `atomic_file` with real processes: several processes publishing to one
//! path while another reads it, and a writer killed with SIGKILL in the
//! middle of writing.
//!
//! Children are this test binary itself, started with `ATOMIC_FILE_CHILD`
//! set; the `child` test below is their entry point and does nothing when
//! the variable is unset.

use ranktune_core::atomic_file::{is_temp_name, is_temp_of, Publish};
use ranktune_testkit::{child_test, child_var_parsed, file_names, kill, KillOnDrop, LineReader};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "ATOMIC_FILE_CHILD";
const LEN: usize = 256 << 10;
const ROUNDS: usize = 30;
/// How long the children may take to get anywhere: only a hang reaches it.
const LIMIT: Duration = Duration::from_secs(300);

/// The content writer `id` publishes in round `round`: `LEN` bytes of one
/// value, so any mix or truncation is visible.
fn content(id: usize, round: usize) -> Vec<u8> {
    vec![((id * ROUNDS + round) % 251) as u8 + 1; LEN]
}

fn complete(bytes: &[u8]) -> bool {
    bytes.len() == LEN && bytes.iter().all(|b| *b == bytes[0])
}

fn spawn_child(mode: &str, path: &Path, id: usize) -> Child {
    child_test("child", false)
        .env(CHILD_ENV, mode)
        .env("CHILD_PATH", path)
        .env("CHILD_ID", id.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Entry point of the child processes.
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else { return };
    let path: PathBuf = child_var_parsed("CHILD_PATH");
    let id: usize = child_var_parsed("CHILD_ID");
    match mode.as_str() {
        "publish" => {
            for r in 0..ROUNDS {
                let p = Publish::new(&path);
                let p = if r % 10 == 0 { p.durable() } else { p };
                let bytes = content(id, r);
                if r % 2 == 0 {
                    p.bytes(&bytes).unwrap();
                } else {
                    p.write_with(|f| {
                        for chunk in bytes.chunks(4096) {
                            f.write_all(chunk)?;
                        }
                        Ok::<_, std::io::Error>(())
                    })
                    .unwrap();
                }
            }
        }
        "hang" => {
            let _ = Publish::new(&path).durable().write_with(|f| {
                f.write_all(&content(id, 0)[..LEN / 2])?;
                println!("TEMP {}", f.path().display());
                std::io::stdout().flush()?;
                std::thread::sleep(Duration::from_secs(600));
                Ok::<_, std::io::Error>(())
            });
        }
        other => panic!("unknown child mode {other}"),
    }
}

#[test]
fn processes_publishing_at_once_and_a_killed_writer_leave_a_complete_file() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.bin");
    Publish::new(&path).durable().bytes(&content(99, 0)).unwrap();

    // Kills the hanging writer when the test ends early, so a failure never
    // leaves it running.
    let mut hang = KillOnDrop(spawn_child("hang", &path, 98));
    let writers: Vec<Child> = (0..4).map(|id| spawn_child("publish", &path, id)).collect();

    // The killed writer: wait until it is mid-write, then SIGKILL it.
    let lines = LineReader::read(hang.0.stdout.take().unwrap());
    let temp = lines
        .wait_for(|l| l.starts_with("TEMP "), LIMIT)
        .ok()
        .and_then(|l| l.strip_prefix("TEMP ").map(PathBuf::from))
        .expect("the hanging writer names its temp file");
    assert!(temp.exists(), "{}", temp.display());
    kill(&mut hang.0).unwrap();

    // Read all along while the others publish: never a partial file.
    let start = Instant::now();
    let mut writers: Vec<Option<Child>> = writers.into_iter().map(Some).collect();
    let mut reads = 0u64;
    while writers.iter().any(Option::is_some) {
        assert!(start.elapsed() < LIMIT, "writers did not finish");
        let bytes = std::fs::read(&path).unwrap();
        assert!(complete(&bytes), "a reader saw a partial file ({} bytes)", bytes.len());
        reads += 1;
        for slot in writers.iter_mut() {
            if let Some(status) = slot.as_mut().and_then(|c| c.try_wait().unwrap()) {
                assert!(status.success(), "a writer failed: {status}");
                *slot = None;
            }
        }
    }
    assert!(reads > 0);
    assert!(complete(&std::fs::read(&path).unwrap()));

    // Only the target and the killed writer's temp file are left, and the
    // temp file is recognisable as one (so a caller can clean it up).
    let names = file_names(dir.path());
    let temp_name = temp.file_name().unwrap();
    assert_eq!(names, [temp_name.to_string_lossy().as_ref(), "shared.bin"]);
    assert!(is_temp_of(&path, temp_name) && is_temp_name(temp_name));
    assert_eq!(std::fs::metadata(&temp).unwrap().len(), (LEN / 2) as u64);
}
