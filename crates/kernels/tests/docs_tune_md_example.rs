//! docs/tune.md's library example compiles and runs as written: the page
//! shows `docs/tune_md_example.rs` verbatim, and this test runs it.

#[allow(dead_code)]
mod example {
    include!("docs/tune_md_example.rs");

    #[test]
    fn the_example_runs() {
        let dir = tempfile::tempdir().unwrap();
        let back = std::env::current_dir().unwrap();
        std::env::set_current_dir(dir.path()).unwrap();
        let r = main();
        std::env::set_current_dir(back).unwrap();
        r.unwrap();
        assert!(dir.path().join("ranktune-cache.json").exists());
    }
}

#[test]
fn the_page_shows_this_example() {
    let page = include_str!("../../../docs/tune.md");
    let code = include_str!("docs/tune_md_example.rs");
    let body: String = code.lines().filter(|l| !l.starts_with("//")).collect::<Vec<_>>().join("\n");
    assert!(
        page.contains(&format!("```rust\n{}\n```", body.trim())),
        "docs/tune.md's example differs from tests/docs/tune_md_example.rs"
    );
}
