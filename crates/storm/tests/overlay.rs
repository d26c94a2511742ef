//! A root and seven nodes on loopback, fan-out 2: the three mechanisms reach exactly the
//! nodes they address, reports come up, and garbage peers are dropped without harm.

use std::time::Duration;

use cosched_core::NodeId;
use cosched_storm::{Cmp, Cond, Delivery, Dest, Key, Root, RootEvent, spawn_node};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedReceiver;

const T: Duration = Duration::from_secs(10);

async fn next_xfer(rx: &mut UnboundedReceiver<Delivery>) -> Vec<u8> {
    loop {
        match tokio::time::timeout(T, rx.recv())
            .await
            .expect("delivery within 10 s")
            .unwrap()
        {
            Delivery::Xfer(p) => return p.to_vec(),
            _ => continue,
        }
    }
}

#[tokio::test]
async fn mechanisms_over_a_binary_tree() {
    let key = Key::generate().unwrap();
    let mut nodes = Vec::new();
    let mut members = Vec::new();
    for i in 0..7 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        members.push((NodeId(i), l.local_addr().unwrap().to_string()));
        nodes.push(spawn_node(l, key.clone(), NodeId(i)));
    }
    // A stranger with another key and a garbage sender hit node 0 first; it must keep serving.
    let addr0 = members[0].1.clone();
    let mut s = tokio::net::TcpStream::connect(&addr0).await.unwrap();
    s.write_all(
        b"\x00\x00\x00\x40garbage-garbage-garbage-garbage-garbage-garbage-garbage-garbage!",
    )
    .await
    .unwrap();
    let stranger = Key::generate().unwrap();
    let mut s2 = tokio::net::TcpStream::connect(&addr0).await.unwrap();
    s2.write_all(&stranger.seal(&cosched_storm::Down::Xfer {
        dest: Dest::All,
        write: None,
        payload: vec![9],
        ack: None,
    }))
    .await
    .unwrap();

    let (mut root, mut up) = Root::new(key.clone(), 2);
    root.set_members(1, members.clone());

    // XFER-AND-SIGNAL to all: every node gets the payload and its variable set.
    root.xfer(&Dest::All, Some((1, 5)), b"hello".to_vec());
    for (_, rx) in nodes.iter_mut() {
        assert_eq!(next_xfer(rx).await, b"hello");
    }
    for (h, _) in &nodes {
        assert!(h.vars.test_event(1, 5));
    }

    // Only nodes 3 and 6 (leaves under different subtrees) get this one.
    root.xfer(
        &Dest::nodes(vec![NodeId(6), NodeId(3)]),
        Some((2, 1)),
        b"some".to_vec(),
    );
    assert_eq!(next_xfer(&mut nodes[3].1).await, b"some");
    assert_eq!(next_xfer(&mut nodes[6].1).await, b"some");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let set: Vec<bool> = nodes.iter().map(|(h, _)| h.vars.test_event(2, 1)).collect();
    assert_eq!(set, vec![false, false, false, true, false, false, true]);

    // COMPARE: var 2 >= 1 holds on 3 and 6 only; one combined answer names the others.
    let id = root.compare(
        &Dest::All,
        Cond {
            var: 2,
            cmp: Cmp::Ge,
            value: 1,
        },
        Some((3, 1)),
        T,
    );
    let o = loop {
        match tokio::time::timeout(T, up.recv())
            .await
            .expect("answer within 10 s")
            .unwrap()
        {
            RootEvent::Answer(o) if o.id() == id => break o,
            _ => {}
        }
    };
    assert_eq!(o.answer.answered, 7);
    assert_eq!(o.held(), vec![NodeId(3), NodeId(6)]);
    assert_eq!(o.answer.fails, [0, 1, 2, 4, 5].map(NodeId).to_vec());
    assert!(o.answer.silent.is_empty() && !o.holds_everywhere() && !o.written);

    // A signal from a leaf two hops down reaches the root.
    nodes[5].0.signal_up(b"done".to_vec());
    loop {
        let ev = tokio::time::timeout(T, up.recv())
            .await
            .expect("signal within 10 s")
            .unwrap();
        if let RootEvent::Signal { from, payload } = ev {
            assert_eq!((from, payload), (NodeId(5), b"done".to_vec()));
            break;
        }
    }

    // Re-announcing without node 0 re-parents its subtree; everyone left still gets messages.
    root.set_members(2, members[1..].to_vec());
    root.xfer(&Dest::All, None, b"again".to_vec());
    for (_, rx) in nodes.iter_mut().skip(1) {
        assert_eq!(next_xfer(rx).await, b"again");
    }
}
