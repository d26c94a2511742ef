//! The benchmark's links between ranks: a Unix stream socket between two ranks on the same
//! node (an abstract address, so nothing is left on disk), TCP between nodes. Each rank
//! listens on both, publishes its addresses through PMI, connects to the peers of higher rank
//! and accepts those of lower rank; the first 8 bytes on a link say who connected.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// Says that a connection is a benchmark link (and not a stray connection to the port).
const HELLO_MAGIC: u32 = 0xB5B0_0001;

/// A connection to one peer.
pub enum Link {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Link {
    pub fn fd(&self) -> RawFd {
        match self {
            Link::Unix(s) => s.as_raw_fd(),
            Link::Tcp(s) => s.as_raw_fd(),
        }
    }
    pub fn kind(&self) -> &'static str {
        match self {
            Link::Unix(_) => "unix",
            Link::Tcp(_) => "tcp",
        }
    }
    pub fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Link::Unix(s) => s.write_all(buf),
            Link::Tcp(s) => s.write_all(buf),
        }
    }
    /// One read(2): what is there, at least one byte, 0 at end of stream.
    pub fn read_some(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Unix(s) => s.read(buf),
            Link::Tcp(s) => s.read(buf),
        }
    }
}

/// Where a rank can be reached: `NODE;UNIXNAME;IP,IP,...:PORT` (no spaces: a PMI value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Card {
    pub node: String,
    pub unix: String,
    pub ips: Vec<Ipv4Addr>,
    pub port: u16,
}

impl Card {
    pub fn encode(&self) -> String {
        let ips: Vec<String> = self.ips.iter().map(|i| i.to_string()).collect();
        format!(
            "{};{};{}:{}",
            self.node,
            self.unix,
            ips.join(","),
            self.port
        )
    }
    pub fn decode(s: &str) -> Option<Card> {
        let mut parts = s.splitn(3, ';');
        let node = parts.next()?.to_string();
        let unix = parts.next()?.to_string();
        let (ips, port) = parts.next()?.rsplit_once(':')?;
        Some(Card {
            node,
            unix,
            ips: ips
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().ok())
                .collect::<Option<_>>()?,
            port: port.parse().ok()?,
        })
    }
}

/// A rank's two listeners.
pub struct Listeners {
    tcp: TcpListener,
    unix: UnixListener,
    pub card: Card,
}

impl Listeners {
    /// Listens on every IPv4 address (port chosen by the system) and on an abstract Unix
    /// address named after the job, the rank and the process.
    pub fn bind(job: &str, rank: u32, node: &str) -> io::Result<Listeners> {
        let tcp = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        let port = tcp.local_addr()?.port();
        let name = format!("cosched-bsp-{job}-{rank}-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        let unix = UnixListener::bind_addr(&addr)?;
        Ok(Listeners {
            tcp,
            unix,
            card: Card {
                node: node.to_string(),
                unix: name,
                ips: local_ipv4s(),
                port,
            },
        })
    }

    /// Accepts links until one from each rank in `from` arrived (or `timeout` passed).
    pub fn accept(&self, from: &[u32], timeout: Duration) -> io::Result<BTreeMap<u32, Link>> {
        let deadline = Instant::now() + timeout;
        let mut got = BTreeMap::new();
        self.tcp.set_nonblocking(true)?;
        self.unix.set_nonblocking(true)?;
        while got.len() < from.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let missing: Vec<u32> = from
                    .iter()
                    .filter(|r| !got.contains_key(*r))
                    .copied()
                    .collect();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no connection from ranks {missing:?} within {timeout:?}"),
                ));
            }
            let mut fds = [
                libc::pollfd {
                    fd: self.tcp.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.unix.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, left.as_millis().min(1000) as i32) };
            let mut links = Vec::new();
            if let Ok((s, _)) = self.tcp.accept() {
                s.set_nonblocking(false)?;
                s.set_nodelay(true)?;
                links.push(Link::Tcp(s));
            }
            if let Ok((s, _)) = self.unix.accept() {
                s.set_nonblocking(false)?;
                links.push(Link::Unix(s));
            }
            for mut l in links {
                let mut hello = [0u8; 8];
                set_timeout(&l, Some(Duration::from_secs(10)))?;
                if read_exact(&mut l, &mut hello).is_err() {
                    continue;
                }
                set_timeout(&l, None)?;
                let magic = u32::from_le_bytes(hello[..4].try_into().expect("4"));
                let peer = u32::from_le_bytes(hello[4..].try_into().expect("4"));
                if magic == HELLO_MAGIC && from.contains(&peer) {
                    got.insert(peer, l);
                }
            }
        }
        Ok(got)
    }
}

fn set_timeout(l: &Link, t: Option<Duration>) -> io::Result<()> {
    match l {
        Link::Unix(s) => s.set_read_timeout(t),
        Link::Tcp(s) => s.set_read_timeout(t),
    }
}

fn read_exact(l: &mut Link, buf: &mut [u8]) -> io::Result<()> {
    match l {
        Link::Unix(s) => s.read_exact(buf),
        Link::Tcp(s) => s.read_exact(buf),
    }
}

/// Connects to `peer` at `card`: by its Unix address when it is on `my_node`, else by TCP
/// to the first of its addresses that answers.
pub fn connect(me: u32, my_node: &str, card: &Card) -> io::Result<Link> {
    let mut link = if card.node == my_node {
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(card.unix.as_bytes())?;
        Link::Unix(UnixStream::connect_addr(&addr)?)
    } else {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address published");
        let mut found = None;
        for ip in &card.ips {
            let addr = SocketAddr::from((*ip, card.port));
            match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                Ok(s) => {
                    found = Some(s);
                    break;
                }
                Err(e) => last = io::Error::new(e.kind(), format!("{addr}: {e}")),
            }
        }
        let s = found.ok_or(last)?;
        s.set_nodelay(true)?;
        Link::Tcp(s)
    };
    let mut hello = [0u8; 8];
    hello[..4].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
    hello[4..].copy_from_slice(&me.to_le_bytes());
    link.write_all(&hello)?;
    Ok(link)
}

/// The host's IPv4 addresses, loopback last (a peer on another host reaches one of the
/// others; on the same host any works).
fn local_ipv4s() -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we walk and free.
    if unsafe { libc::getifaddrs(&mut ifap) } == 0 {
        let mut p = ifap;
        while !p.is_null() {
            // SAFETY: a node of the list.
            let ifa = unsafe { &*p };
            if !ifa.ifa_addr.is_null()
                && unsafe { (*ifa.ifa_addr).sa_family } as i32 == libc::AF_INET
            {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                if !out.contains(&ip) {
                    out.push(ip);
                }
            }
            p = ifa.ifa_next;
        }
        // SAFETY: the list getifaddrs gave.
        unsafe { libc::freeifaddrs(ifap) };
    }
    out.sort_by_key(|ip| ip.is_loopback());
    if !out.iter().any(|ip| ip.is_loopback()) {
        out.push(Ipv4Addr::LOCALHOST);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_survives_encoding() {
        let c = Card {
            node: "n1".into(),
            unix: "cosched-bsp-4-3-999".into(),
            ips: vec![Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::LOCALHOST],
            port: 4711,
        };
        assert_eq!(Card::decode(&c.encode()), Some(c));
        assert!(local_ipv4s().last().unwrap().is_loopback());
    }
}
