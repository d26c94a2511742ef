//! The table's consistency, getopt_long's forms, strict mode and `#SBATCH` directives.

use super::*;

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

#[test]
fn getopt_forms_are_all_read() {
    let p = parse(
        Cmd::Sbatch,
        &args("-n4 -N 2 --ntasks-per-node=2 --time 10 -vQ --job-n=x job.sh a -n 9"),
        false,
    )
    .unwrap();
    assert_eq!(p.value("ntasks"), Some("4"));
    assert_eq!(p.value("nodes"), Some("2"));
    assert_eq!(p.value("ntasks-per-node"), Some("2"));
    assert_eq!(p.value("time"), Some("10"));
    assert_eq!(p.value("job-name"), Some("x"), "a unique prefix");
    assert!(p.has("verbose") && p.has("quiet"));
    assert_eq!(p.rest, args("job.sh a -n 9"), "options end at the script");
    let p = parse(Cmd::Sbatch, &args("--exclusive -- x"), false).unwrap();
    assert_eq!(p.value("exclusive"), None);
    assert_eq!(p.rest, args("x"));
    let p = parse(Cmd::Sbatch, &args("--exclusive=user x"), false).unwrap();
    assert_eq!(p.value("exclusive"), Some("user"));
    // cosched's own --strict is an option of every command.
    assert!(
        parse(Cmd::Sbatch, &args("--strict x"), true)
            .unwrap()
            .has("strict")
    );
}

#[test]
fn each_ignored_option_warns_once_and_strict_refuses_it() {
    let p = parse(
        Cmd::Sbatch,
        &args("--mail-type=ALL --mail-type=END -A proj --qos normal x"),
        false,
    )
    .unwrap();
    // One line per option, however often it is given.
    assert_eq!(p.warnings.len(), 3, "{:?}", p.warnings);
    assert!(p.warnings[0].starts_with("sbatch: warning: --mail-type is ignored"));
    assert!(p.warnings[1].contains("--account") && p.warnings[2].contains("--qos"));
    let e = parse(Cmd::Sbatch, &args("--mail-type=ALL x"), true).unwrap_err();
    assert!(matches!(e, OptError::Strict("mail-type", ..)), "{e}");
    let e = parse(Cmd::Sbatch, &args("--input=in.txt x"), true).unwrap_err();
    assert!(e.to_string().contains("strict mode"), "{e}");
    // Same and different options pass strict mode.
    assert!(parse(Cmd::Sbatch, &args("-n 2 -J a --mem=4G x"), true).is_ok());
}

#[test]
fn unknown_refused_and_malformed_options_are_errors() {
    let e = parse(Cmd::Sbatch, &args("--bogus x"), false).unwrap_err();
    assert_eq!(e.to_string(), "unrecognized option '--bogus'");
    let e = parse(Cmd::Sbatch, &args("--uid=5 x"), false).unwrap_err();
    assert!(matches!(e, OptError::Refused("uid", _)));
    assert!(matches!(
        parse(Cmd::Sbatch, &args("--nt=3"), false),
        Err(OptError::Ambiguous(..))
    ));
    assert!(matches!(
        parse(Cmd::Sbatch, &args("-n"), false),
        Err(OptError::Missing(_))
    ));
    assert!(matches!(
        parse(Cmd::Sbatch, &args("--parsable=1"), false),
        Err(OptError::NoValue(_))
    ));
    // srun's -W takes seconds, sbatch's is a flag: each command its own entry.
    assert_eq!(
        parse(Cmd::Srun, &args("-W 5 prog"), false)
            .unwrap()
            .value("wait"),
        Some("5")
    );
    assert_eq!(
        parse(Cmd::Sbatch, &args("-W x"), false).unwrap().rest,
        args("x")
    );
    // srun-only options are not sbatch's.
    assert!(parse(Cmd::Sbatch, &args("--pty x"), false).is_err());
}

#[test]
fn every_option_is_in_the_table_once_per_command() {
    for cmd in [Cmd::Sbatch, Cmd::Srun, Cmd::Salloc] {
        let mine: Vec<&Opt> = TABLE.iter().filter(|o| o.of(cmd)).collect();
        for o in &mine {
            assert_eq!(
                mine.iter().filter(|x| x.long == o.long).count(),
                1,
                "--{} twice for {cmd:?}",
                o.long
            );
            if let Some(c) = o.short {
                assert_eq!(
                    mine.iter().filter(|x| x.short == Some(c)).count(),
                    1,
                    "-{c} twice for {cmd:?}"
                );
            }
        }
    }
    // The options sbatch --help lists (Slurm 22.05) are all known to sbatch.
    for long in [
        "array",
        "account",
        "bb",
        "bbf",
        "begin",
        "comment",
        "cpu-freq",
        "cpus-per-task",
        "dependency",
        "deadline",
        "delay-boot",
        "chdir",
        "error",
        "export",
        "export-file",
        "get-user-env",
        "gid",
        "gres",
        "gres-flags",
        "hold",
        "ignore-pbs",
        "input",
        "job-name",
        "no-kill",
        "licenses",
        "clusters",
        "container",
        "distribution",
        "mail-type",
        "mail-user",
        "mcs-label",
        "ntasks",
        "nice",
        "no-requeue",
        "ntasks-per-node",
        "nodes",
        "output",
        "overcommit",
        "partition",
        "parsable",
        "power",
        "priority",
        "profile",
        "propagate",
        "qos",
        "quiet",
        "reboot",
        "requeue",
        "oversubscribe",
        "core-spec",
        "signal",
        "spread-job",
        "switches",
        "thread-spec",
        "time",
        "time-min",
        "uid",
        "use-min-nodes",
        "verbose",
        "wait",
        "wckey",
        "wrap",
        "cluster-constraint",
        "contiguous",
        "constraint",
        "nodefile",
        "mem",
        "mincpus",
        "reservation",
        "tmp",
        "nodelist",
        "exclude",
        "exclusive",
        "mem-per-cpu",
        "sockets-per-node",
        "cores-per-socket",
        "threads-per-core",
        "extra-node-info",
        "ntasks-per-core",
        "ntasks-per-socket",
        "cpus-per-gpu",
        "gpus",
        "gpu-bind",
        "gpu-freq",
        "gpus-per-node",
        "gpus-per-socket",
        "gpus-per-task",
        "mem-per-gpu",
        "help",
        "usage",
        "version",
        "open-mode",
    ] {
        assert!(
            TABLE.iter().any(|o| o.long == long && o.of(Cmd::Sbatch)),
            "--{long}"
        );
    }
}

#[test]
fn directives_are_read_with_the_same_table() {
    let text = "#!/bin/sh\n#SBATCH -n 2\n#SBATCH --mail-type=END # comment\n\
                #SBATCH --job-name 'a b'\n#SBATCH -n 3\n\necho\n#SBATCH --bogus\n";
    let p = directives("j.sh", text, false).unwrap();
    assert_eq!(p.value("ntasks"), Some("3"), "a later directive wins");
    assert_eq!(p.value("job-name"), Some("a b"));
    assert_eq!(p.warnings.len(), 1);
    let e = directives("j.sh", "#!/bin/sh\n#SBATCH --bogus\n", false).unwrap_err();
    assert_eq!(e, "j.sh:2: unrecognized option '--bogus'");
    let e = directives("j.sh", "#!/bin/sh\n#SBATCH -n 1 extra\n", false).unwrap_err();
    assert!(e.starts_with("j.sh:2: \"extra\" is not an option"), "{e}");
    let e = directives("j.sh", "#!/bin/sh\n#SBATCH --qos=x\n", true).unwrap_err();
    assert!(e.starts_with("j.sh:2: --qos is ignored here"), "{e}");
}

#[test]
fn strictness_from_the_environment() {
    assert!(strict_from_env(Some("1")));
    assert!(strict_from_env(Some("yes")));
    assert!(!strict_from_env(Some("0")));
    assert!(!strict_from_env(Some("")));
    assert!(!strict_from_env(None));
}
