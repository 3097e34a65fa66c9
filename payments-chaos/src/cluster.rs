//! The system under test: real `payments-server serve` processes, each behind fault proxies
//! to PostgreSQL and to the upstream, with a clock-offset file each; the PostgreSQL server
//! (restarted and killed with its `pg_ctl`); for SQLite, the node's data dir on a small tmpfs
//! that the nemesis fills.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use payments_server::testing::free_addr;

use crate::proxy::Proxy;
use crate::upstream::{PROVIDERS, SECRETS};
use crate::Error;

/// The lease of a callback attempt (longer than the 10 s attempt timeout, as the server
/// requires): a node stopped (SIGSTOP) for longer loses its attempts to the others.
pub const LEASE: Duration = Duration::from_secs(11);

/// One node.
#[derive(Debug)]
pub struct Node {
    /// Its index.
    pub index: usize,
    /// The merchant API.
    pub merchant: SocketAddr,
    /// The operator API.
    pub operator: SocketAddr,
    /// The providers' notifications.
    pub notifications: SocketAddr,
    cabinet: SocketAddr,
    /// The file its clock offset (milliseconds) is read from.
    pub clock_file: PathBuf,
    /// Its way to PostgreSQL (`None` on SQLite).
    pub database: Option<Proxy>,
    /// Its way to the upstream.
    pub upstream: Proxy,
    config: PathBuf,
    child: Option<Child>,
    starts: usize,
    /// SIGSTOPped now.
    pub paused: bool,
}

/// What the nodes run with.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `payments-server` binary.
    pub binary: PathBuf,
    /// The data dir (shared by the nodes of one database: the sandbox's credentials file).
    pub data_dir: PathBuf,
    /// Where the nodes' logs go.
    pub logs: PathBuf,
    /// The PostgreSQL URL with the run's schema (`None`: SQLite in the data dir).
    pub database_url: Option<url::Url>,
    /// A planted bug to switch on (`testing.planted_bug`).
    pub planted_bug: Option<String>,
}

impl Node {
    /// A node's ports, proxies and files (not started).
    pub async fn new(
        index: usize,
        launch: &Launch,
        database: Option<SocketAddr>,
        upstream: SocketAddr,
    ) -> Result<Node, Error> {
        let database = match database {
            Some(addr) => Some(Proxy::start(addr).await?),
            None => None,
        };
        let node = Node {
            index,
            merchant: free_addr(),
            operator: free_addr(),
            notifications: free_addr(),
            cabinet: free_addr(),
            clock_file: launch.logs.join(format!("node{index}.clock")),
            database,
            upstream: Proxy::start(upstream).await?,
            config: launch.logs.join(format!("node{index}.toml")),
            child: None,
            starts: 0,
            paused: false,
        };
        std::fs::write(&node.clock_file, "0")?;
        std::fs::write(&node.config, node.config_text())?;
        Ok(node)
    }

    /// The settings file: the two providers through this node's upstream proxy.
    fn config_text(&self) -> String {
        let mut text = String::from(
            "[upstream]\nprovider = \"http\"\nrate_source = \"fixed\"\ntimeout = \"3s\"\n\
             provider_budget = \"8s\"\nbreaker_failures = 5\nbreaker_open = \"2s\"\n",
        );
        for (i, name) in PROVIDERS.iter().enumerate() {
            text.push_str(&format!(
                "\n[[upstream.providers]]\nname = \"{name}\"\nurl = \"http://{}/{name}/requisites\"\n\
                 secrets = [\"{}\"]\npriority = {i}\n",
                self.upstream.addr, SECRETS[i]
            ));
        }
        text
    }

    /// `http://` of the merchant API.
    pub fn merchant_url(&self) -> String {
        format!("http://{}", self.merchant)
    }

    /// `http://` of the operator API.
    pub fn operator_url(&self) -> String {
        format!("http://{}", self.operator)
    }

    /// `http://` of the notification listener.
    pub fn notifications_url(&self) -> String {
        format!("http://{}", self.notifications)
    }

    /// Whether its process runs (possibly paused).
    pub fn is_up(&self) -> bool {
        self.child.is_some()
    }

    /// Starts the process.
    pub fn start(&mut self, launch: &Launch) -> Result<(), Error> {
        debug_assert!(self.child.is_none(), "node {} started twice", self.index);
        let log = std::fs::File::create(
            launch
                .logs
                .join(format!("node{}-{}.log", self.index, self.starts)),
        )?;
        self.starts += 1;
        let mut command = Command::new(&launch.binary);
        command
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PAYMENTS_CONFIG", &self.config)
            .env("PAYMENTS_DATA_DIR", &launch.data_dir)
            .env("PAYMENTS_LISTEN__MERCHANT", self.merchant.to_string())
            .env("PAYMENTS_LISTEN__OPERATOR", self.operator.to_string())
            .env("PAYMENTS_CABINET__LISTEN", self.cabinet.to_string())
            .env("PAYMENTS_UPSTREAM__LISTEN", self.notifications.to_string())
            .env("PAYMENTS_CALLBACKS__ALLOW_LOCAL", "1")
            .env("PAYMENTS_CALLBACKS__RETRY_DELAYS", "1,1,2,2,3,3,5,5,5,5")
            .env(
                "PAYMENTS_CALLBACKS__LEASE",
                format!("{}ms", LEASE.as_millis()),
            )
            .env("PAYMENTS_TUNING__SWEEP_INTERVAL", "200ms")
            .env("PAYMENTS_TUNING__SHUTDOWN_GRACE", "1s")
            .env("PAYMENTS_STORE__RESERVE_MIB", "2")
            .env("PAYMENTS_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let (Some(url), Some(proxy)) = (&launch.database_url, &self.database) {
            let mut url = url.clone();
            url.set_host(Some("127.0.0.1"))
                .map_err(|e| Error::Setup(format!("the database URL: {e}")))?;
            url.set_port(Some(proxy.addr.port()))
                .map_err(|()| Error::Setup("the database URL takes no port".into()))?;
            command
                .env("PAYMENTS_STORE__DATABASE_URL", url.as_str())
                .env("PAYMENTS_STORE__POOL_SIZE", "6");
        }
        command.env("PAYMENTS_TESTING__CLOCK_OFFSET_FILE", &self.clock_file);
        if let Some(bug) = &launch.planted_bug {
            command.env("PAYMENTS_TESTING__PLANTED_BUG", bug);
        }
        self.child = Some(command.spawn()?);
        self.paused = false;
        Ok(())
    }

    /// SIGKILL: nothing flushed, requests in flight cut.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`).
    pub fn pause(&mut self, stop: bool) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .arg(if stop { "-STOP" } else { "-CONT" })
                .arg(child.id().to_string())
                .status();
            self.paused = stop;
        }
    }

    /// Jumps its clock to `offset_ms` from the real time.
    pub fn set_clock(&self, offset_ms: i64) -> Result<(), Error> {
        std::fs::write(&self.clock_file, offset_ms.to_string())?;
        Ok(())
    }

    /// The last line of its current log (why it exited).
    pub fn last_log_line(&self, launch: &Launch) -> String {
        let path = launch.logs.join(format!(
            "node{}-{}.log",
            self.index,
            self.starts.saturating_sub(1)
        ));
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .last()
            .unwrap_or_default()
            .to_string()
    }

    /// Whether the process exited by itself (a crash): its status.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                Some(status)
            }
            _ => None,
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if self.paused {
            self.pause(false);
        }
        self.kill();
    }
}

/// Waits until `<merchant_url>/readyz` answers `200` (at most `within`).
pub async fn wait_ready(http: &reqwest::Client, merchant_url: &str, within: Duration) -> bool {
    let url = format!("{merchant_url}/readyz");
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let ready = http
            .get(&url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

// --- PostgreSQL ------------------------------------------------------------------------------

/// The test database's server, restarted and killed with its `pg_ctl` as the user `postgres`.
#[derive(Debug, Clone)]
pub struct Database {
    pg_ctl: String,
    data: String,
}

impl Database {
    /// From `PAYMENTS_TEST_PG_CTL` and `PAYMENTS_TEST_PG_DATA` (`.ci/run` exports both).
    pub fn from_env() -> Option<Database> {
        Some(Database {
            pg_ctl: std::env::var("PAYMENTS_TEST_PG_CTL").ok()?,
            data: std::env::var("PAYMENTS_TEST_PG_DATA").ok()?,
        })
    }

    /// The options the server was started with (what follows the data dir in
    /// `postmaster.opts`), for starting it again after a kill.
    fn options(&self) -> Result<String, Error> {
        let opts = std::fs::read_to_string(format!("{}/postmaster.opts", self.data))?;
        opts.split_once(&format!("\"{}\"", self.data))
            .map(|(_, rest)| rest.trim().to_string())
            .ok_or_else(|| Error::Setup("postmaster.opts does not name the data dir".into()))
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<(), Error> {
        let status = Command::new("runuser")
            .args(["-u", "postgres", "--", &self.pg_ctl, "-D", &self.data])
            .args(["-w", "-t", "60"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::Setup(format!("pg_ctl {args:?}: {status}")))
        }
    }

    /// Fast restart: every session cut, the server back at once.
    pub fn restart(&self) -> Result<(), Error> {
        self.pg_ctl(&["-m", "fast", "restart"])
    }

    /// Immediate stop (a crash: recovery from the WAL at the next start).
    pub fn kill(&self) -> Result<String, Error> {
        let options = self.options()?;
        self.pg_ctl(&["-m", "immediate", "stop"])?;
        Ok(options)
    }

    /// Starts it with `options` (from [`Database::kill`]).
    pub fn start(&self, options: &str) -> Result<(), Error> {
        self.pg_ctl(&[
            "-o",
            options,
            "-l",
            &format!("{}/chaos.log", self.data),
            "start",
        ])
    }
}

/// A new schema in the database at `base`; `base` with it as the `search_path`.
pub async fn fresh_schema(base: &str, seed: u64) -> Result<url::Url, Error> {
    let name = format!("chaos_{seed:x}_{}", std::process::id());
    let (client, connection) = tokio_postgres::connect(base, tokio_postgres::NoTls).await?;
    let task = tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"
        ))
        .await?;
    drop(client);
    let _ = task.await;
    let sep = if base.contains('?') { '&' } else { '?' };
    url::Url::parse(&format!("{base}{sep}options=-c%20search_path%3D{name}"))
        .map_err(|e| Error::Setup(format!("DATABASE_URL: {e}")))
}

/// The address `url` connects to (127.0.0.1 for `localhost`).
pub fn database_addr(url: &url::Url) -> Result<SocketAddr, Error> {
    let host = match url.host_str() {
        Some("localhost") | None => "127.0.0.1",
        Some(h) => h,
    };
    let port = url.port().unwrap_or(5432);
    format!("{host}:{port}")
        .parse()
        .map_err(|_| Error::Setup(format!("DATABASE_URL's host {host} is not an IP address")))
}

// --- a small disk ----------------------------------------------------------------------------

/// A tmpfs mounted on a new directory, unmounted on drop: the SQLite node's data dir, which
/// the nemesis fills with a ballast file.
#[derive(Debug)]
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts `mib` MiB (needs root).
    pub fn mount(mib: u32) -> Result<SmallDisk, Error> {
        let dir = tempfile::tempdir()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()?;
        if !status.success() {
            return Err(Error::Setup(format!(
                "mount a {mib} MiB tmpfs (the full-disk fault needs root): {status}"
            )));
        }
        Ok(SmallDisk { dir })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The ballast file.
    fn ballast(&self) -> PathBuf {
        self.dir.path().join("ballast")
    }

    /// Fills the disk to the brim with a ballast file; the bytes written.
    pub fn fill(&self) -> Result<u64, Error> {
        use std::io::Write as _;
        let mut file = std::fs::File::create(self.ballast())?;
        let chunk = vec![0u8; 1 << 16];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(_) => break,
            }
        }
        let _ = file.sync_all();
        Ok(written)
    }

    /// Deletes the ballast.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.ballast());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
