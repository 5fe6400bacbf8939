//! The stack's RabbitMQ: the single private node every scenario used so far,
//! or a private 3-node cluster (s15). The drain and the audit only ask for
//! queue depths, which both answer; the single-node faults (kill -9, freeze,
//! memory alarm) keep their names, so the scenarios written for one node read
//! as before, and panic on a cluster stack (a cluster scenario uses
//! [`Broker::cluster`]).

use super::process::OwnedProcess;
use super::rabbit_cluster::RabbitCluster;
use super::rabbitmq::Rabbit;

pub enum Broker {
    Single(Rabbit),
    Cluster(RabbitCluster),
}

impl Broker {
    /// `amqp.url`: the node, or the cluster's first node.
    pub fn url(&self) -> String {
        match self {
            Self::Single(r) => r.url(),
            Self::Cluster(c) => c.nodes[0].url(),
        }
    }

    /// `amqp.urls` of a cluster (None for the single node).
    pub fn urls(&self) -> Option<String> {
        match self {
            Self::Single(_) => None,
            Self::Cluster(c) => Some(c.urls()),
        }
    }

    /// (name, messages, ready, unacked) of every queue, from rabbitmqctl.
    pub async fn list_queues(&self) -> Vec<(String, u64, u64, u64)> {
        match self {
            Self::Single(r) => r.list_queues().await,
            Self::Cluster(c) => c.list_queues().await,
        }
    }

    /// Ready messages of `queue` (AMQP passive declare), None if unreachable.
    pub async fn ready(&self, queue: &str) -> Option<u32> {
        match self {
            Self::Single(r) => r.ready(queue).await,
            Self::Cluster(c) => c.ready(queue).await,
        }
    }

    pub fn cluster(&mut self) -> &mut RabbitCluster {
        match self {
            Self::Cluster(c) => c,
            Self::Single(_) => panic!("this stack runs a single RabbitMQ node"),
        }
    }

    fn single(&mut self) -> &mut Rabbit {
        match self {
            Self::Single(r) => r,
            Self::Cluster(_) => panic!("this stack runs a RabbitMQ cluster: use cluster()"),
        }
    }

    // The single node's faults, under the names the scenarios use.

    pub fn process(&mut self) -> &mut OwnedProcess {
        self.single().process()
    }

    pub fn kill9(&mut self) {
        self.single().kill9();
    }

    pub async fn restart(&mut self) {
        self.single().restart().await;
    }

    pub async fn memory_alarm(&self, on: bool) {
        match self {
            Self::Single(r) => r.memory_alarm(on).await,
            Self::Cluster(_) => panic!("memory_alarm: single-node stacks only"),
        }
    }
}
