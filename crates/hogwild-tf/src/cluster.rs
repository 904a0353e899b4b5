//! The runner as a worker of a TensorFlow parameter-server cluster (between-graph replication).
//!
//! The graph is exported with `tf.compat.v1.train.replica_device_setter` over the cluster's ps
//! tasks (`examples/export_bow_graph.py --ps-hosts`): its variables, their optimizer slots and the
//! update ops live on `/job:ps` tasks, every other op is unplaced. Each runner serves its own
//! task `/job:worker/task:<i>` with an in-process TensorFlow server ([`crate::server`]) and is
//! the master of its own session, as a Python worker does with `tf.distribute.Server` and
//! `tf.compat.v1.Session(server.target)`; the master places the unplaced ops on its own task, so
//! one graph file serves every worker. The session's device filters (`/job:ps` and the runner's
//! own task) keep the workers independent of each other: a worker neither waits for the others to
//! start nor places anything on them. With `--target` the session connects to another master
//! instead (a server of the same cluster that serves this worker's task) and no server starts.
//!
//! Roles, as `MonitoredTrainingSession`'s: worker task 0 is the chief. It initialises the
//! variables (or restores them), trains, then waits for every other worker to count itself
//! finished (the graph's `hogwild/finish_op` on a counter on a ps task) before it saves and
//! evaluates, so that its checkpoint holds every worker's updates. The other workers wait, before
//! training, until the graph's `ready_op` (`report_uninitialized_variables`) reports nothing.
//!
//! Every wait on the rest of the cluster is bounded by `--wait-timeout`: reaching the ps tasks,
//! the chief's initialisation, the other workers' end; the session's `operation_timeout_in_ms`
//! also bounds each call into the cluster. Reaching it needs care: a master creating a session
//! waits for every task it sees to answer, for ever, and a call to an in-process master (unlike
//! one to a remote master, which its gRPC deadline bounds) then returns only when that wait ends.
//! So a probe first creates a session with a one-constant graph over gRPC even to the in-process
//! master (`use_rpc_for_inprocess_master`); once every task has answered it, the training session
//! calls the in-process master directly, without a gRPC round trip per step (which cost the
//! bag-of-words graph about 15 % of its steps' speed on loopback).

use std::collections::HashMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use prost::Message;
use tensorflow::{Code, DataType, Graph, Session, SessionOptions, SessionRunArgs, Status, Tensor};

use crate::graph::{run_error, SessionConfig, TrainGraph};
use crate::proto::{ClusterDef, ConfigProto, JobDef, RpcOptions, ServerDef};
use crate::server::Server;
use crate::{Error, Result};

/// The job the runners serve a task of.
pub const WORKER_JOB: &str = "worker";
/// The job of the tasks that hold the variables.
pub const PS_JOB: &str = "ps";
/// How often a wait asks the cluster again.
const POLL: Duration = Duration::from_millis(100);

/// Options of `hogwild tf-train` for training as a worker of a parameter-server cluster.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(
    next_help_heading = "Cluster training (a worker of a TensorFlow parameter-server cluster)"
)]
pub struct ClusterArgs {
    /// The cluster's ps tasks, `host:port,...`, which hold the variables (export the graph with
    /// examples/export_bow_graph.py --ps-hosts).
    #[arg(long, value_name = "HOST:PORT,...", value_delimiter = ',',
          value_parser = parse_host_port, requires_all = ["worker_hosts", "task_index"])]
    pub ps_hosts: Vec<String>,
    /// The cluster's worker tasks, `host:port,...`; this runner is one of them.
    #[arg(long, value_name = "HOST:PORT,...", value_delimiter = ',',
          value_parser = parse_host_port, requires_all = ["ps_hosts", "task_index"])]
    pub worker_hosts: Vec<String>,
    /// This runner's task in --worker-hosts (from 0). Task 0 is the chief: it initialises the
    /// variables (or restores --restore), waits for the other workers to finish, saves --save;
    /// the others wait for its initialisation before they train.
    #[arg(long, value_name = "INDEX", requires_all = ["ps_hosts", "worker_hosts"])]
    pub task_index: Option<usize>,
    /// Connect the session to this master, `grpc://host:port`, a TensorFlow server of the same
    /// cluster that serves this worker's task (e.g. a Python tf.distribute.Server), instead of
    /// serving the task in-process.
    #[arg(long, value_name = "grpc://HOST:PORT", value_parser = parse_target,
          requires = "task_index")]
    pub target: Option<String>,
    /// The longest wait, in seconds, on the rest of the cluster: to reach its tasks (and for each
    /// later call into it), for the chief's initialisation, for the other workers' end.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0, value_parser = parse_seconds,
          requires = "task_index")]
    pub wait_timeout: f64,
}

/// Where the session's master is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Master {
    /// The runner serves its task in-process and is its own master.
    InProcess,
    /// Another server of the cluster, `grpc://host:port`.
    Remote(String),
}

/// A validated cluster and this runner's task in it.
#[derive(Debug, Clone)]
pub(crate) struct Cluster {
    ps: Vec<String>,
    workers: Vec<String>,
    task: usize,
    master: Master,
    wait: Duration,
}

/// `host:port` with a port in 1..=65535 and a non-empty host.
fn parse_host_port(text: &str) -> std::result::Result<String, String> {
    let text = text.trim();
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("\"{text}\" is not host:port"))?;
    if host.is_empty() {
        return Err(format!("\"{text}\" has no host"));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(text.to_string()),
        _ => Err(format!("\"{text}\": \"{port}\" is not a port (1 to 65535)")),
    }
}

/// `grpc://host:port`.
fn parse_target(text: &str) -> std::result::Result<String, String> {
    let address = text
        .strip_prefix("grpc://")
        .ok_or_else(|| format!("\"{text}\" is not grpc://host:port"))?;
    parse_host_port(address).map_err(|e| format!("\"{text}\" is not grpc://host:port: {e}"))?;
    Ok(text.to_string())
}

fn parse_seconds(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(s),
        Ok(s) => Err(format!(
            "{s} is not a number of seconds (more than 0, less than 1e9)"
        )),
        Err(e) => Err(format!("\"{text}\" is not a number: {e}")),
    }
}

impl Cluster {
    /// The cluster of `args`, or `None` for training in a local session.
    pub(crate) fn from_args(args: &ClusterArgs) -> Result<Option<Cluster>> {
        let Some(task) = args.task_index else {
            return Ok(None);
        };
        let bad = |option: &'static str, reason: String| Error::BadOption { option, reason };
        if args.ps_hosts.is_empty() {
            return Err(bad("--ps-hosts", "no ps task given".into()));
        }
        if task >= args.worker_hosts.len() {
            return Err(bad(
                "--task-index",
                format!(
                    "{task} is not a task of --worker-hosts, which lists {} (from 0)",
                    args.worker_hosts.len()
                ),
            ));
        }
        for (option, hosts) in [
            ("--ps-hosts", &args.ps_hosts),
            ("--worker-hosts", &args.worker_hosts),
        ] {
            let mut seen = HashMap::new();
            for (i, host) in hosts.iter().enumerate() {
                if let Some(j) = seen.insert(host, i) {
                    return Err(bad(
                        option,
                        format!("{host} is listed twice (tasks {j} and {i})"),
                    ));
                }
            }
        }
        if let Some(host) = args.ps_hosts.iter().find(|h| args.worker_hosts.contains(h)) {
            return Err(bad(
                "--ps-hosts",
                format!("{host} is also in --worker-hosts: every task needs its own port"),
            ));
        }
        Ok(Some(Cluster {
            ps: args.ps_hosts.clone(),
            workers: args.worker_hosts.clone(),
            task,
            master: match &args.target {
                Some(t) => Master::Remote(t.clone()),
                None => Master::InProcess,
            },
            wait: Duration::from_secs_f64(args.wait_timeout),
        }))
    }

    /// Whether this runner is the chief (worker task 0).
    pub(crate) fn is_chief(&self) -> bool {
        self.task == 0
    }

    /// `worker task 1 of 2 (127.0.0.1:2223)`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "worker task {} of {} ({}{})",
            self.task,
            self.workers.len(),
            self.workers[self.task],
            if self.is_chief() { ", the chief" } else { "" }
        )
    }

    fn cluster_def(&self) -> ClusterDef {
        let job = |name: &str, hosts: &[String]| JobDef {
            name: name.into(),
            tasks: (0..).zip(hosts.iter().cloned()).collect(),
        };
        ClusterDef {
            job: vec![job(PS_JOB, &self.ps), job(WORKER_JOB, &self.workers)],
        }
    }

    fn wait_text(&self) -> String {
        format!("{} s (--wait-timeout)", self.wait.as_secs_f64())
    }

    /// Sets the session's target, device filters and deadline in `config`, and starts the
    /// in-process server of this worker's task unless the master is remote. The server must live
    /// as long as the session.
    pub(crate) fn join(&self, config: &mut SessionConfig) -> Result<Option<Server>> {
        config.device_filters = vec![
            format!("/job:{PS_JOB}"),
            format!("/job:{WORKER_JOB}/task:{}", self.task),
        ];
        config.operation_timeout = Some(self.wait);
        match &self.master {
            Master::Remote(target) => {
                config.target = Some(target.clone());
                Ok(None)
            }
            Master::InProcess => {
                let def = ServerDef {
                    cluster: Some(self.cluster_def()),
                    job_name: WORKER_JOB.into(),
                    task_index: self.task as i32,
                    default_session_config: Some(ConfigProto {
                        intra_op_parallelism_threads: config.intra_op_threads as i32,
                        inter_op_parallelism_threads: config.inter_op_threads as i32,
                        ..ConfigProto::default()
                    }),
                    protocol: "grpc".into(),
                };
                let server = Server::start(&def)?;
                config.target = Some(server.target().to_string());
                Ok(Some(server))
            }
        }
    }

    /// The session's master, for messages.
    fn master_text(&self, target: &str) -> String {
        match &self.master {
            Master::InProcess => format!("its in-process server ({target})"),
            Master::Remote(t) => t.clone(),
        }
    }

    /// Creates a session with a one-constant graph on the master of `config` and runs it, so
    /// that the master has heard from every task the session sees (the ps tasks and this
    /// worker's), within the wait timeout: over gRPC, which bounds the call, even to the
    /// in-process master. Names the tasks nothing answers at when that fails.
    pub(crate) fn reach(&self, config: &SessionConfig) -> Result<()> {
        let target = config.target.as_deref().unwrap_or_default();
        eprintln!(
            "{}: reaching the ps tasks {} through {}",
            self.describe(),
            self.ps.join(","),
            self.master_text(target)
        );
        let during = || format!("reaching the cluster through {}", self.master_text(target));
        let probe = || -> std::result::Result<(), Status> {
            let mut graph = Graph::new();
            let mut op = graph.new_operation("Const", "hogwild_probe")?;
            op.set_attr_type("dtype", DataType::Int32)?;
            op.set_attr_tensor("value", Tensor::from(0i32))?;
            let op = op.finish()?;
            let config = ConfigProto {
                device_filters: config.device_filters.clone(),
                operation_timeout_in_ms: self.wait.as_millis().max(1) as i64,
                rpc_options: Some(RpcOptions {
                    use_rpc_for_inprocess_master: true,
                }),
                ..ConfigProto::default()
            };
            let mut options = SessionOptions::new();
            options.set_config(&config.encode_to_vec())?;
            options
                .set_target(target)
                .map_err(|e| Status::new_set_lossy(Code::InvalidArgument, &e.to_string()))?;
            let mut session = Session::new(&options, &graph)?;
            let mut args = SessionRunArgs::new();
            args.request_fetch(&op, 0);
            session.run(&mut args)?;
            session.close()
        };
        probe().map_err(|status| match status.code() {
            Code::DeadlineExceeded | Code::Unavailable => Error::Cluster {
                task: self.describe(),
                reason: format!(
                    "cannot reach the cluster through {} within {}: {status}; {}",
                    self.master_text(target),
                    self.wait_text(),
                    self.silent_tasks()
                ),
            },
            _ => run_error(during(), status),
        })
    }

    /// Which of the tasks a session needs accept no TCP connection, for an error message.
    fn silent_tasks(&self) -> String {
        let mut tasks: Vec<(String, &str)> = (0..)
            .zip(&self.ps)
            .map(|(i, host)| (format!("ps task {i}"), host.as_str()))
            .collect();
        match &self.master {
            Master::Remote(t) => tasks.push(("the master".into(), &t["grpc://".len()..])),
            Master::InProcess => {}
        }
        let silent: Vec<String> = tasks
            .iter()
            .filter(|(_, host)| !accepts_connections(host))
            .map(|(task, host)| format!("{task} ({host})"))
            .collect();
        if silent.is_empty() {
            "every task accepts connections (is each one a TensorFlow server of this cluster?)"
                .into()
        } else {
            format!("nothing accepts connections at {}", silent.join(", "))
        }
    }

    /// Brings the variables up before training, once the cluster is reached ([`Cluster::reach`]):
    /// the chief initialises them or restores `restore`, the other workers wait until every
    /// variable is initialised.
    pub(crate) fn start(
        &self,
        graph: &TrainGraph,
        restore: Option<&std::path::Path>,
    ) -> Result<()> {
        let started = Instant::now();
        let ask = || {
            graph
                .uninitialized_variables()
                .map_err(|s| run_error("asking the cluster for uninitialised variables", s))
        };
        if self.is_chief() {
            match restore {
                Some(prefix) => graph.restore(prefix)?,
                None => graph.init()?,
            }
            eprintln!(
                "{}: {} the variables",
                self.describe(),
                if restore.is_some() {
                    "restored"
                } else {
                    "initialised"
                }
            );
            return Ok(());
        }
        let mut uninitialized = ask()?;
        let mut said = false;
        while !uninitialized.is_empty() {
            if started.elapsed() >= self.wait {
                return Err(Error::Cluster {
                    task: self.describe(),
                    reason: format!(
                        "the chief (worker task 0, {}) has not initialised the variables within \
                         {}; uninitialised: {}",
                        self.workers[0],
                        self.wait_text(),
                        uninitialized.join(", ")
                    ),
                });
            }
            if !said {
                eprintln!(
                    "{}: waiting for the chief to initialise the variables",
                    self.describe()
                );
                said = true;
            }
            std::thread::sleep(POLL);
            uninitialized = ask()?;
        }
        Ok(())
    }

    /// After training: counts this worker finished; the chief then waits until every worker
    /// has. `Ok(Some(error))` when the chief's wait ran out: it may still save and evaluate what
    /// the ps tasks hold, then report the error.
    pub(crate) fn finish(&self, graph: &TrainGraph) -> Result<Option<Error>> {
        graph.count_finished()?;
        if !self.is_chief() {
            return Ok(None);
        }
        let all = self.workers.len() as i64;
        let started = Instant::now();
        let mut said = false;
        loop {
            let finished = graph.finished_workers()?;
            if finished >= all {
                return Ok(None);
            }
            if started.elapsed() >= self.wait {
                return Ok(Some(Error::Cluster {
                    task: self.describe(),
                    reason: format!(
                        "only {finished} of {all} workers finished training within {} (a \
                         checkpoint or evaluation asked for holds what the ps tasks held then)",
                        self.wait_text()
                    ),
                }));
            }
            if !said {
                eprintln!(
                    "{}: {finished} of {all} workers finished; waiting for the others",
                    self.describe()
                );
                said = true;
            }
            std::thread::sleep(POLL);
        }
    }
}

/// Whether something at `host` (`host:port`) accepts a TCP connection within a second.
fn accepts_connections(host: &str) -> bool {
    let Ok(addresses) = host.to_socket_addrs() else {
        return false;
    };
    addresses
        .into_iter()
        .any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_host_port() {
        assert_eq!(parse_host_port("127.0.0.1:2222").unwrap(), "127.0.0.1:2222");
        assert_eq!(parse_host_port("[::1]:80").unwrap(), "[::1]:80");
        assert!(parse_host_port("localhost")
            .unwrap_err()
            .contains("not host:port"));
        assert!(parse_host_port(":80").unwrap_err().contains("no host"));
        assert!(parse_host_port("h:0").unwrap_err().contains("not a port"));
        assert!(parse_host_port("h:99999")
            .unwrap_err()
            .contains("not a port"));
        assert_eq!(parse_target("grpc://h:1").unwrap(), "grpc://h:1");
        assert!(parse_target("h:1")
            .unwrap_err()
            .contains("not grpc://host:port"));
        assert!(parse_target("grpc://h")
            .unwrap_err()
            .contains("not grpc://host:port"));
    }

    fn args(ps: &[&str], workers: &[&str], task: usize) -> ClusterArgs {
        ClusterArgs {
            ps_hosts: ps.iter().map(|s| s.to_string()).collect(),
            worker_hosts: workers.iter().map(|s| s.to_string()).collect(),
            task_index: Some(task),
            target: None,
            wait_timeout: 1.0,
        }
    }

    #[test]
    fn the_task_must_be_one_of_the_workers_and_every_task_its_own_address() {
        let c = Cluster::from_args(&args(&["h:1"], &["h:2", "h:3"], 1))
            .unwrap()
            .unwrap();
        assert!(!c.is_chief());
        assert_eq!(c.describe(), "worker task 1 of 2 (h:3)");
        let e = Cluster::from_args(&args(&["h:1"], &["h:2"], 1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--task-index: 1 is not a task of --worker-hosts, which lists 1 (from 0)"
        );
        let e = Cluster::from_args(&args(&["h:1", "h:1"], &["h:2"], 0)).unwrap_err();
        assert!(e.to_string().contains("h:1 is listed twice"), "{e}");
        let e = Cluster::from_args(&args(&["h:2"], &["h:2"], 0)).unwrap_err();
        assert!(e.to_string().contains("also in --worker-hosts"), "{e}");
        assert!(Cluster::from_args(&ClusterArgs::default())
            .unwrap()
            .is_none());
    }
}
