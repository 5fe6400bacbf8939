//! Where one process of a stack runs: a network namespace (or the harness's
//! own) and the IPv4 address it binds and is reached at.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::Arc;

/// An open handle on a named namespace (`/run/netns/<name>`), what `setns`
/// needs in a child process between fork and exec.
#[derive(Debug)]
pub struct NsHandle {
    pub name: String,
    file: File,
}

impl NsHandle {
    pub fn open(name: &str) -> Self {
        let path = format!("/run/netns/{name}");
        let file = File::open(&path).unwrap_or_else(|e| panic!("opening {path}: {e}"));
        Self {
            name: name.to_string(),
            file,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Place {
    /// None: the harness's own (root) namespace.
    pub ns: Option<Arc<NsHandle>>,
    /// The address servers bind and clients connect to.
    pub ip: Ipv4Addr,
}

impl Place {
    /// Root namespace, 127.0.0.1: how every scenario before s18 runs.
    pub fn loopback() -> Self {
        Self {
            ns: None,
            ip: Ipv4Addr::LOCALHOST,
        }
    }

    /// `Command::new(program)`, run inside this place's namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        self.enter(&mut cmd);
        cmd
    }

    /// Makes `cmd` join this place's namespace before it execs, so the child
    /// *is* the program (its pid is the one the harness kills), unlike a
    /// wrapper process such as `ip netns exec` would be if it forked.
    pub fn enter(&self, cmd: &mut Command) {
        let Some(ns) = &self.ns else { return };
        let ns = ns.clone();
        // SAFETY: setns(2) is async-signal-safe and touches no memory of the
        // parent; the fd stays open because `ns` (an Arc) lives in the closure.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(ns.file.as_raw_fd(), libc::CLONE_NEWNET) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
    }

    /// The namespace's name, for messages ("root" for the harness's own).
    pub fn ns_name(&self) -> &str {
        self.ns.as_ref().map_or("root", |ns| ns.name.as_str())
    }
}
