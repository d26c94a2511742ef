//! The README's examples stay true: the `--matrix-out` example, taken from
//! the README's text and run as written, draws jobs; every repository file an example names
//! (`docs/t3d.toml`, `scenarios/*.toml`, …) is shipped.

use std::path::Path;
use std::process::Command;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap()
}

/// The README's shell commands (in ```sh blocks), continuation lines joined, comments cut.
fn commands(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut cur = String::new();
    for line in text.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = line.split(" #").next().unwrap_or("").trim_end();
        if let Some(head) = code.strip_suffix('\\') {
            cur.push_str(head);
            continue;
        }
        cur.push_str(code);
        if !cur.trim().is_empty() {
            out.push(cur.trim().to_string());
        }
        cur.clear();
    }
    out
}

#[test]
fn the_matrix_out_example_draws_jobs() {
    let cmds = commands(&readme());
    let cmd = cmds
        .iter()
        .find(|c| c.contains("--matrix-out"))
        .expect("the README has a --matrix-out example");
    let args: Vec<&str> = cmd.split_whitespace().collect();
    assert_eq!(args[0], "cosched", "{cmd}");
    let dir = std::env::temp_dir().join(format!("cosched-readme-matrix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cosched"))
        .args(&args[1..])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = args[args.iter().position(|a| *a == "--matrix-out").unwrap() + 1];
    let svg = std::fs::read_to_string(dir.join(file)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    // Each job drawn in the matrix carries its id in white on its colour.
    let jobs = svg.matches("fill=\"white\">").count();
    assert!(
        jobs >= 3 && !svg.contains("no event"),
        "{cmd} drew {jobs} jobs:\n{svg}"
    );
}

#[test]
fn every_file_an_example_names_is_shipped() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut named = 0;
    for cmd in commands(&readme()) {
        for word in cmd.split_whitespace() {
            let word = word.trim_matches(|c| c == '\'' || c == '"');
            if (word.starts_with("docs/") || word.starts_with("scenarios/"))
                && word.ends_with(".toml")
            {
                named += 1;
                assert!(
                    root.join(word).is_file(),
                    "`{cmd}` names {word}, which is not shipped"
                );
            }
        }
    }
    assert!(
        named >= 3,
        "the README's examples name docs/t3d.toml and scenarios"
    );
}
