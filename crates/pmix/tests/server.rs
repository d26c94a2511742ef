//! The server's contract without an MPI program: one server per process, registration
//! errors that name what is wrong, and the environment a rank gets. One test, since OpenPMIx
//! allows one server per process (each test file is a process of its own).

use cosched_pmix::{Error, JobLayout, JobNode, Server};

#[test]
fn one_server_per_process_and_what_a_rank_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let started = Server::start(dir.path(), "n0", |_| {});
    if !cosched_pmix::AVAILABLE {
        // The stand-in: a clear refusal that says how to get the real server.
        let e = started.unwrap_err();
        assert!(matches!(e, Error::NotBuilt));
        assert!(e.to_string().contains("install libpmix-dev"), "{e}");
        return;
    }
    let server = started.expect("the first server starts");
    let second = Server::start(dir.path(), "n0", |_| {}).unwrap_err();
    assert!(matches!(second, Error::AlreadyStarted), "{second}");

    let job = JobLayout::new(
        "cosched.1",
        vec![
            JobNode {
                host: "n0".into(),
                ranks: vec![0, 1],
            },
            JobNode {
                host: "n1".into(),
                ranks: vec![2],
            },
        ],
    )
    .unwrap();
    let outside = server.register_job(&job, "n7", None).unwrap_err();
    assert!(matches!(outside, Error::NotANode { .. }), "{outside}");
    server.register_job(&job, "n0", Some(dir.path())).unwrap();
    server.register_client("cosched.1", 1, 0, 0).unwrap();
    let env = server.client_env("cosched.1", 1).unwrap();
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("PMIX_NAMESPACE"), Some("cosched.1"), "{env:?}");
    assert_eq!(get("PMIX_RANK"), Some("1"), "{env:?}");
    assert!(get("PMIX_SERVER_URI41").is_some(), "{env:?}");
    // Without it, Open MPI 4 takes each rank for a singleton.
    assert_eq!(get("OMPI_MCA_schizo"), Some("^orte,slurm"), "{env:?}");
    server.deregister_client("cosched.1", 1).unwrap();
    server.deregister_job("cosched.1").unwrap();

    server.shutdown().unwrap();
    let after = Server::start(dir.path(), "n0", |_| {}).unwrap_err();
    assert!(matches!(after, Error::AlreadyStarted), "{after}");
}
