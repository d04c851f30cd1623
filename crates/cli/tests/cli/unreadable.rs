//! A cache that cannot be read: every read-only command says what to do
//! about it (not "`cache check` says more", which `check` itself repeated),
//! and a TensorRT-LLM file's advice names the real file.

use ranktune_testkit::Cli;

fn ranktune(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Cli::new(env!("CARGO_BIN_EXE_ranktune")).current_dir(dir).args(args).run();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn a_damaged_file_gets_advice_and_a_tensorrt_llm_file_its_own_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("broken.json"), b"{\"shared\": [").unwrap();
    for cmd in ["show", "check", "prune"] {
        let (code, text) = ranktune(dir.path(), &["cache", cmd, "broken.json"]);
        assert_ne!(code, Some(0), "{cmd}: {text}");
        assert!(!text.contains("says more"), "{cmd}: {text}");
        assert!(
            text.contains("what to do: the next save")
                && text.contains("broken.json.corrupt-<UTC time>")
                && text.contains("or delete it"),
            "{cmd}: {text}"
        );
    }
    // Read-only: the file is where it was.
    assert_eq!(std::fs::read(dir.path().join("broken.json")).unwrap(), b"{\"shared\": [");

    let name = "trt llm.json";
    std::fs::write(dir.path().join(name), br#"{"metadata": {"lib_version": "1.0"}, "shared": {}}"#)
        .unwrap();
    for cmd in ["show", "check"] {
        let (_, text) = ranktune(dir.path(), &["cache", cmd, name]);
        assert!(!text.contains("THIS_FILE"), "{cmd}: {text}");
        assert!(
            text.contains("ranktune cache import NEW.json 'trt llm.json' --format trtllm"),
            "{cmd}: {text}"
        );
    }
}
