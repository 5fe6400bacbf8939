//! The roles one `stockd` binary can run (`--role`), how `all` combines them,
//! and what every role runs beside its work: the polled gauges (`gauges`) and
//! the event relay (`events::relay`).

pub mod api;
pub mod closer;
pub mod consumer;
pub mod gauges;
pub mod reconciler;
pub mod startup;
pub mod traces;

use std::net::TcpListener;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::ops::reconcile::Reconciler;
use crate::outbox::EventRelay;
use crate::resources::Resources;

/// The roles `--role` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// HTTP API, outbox relay.
    Api,
    /// Applies deduction messages to MySQL.
    Consumer,
    /// Releases unpaid reservations (delay queue + sweep backstop).
    Closer,
    /// Compares Redis, MySQL and the ledger; alerts and repairs drift.
    Reconciler,
    /// Every role in one process (development, small installs).
    All,
}

/// Starts `role`: binds its probe port (a taken port fails at once), waits for
/// its stores there (`startup`), then runs it until `cancel` fires.
pub async fn start(
    role: Role,
    settings: Settings,
    name: &str,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let (key, bind) = match role {
        Role::Api | Role::All => ("http.bind", settings.http.bind.clone()),
        _ => ("metrics.bind", settings.metrics.bind.clone()),
    };
    let listener = TcpListener::bind(&bind).with_context(|| format!("binding {key} {bind}"))?;
    listener.set_nonblocking(true)?;
    let serves_tls = key == "http.bind" && settings.http.tls.is_on();
    let probe = (!serves_tls).then_some(&listener);
    match startup::connect_when_reachable(&settings, name, probe, &cancel).await? {
        Some(res) => run(role, res, listener, cancel).await,
        None => {
            tracing::info!("stockd: stopped while waiting for its stores");
            Ok(())
        }
    }
}

/// Runs `role` on `listener` (its http.bind for the api, metrics.bind for the
/// other roles) until `cancel` fires, then shuts down in order and closes pools.
///
/// Every role is built the same way, from the shared resources; the one
/// reconciler is shared by the api's admin routes and the reconciler loop, so
/// with `--role all` `/v1/admin/reconcile` and the console see the loop's
/// history (previous verdicts, last report, ongoing alerts).
pub async fn run(
    role: Role,
    res: Resources,
    listener: TcpListener,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let mut api = None;
    let mut metrics_server = None;
    let mut workers = Vec::new();
    let reconciler = Arc::new(Reconciler::from_resources(&res));
    if matches!(role, Role::Api | Role::All) {
        let handle = api::start(res.clone(), reconciler.clone(), listener, cancel.clone())?;
        tracing::info!(http.addr = %handle.addr, "api: listening");
        api = Some(handle);
    } else {
        tracing::info!(metrics.addr = %listener.local_addr()?, "metrics: listening");
        metrics_server = Some(crate::telemetry::metrics_listener::start(
            listener,
            res.mysql_breaker.clone(),
            cancel.clone(),
        )?);
    }
    workers.push(tokio::spawn(gauges::run_until_stopped(
        res.clone(),
        cancel.clone(),
    )));
    if res.settings.events.enabled {
        // Every role relays the event outbox: whichever roles a host runs,
        // the events their transactions staged leave from there too.
        let relay = EventRelay::new(res.db.clone(), res.publisher.clone(), &res.settings.events);
        workers.push(tokio::spawn(relay.run_until_stopped(cancel.clone())));
    }
    if matches!(role, Role::Consumer | Role::All) {
        let consumer = consumer::Consumer::from_resources(&res);
        workers.push(tokio::spawn(consumer.run_until_stopped(cancel.clone())));
    }
    if matches!(role, Role::Closer | Role::All) {
        let closer = closer::Closer::from_resources(&res);
        workers.push(tokio::spawn(closer.run_until_stopped(cancel.clone())));
    }
    if matches!(role, Role::Reconciler | Role::All) {
        let interval = std::time::Duration::from_millis(res.settings.reconcile.interval_ms);
        let task = reconciler::run_until_stopped(
            reconciler.clone(),
            crate::ops::sale_schedule::SaleSchedule::from_resources(&res),
            interval,
            res.settings.reconcile.repair,
            res.tracing.clone(),
            cancel.clone(),
        );
        workers.push(tokio::spawn(task));
    }
    crate::sdnotify::ready_and_watch(cancel.clone());
    if let Some(api) = api {
        api.stopped().await;
    }
    if let Some(server) = metrics_server {
        let _ = server.await;
    }
    for worker in workers {
        let _ = worker.await;
    }
    res.close().await;
    tracing::info!("stockd: stopped");
    Ok(())
}
