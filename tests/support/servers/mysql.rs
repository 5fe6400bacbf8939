//! The stack's MySQL: the single private mariadbd every scenario used so far,
//! or a primary with an asynchronous replica behind a proxy (s17). stockd
//! connects to [`Mysql::url`] either way; the harness's own reads go straight
//! to the server that takes writes now. The single-server faults (kill -9,
//! restart, freeze) keep their names, so the scenarios written for one server
//! read as before, and panic on a pair (s17 uses [`Mysql::pair_mut`]).

use super::mariadb::Mariadb;
use super::mariadb_replica::MysqlPair;
use super::process::OwnedProcess;

/// Which MySQL a stack runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MysqlSetup {
    /// One mariadbd (every scenario up to s16).
    Single,
    /// A primary and an asynchronous replica behind a re-pointable proxy.
    PrimaryReplica,
}

/// Both variants boxed: a server is a few hundred bytes, a pair two and a proxy.
pub enum Mysql {
    Single(Box<Mariadb>),
    Pair(Box<MysqlPair>),
}

impl Mysql {
    /// `mysql.url` of every stockd process: the server, or the pair's proxy.
    pub fn url(&self, name: &str) -> String {
        match self {
            Self::Single(m) => m.url(name),
            Self::Pair(p) => p.url(name),
        }
    }

    /// A harness connection to database `name` on the server taking writes.
    pub async fn conn(&self, name: &str) -> mysql_async::Conn {
        match self {
            Self::Single(m) => m.conn(name).await,
            Self::Pair(p) => p.current().conn(name).await,
        }
    }

    pub fn pair(&self) -> &MysqlPair {
        match self {
            Self::Pair(p) => p,
            Self::Single(_) => panic!("a single mariadbd, not a primary + replica pair"),
        }
    }

    pub fn pair_mut(&mut self) -> &mut MysqlPair {
        match self {
            Self::Pair(p) => p,
            Self::Single(_) => panic!("a single mariadbd, not a primary + replica pair"),
        }
    }

    /// The single server (its place and port, to cut its link).
    pub fn server(&self) -> &Mariadb {
        match self {
            Self::Single(m) => m,
            Self::Pair(_) => panic!("a primary + replica pair: use Mysql::pair"),
        }
    }

    fn single(&mut self) -> &mut Mariadb {
        match self {
            Self::Single(m) => m,
            Self::Pair(_) => panic!("a primary + replica pair: use Mysql::pair_mut"),
        }
    }

    /// kill -9 of the single server.
    pub fn kill9(&mut self) {
        self.single().kill9();
    }

    /// Restart of the single server on its datadir (crash recovery).
    pub async fn restart(&mut self) {
        self.single().restart().await;
    }

    /// The single server's process (to freeze it).
    pub fn process(&mut self) -> &mut OwnedProcess {
        self.single().process()
    }
}
