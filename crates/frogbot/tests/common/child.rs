//! `frogbot serve` as a child process (the real binary): a free loopback port, an optional
//! configuration file, healthy before the test goes on, and killed when the test ends.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `frogbot serve`; killed (and reaped) when dropped.
pub(crate) struct ServeProcess {
    pub(crate) child: Child,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `frogbot` binary, logging warnings to the test's stderr.
pub(crate) fn frogbot() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_frogbot"));
    cmd.env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    cmd
}

/// Writes `dir/frogbot.toml`: `listen` on `port`, `database`, then `rest` (more TOML).
pub(crate) fn config_file(dir: &Path, port: u16, database: &str, rest: &str) -> PathBuf {
    let path = dir.join("frogbot.toml");
    std::fs::write(
        &path,
        format!("listen = \"127.0.0.1:{port}\"\ndatabase = \"{database}\"\n\n{rest}\n"),
    )
    .unwrap();
    path
}

/// Spawns `cmd` (a `frogbot serve` listening on `port`) and waits until `/healthz` answers 200.
pub(crate) async fn start(mut cmd: Command, port: u16) -> ServeProcess {
    let child = cmd.spawn().expect("start frogbot serve");
    let process = ServeProcess {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    frogbot_openai::install_crypto_provider();
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = client.get(format!("{}/healthz", process.base)).send().await
            && r.status() == 200
        {
            return process;
        }
        assert!(
            Instant::now() < deadline,
            "frogbot serve did not become healthy"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
