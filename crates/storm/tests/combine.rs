//! COMPARE-AND-WRITE and acknowledged XFER-AND-SIGNAL on 64 node transports (the part of a
//! node manager that speaks the tree), fan-out 4: every query yields exactly one combined
//! answer at the root, at most fan-out answer frames reach it, the write half lands only when
//! the comparison held everywhere, and a silent subtree is named once the budget runs out.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cosched_core::NodeId;
use cosched_storm::{Cmp, Cond, Dest, Key, NodeHandle, Outcome, Root, RootEvent, spawn_node};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedReceiver;

const T: Duration = Duration::from_secs(10);
const N: u32 = 64;
const FANOUT: u32 = 4;

async fn outcome(up: &mut UnboundedReceiver<RootEvent>, id: u64) -> Outcome {
    loop {
        match tokio::time::timeout(T, up.recv())
            .await
            .expect("an answer within 10 s")
            .unwrap()
        {
            RootEvent::Answer(o) => {
                assert_eq!(o.id(), id, "answers come in query order here");
                return o;
            }
            RootEvent::Signal { .. } => {}
        }
    }
}

/// Waits until every handle's `var` reads `value` (TEST-EVENT, blocking form).
async fn all_reach(nodes: &[NodeHandle], var: u32, value: i64) {
    for h in nodes {
        tokio::time::timeout(T, h.vars.wait_event(var, value))
            .await
            .expect("variable set within 10 s");
    }
}

fn cond(var: u32, cmp: Cmp, value: i64) -> Cond {
    Cond { var, cmp, value }
}

#[tokio::test]
async fn one_combined_answer_per_query_on_64_nodes() {
    let key = Key::generate().unwrap();
    let mut handles = Vec::new();
    let mut members = Vec::new();
    let mut deliveries = Vec::new();
    for i in 0..N {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        members.push((NodeId(i), l.local_addr().unwrap().to_string()));
        let (h, rx) = spawn_node(l, key.clone(), NodeId(i));
        handles.push(h);
        deliveries.push(rx);
    }
    let (mut root, mut up) = Root::new(key.clone(), FANOUT);
    let stats = root.stats();
    root.set_members(1, members.clone());

    // Acknowledged XFER: the sender's completion event comes once all 64 hold the payload,
    // and each receiver's event (variable 1) is set.
    let id = root.xfer_acked(&Dest::All, Some((1, 1)), b"go".to_vec(), T);
    let o = outcome(&mut up, id).await;
    assert_eq!(o.answer.answered, N);
    assert!(o.holds_everywhere(), "{o:?}");
    for h in &handles {
        assert!(h.vars.test_event(1, 1));
    }

    // COMPARE-AND-WRITE that holds everywhere: one answer, and the write lands on all.
    let frames_before = stats.answer_frames.load(Ordering::Relaxed);
    let id = root.compare(&Dest::All, cond(1, Cmp::Eq, 1), Some((2, 42)), T);
    let o = outcome(&mut up, id).await;
    assert_eq!((o.answer.answered, o.written), (N, true), "{o:?}");
    assert_eq!(o.held().len(), N as usize);
    let frames = stats.answer_frames.load(Ordering::Relaxed) - frames_before;
    assert!(
        (1..=FANOUT as u64).contains(&frames),
        "{frames} answer frames reached the root for one query (at most its {FANOUT} children)"
    );
    all_reach(&handles, 2, 42).await;

    // One node differs: Ne, Lt and Ge fail there only, and no write happens.
    handles[17].vars.set(1, 7);
    for (c, fails) in [
        (cond(1, Cmp::Ne, 7), vec![NodeId(17)]),
        (cond(1, Cmp::Lt, 2), vec![NodeId(17)]),
        (
            cond(1, Cmp::Ge, 2),
            (0..N).filter(|&i| i != 17).map(NodeId).collect(),
        ),
    ] {
        let id = root.compare(&Dest::All, c, Some((3, 1)), T);
        let o = outcome(&mut up, id).await;
        assert_eq!(o.answer.answered, N);
        assert_eq!(o.answer.fails, fails, "{c:?}");
        assert!(!o.written);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(handles.iter().all(|h| h.vars.get(3) == 0), "no write half");

    // A subset: only the nodes asked answer.
    let some = Dest::nodes(vec![NodeId(5), NodeId(60), NodeId(33)]);
    let id = root.compare(&some, cond(2, Cmp::Eq, 42), Some((4, 9)), T);
    let o = outcome(&mut up, id).await;
    assert_eq!((o.answer.answered, o.written), (3, true));
    all_reach(&[handles[5].clone(), handles[60].clone()], 4, 9).await;
    assert_eq!(handles[6].vars.get(4), 0);

    // A waiting COMPARE: node 40 reaches the value 150 ms after the query left; the one
    // answer holds, without the root asking twice. One that never does answers "no" once its
    // wait is over.
    for (i, h) in handles.iter().enumerate() {
        if i != 40 {
            h.vars.set(6, 1);
        }
    }
    let late = handles[40].clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        late.vars.set(6, 1);
    });
    let t0 = Instant::now();
    let wait = Duration::from_secs(3);
    let id = root.compare_waiting(&Dest::All, cond(6, Cmp::Ge, 1), None, T, wait);
    let o = outcome(&mut up, id).await;
    // Node 40 held only once it was set: had its wait run out, it would be among the fails.
    assert!(o.holds_everywhere(), "{o:?}");
    assert!(
        t0.elapsed() >= Duration::from_millis(140),
        "answered before node 40 held"
    );
    let id = root.compare_waiting(
        &Dest::All,
        cond(6, Cmp::Ge, 2),
        None,
        T,
        Duration::from_millis(200),
    );
    let o = outcome(&mut up, id).await;
    assert_eq!((o.answer.answered, o.answer.fails.len()), (N, N as usize));

    assert_eq!(
        stats.outcomes.load(Ordering::Relaxed),
        8,
        "exactly one combined answer per query"
    );
}

/// A node that takes its parent's connection and never answers (a hung node manager): the
/// query ends when the budget runs out, with one answer naming the hung node and the nodes
/// below it, which the hung node cut off. (That the answer comes exactly when the budget is
/// spent is `Combiner`'s unit test, on a virtual clock; here only that it is not earlier.)
#[tokio::test]
async fn a_silent_subtree_is_named_when_the_budget_runs_out() {
    let key = Key::generate().unwrap();
    let mut members = Vec::new();
    let mut keep = Vec::new();
    for i in 0..N {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        members.push((NodeId(i), l.local_addr().unwrap().to_string()));
        if i == 1 {
            // Position 2: accepts, reads, says nothing.
            tokio::spawn(async move {
                loop {
                    let (mut s, _) = l.accept().await.unwrap();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 1 << 16];
                        while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
                    });
                }
            });
        } else {
            keep.push(spawn_node(l, key.clone(), NodeId(i)));
        }
    }
    let (mut root, mut up) = Root::new(key.clone(), FANOUT);
    root.set_members(1, members);
    let cut_off = root.topology().subtree(2);
    assert!(cut_off.len() > 1, "position 2 has a subtree");
    let budget = Duration::from_millis(600);
    let t0 = Instant::now();
    let id = root.compare(&Dest::All, cond(9, Cmp::Eq, 0), Some((9, 1)), budget);
    let o = outcome(&mut up, id).await;
    let took = t0.elapsed();
    assert_eq!(o.answer.silent, cut_off);
    assert_eq!(o.answer.answered as usize, N as usize - cut_off.len());
    assert!(o.answer.fails.is_empty() && !o.written);
    assert!(took >= budget, "answered after {took:?}, budget {budget:?}");
    assert_eq!(root.stats().outcomes.load(Ordering::Relaxed), 1);
}
