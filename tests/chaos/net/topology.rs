//! The [`Net`] guard: one switch namespace holding a Linux bridge, one
//! namespace per host with a veth into the bridge (address `10.231.<n>.<10+i>`
//! of a /24 used nowhere else), and one veth from the harness's (root)
//! namespace into the bridge (`.1`), so the load driver, the harness's own
//! store reads and every CLI run reach every host, and a server left in the
//! root namespace can bind `.1` for the hosts to reach it.
//!
//! Names are `sc<pid>n<k>-<scenario>-<host>` (namespaces) and `sc<pid>n<k>`
//! (the root-side veth, 15 bytes at most): a start removes what an earlier,
//! crashed test process (pid no longer alive) left behind; `Drop` deletes
//! every namespace and the root-side veth of this guard by name.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use super::rules::{self, Link};
use crate::place::{NsHandle, Place};

/// Second octet of every partition subnet: 10.231.0.0/16 is private and not
/// routed on the machines this suite runs on (checked per /24 at start).
const SUBNET_PREFIX: [u8; 2] = [10, 231];
/// Host addresses start here (`.1` is the root-side veth).
const FIRST_HOST: u8 = 10;
/// Name of the nftables table (in each host namespace) that holds the cuts.
pub const TABLE: &str = "chaos";

pub struct Net {
    /// `sc<pid>n<k>`: prefix of every name this guard creates.
    pub tag: String,
    /// Host name → its namespace and address.
    hosts: BTreeMap<String, Place>,
    /// The harness's own namespace, on the root-side veth's address.
    root: Place,
    /// Every namespace created (the switch first), deleted in reverse on drop.
    namespaces: Vec<String>,
}

impl Net {
    /// Builds the switch, one namespace per host and the root-side veth.
    pub fn new(scenario: &str, hosts: &[&str]) -> Self {
        ensure_tools();
        remove_leftovers();
        static GUARDS: AtomicU32 = AtomicU32::new(0);
        let tag = format!(
            "sc{}n{}",
            std::process::id(),
            GUARDS.fetch_add(1, Ordering::Relaxed)
        );
        let subnet = free_subnet();
        let addr = |last: u8| Ipv4Addr::new(SUBNET_PREFIX[0], SUBNET_PREFIX[1], subnet, last);
        let mut net = Self {
            tag: tag.clone(),
            hosts: BTreeMap::new(),
            root: Place {
                ns: None,
                ip: addr(1),
            },
            namespaces: Vec::new(),
        };
        let switch = net.add_namespace(&format!("{tag}-{scenario}-sw"));
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &switch, "link", "set", "br0", "up"]);
        ip(&[
            "link", "add", &tag, "type", "veth", "peer", "name", "p-root", "netns", &switch,
        ]);
        ip(&[
            "-n", &switch, "link", "set", "p-root", "master", "br0", "up",
        ]);
        ip(&["addr", "add", &format!("{}/24", addr(1)), "dev", &tag]);
        ip(&["link", "set", &tag, "up"]);
        for (i, host) in hosts.iter().enumerate() {
            let ns = net.add_namespace(&format!("{tag}-{scenario}-{host}"));
            let port = format!("p{i}");
            let ip_addr = addr(FIRST_HOST + i as u8);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            ip(&[
                "-n", &ns, "link", "add", "eth0", "type", "veth", "peer", "name", &port, "netns",
                &switch,
            ]);
            ip(&["-n", &switch, "link", "set", &port, "master", "br0", "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{ip_addr}/24"),
                "dev",
                "eth0",
            ]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            let place = Place {
                ns: Some(Arc::new(NsHandle::open(&ns))),
                ip: ip_addr,
            };
            nft(&place, &rules::table_setup());
            net.hosts.insert(host.to_string(), place);
        }
        println!(
            "  net {tag}: {}.{}.{subnet}.0/24, root {}, {}",
            SUBNET_PREFIX[0],
            SUBNET_PREFIX[1],
            net.root.ip,
            net.describe()
        );
        net
    }

    fn add_namespace(&mut self, name: &str) -> String {
        ip(&["netns", "add", name]);
        self.namespaces.push(name.to_string());
        name.to_string()
    }

    /// `host=ip` for every host, for the start-up line.
    fn describe(&self) -> String {
        self.hosts
            .iter()
            .map(|(h, p)| format!("{h}={}", p.ip))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The place of a host this guard created (panics on an unknown name).
    pub fn host(&self, name: &str) -> &Place {
        self.hosts
            .get(name)
            .unwrap_or_else(|| panic!("net {}: no host {name}", self.tag))
    }

    /// The host's place if it has a namespace, else the root namespace on
    /// the root-side veth's address (reachable from every host).
    pub fn place_or_root(&self, name: &str) -> Place {
        self.hosts.get(name).unwrap_or(&self.root).clone()
    }

    /// The harness's namespace, on the root-side veth's address.
    pub fn root(&self) -> &Place {
        &self.root
    }

    /// Drops every packet of each link (both directions), from now on.
    pub fn cut(&self, links: &[Link]) {
        self.apply(links, None);
    }

    /// Drops `percent` % of the packets of each link, at random, each direction.
    pub fn flap(&self, links: &[Link], percent: u8) {
        self.apply(links, Some(percent));
    }

    fn apply(&self, links: &[Link], loss_percent: Option<u8>) {
        for link in links {
            let place = self.host(&link.host);
            nft(place, &rules::drop_rules(link, loss_percent));
        }
    }

    /// Removes every rule of every host: all links whole again.
    pub fn heal(&self) {
        for place in self.hosts.values() {
            nft(place, &rules::flush());
        }
    }

    /// Packets dropped so far by the rules of `host` (nft counters).
    pub fn dropped_packets(&self, host: &str) -> u64 {
        let out = nft_output(self.host(host), &format!("list table inet {TABLE}"));
        rules::sum_packets(&out)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.namespaces.iter().rev() {
            let _ = quiet_ip(&["netns", "del", ns]);
        }
        // Deleting the switch deletes the pair; by name too in case it lingers.
        let _ = quiet_ip(&["link", "del", &self.tag]);
    }
}

/// Runs `ip args`, panicking with its stderr when it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn quiet_ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Feeds `script` to `nft -f -` inside `place`'s namespace.
fn nft(place: &Place, script: &str) {
    let mut cmd = place.command("nft");
    cmd.args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("running nft");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "nft in {}:\n{script}\n{}",
        place.ns_name(),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn nft_output(place: &Place, command: &str) -> String {
    let mut cmd = place.command("nft");
    cmd.args(command.split_whitespace());
    let out = cmd.output().expect("running nft");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// scripts/net-tools.sh once per test process (installs iproute2/nftables).
fn ensure_tools() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/net-tools.sh");
        let out = Command::new(script).output().expect("running net-tools.sh");
        assert!(
            out.status.success(),
            "scripts/net-tools.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// The pid in a name `sc<pid>n<k>…` this suite gives, if it is one.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("sc")?;
    let (pid, after) = rest.split_once('n')?;
    after.chars().next()?.is_ascii_digit().then_some(())?;
    pid.parse().ok()
}

/// Deletes namespaces and root-side veths of test processes that are gone.
fn remove_leftovers() {
    let dead = |name: &str| {
        owner_pid(name).is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
    };
    if let Ok(entries) = std::fs::read_dir("/run/netns") {
        for name in entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
        {
            if dead(&name) {
                println!("  net: removing leftover namespace {name}");
                quiet_ip(&["netns", "del", &name]);
            }
        }
    }
    let links = Command::new("ip").args(["-o", "link", "show"]).output();
    let text = links.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    for line in text.unwrap_or_default().lines() {
        let name = line.split(':').nth(1).unwrap_or("").trim();
        let name = name.split('@').next().unwrap_or("");
        if dead(name) {
            println!("  net: removing leftover veth {name}");
            quiet_ip(&["link", "del", name]);
        }
    }
}

/// A third octet whose /24 no interface of the root namespace uses yet.
fn free_subnet() -> u8 {
    let start = (std::process::id() % 250) as u8;
    for step in 0..250u16 {
        let octet = ((u16::from(start) + step) % 250 + 1) as u8;
        let prefix = format!("{}.{}.{octet}.0/24", SUBNET_PREFIX[0], SUBNET_PREFIX[1]);
        let out = Command::new("ip")
            .args(["-o", "addr", "show", "to", &prefix])
            .output()
            .expect("running ip");
        if out.stdout.is_empty() {
            return octet;
        }
    }
    panic!(
        "no free /24 in {}.{}.0.0/16",
        SUBNET_PREFIX[0], SUBNET_PREFIX[1]
    );
}

#[cfg(test)]
mod tests {
    use super::owner_pid;

    #[test]
    fn owner_pid_reads_only_names_this_suite_gives() {
        assert_eq!(owner_pid("sc1234n0-s18-api"), Some(1234));
        assert_eq!(owner_pid("sc77n12"), Some(77));
        assert_eq!(owner_pid("scratch"), None);
        assert_eq!(owner_pid("sc12nx"), None);
        assert_eq!(owner_pid("eth0"), None);
    }
}
