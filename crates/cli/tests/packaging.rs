//! What the Debian package ships beside the binary, generated from the clap definitions so
//! that it never disagrees with `--help`: a man page per subcommand and shell completions.
//! (.ci/run builds the package, installs it and reads `man cosched-submit`.)

mod support;

use std::process::Command;

use support::*;

fn generate(what: &str, dir: &std::path::Path) {
    let out = Command::new(bin())
        .args(["generate", what, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn man_pages_are_generated_for_every_subcommand() {
    let tmp = scratch_dir("packaging", "man");
    let dir = tmp.path().join("man");
    generate("man", &dir);
    let page = |name: &str| {
        std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    let submit = page("cosched-submit.1");
    assert!(submit.contains(".TH"), "{submit}");
    assert!(submit.contains("cosched\\-submit"), "{submit}");
    assert!(
        submit.contains("\\-\\-time"),
        "its options are there: {submit}"
    );
    for name in [
        "cosched.1",
        "cosched-mm.1",
        "cosched-nm.1",
        "cosched-node-drain.1",
        "cosched-reconfigure.1",
        "cosched-keygen.1",
    ] {
        assert!(page(name).contains(".TH"), "{name}");
    }
}

#[test]
fn shell_completions_are_generated_for_bash_zsh_and_fish() {
    let tmp = scratch_dir("packaging", "completions");
    let dir = tmp.path().join("completions");
    generate("completions", &dir);
    for name in ["cosched.bash", "_cosched", "cosched.fish"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(text.contains("reconfigure"), "{name} knows the subcommands");
    }
}
