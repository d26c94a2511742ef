//! The options of `sbatch`, `srun` and `salloc`, and what cosched does with each: the one
//! table both the command line and `#SBATCH` directives are parsed with.
//!
//! Each option is [`Support::Same`] (done as Slurm does), [`Support::Own`] (cosched's, not
//! Slurm's: `--class`, `--monitor`, `--strict`), [`Support::Different`] (done, in
//! a way the text says), [`Support::NotYet`] (parsed and mapped, but the part of cosched it
//! needs — job steps, the administrator's limits, node-level placement — is not built: one
//! warning line says so), [`Support::Ignored`] (no meaning here: accepted with one warning
//! line, as a site's Slurm ignores the option of a plugin it does not run) or
//! [`Support::Refused`] (an error saying why). In strict mode (`--strict`, or
//! `COSCHED_SLURM_STRICT=1`) ignored and not-yet options are refused too.
//!
//! Parsing follows getopt_long as Slurm's commands use it: `-n4`, `-n 4`, `--ntasks=4`,
//! `--ntasks 4`, clustered flags (`-vQ`), a long option abbreviated to a unique prefix, an
//! optional argument only after `=`, options ending at `--` or at the first word that is not
//! one (the script and its arguments).

mod directives;
mod parse;
mod table;
#[cfg(test)]
mod tests;

pub use directives::{directive_bodies, directive_lines, directives, split_words, strict_from_env};
pub use parse::{Given, OptError, Parsed, parse};
pub use table::TABLE;

/// Which command an option belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmd {
    Sbatch,
    Srun,
    Salloc,
}

impl Cmd {
    pub fn name(self) -> &'static str {
        match self {
            Cmd::Sbatch => "sbatch",
            Cmd::Srun => "srun",
            Cmd::Salloc => "salloc",
        }
    }
    fn bit(self) -> u8 {
        match self {
            Cmd::Sbatch => SB,
            Cmd::Srun => SR,
            Cmd::Salloc => SA,
        }
    }
}

const SB: u8 = 1;
const SR: u8 = 2;
const SA: u8 = 4;
const ALL: u8 = SB | SR | SA;

/// Whether an option takes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    No,
    Required,
    /// Only as `--opt=value` (or `-oVALUE` for a short option).
    Optional,
}

/// What cosched does with an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    Same,
    /// Not Slurm's: one of cosched's own, what it does.
    Own(&'static str),
    Different(&'static str),
    NotYet(&'static str),
    Ignored(&'static str),
    Refused(&'static str),
}

/// One option of the table.
#[derive(Clone, Copy, Debug)]
pub struct Opt {
    pub long: &'static str,
    pub short: Option<char>,
    pub arg: Arg,
    cmds: u8,
    pub support: Support,
}

impl Opt {
    pub fn of(&self, cmd: Cmd) -> bool {
        self.cmds & cmd.bit() != 0
    }
}

const fn o(long: &'static str, short: Option<char>, arg: Arg, cmds: u8, support: Support) -> Opt {
    Opt {
        long,
        short,
        arg,
        cmds,
        support,
    }
}

impl Support {
    /// The word docs/slurm.md uses for it.
    pub fn word(self) -> &'static str {
        match self {
            Support::Same => "same",
            Support::Own(_) => "cosched's own",
            Support::Different(_) => "different",
            Support::NotYet(_) => "not yet",
            Support::Ignored(_) => "ignored (warning)",
            Support::Refused(_) => "not supported",
        }
    }

    /// What cosched does, when it is not simply what Slurm does.
    pub fn note(self) -> &'static str {
        match self {
            Support::Same => "",
            Support::Own(s)
            | Support::Different(s)
            | Support::NotYet(s)
            | Support::Ignored(s)
            | Support::Refused(s) => s,
        }
    }
}

/// The table as Markdown, one row per option and command set: what docs/slurm.md shows and
/// `cosched slurm options` prints.
pub fn markdown() -> String {
    let mut out = String::from(
        "| option | short | sbatch | srun | salloc | cosched | how, or why not |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for o in TABLE {
        let mark = |c: Cmd| if o.of(c) { "✓" } else { "" };
        let arg = match o.arg {
            Arg::No => "",
            Arg::Required => "=…",
            Arg::Optional => "[=…]",
        };
        out += &format!(
            "| `--{}{arg}` | {} | {} | {} | {} | {} | {} |\n",
            o.long,
            o.short.map_or_else(String::new, |c| format!("`-{c}`")),
            mark(Cmd::Sbatch),
            mark(Cmd::Srun),
            mark(Cmd::Salloc),
            o.support.word(),
            o.support.note().replace('|', "\\|"),
        );
    }
    out
}
