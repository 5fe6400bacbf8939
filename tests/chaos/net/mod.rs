//! Real network partitions for the chaos suite (s18–s22): private network
//! namespaces joined by veth pairs to a Linux bridge, and nftables DROP rules
//! that cut or thin one link. A cut link drops packets silently — a connect
//! times out, a sent request gets no answer and no RST — which is what a
//! partition looks like to stockd, unlike a killed server's refused
//! connections or a frozen one's open but mute socket.
//!
//! [`Net`] is the guard: it builds the namespaces and removes them (and the
//! root-side veth) when dropped, also after a panic. [`Place`] is where one
//! process runs and which address it binds: the root namespace on loopback
//! (every scenario before s18), the root namespace on the root-side veth
//! address (a server the partitioned hosts must reach), or a host namespace.

mod rules;
mod selftest;
mod topology;

pub use crate::place::Place;
pub use rules::Link;
pub use topology::Net;
