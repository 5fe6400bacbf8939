//! The guard's own check, before any scenario relies on it: a host reaches
//! another host and the root namespace reaches both; a cut makes a connect
//! time out (packets dropped), where a closed port is refused at once; heal
//! restores the link; dropping the guard removes every namespace.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use super::{Link, Net, Place};
use crate::servers::process::OwnedProcess;

/// A connect across a whole link takes well under this.
const CONNECT_LIMIT: Duration = Duration::from_secs(2);
/// A listener in a namespace is up within this.
const LISTEN_LIMIT: Duration = Duration::from_secs(10);
/// Port of the listener (namespaces have their own port spaces).
const PORT: u16 = 7000;

#[derive(Debug, PartialEq)]
enum Connect {
    Open,
    Refused,
    TimedOut,
    Other(String),
}

async fn connect(ip: std::net::Ipv4Addr, port: u16) -> Connect {
    let addr = SocketAddrV4::new(ip, port);
    match tokio::time::timeout(CONNECT_LIMIT, TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Connect::Open,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Connect::Refused,
        Ok(Err(e)) => Connect::Other(e.to_string()),
        Err(_) => Connect::TimedOut,
    }
}

/// `redis-cli -h ip -p port PING` run inside `from`: whether PONG came back.
fn ping_from(from: &Place, ip: std::net::Ipv4Addr, port: u16) -> bool {
    let mut cmd = from.command("timeout");
    cmd.args([
        "3",
        "redis-cli",
        "-h",
        &ip.to_string(),
        "-p",
        &port.to_string(),
        "PING",
    ]);
    let out = cmd.output().expect("running redis-cli");
    String::from_utf8_lossy(&out.stdout).contains("PONG")
}

#[tokio::test]
#[ignore = "chaos suite: make chaos (needs root)"]
async fn net_cut_drops_packets_instead_of_refusing_and_heal_restores() {
    let net = Net::new("selftest", &["a", "b"]);
    let (a, b) = (net.host("a").clone(), net.host("b").clone());
    let dir = crate::servers::process::TempDir::new("chaos-net-selftest");
    let mut cmd = b.command("redis-server");
    cmd.args(["--port", &PORT.to_string(), "--bind", &b.ip.to_string()])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .arg("--dir")
        .arg(&dir.path);
    let _server = OwnedProcess::spawn("redis-server in b", cmd, &dir.path.join("redis.log"));
    let start = Instant::now();
    while connect(b.ip, PORT).await != Connect::Open {
        assert!(start.elapsed() < LISTEN_LIMIT, "redis-server in b not up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        connect(b.ip, PORT + 1).await,
        Connect::Refused,
        "closed port"
    );
    assert!(ping_from(&a, b.ip, PORT), "a reaches b");

    net.cut(&[Link::to_addr("b", net.root().ip)]);
    net.cut(&[Link::to_server("a", b.ip, PORT)]);
    assert_eq!(
        connect(b.ip, PORT).await,
        Connect::TimedOut,
        "root -> b cut"
    );
    assert_eq!(
        connect(b.ip, PORT + 1).await,
        Connect::TimedOut,
        "no RST either"
    );
    assert!(!ping_from(&a, b.ip, PORT), "a -> b cut");
    assert!(net.dropped_packets("b") > 0, "b's rules counted drops");

    net.heal();
    assert_eq!(connect(b.ip, PORT).await, Connect::Open, "healed");
    assert!(ping_from(&a, b.ip, PORT), "a reaches b again");

    let names: Vec<String> = ["sw", "a", "b"]
        .iter()
        .map(|h| format!("/run/netns/{}-selftest-{h}", net.tag))
        .collect();
    drop(_server);
    drop(net);
    for name in names {
        assert!(!std::path::Path::new(&name).exists(), "{name} removed");
    }
}
