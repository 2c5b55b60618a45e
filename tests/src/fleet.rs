//! The `frogbot serve` processes: started with a configuration file (the `demo` model, the run's
//! users), SIGKILLed and restarted, their RSS read from `/proc`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use crate::client::{Api, USERS, token};

/// `A`, `B`, … for slot 0, 1, ….
pub fn slot_name(i: usize) -> char {
    char::from(b'A' + (i % 26) as u8)
}

#[derive(Debug)]
struct Slot {
    /// The running process, when there is one.
    child: Mutex<Option<Child>>,
    /// Its pid (0 when down).
    pid: RwLock<u32>,
    /// `http://127.0.0.1:PORT` while the process is up.
    base: RwLock<Option<String>>,
    /// The port it listens on (kept across restarts when possible).
    port: Mutex<u16>,
    /// Starts so far.
    starts: Mutex<u32>,
}

/// The serve processes of the run.
#[derive(Debug)]
pub struct Fleet {
    slots: Vec<Slot>,
    frogbot: PathBuf,
    dir: PathBuf,
    database: String,
    lease: Duration,
    api: Api,
    /// More configuration appended to each process's file (e.g. a `[channels.…]` table).
    extra_config: String,
    /// Environment variables each process gets (the secrets `extra_config`'s `*_env` keys name).
    env: Vec<(String, String)>,
}

impl Fleet {
    /// Starts `n` processes on `database`, one after the other (the first migrates), each healthy.
    pub async fn start(
        api: &Api,
        frogbot: PathBuf,
        dir: PathBuf,
        database: String,
        n: usize,
        lease: Duration,
    ) -> Result<Fleet, String> {
        Self::start_with(
            api,
            frogbot,
            dir,
            database,
            n,
            lease,
            String::new(),
            Vec::new(),
        )
        .await
    }

    /// [`Fleet::start`] with `extra_config` appended to each process's configuration and `env`
    /// set in each process's environment.
    #[allow(clippy::too_many_arguments)]
    pub async fn start_with(
        api: &Api,
        frogbot: PathBuf,
        dir: PathBuf,
        database: String,
        n: usize,
        lease: Duration,
        extra_config: String,
        env: Vec<(String, String)>,
    ) -> Result<Fleet, String> {
        let fleet = Fleet {
            slots: (0..n)
                .map(|_| Slot {
                    child: Mutex::new(None),
                    pid: RwLock::new(0),
                    base: RwLock::new(None),
                    port: Mutex::new(free_port()),
                    starts: Mutex::new(0),
                })
                .collect(),
            frogbot,
            dir,
            database,
            lease,
            api: api.clone(),
            extra_config,
            env,
        };
        for i in 0..n {
            fleet.launch(i).await?;
        }
        Ok(fleet)
    }

    /// How many processes.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the fleet has no process slots (never, once started).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The base URL of slot `i` while it is up.
    pub fn base(&self, i: usize) -> Option<String> {
        self.slots[i].base.read().expect("lock").clone()
    }

    /// A random process that is up: its slot and base URL.
    pub fn pick(&self, rng: &mut fastrand::Rng) -> Option<(usize, String)> {
        let up: Vec<(usize, String)> = (0..self.len())
            .filter_map(|i| self.base(i).map(|b| (i, b)))
            .collect();
        if up.is_empty() {
            None
        } else {
            Some(up[rng.usize(..up.len())].clone())
        }
    }

    /// The pid of slot `i` (0 when down).
    pub fn pid(&self, i: usize) -> u32 {
        *self.slots[i].pid.read().expect("lock")
    }

    /// Resident memory of slot `i` in kB (`VmRSS`), when it is up.
    pub fn rss_kb(&self, i: usize) -> Option<u64> {
        let pid = self.pid(i);
        if pid == 0 {
            return None;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// SIGKILLs slot `i` and reaps it; its pid, or `None` when it was down.
    pub async fn kill(&self, i: usize) -> Option<u32> {
        let child = self.slots[i].child.lock().expect("lock").take();
        let mut child = child?;
        let pid = child.id();
        let _ = child.kill(); // SIGKILL
        *self.slots[i].base.write().expect("lock") = None;
        *self.slots[i].pid.write().expect("lock") = 0;
        let _ = tokio::task::spawn_blocking(move || child.wait()).await;
        Some(pid)
    }

    /// Starts slot `i` again (on its port, or a new one when that is still taken).
    pub async fn restart(&self, i: usize) -> Result<u32, String> {
        let mut last = String::new();
        for attempt in 0..4 {
            if attempt > 0 {
                *self.slots[i].port.lock().expect("lock") = free_port();
            }
            match self.launch(i).await {
                Ok(pid) => return Ok(pid),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Lines each process logged (warnings and errors: they run with `RUST_LOG=warn`), over all
    /// its starts, and where its log is.
    pub fn logged(&self) -> Vec<(usize, PathBuf)> {
        (0..self.len())
            .map(|i| {
                let path = self.dir.join(format!("serve-{}.log", slot_name(i)));
                let lines = std::fs::read_to_string(&path)
                    .map(|t| t.lines().filter(|l| !l.starts_with("==== soak:")).count())
                    .unwrap_or(0);
                (lines, path)
            })
            .collect()
    }

    /// Stops every process (SIGKILL; nothing is left to finish).
    pub async fn stop_all(&self) {
        for i in 0..self.len() {
            self.kill(i).await;
        }
    }

    fn config(&self, i: usize, port: u16) -> Result<PathBuf, String> {
        let path = self.dir.join(format!("serve-{}.toml", slot_name(i)));
        let mut text = format!(
            "listen = \"127.0.0.1:{port}\"\ndatabase = \"{}\"\nturn_lease_seconds = {}\n",
            self.database,
            self.lease.as_secs()
        );
        for u in 0..USERS {
            text.push_str(&format!(
                "\n[[users]]\nid = \"soak-user-{u}\"\ntoken = \"{}\"\n",
                token(u)
            ));
        }
        text.push_str(&self.extra_config);
        std::fs::write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
        Ok(path)
    }

    /// Starts slot `i` and waits until it is healthy.
    async fn launch(&self, i: usize) -> Result<u32, String> {
        let port = *self.slots[i].port.lock().expect("lock");
        let config = self.config(i, port)?;
        let log_path = self.dir.join(format!("serve-{}.log", slot_name(i)));
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("open {}: {e}", log_path.display()))?;
        let n = {
            let mut s = self.slots[i].starts.lock().expect("lock");
            *s += 1;
            *s
        };
        let _ = writeln!(log, "==== soak: start #{n} on port {port}");
        let mut cmd = Command::new(&self.frogbot);
        cmd.arg("serve")
            .arg("--config")
            .arg(&config)
            .env_remove("FROGBOT_LISTEN")
            .env_remove("FROGBOT_DATABASE")
            .env_remove("FROGBOT_CONFIG")
            .env("RUST_LOG", "warn")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let mut child = spawn(cmd).await?;
        let pid = child.id();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "frogbot serve {} exited at start ({status}); see {}",
                    slot_name(i),
                    log_path.display()
                ));
            }
            if self.api.healthy(&base).await {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "frogbot serve {} not healthy within 60 s; see {}",
                    slot_name(i),
                    log_path.display()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        *self.slots[i].child.lock().expect("lock") = Some(child);
        *self.slots[i].pid.write().expect("lock") = pid;
        *self.slots[i].base.write().expect("lock") = Some(base);
        Ok(pid)
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for slot in &self.slots {
            if let Some(mut child) = slot.child.lock().ok().and_then(|mut c| c.take()) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The `frogbot` binary to run: `explicit` (a `--frogbot` option), else the one next to this
/// executable (built in the same profile).
pub fn frogbot_binary(explicit: Option<&std::path::Path>) -> Result<PathBuf, String> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| format!("where is this executable: {e}"))?
            .parent()
            .ok_or("this executable has no directory")?
            .join("frogbot"),
    };
    if !path.is_file() {
        return Err(format!(
            "no frogbot binary at {} (build it: `cargo build -p frogbot` in the same profile, or \
             pass --frogbot PATH)",
            path.display()
        ));
    }
    Ok(path)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

type SpawnRequest = (
    Command,
    tokio::sync::oneshot::Sender<std::io::Result<Child>>,
);

/// Spawns `cmd` from one long-lived thread, so the child's parent-death signal (SIGKILL when
/// this process dies, however it dies) is tied to a thread that lives as long as the process:
/// no `frogbot serve` outlives a killed soak.
async fn spawn(cmd: Command) -> Result<Child, String> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("soak-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    die_with_parent(&mut cmd);
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawn the spawner thread");
        Mutex::new(tx)
    });
    let (tx, rx) = tokio::sync::oneshot::channel();
    sender
        .lock()
        .expect("lock")
        .send((cmd, tx))
        .map_err(|_| "the spawner thread is gone".to_string())?;
    rx.await
        .map_err(|_| "the spawner thread is gone".to_string())?
        .map_err(|e| format!("start frogbot serve: {e}"))
}

#[allow(unsafe_code)] // prctl(2) between fork and exec
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only calls prctl(2), which is
    // async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
