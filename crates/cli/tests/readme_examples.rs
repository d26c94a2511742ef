//! The README's examples stay true: the `--matrix-out` example, taken from
//! the README's text and run as written, draws jobs; every repository file an example names
//! (`docs/t3d.toml`, `scenarios/*.toml`, …) is shipped; every file an example writes is named
//! under `target/`, so running them leaves nothing in the repository.

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
    // The README's examples run at the root of a built repository, which has `target/`.
    std::fs::create_dir_all(dir.join("target")).unwrap();
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

/// Flags whose value is a file or directory a command writes.
fn writes(flag: &str) -> bool {
    matches!(
        flag,
        "-o" | "--out" | "--output" | "--error" | "--plot" | "--forecast-log" | "--class-history"
    ) || (flag.starts_with("--") && (flag.ends_with("-out") || flag.contains("-out-")))
}

/// Every file an example writes (an output flag's value, a `>` redirection, an `#SBATCH
/// --output` directive, a compiler's `-o`) is under `target/`: run from the repository's
/// root, the README's examples leave nothing in the repository.
#[test]
fn the_readme_examples_write_their_files_under_target() {
    let mut outputs = Vec::new();
    for cmd in commands(&readme()) {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        for w in words.windows(2) {
            let value = w[1].trim_matches(|c| c == '\'' || c == '"');
            // `replay --state` is a file (`acct --state` a list of job states).
            let state_file = w[0] == "--state" && cmd.starts_with("cosched replay");
            if writes(w[0]) || w[0] == ">" || state_file {
                outputs.push((cmd.clone(), value.to_string()));
            }
        }
        if let Some(v) = cmd.strip_prefix("#SBATCH --output=") {
            outputs.push((cmd.clone(), v.to_string()));
        }
    }
    // Flags of other programs that take no file (squeue's -o is a format).
    outputs.retain(|(cmd, _)| !cmd.starts_with("squeue"));
    assert!(outputs.len() >= 20, "the README's outputs: {outputs:?}");
    for (cmd, file) in &outputs {
        assert!(
            file.starts_with("target/"),
            "`{cmd}` writes {file} in the repository: name it under target/"
        );
    }
}
