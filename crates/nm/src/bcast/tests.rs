use super::copies::{hand_over, open_copy, recycle};
use super::reaper::Reaper;
use super::stager::JobCopy;
use super::*;

/// A test's own directory, removed when the test ends (also when it fails).
fn scratch(what: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("cosched-{what}-"))
        .tempdir()
        .unwrap()
}

/// A replaced copy leaves its name at once and is gone soon after (the reaper runs in the
/// idle class, and this test leaves the CPU idle enough for it).
#[test]
fn a_replaced_copy_frees_its_name_at_once_and_is_removed() {
    let tmp = scratch("reaper");
    let dir = tmp.path();
    let place = Place {
        dir: Arc::new(Dir::open(dir).unwrap()),
        name: "prog".into(),
    };
    let path = place.path();
    std::fs::write(&path, b"old").unwrap();
    let reaper = Reaper::start("t");
    let aside = reaper.set_aside(&place, 7).expect("there was a copy");
    assert!(!path.exists(), "the name is free for the new copy");
    reaper.remove(place.dir.clone(), aside);
    let t0 = Instant::now();
    while std::fs::read_dir(dir).unwrap().count() > 0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "the old copy stays");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Nothing there: nothing to do, and no error.
    assert_eq!(reaper.set_aside(&place, 8), None);
}

/// The copy a transfer replaces is written over only when nothing else holds it: not
/// while it is open elsewhere, mapped, or has a second name; then a new file takes its
/// place and it is left as it was.
#[test]
fn a_replaced_copy_is_reused_only_when_nobody_else_holds_it() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let tmp = scratch("recycle");
    let dir = tmp.path();
    let place = Place {
        dir: Arc::new(Dir::open(dir).unwrap()),
        name: "prog".into(),
    };
    let path = place.path();
    let reaper = Reaper::start("t");
    let stage = |len: usize, id: u32| {
        std::fs::write(&path, vec![b'o'; len]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        let ino = std::fs::metadata(&path).unwrap().ino();
        (reaper.set_aside(&place, id).unwrap(), ino)
    };
    let me = Space::User(cosched_proto::util::euid());
    // Free: taken over, at its new size either way, closed to others while written.
    for (old, new) in [(3 * 4096, 5 * 4096 + 7), (5 * 4096, 4096)] {
        let (aside, ino) = stage(old, 1);
        let f = open_copy(&place, new, Some(aside.clone()), &reaper).unwrap();
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!((m.ino(), m.len()), (ino, new), "reused at the new size");
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        assert!(!dir.join(&aside).exists());
        hand_over(&f, me).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o700
        );
        drop(f);
        std::fs::remove_file(&path).unwrap();
    }
    // Held: open for reading, mapped (its descriptor closed), linked elsewhere.
    let (aside_name, ino) = stage(4096, 2);
    let aside = dir.join(&aside_name);
    let again = || recycle(&place.dir, &aside_name, "prog", 4096);
    let reader = std::fs::File::open(&aside).unwrap();
    assert!(again().is_err(), "open elsewhere");
    assert_eq!(
        std::fs::metadata(&aside).unwrap().permissions().mode() & 0o777,
        0o700
    );
    // SAFETY: a shared read-only mapping of an open file, unmapped below.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            reader.as_raw_fd(),
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED);
    drop(reader);
    assert!(again().is_err(), "mapped");
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(map, 4096) };
    let link = dir.join("link");
    std::fs::hard_link(&aside, &link).unwrap();
    assert!(again().is_err(), "linked");
    std::fs::remove_file(&link).unwrap();
    // Refused: a new file instead, the old one left to the reaper.
    let reader = std::fs::File::open(&aside).unwrap();
    let f = open_copy(&place, 4096, Some(aside_name.clone()), &reaper).unwrap();
    assert_ne!(std::fs::metadata(&path).unwrap().ino(), ino, "a new file");
    drop((f, reader));
    let t0 = Instant::now();
    while aside.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the old copy stays");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn staged_names_stay_in_the_scratch_directory() {
    for ok in ["a.out", "d/a", "x@y"] {
        for scope in [Scope::User, Scope::Job, Scope::Public] {
            assert_eq!(check_dest(ok, scope), Ok(()), "{ok} {scope:?}");
        }
    }
    for bad in ["../x", "", "./x", "d/../x", "@5/a", "@x"] {
        assert!(check_dest(bad, Scope::User).is_err(), "{bad}");
    }
    assert_eq!(check_dest("/abs/x", Scope::User), Ok(()));
    assert!(check_dest("/abs/x", Scope::Job).is_err());
    assert!(check_dest("/abs/x", Scope::Public).is_err());
    assert_eq!(held(3, 5), (3 << 32) | 5);
    assert!(held(3, 5) >= held(3, 4) && held(4, 0) > held(3, 99));
}

/// a scratch directory someone else made where the node manager's
/// goes (a user squatting `/dev/shm/cosched-0`, here under `COSCHED_SCRATCH`-like paths
/// of a sticky shared directory) is refused, naming it; the node manager's own is used.
#[test]
fn a_scratch_directory_made_by_someone_else_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = scratch("squat");
    let shared = tmp.path().join("shm");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mine = Dir::private(&shared.join("cosched-me"), 0o711).unwrap();
    mine.private_child("n0-1234", 0o711).unwrap();
    let squatted = shared.join("cosched-them");
    std::fs::create_dir(&squatted).unwrap();
    std::fs::set_permissions(&squatted, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::symlink("/", squatted.join("n0-1234")).unwrap();
    let e = Dir::private(&squatted, 0o711).unwrap_err().to_string();
    assert!(e.contains(&squatted.display().to_string()), "{e}");
    std::fs::set_permissions(&squatted, std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = Dir::private(&squatted, 0o711).unwrap();
    let e = d.private_child("n0-1234", 0o711).unwrap_err().to_string();
    assert!(e.contains("symbolic link"), "{e}");
}

/// Copies of a job's transfer, a user's names and published ones are told apart by the
/// reference a job's argv[0] makes.
#[test]
fn a_staged_reference_names_one_space() {
    let scratch = scratch("spaces");
    let vars = cosched_storm::Vars::default();
    vars.set(VAR_BCAST_READY, 100);
    let mut st = Stager {
        name: "t".into(),
        scratch: Ok(Dir::open(scratch.path()).unwrap()),
        vars,
        delay: Duration::ZERO,
        current: None,
        verified: Arc::default(),
        job_copies: HashMap::new(),
        reaper: Reaper::start("t"),
    };
    let put = |st: &Stager, space, name: &str, path: &str| {
        st.verified
            .lock()
            .unwrap()
            .insert((space, name.into()), (PathBuf::from(path), 1));
    };
    put(&st, Space::User(7), "app", "/u7/app");
    put(&st, Space::Public, "app", "/pub/app");
    put(&st, Space::Public, "tool", "/pub/tool");
    put(
        &st,
        Space::Job {
            uid: 7,
            transfer: 9,
        },
        "app",
        "/u7/@9/app",
    );
    let r = |st: &mut Stager, cmd: &str, uid| st.resolve(cmd, JobId(1), uid);
    assert_eq!(r(&mut st, "/bin/true", 7), Ok(None));
    assert_eq!(
        r(&mut st, "cosched-staged:app", 7),
        Ok(Some("/u7/app".into()))
    );
    assert_eq!(
        r(&mut st, "cosched-staged:app", 8),
        Ok(Some("/pub/app".into()))
    );
    assert_eq!(
        r(&mut st, "cosched-staged:tool", 7),
        Ok(Some("/pub/tool".into()))
    );
    assert_eq!(
        r(&mut st, "cosched-staged:@9/app", 7),
        Ok(Some("/u7/@9/app".into()))
    );
    assert!(
        r(&mut st, "cosched-staged:@9/app", 8).is_err(),
        "another user's job copy"
    );
    st.job_copies.insert(
        (7, 9),
        JobCopy {
            jobs: BTreeSet::new(),
            idle_since: Instant::now(),
        },
    );
    r(&mut st, "cosched-staged:@9/app", 7).unwrap();
    st.sweep(Duration::ZERO);
    assert!(st.job_copies.contains_key(&(7, 9)), "in use by job 1");
    st.forget(JobId(1));
    st.sweep(Duration::ZERO);
    assert!(!st.job_copies.contains_key(&(7, 9)));
    assert!(r(&mut st, "cosched-staged:@9/app", 7).is_err(), "swept");
}
