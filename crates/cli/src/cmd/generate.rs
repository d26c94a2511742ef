//! `cosched generate man|completions DIR`: the man pages (one per subcommand, `cosched-submit.1`
//! and so on) and the shell completions, generated from the clap definitions so that they
//! never disagree with `--help`. The Debian package ships both (docs/deploy.md).

use std::path::PathBuf;

use anyhow::Context;
use clap_complete::Shell;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// Man pages, section 1: cosched.1 and cosched-SUBCOMMAND.1 for every subcommand
    Man {
        /// Where to write them (created if missing)
        dir: PathBuf,
    },
    /// Completions for bash (cosched.bash), zsh (_cosched) and fish (cosched.fish)
    Completions {
        /// Where to write them (created if missing)
        dir: PathBuf,
    },
}

/// Writes what `a` asks for, of the command line `cmd` (the whole `cosched`).
pub fn run(a: Args, mut cmd: clap::Command) -> anyhow::Result<i32> {
    let dir = match &a.what {
        What::Man { dir } | What::Completions { dir } => dir,
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    match a.what {
        What::Man { .. } => {
            cmd.build();
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("writing man pages to {}", dir.display()))?;
        }
        What::Completions { .. } => {
            for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
                clap_complete::generate_to(shell, &mut cmd, "cosched", dir)
                    .with_context(|| format!("writing {shell} completions to {}", dir.display()))?;
            }
        }
    }
    eprintln!("wrote to {}", dir.display());
    Ok(0)
}
