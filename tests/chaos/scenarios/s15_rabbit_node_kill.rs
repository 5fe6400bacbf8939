//! Scenario 15: one node of a 3-node RabbitMQ cluster is killed with SIGKILL
//! under load — the node holding the `deduct` quorum queue's leader, which is
//! also the first of `amqp.urls`, so every role is connected to it. The roles
//! move to the next node of `amqp.urls` (`mq::connect_any`), the quorum queues
//! (3 members each) elect a leader on the survivors, publishes and consumption
//! go on; confirms in flight at the kill count as failures and the outbox
//! relay republishes them (the consumer's ledger skips the duplicates). The
//! node is restarted before the drain, so the audit sees every member.

use std::collections::BTreeMap;

use super::{metrics, plan, Scenario, DRAIN_LIMIT};
use crate::load::{Load, LoadReport};
use crate::servers::rabbit_cluster::{QueueView, NODES};
use crate::{drain, stores};

/// How long the node stays down under load before it is restarted.
const DOWN_MS: u64 = 10_000;
/// Answers sent this soon after the kill may wait for the new leader; the
/// "201 while the node is down" count starts after it.
const FAILOVER_MS: u64 = 3_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s15_rabbit_cluster_node_kill9_under_load_loses_nothing() {
    let extra = [("STOCKD__AMQP__QUORUM_INITIAL_GROUP_SIZE", "3".to_string())];
    let mut sc = Scenario::begin_rabbit_cluster(
        "s15",
        "kill -9 one RabbitMQ cluster node under load",
        &extra,
    )
    .await;
    let skus = [151, 152];
    sc.open_skus(&skus, 1_000, 2).await;
    let victim = choose_victim(&mut sc).await;
    let load = sc.load(plan("s15", &skus, 500, 1_600, 100));
    sc.pause(4_000, 2_000).await;
    let outage = kill_and_restart(&mut sc, &load, &victim).await;
    let report = load.finish().await;
    sc.expect_sane_answers(&report);
    let after_kill = judge_after_kill(&mut sc, &report, &outage);
    drain_and_count(&mut sc, &report, &skus, &after_kill).await;
    expect_roles_moved(&mut sc, victim.index);
    sc.finish(&report).await;
}

/// The node to kill: the `deduct` queue's leader.
struct Victim {
    index: usize,
    name: String,
    deduct: String,
    work: Vec<String>,
}

/// Every work queue has a member on each node, all online; the victim is
/// the node leading `deduct` (node 0 if none is found).
async fn choose_victim(sc: &mut Scenario) -> Victim {
    let deduct = sc.stack.topology.deduct_queue.clone();
    let work = stores::work_queues(&sc.stack);
    let layout = sc.stack.rabbit.cluster().queues().await;
    print_layout("before the kill", &layout, &work);
    let leader = layout
        .iter()
        .find(|q| q.name == deduct)
        .map(|q| (q.leader.clone(), q.members.len(), q.online.len()));
    sc.expect(
        work.iter().all(|w| {
            layout
                .iter()
                .any(|q| &q.name == w && q.members.len() == NODES && q.online.len() == NODES)
        }),
        format!("every work queue has {NODES} members, all online ({deduct}: leader, members, online = {leader:?})"),
    );
    let cluster = sc.stack.rabbit.cluster();
    let index = leader
        .as_ref()
        .and_then(|(name, _, _)| cluster.index_of(name))
        .unwrap_or(0);
    let name = cluster.nodes[index].node.clone();
    Victim {
        index,
        name,
        deduct,
        work,
    }
}

/// When (load ms) the node was killed and restarted.
struct Outage {
    kill_ms: u64,
    restart_ms: u64,
}

/// kill -9 of the victim; halfway through [`DOWN_MS`] a survivor leads
/// `deduct`; at its end consumption went on; then the node is restarted.
async fn kill_and_restart(sc: &mut Scenario, load: &Load, victim: &Victim) -> Outage {
    let (deduct, name) = (&victim.deduct, &victim.name);
    let ledger_at_kill = stores::ledger(&sc.stack).await.len();
    let accepted_at_kill = load.accepted_count();
    let kill_ms = load.elapsed_ms();
    sc.note(&format!(
        "inject: kill -9 rabbitmq {name} (amqp.urls[{}], leader of {deduct}; \
         {accepted_at_kill} accepted, {ledger_at_kill} ledger rows so far)",
        victim.index
    ));
    sc.stack.rabbit.cluster().kill9(victim.index);

    // Halfway through the outage: where the queues are led now.
    sc.pause(DOWN_MS / 2, 0).await;
    let during = sc.stack.rabbit.cluster().queues().await;
    print_layout("with the node down", &during, &victim.work);
    let new_leader = during
        .iter()
        .find(|q| &q.name == deduct)
        .map(|q| q.leader.clone())
        .unwrap_or_default();
    sc.expect(
        !new_leader.is_empty() && &new_leader != name,
        format!("{deduct} has a new leader on a survivor: {new_leader:?}"),
    );
    sc.pause(DOWN_MS / 2, 1_000).await;
    let ledger_down = stores::ledger(&sc.stack).await.len();
    let restart_ms = load.elapsed_ms();
    sc.expect(
        ledger_down >= ledger_at_kill + 50,
        format!(
            "consumption went on with the node down: ledger {ledger_at_kill} -> {ledger_down} rows \
             in {:.1} s",
            (restart_ms - kill_ms) as f64 / 1000.0
        ),
    );
    sc.note(&format!("restart rabbitmq {name}"));
    sc.stack.rabbit.cluster().restart(victim.index).await;
    Outage {
        kill_ms,
        restart_ms,
    }
}

/// Accepted reservations sent after the kill: how many, answered 201 while
/// the node was down (past the failover), answered 202.
struct AfterKill {
    accepted: usize,
    created_while_down: usize,
    deferred: usize,
}

/// Publishes were confirmed through the survivors while the node was down.
fn judge_after_kill(sc: &mut Scenario, report: &LoadReport, outage: &Outage) -> AfterKill {
    let kill_ms = outage.kill_ms;
    let after_kill: Vec<_> = report
        .answers
        .iter()
        .filter(|a| a.accepted() && a.sent_ms >= kill_ms)
        .collect();
    let created_while_down = after_kill
        .iter()
        .filter(|a| {
            a.status == 201 && a.sent_ms >= kill_ms + FAILOVER_MS && a.sent_ms < outage.restart_ms
        })
        .count();
    let deferred = after_kill.iter().filter(|a| a.status == 202).count();
    sc.expect(
        created_while_down > 0,
        format!(
            "publishes confirmed through the survivors: {created_while_down} reservations answered \
             201 between kill + {FAILOVER_MS} ms and the restart"
        ),
    );
    AfterKill {
        accepted: after_kill.len(),
        created_while_down,
        deferred,
    }
}

/// Drain first, so the counters below include the relay's republishes
/// and the consumer's skipped duplicates (finish() drains, at once, again
/// and audits); every member back online; the counts; nothing lost or
/// oversold.
async fn drain_and_count(sc: &mut Scenario, report: &LoadReport, skus: &[u64], k: &AfterKill) {
    let deduct = sc.stack.topology.deduct_queue.clone();
    let work = stores::work_queues(&sc.stack);
    let accepted = report.accepted();
    let (drained, _) = drain::wait_drained(&sc.stack, skus, &accepted, DRAIN_LIMIT).await;
    let after = sc.stack.rabbit.cluster().queues().await;
    print_layout("after the restart and the drain", &after, &work);
    sc.expect(
        after
            .iter()
            .find(|q| q.name == deduct)
            .is_some_and(|q| q.online.len() == NODES),
        format!("{deduct}: all {NODES} members online again"),
    );
    let ledger = stores::ledger(&sc.stack).await;
    let keys = stores::by_key(&ledger);
    let lost = accepted.keys().filter(|k| !keys.contains_key(*k)).count();
    let oversold: i64 = stores::sku_rows(&sc.stack)
        .await
        .iter()
        .map(|r| (-r.available).max(0))
        .sum();
    let (publish, republished) = metrics::publish_counts(sc).await;
    let consumer = metrics::scrape(sc, "consumer").await;
    let duplicates = metrics::sum(
        &consumer,
        "stockd_consumer_messages_total",
        "outcome=\"duplicate\"",
    );
    sc.note(&format!(
        "counts: accepted {} ({} sent after the kill: {} answered 201 while the node was down, \
         {} answered 202), ledger rows {}, api publishes {:?}, relay republished {}, consumer \
         duplicates skipped {}, lost {lost}, oversold {oversold}; drained {drained}",
        accepted.len(),
        k.accepted,
        k.created_while_down,
        k.deferred,
        ledger.len(),
        publish,
        republished,
        duplicates,
    ));
    sc.expect(lost == 0, format!("nothing accepted is lost ({lost})"));
    sc.expect(
        oversold == 0,
        format!("nothing oversold ({oversold} units)"),
    );
}

/// The roles connect to the first URL; only its loss makes them move.
fn expect_roles_moved(sc: &mut Scenario, victim: usize) {
    let moved = moved_to_later_node(sc);
    if victim == 0 {
        sc.expect(
            ["api", "consumer", "closer"]
                .iter()
                .all(|r| moved.get(*r).copied().unwrap_or(0) > 0),
            format!("every role reconnected to a later node of amqp.urls (log lines per role: {moved:?})"),
        );
    } else {
        sc.note(&format!(
            "the deduct leader was not on the first URL's node: roles kept their connections \
             (reconnect log lines per role: {moved:?})"
        ));
    }
}

fn print_layout(when: &str, queues: &[QueueView], work: &[String]) {
    println!("  queues {when}:");
    for q in queues.iter().filter(|q| work.contains(&q.name)) {
        println!(
            "    {:<28} messages {:>5}  leader {:<24} members {}  online {}",
            q.name,
            q.messages,
            q.leader,
            q.members.len(),
            q.online.len()
        );
    }
}

/// Per role, the log lines saying it connected to a later node of
/// `amqp.urls` than the first (src/mq/mod.rs, `connect_any`).
fn moved_to_later_node(sc: &Scenario) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(sc.stack.logs_dir()) else {
        return out;
    };
    for path in entries.flatten().map(|e| e.path()) {
        let file = path.file_name().unwrap_or_default().to_string_lossy();
        let Some((role, _)) = file.rsplit_once('-') else {
            continue;
        };
        if !["api", "consumer", "closer"].contains(&role) {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
        let n = text
            .lines()
            .filter(|l| l.contains("connected to a later broker of amqp.urls"))
            .count();
        *out.entry(role.to_string()).or_default() += n;
    }
    out
}
