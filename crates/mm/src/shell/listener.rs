//! The listening side: the TCP and Unix sockets bound and served, each connection admitted
//! under its peer, its hello read and opened, and its one answer relayed back.

use super::*;

/// Binds the listening socket. With a port of 0 (any port, as `cluster up` asks) on a state
/// directory whose `mm.addr` still names a port on the same address, that port is taken
/// again if it is free: the machine manager is being restarted after a crash, and its node
/// managers keep registering at the address they were given. A fresh
/// `cluster up` removes `mm.addr` first, and a clean `cluster down` removes it too, so only a
/// restart reuses a port; if the port is taken meanwhile, any port is used, as asked, and the
/// log says that the node managers must be restarted with the new address.
pub(super) async fn listen(
    wanted: &str,
    state: &cosched_proto::StateDir,
) -> Result<TcpListener, DaemonError> {
    let bind_err = |addr: &str, e| DaemonError::Bind {
        addr: addr.to_string(),
        cause: e,
    };
    let previous = wanted
        .parse::<std::net::SocketAddr>()
        .ok()
        .filter(|w| w.port() == 0)
        .and_then(|w| {
            let old = state.addr().ok()?.parse::<std::net::SocketAddr>().ok()?;
            (old.ip() == w.ip() && old.port() != 0).then_some(old)
        });
    if let Some(old) = previous {
        match TcpListener::bind(old).await {
            Ok(l) => {
                tracing::info!(
                    "mm: listening again on {old}, the address recorded in {} (a restart)",
                    state.addr_file().display()
                );
                return Ok(l);
            }
            Err(e) => tracing::warn!(
                "mm: cannot listen again on {old} ({e}); taking another port: node managers started with {old} must be restarted with the new address"
            ),
        }
    }
    TcpListener::bind(wanted)
        .await
        .map_err(|e| bind_err(wanted, e))
}

/// Serves connections: each sends one [`Hello`] (a registration or a client request) and
/// gets one answer. Every connection is accepted at once and admitted under its peer's
/// address ([`Admission`]): until its hello is read it holds at most [`MAX_HELLO`] bytes for
/// at most the first-frame time, and a peer's idle connections displace only its own, so
/// neither idle clients nor a flood keeps a node manager from registering.
pub(super) async fn accept_loop(listener: TcpListener, l: Listening<std::net::IpAddr>) {
    loop {
        let (stream, peer) = accept(&listener, "mm").await;
        let ticket = l.admission.admit(peer.ip());
        let _ = stream.set_nodelay(true);
        let Listening {
            key,
            creds,
            tx,
            replays,
            admission,
            drops,
        } = l.clone();
        tokio::spawn(async move {
            let (mut rd, mut wr) = stream.into_split();
            let body = match admission.first_frame(&mut rd, ticket, MAX_HELLO).await {
                Ok(b) => b,
                // A connection closed before saying anything is a probe, not an attack.
                Err(FirstFrameError::Frame(cosched_storm::FrameError::Closed)) => return,
                Err(e) => {
                    if matches!(e, FirstFrameError::Displaced(_)) {
                        // Its request was not read: the peer may send it again.
                        cosched_storm::frame::write_busy(&mut wr).await;
                    }
                    drops.dropped(format_args!("mm: dropping peer {peer}: {e}"));
                    return;
                }
            };
            // `key` becomes the key this connection is answered with: the user's for a user.
            let held = creds.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let keys = key.keys();
            let (hello, key, grace) =
                match open_hello(&keys, cosched_proto::util::now().as_micros(), &held, &body) {
                    Ok(h) => h,
                    Err(e @ cosched_storm::FrameError::Decode(_)) => {
                        // A node manager of another version: told why, with both versions.
                        if let Some((why, key)) = other_version(&keys, &body) {
                            let reply = RegisterReply::Rejected(why.clone());
                            let _ = cosched_storm::frame::write_frame(&mut wr, &key, &reply).await;
                            drops.dropped(format_args!("mm: refusing peer {peer}: {why}"));
                        } else {
                            drops.dropped(format_args!("mm: dropping peer {peer}: {e}"));
                        }
                        return;
                    }
                    Err(e) => {
                        if matches!(e, cosched_storm::FrameError::BadTag) {
                            // Told, so a user with the wrong key hears why (not "closed").
                            cosched_storm::frame::write_refusal(&mut wr).await;
                        }
                        drops.dropped(format_args!("mm: dropping peer {peer}: {e}"));
                        return;
                    }
                };
            if let Hello::User(uid, ..) = &hello
                && let Some(why) = held
                    .get(uid)
                    .and_then(|c| c.expired(cosched_proto::util::now().as_micros()))
            {
                drops.dropped(format_args!("mm: dropping peer {peer}: uid {uid}: {why}"));
                let _ =
                    cosched_storm::frame::write_frame(&mut wr, &key, &Response::Error(why)).await;
                return;
            }
            let stamp = match &hello {
                Hello::Register(s, _) | Hello::Client(s, _) | Hello::User(_, s, _) => *s,
            };
            // The lock is released before any await.
            let checked = replays
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .check(stamp);
            if let Err(why) = checked {
                drops.dropped(format_args!("mm: dropping peer {peer}: {why}"));
                // The sender learns why: a node manager whose clock is off stops with the
                // reason instead of retrying in silence; a replayer learns nothing new.
                let _ = match hello {
                    Hello::Client(..) | Hello::User(..) => {
                        cosched_storm::frame::write_frame(&mut wr, &key, &Response::Error(why))
                            .await
                    }
                    Hello::Register(..) => {
                        let reply = RegisterReply::Rejected(why);
                        cosched_storm::frame::write_frame(&mut wr, &key, &reply).await
                    }
                };
                return;
            }
            match hello {
                // Sealed with the key of a rotation's grace period: the node missed the
                // rotation. It gets the new key, and registers again with it.
                Hello::Register(..) if grace.is_some() => {
                    let until_us = grace.unwrap_or_default();
                    let Ok(wrapped) = key.wrap(&keys.seal) else {
                        return;
                    };
                    let reply = RegisterReply::NewKey {
                        key: wrapped,
                        until_us,
                    };
                    let _ = cosched_storm::frame::write_frame(&mut wr, &key, &reply).await;
                    tracing::info!(
                        "mm: peer {peer} registered with the previous cluster key: given the new one"
                    );
                }
                Hello::Register(stamp, reg) => {
                    relay(&tx, &mut wr, &key, |otx| {
                        Incoming::Register(reg, stamp, otx)
                    })
                    .await
                }
                // The cluster key is the administrator's: its holder acts as this daemon's
                // user and may name the user a job runs as (see docs/daemons.md, "Trust").
                Hello::Client(stamp, req) => {
                    let caller = Caller {
                        uid: cosched_proto::util::euid(),
                        gid: cosched_proto::util::egid(),
                        admin: true,
                    };
                    relay(&tx, &mut wr, &key, |otx| {
                        Incoming::Client(req, caller, stamp, otx)
                    })
                    .await
                }
                // The tag proved the user credential of `uid`: that user, with a user's rights.
                Hello::User(uid, stamp, req) => {
                    let caller = Caller {
                        uid,
                        gid: cosched_proto::util::account(uid).map_or(uid, |a| a.gid),
                        admin: false,
                    };
                    relay(&tx, &mut wr, &key, |otx| {
                        Incoming::Client(req, caller, stamp, otx)
                    })
                    .await
                }
            }
        });
        // The reader runs before the next accept: a hello that has arrived is read before a
        // newer connection of the same peer could displace it.
        tokio::task::yield_now().await;
    }
}

/// Authenticates the first frame of a TCP connection (its body: tag and payload) and returns
/// it with the key its answer is sealed with. A [`Hello::User`] names its uid in the payload,
/// which is decoded before the tag is checked only to learn that uid: nothing in it is used
/// unless the tag checks with that user's credential, derived from the cluster key. Any other
/// hello must carry the cluster key's tag.
/// A user's credential is the one of the serial `creds` holds for them (0 if none): an
/// earlier one was revoked.
///
/// Any cluster key accepted at `now_us` will do (see [`cosched_storm::keyring`]): the third
/// value is the deadline of the one that did, if it is accepted only for a rotation's grace
/// period. A user credential counts as made from each of them in turn.
pub(super) fn open_hello(
    keys: &Keys,
    now_us: i64,
    creds: &BTreeMap<u32, Credential>,
    body: &[u8],
) -> Result<(Hello, Key, Option<i64>), cosched_storm::FrameError> {
    let claimed = body
        .get(cosched_storm::frame::TAG_LEN..)
        .and_then(|payload| postcard::from_bytes::<Hello>(payload).ok());
    let mut refused = cosched_storm::FrameError::BadTag;
    for (cluster, until) in keys.accepted_until(now_us) {
        let key = match claimed {
            Some(Hello::User(uid, ..)) => {
                cluster.user_key_serial(uid, creds.get(&uid).map_or(0, |c| c.serial))
            }
            _ => cluster.clone(),
        };
        match key.open::<Hello>(body) {
            // The claim checked is the claim used: the payload decoded again is the same bytes.
            Ok(hello) => return Ok((hello, key, until)),
            Err(e @ cosched_storm::FrameError::BadTag) => refused = e,
            Err(e) => return Err(e),
        }
    }
    Err(refused)
}

/// Why a first frame that does not decode as this version's [`Hello`] came from a node
/// manager of another version, if it did: sealed with the cluster key, beginning as every
/// version's registration does ([`RegisterHead`]), with another message version.
/// Returns the refusal with the key to seal it with.
pub(super) fn other_version(keys: &Keys, body: &[u8]) -> Option<(String, Key)> {
    let key = keys
        .accepted(cosched_proto::util::now().as_micros())
        .find(|k| k.open::<RegisterHead>(body).is_ok_and(|head| head.tag == 0))?;
    let head: RegisterHead = key.open(body).ok()?;
    Some((Version::refusal(&head.version, None)?, key.clone()))
}

/// Binds the Unix socket of local clients, `mm.sock` in the state directory, connectable by
/// every user who may enter the directory: the kernel tells who connects (`SO_PEERCRED`), so
/// a user needs no key, and gets no more than a user's rights.
pub(super) fn bind_local(
    state: &cosched_proto::StateDir,
) -> Result<tokio::net::UnixListener, DaemonError> {
    use std::os::unix::fs::PermissionsExt;
    let path = state.sock_file();
    // Only this user can write in the (checked) directory: what is there is a stale socket.
    let _ = std::fs::remove_file(&path);
    let (_dir, short) = cosched_proto::util::socket_path(&path)?;
    let l = tokio::net::UnixListener::bind(&short).map_err(|e| DaemonError::StateDir {
        dir: state.root().to_path_buf(),
        why: format!("cannot listen on {}: {e}", path.display()),
    })?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
    Ok(l)
}

/// Serves local clients on the Unix socket: as [`accept_loop`], but each request is the
/// caller's whose uid and gid the kernel gives (`SO_PEERCRED`, read before the connection is
/// admitted: a user's connections are admitted under that uid, so one user's idle
/// connections displace only that user's), never a claim in the request; node managers
/// register only over TCP, with the key.
pub(super) async fn local_accept_loop(listener: tokio::net::UnixListener, l: Listening<u32>) {
    let me = cosched_proto::util::euid();
    loop {
        let (stream, _) = accept(&listener, "mm (local)").await;
        let Ok(cred) = stream.peer_cred() else {
            continue;
        };
        let caller = Caller {
            uid: cred.uid(),
            gid: cred.gid(),
            admin: cred.uid() == 0 || cred.uid() == me,
        };
        let ticket = l.admission.admit(caller.uid);
        // The kernel vouches for a local user: no credential to check.
        let Listening {
            key,
            tx,
            replays,
            admission,
            drops,
            ..
        } = l.clone();
        let key = key.current();
        tokio::spawn(async move {
            let (mut rd, mut wr) = stream.into_split();
            let body = admission.first_frame(&mut rd, ticket, MAX_HELLO).await;
            let who = format!("local uid {}", caller.uid);
            let hello = match body {
                Ok(b) => key.open::<Hello>(&b),
                Err(FirstFrameError::Frame(e)) => Err(e),
                Err(e) => {
                    if matches!(e, FirstFrameError::Displaced(_)) {
                        cosched_storm::frame::write_busy(&mut wr).await;
                    }
                    drops.dropped(format_args!("mm: dropping {who}: {e}"));
                    return;
                }
            };
            match hello {
                Ok(Hello::Client(stamp, req)) => {
                    let checked = replays
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .check(stamp);
                    if let Err(why) = checked {
                        drops.dropped(format_args!("mm: dropping {who}: {why}"));
                        let answer = Response::Error(why);
                        let _ = cosched_storm::frame::write_frame(&mut wr, &key, &answer).await;
                        return;
                    }
                    relay(&tx, &mut wr, &key, |otx| {
                        Incoming::Client(req, caller, stamp, otx)
                    })
                    .await
                }
                Ok(Hello::Register(..)) => drops.dropped(format_args!(
                    "mm: dropping {who}: node managers register over TCP, with the key"
                )),
                // Here the kernel says who the peer is; a credential is for TCP only.
                Ok(Hello::User(..)) => drops.dropped(format_args!(
                    "mm: dropping {who}: user credentials are for TCP clients"
                )),
                Err(cosched_storm::FrameError::Closed) => {}
                Err(e) => drops.dropped(format_args!("mm: dropping {who}: {e}")),
            }
        });
        tokio::task::yield_now().await;
    }
}

/// What the connections of one listener share: the key their frames are read with (the
/// cluster's, or `mm.sock`'s public one), the way to the event loop, the replay window, their
/// admission under their peers' names and the log of those dropped.
#[derive(Clone)]
pub(super) struct Listening<P> {
    key: Keyring,
    /// Each user's credential serial and expiry (see [`crate::user_key`]).
    creds: Credentials,
    tx: mpsc::UnboundedSender<Incoming>,
    replays: Arc<Mutex<Replays>>,
    admission: Admission<P>,
    drops: DropLog,
}

impl<P: std::hash::Hash + Eq + Clone> Listening<P> {
    pub(super) fn new(
        key: Keyring,
        creds: &Credentials,
        tx: &mpsc::UnboundedSender<Incoming>,
        replays: &Arc<Mutex<Replays>>,
        limits: cosched_storm::accept::Limits,
    ) -> Listening<P> {
        Listening {
            key,
            creds: creds.clone(),
            tx: tx.clone(),
            replays: replays.clone(),
            admission: Admission::new(limits),
            drops: DropLog::default(),
        }
    }
}

/// Hands a request to the event loop and writes its answer back on the connection.
pub(super) async fn relay<T: serde::Serialize, W: tokio::io::AsyncWrite + Unpin>(
    tx: &mpsc::UnboundedSender<Incoming>,
    wr: &mut W,
    key: &Key,
    wrap: impl FnOnce(oneshot::Sender<T>) -> Incoming,
) {
    let (otx, orx) = oneshot::channel();
    if tx.send(wrap(otx)).is_err() {
        return;
    }
    if let Ok(answer) = orx.await {
        let _ = cosched_storm::frame::write_frame(wr, key, &answer).await;
    }
}

#[cfg(test)]
mod hello_tests {
    use super::*;

    fn body(frame: Vec<u8>) -> Vec<u8> {
        frame[4..].to_vec()
    }

    /// A registration of another message version does not decode as a [`Hello`]; what it
    /// begins with names its version, and the refusal names both.
    #[test]
    fn a_node_manager_of_another_version_is_refused_naming_both_versions() {
        let cluster = Key::from_bytes([5; 32]);
        #[derive(serde::Serialize)]
        struct Future {
            head: RegisterHead,
            what_it_says_next: Vec<u128>,
        }
        let future = Future {
            head: RegisterHead {
                tag: 0,
                stamp: Stamp::now(),
                version: Version {
                    release: "9.9.9".into(),
                    wire: WIRE_VERSION + 1,
                },
            },
            what_it_says_next: vec![u128::MAX; 3],
        };
        let frame = body(cluster.seal(&future));
        assert!(matches!(
            open_hello(&Keys::new(cluster.clone()), 0, &BTreeMap::new(), &frame),
            Err(cosched_storm::FrameError::Decode(_))
        ));
        let why = other_version(&Keys::new(cluster.clone()), &frame)
            .expect("refused")
            .0;
        assert_eq!(
            why,
            format!(
                "node manager is cosched 9.9.9 (messages v{}) but the machine manager is cosched {} (messages v{WIRE_VERSION}): run the same version on both (docs/deploy.md, Upgrades)",
                WIRE_VERSION + 1,
                env!("CARGO_PKG_VERSION")
            )
        );
        // Not sealed with the cluster key: nothing is said.
        let stranger = body(Key::from_bytes([6; 32]).seal(&future));
        assert_eq!(other_version(&Keys::new(cluster.clone()), &stranger), None);
        // This version's registration begins as the head says.
        let reg = Hello::Register(
            future.head.stamp,
            Register {
                version: Version::ours(),
                name: "n0".into(),
                pes: 1,
                addr: String::new(),
                jobs: Vec::new(),
                incarnation: 1,
                memory: 1,
            },
        );
        let head: RegisterHead = cluster.open(&body(cluster.seal(&reg))).unwrap();
        assert_eq!((head.tag, head.version), (0, Version::ours()));
    }

    /// A user's hello opens only with the credential of the uid it claims, and is answered
    /// with that credential; a cluster-key hello still opens with the cluster key.
    #[test]
    fn a_user_hello_opens_only_with_its_uids_credential() {
        let cluster = Key::from_bytes([5; 32]);
        let none = BTreeMap::new();
        let s = Stamp::now();
        let user = |uid| Hello::User(uid, s, Request::Status);
        let (h, k, _) = open_hello(
            &Keys::new(cluster.clone()),
            0,
            &none,
            &body(cluster.user_key(1000).seal(&user(1000))),
        )
        .unwrap();
        assert!(matches!(h, Hello::User(1000, ..)));
        assert_eq!(k, cluster.user_key(1000));
        // uid 1000's credential claiming uid 0, or sealed with the cluster key itself: refused.
        for frame in [
            cluster.user_key(1000).seal(&user(0)),
            cluster.seal(&user(0)),
        ] {
            assert!(matches!(
                open_hello(&Keys::new(cluster.clone()), 0, &none, &body(frame)),
                Err(cosched_storm::FrameError::BadTag)
            ));
        }
        let client = Hello::Client(s, Request::Status);
        let (h, k, _) = open_hello(
            &Keys::new(cluster.clone()),
            0,
            &none,
            &body(cluster.seal(&client)),
        )
        .unwrap();
        assert!(matches!(h, Hello::Client(..)));
        assert_eq!(k, cluster);
        // A user credential does not pass for the cluster key.
        assert!(
            open_hello(
                &Keys::new(cluster.clone()),
                0,
                &none,
                &body(cluster.user_key(0).seal(&client))
            )
            .is_err()
        );
    }

    /// Once uid 1000 has serial 2, its credentials of serial 0 and 1 are refused and the
    /// one of serial 2 opens; another user's serial-0 credential still opens.
    #[test]
    fn a_revoked_user_credential_is_refused_and_another_users_still_works() {
        let cluster = Key::from_bytes([5; 32]);
        let s = Stamp::now();
        let user = |uid| Hello::User(uid, s, Request::Status);
        let creds = BTreeMap::from([(
            1000,
            Credential {
                serial: 2,
                expires_us: None,
            },
        )]);
        for old in [0, 1] {
            let frame = cluster.user_key_serial(1000, old).seal(&user(1000));
            assert!(
                matches!(
                    open_hello(&Keys::new(cluster.clone()), 0, &creds, &body(frame)),
                    Err(cosched_storm::FrameError::BadTag)
                ),
                "serial {old}"
            );
        }
        let frame = cluster.user_key_serial(1000, 2).seal(&user(1000));
        let (_, k, _) = open_hello(&Keys::new(cluster.clone()), 0, &creds, &body(frame)).unwrap();
        assert_eq!(k, cluster.user_key_serial(1000, 2));
        let other = cluster.user_key(1001).seal(&user(1001));
        assert!(open_hello(&Keys::new(cluster.clone()), 0, &creds, &body(other)).is_ok());
    }

    /// During a rotation's grace period a hello sealed with the old key, or with a user
    /// credential made from it, opens and is marked with the deadline (a node manager that
    /// sealed its registration so gets the new key); after the deadline both are refused,
    /// and the new key's hellos open unmarked throughout.
    #[test]
    fn the_old_key_and_its_user_credentials_open_until_the_grace_deadline() {
        let (old, new) = (Key::from_bytes([5; 32]), Key::from_bytes([6; 32]));
        let mut keys = Keys::new(old.clone());
        keys.rotate(new.clone(), 1_000);
        let none = BTreeMap::new();
        let s = Stamp::now();
        let client = Hello::Client(s, Request::Status);
        let user = Hello::User(1000, s, Request::Status);
        let by_old = body(old.seal(&client));
        let (_, k, grace) = open_hello(&keys, 999, &none, &by_old).unwrap();
        assert_eq!((k, grace), (old.clone(), Some(1_000)));
        let (_, k, grace) = open_hello(&keys, 999, &none, &body(new.seal(&client))).unwrap();
        assert_eq!((k, grace), (new.clone(), None));
        let old_user = body(old.user_key(1000).seal(&user));
        assert!(open_hello(&keys, 999, &none, &old_user).is_ok());
        for frame in [&by_old, &old_user] {
            assert!(matches!(
                open_hello(&keys, 1_000, &none, frame),
                Err(cosched_storm::FrameError::BadTag)
            ));
        }
        assert!(open_hello(&keys, 1_000, &none, &body(new.user_key(1000).seal(&user))).is_ok());
    }
}
