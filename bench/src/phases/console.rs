//! The operator console's cost to the hot path: a poller that does what an
//! open console does — `GET /v1/admin/overview` once a second with the admin
//! token — while `reserve_redis_console` measures reservations. Its ratio to
//! `reserve_redis` (goal ≥ 0.97) is the console's price.

use std::net::SocketAddr;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::drive::http_client::HttpConn;

/// The console page's poll interval.
pub const POLL_EVERY: Duration = Duration::from_secs(1);
const OVERVIEW: &str = "/v1/admin/overview";

/// What the poller saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollTally {
    pub ok: u64,
    pub failed: u64,
}

impl PollTally {
    /// A run is only a fair comparison when the console really polled, and
    /// the overview kept answering under load.
    pub fn violation(self) -> Option<String> {
        if self.ok == 0 {
            Some(format!("the console poller never got {OVERVIEW} (200)"))
        } else if self.failed > 0 {
            Some(format!(
                "{OVERVIEW} failed {} of {} polls under load",
                self.failed,
                self.ok + self.failed
            ))
        } else {
            None
        }
    }
}

/// A running poller; [`Poller::stop`] ends it and returns its tally.
pub struct Poller {
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<PollTally>,
}

impl Poller {
    pub fn start(addr: SocketAddr, admin_token: &str) -> Self {
        let cancel = CancellationToken::new();
        let auth = format!("Authorization: Bearer {admin_token}\r\n");
        let stop = cancel.clone();
        let task = tokio::spawn(async move {
            let mut conn = HttpConn::new(addr);
            let mut tally = PollTally::default();
            let mut tick = tokio::time::interval(POLL_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.cancelled() => return tally,
                }
                match conn.request("GET", OVERVIEW, &auth, b"").await {
                    Ok(resp) if resp.status == 200 => tally.ok += 1,
                    _ => tally.failed += 1,
                }
            }
        });
        Self { cancel, task }
    }

    pub async fn stop(self) -> PollTally {
        self.cancel.cancel();
        self.task.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poller_that_never_got_through_or_failed_spoils_the_comparison() {
        assert!(PollTally { ok: 0, failed: 0 }.violation().is_some());
        assert!(PollTally { ok: 5, failed: 1 }.violation().is_some());
        assert_eq!(PollTally { ok: 5, failed: 0 }.violation(), None);
    }
}
