//! README.md shows `examples/quickstart.rs` verbatim (so that a newcomer can copy it), and the
//! example runs.

mod quickstart {
    include!("../examples/quickstart.rs");

    /// The example's `main`, callable from the tests.
    pub fn run() -> Result<(), PoolError> {
        main()
    }
}

/// The fenced block that follows the `<!-- quickstart -->` marker in README.md.
fn readme_block(readme: &str) -> Option<String> {
    let after = &readme[readme.find("<!-- quickstart: examples/quickstart.rs -->")?..];
    let start = after.find("```rust\n")? + "```rust\n".len();
    let len = after[start..].find("\n```")?;
    Some(after[start..start + len + 1].to_string())
}

#[test]
fn readme_shows_the_quickstart_example_verbatim() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let example = std::fs::read_to_string(format!("{root}/examples/quickstart.rs")).unwrap();
    let block = readme_block(&readme).expect("README.md has the quickstart block");
    assert_eq!(
        block, example,
        "README.md's quickstart block and examples/quickstart.rs differ: copy the file into the block"
    );
}

#[test]
fn marker_parsing_finds_only_the_marked_block() {
    let text = "```rust\nother\n```\n<!-- quickstart: examples/quickstart.rs -->\n```rust\nfn main() {}\n```\n";
    assert_eq!(readme_block(text).as_deref(), Some("fn main() {}\n"));
    assert_eq!(readme_block("```rust\nx\n```\n"), None);
}

#[test]
fn quickstart_runs() {
    quickstart::run().unwrap();
}

#[test]
fn the_first_screen_holds_the_what_the_install_line_the_example_and_the_two_commands() {
    // The example itself compiles and runs as a doctest (lib.rs includes README.md under
    // cfg(doctest)).
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let first: Vec<&str> = readme.lines().take(40).collect();
    let has = |s: &str| first.iter().any(|l| l.contains(s));
    assert!(has("rte_mempool"), "what it is");
    assert!(has("idxpool = \""), "the install line");
    assert!(
        has("```rust") && has("PoolBuilder::packet_bufs"),
        "the example"
    );
    assert!(
        first.contains(&"cargo run --release -p idxpool-bench --example mempool_perf")
            && first.contains(&"cargo test"),
        "the two commands"
    );
}
