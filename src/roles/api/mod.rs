//! `stockd --role api`: the HTTP front. The app factory is shared by `main` and
//! the in-process integration tests, so tests exercise exactly what ships.
//! Both listeners (public, and admin when `admin.bind` is set) speak TLS when
//! `http.tls` is on (`tls/`).

pub mod audit;
pub mod auth;
pub mod client_ip;
pub mod hold_views;
pub mod http_metrics;
pub mod ip_guard;
pub mod ip_limit;
pub mod middleware;
pub mod own_task;
pub mod problem;
pub mod readiness;
pub mod request_series;
pub mod routes;
pub mod routing;
pub mod tls;
pub mod trace_context;
pub mod views;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, App, HttpServer};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use crate::events::EventPolicy;
use crate::ops::reconcile::Reconciler;
use crate::outbox::group::GroupShape;
use crate::outbox::{GroupCommit, OutboxAcker, Relay, ReservedEvents};
use crate::resources::Resources;
use crate::soldout::{subscriber, SoldOutBoard};

/// Everything a request handler needs.
pub struct ApiState {
    pub res: Resources,
    /// Runs `/v1/admin/reconcile` and keeps the last report the console shows;
    /// the process's one reconciler (with `--role all`, the loop's too).
    pub reconciler: Arc<Reconciler>,
    /// Publishes outbox entries (group commit) and queues their removal.
    pub group_commit: GroupCommit,
    /// Local sold-out flags (contract §7); `None` when `soldout.enabled` is false.
    pub soldout: Option<Arc<SoldOutBoard>>,
    /// Every SKU's sale terms, in memory (docs/contract.md §19).
    pub sale: Arc<crate::sale::SaleBoard>,
    /// True once shutdown began: `/readyz` answers 503 so load balancers move away.
    pub draining: AtomicBool,
    /// What `/readyz` answers, kept current by a background task (`readiness`).
    pub readiness: Arc<readiness::Readiness>,
    pub metrics: PrometheusHandle,
    /// The per-IP rate limit of the public routes (`limits.per_ip_*`).
    pub ip_limiter: ip_limit::IpLimiter,
    /// Who may tell us the client's address (`http.trusted_proxies`).
    pub trusted: client_ip::TrustedProxies,
    /// Who may call the public routes (`auth.*`, `limits.per_client_*`).
    pub auth: auth::Gate,
    /// The operator console's overview, gathered at most about once a second.
    pub console: crate::ops::overview::OverviewCache,
    /// The keys of admission passes (`passes.*`): verifying a hold's pass,
    /// signing `POST /v1/passes`.
    pub passes: Arc<crate::passes::KeyRing>,
}

/// Registers the routes of `set` and the JSON/path error handlers on an actix `App`.
pub fn configure(
    state: web::Data<ApiState>,
    set: routes::RouteSet,
) -> impl FnOnce(&mut web::ServiceConfig) {
    move |cfg: &mut web::ServiceConfig| {
        let max_body = state.res.settings.http.max_body_bytes;
        cfg.app_data(state)
            .app_data(routes::json_config(max_body))
            .app_data(routes::path_config())
            .app_data(routes::query_config())
            .app_data(web::PayloadConfig::new(max_body));
        routes::register(cfg, set);
    }
}

/// A running api role: the server task plus its background tasks.
pub struct ApiHandle {
    pub addr: std::net::SocketAddr,
    /// The admin listener's address when `admin.bind` is set.
    pub admin_addr: Option<std::net::SocketAddr>,
    pub state: web::Data<ApiState>,
    /// The listeners' certificates when `http.tls` is on (SIGHUP re-reads them).
    pub listener_certs: Option<Arc<tls::certs::ListenerCerts>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    admin_server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl ApiHandle {
    /// Waits for the server and background tasks to finish after cancellation.
    pub async fn stopped(self) {
        let _ = self.server.await;
        if let Some(admin) = self.admin_server {
            let _ = admin.await;
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Starts the api role on `listener`: HTTP(S) server(s), outbox acker,
/// relay, sold-out subscriber, readiness checks, SIGHUP reload of the TLS
/// files. It stops when `cancel` fires: readiness false first, then HTTP
/// drains, then the background tasks finish.
pub fn start(
    res: Resources,
    reconciler: Arc<Reconciler>,
    listener: TcpListener,
    cancel: CancellationToken,
) -> std::io::Result<ApiHandle> {
    let addr = listener.local_addr()?;
    let (group, mut tasks) = spawn_outbox(&res, &cancel);
    let soldout = spawn_soldout(&res, &cancel, &mut tasks);
    let sale = spawn_sale(&res, &cancel, &mut tasks);
    let tls = listener_tls(&res.settings.http.tls)?;
    let passes = crate::passes::KeyRing::from_settings(&res.settings.passes)
        .map_err(|err| std::io::Error::other(format!("{err:#}")))?;
    if let Some(tls) = &tls {
        tasks.push(tls::reload::on_sighup(
            tls.certs.clone(),
            cancel.child_token(),
        )?);
    }
    let http = res.settings.http.clone();
    let admin_listener = match &res.settings.admin.bind {
        Some(bind) => Some(TcpListener::bind(bind)?),
        None => None,
    };
    let mut state = api_state(res, reconciler, group, soldout, passes);
    state.sale = sale;
    let state = web::Data::new(state);
    let checks = readiness::spawn(
        state.res.clone(),
        state.readiness.clone(),
        cancel.child_token(),
    );
    tasks.push(checks);
    let tls_server = tls.as_ref().map(|tls| &tls.server);
    let public_set = match admin_listener {
        Some(_) => routes::RouteSet::Public,
        None => routes::RouteSet::All,
    };
    let server = serve(&state, &http, listener, public_set, tls_server)?;
    let mut handles = vec![server.handle()];
    let mut admin_addr = None;
    let admin_server = match admin_listener {
        Some(admin_listener) => {
            admin_listener.set_nonblocking(true)?;
            admin_addr = Some(admin_listener.local_addr()?);
            let set = routes::RouteSet::Admin;
            let admin = serve(&state, &http, admin_listener, set, tls_server)?;
            handles.push(admin.handle());
            Some(tokio::spawn(admin))
        }
        None => None,
    };
    drain_on_cancel(state.clone(), handles, cancel);
    Ok(ApiHandle {
        addr,
        admin_addr,
        state,
        listener_certs: tls.map(|tls| tls.certs),
        tasks,
        server: tokio::spawn(server),
        admin_server,
    })
}

/// The outbox's group commit, acker and relay, and the sweeper of orders
/// held line by line (`ops/order_sweeper.rs`); their tasks.
fn spawn_outbox(
    res: &Resources,
    cancel: &CancellationToken,
) -> (GroupCommit, Vec<tokio::task::JoinHandle<()>>) {
    let (acker, acker_task) = OutboxAcker::spawn(res.redis.clone(), cancel.child_token());
    let amqp = &res.settings.amqp;
    let (group, group_task) = GroupCommit::spawn(
        res.publisher.clone(),
        acker,
        GroupShape {
            max: amqp.group_max,
            in_flight: amqp.group_in_flight,
            linger: Duration::from_millis(amqp.group_linger_ms),
        },
        ReservedEvents::from_policy(&EventPolicy::from_settings(&res.settings.events)),
        cancel.child_token(),
    );
    let relay = Relay::new(res.redis.clone(), group.clone(), res.settings.relay.clone());
    let relay_task = tokio::spawn(relay.run_until_stopped(cancel.child_token()));
    // The sweeper asks MySQL before it undoes an intent (issue 50 D5): the
    // api's own pool, `mysql.query_timeout_ms` bounding each question.
    let sweeper_task = tokio::spawn(crate::ops::order_sweeper::run_until_stopped(
        res.redis.clone(),
        res.db.clone(),
        Duration::from_millis(res.settings.orders.sweep_interval_ms),
        cancel.child_token(),
    ));
    (
        group,
        vec![acker_task, relay_task, group_task, sweeper_task],
    )
}

/// The local sold-out board and its subscriber task, when `soldout.enabled`.
fn spawn_soldout(
    res: &Resources,
    cancel: &CancellationToken,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Option<Arc<SoldOutBoard>> {
    let settings = &res.settings.soldout;
    if !settings.enabled {
        return None;
    }
    let ttl = Duration::from_millis(settings.flag_ttl_ms);
    let board = Arc::new(SoldOutBoard::new(
        res.redis.clone(),
        ttl,
        settings.max_tracked_winners,
    ));
    let listener = subscriber::run_until_stopped(
        board.clone(),
        res.redis.clone(),
        ttl / 2,
        cancel.child_token(),
    );
    tasks.push(tokio::spawn(listener));
    Some(board)
}

/// The board of sale terms and its subscriber task; the board is empty
/// until the task's first read (meanwhile Redis judges every hold).
fn spawn_sale(
    res: &Resources,
    cancel: &CancellationToken,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Arc<crate::sale::SaleBoard> {
    let board = Arc::new(crate::sale::SaleBoard::default());
    let listener = crate::sale::subscriber::run_until_stopped(
        board.clone(),
        res.db.clone(),
        res.redis.clone(),
        cancel.child_token(),
    );
    tasks.push(tokio::spawn(listener));
    board
}

/// The listeners' TLS when `http.tls` is on; a refusal names its key.
fn listener_tls(
    settings: &crate::config::ListenerTls,
) -> std::io::Result<Option<tls::ListenerTlsConfig>> {
    if !settings.is_on() {
        return Ok(None);
    }
    tls::server_config(settings)
        .map(Some)
        .map_err(|err| std::io::Error::other(format!("{err:#}")))
}

fn api_state(
    res: Resources,
    reconciler: Arc<Reconciler>,
    group_commit: GroupCommit,
    soldout: Option<Arc<SoldOutBoard>>,
    passes: crate::passes::KeyRing,
) -> ApiState {
    let limits = &res.settings.limits;
    let ip_limiter = ip_limit::IpLimiter::new(limits.per_ip_rps, limits.per_ip_burst);
    let trusted = client_ip::TrustedProxies::new(&res.settings.http.trusted_proxies);
    let auth = auth::Gate::from_settings(&res.settings);
    ApiState {
        res,
        reconciler,
        group_commit,
        soldout,
        sale: Default::default(),
        draining: AtomicBool::new(false),
        readiness: Default::default(),
        metrics: crate::telemetry::metrics_handle(),
        ip_limiter,
        trusted,
        auth,
        console: Default::default(),
        passes: Arc::new(passes),
    }
}

/// On `cancel`: readiness false, one probe period, then every server drains.
fn drain_on_cancel(
    state: web::Data<ApiState>,
    handles: Vec<actix_web::dev::ServerHandle>,
    cancel: CancellationToken,
) {
    tokio::spawn(async move {
        cancel.cancelled().await;
        state.draining.store(true, Ordering::SeqCst);
        // Give load balancers one probe period to see /readyz fail before closing.
        tokio::time::sleep(READINESS_GRACE).await;
        for handle in handles {
            handle.stop(true).await;
        }
    });
}

/// One HTTP server on `listener` serving the routes of `set`; over TLS when
/// `tls` is given.
fn serve(
    state: &web::Data<ApiState>,
    http: &crate::config::HttpSettings,
    listener: TcpListener,
    set: routes::RouteSet,
    tls: Option<&rustls::ServerConfig>,
) -> std::io::Result<actix_web::dev::Server> {
    let app_state = state.clone();
    let mut server = HttpServer::new(move || {
        App::new()
            .wrap_fn(auth::guard)
            .wrap_fn(ip_guard::guard)
            .wrap_fn(audit::record)
            .wrap_fn(http_metrics::record)
            .configure(configure(app_state.clone(), set))
    })
    .disable_signals()
    .shutdown_timeout(http.shutdown_grace_secs)
    .max_connections(MAX_CONNECTIONS_PER_WORKER)
    .keep_alive(KEEP_ALIVE)
    .client_request_timeout(REQUEST_HEAD_TIMEOUT)
    .client_disconnect_timeout(DISCONNECT_TIMEOUT);
    if http.workers > 0 {
        server = server.workers(http.workers);
    }
    let server = match tls {
        Some(tls) => server
            .on_connect(tls::remember_peer_subject)
            .listen_rustls_0_23(listener, tls.clone())?,
        None => server.listen(listener)?,
    };
    Ok(server.run())
}

/// Time between readiness turning false and the listener closing.
const READINESS_GRACE: Duration = Duration::from_millis(100);

/// Open connections one worker serves; past it, new connections wait in the
/// kernel's accept queue (not accepted, so they cost no memory here).
/// Service clients keep a pool of keep-alive connections; the bench's
/// fan-in phase opens 1,000 at once.
const MAX_CONNECTIONS_PER_WORKER: usize = 10_000;
/// An idle keep-alive connection is closed after this: longer than the idle
/// timeouts of the load balancers in front of stockd (60 s on most), so the
/// balancer, not stockd, closes first and never sends on a closed socket.
const KEEP_ALIVE: Duration = Duration::from_secs(75);
/// A client must send a request's head within this of connecting (or of its
/// last request): a slow-headers client (slowloris) holds a connection no
/// longer.
const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// A closing connection gets this long to say goodbye.
const DISCONNECT_TIMEOUT: Duration = Duration::from_secs(1);
