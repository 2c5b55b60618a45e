//! FrogBot's cross-crate end-to-end suite. The tests live in `tests/tests/`; what they share
//! with every other suite (the scripted `TestModel`, engines over a store, `eventually`, the
//! `PausingStore`, the `backends!` matrix) is in `frogbot-testkit`. This library holds
//! [`CrashChild`]: a real child process (the `frogbot-crash-child` binary of this package) that
//! runs one turn on a database and is then SIGKILLed; and, for the `soak` and `scale` binaries,
//! [`fleet`] (`frogbot serve` processes started, killed and restarted) and [`client`] (their HTTP
//! client). Not published; nothing here may be a dependency of a published crate.

pub mod client;
pub mod fleet;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use frogbot_core::model::{ChatId, Millis};

// ---- a FrogBot process to kill -------------------------------------------------------------------

/// What the crash child prints once its step streamed text that is checkpointed, and then hangs.
pub const STEP_STARTED: &str = "STEP-STARTED";
/// What the crash child prints once its turn waits on a question.
pub const AWAITING: &str = "AWAITING";
/// The text the crash child's hanging step streams (in two deltas) before it hangs.
pub const PARTIAL_TEXT: [&str; 2] = ["thinking… ", "still thinking"];

/// A running `frogbot-crash-child`: `frogbot-crash-child DB_URL CHAT_ID TURN_LEASE_MS TEXT` sends
/// `TEXT` to the chat and runs the turn by script (`hang`: streams [`PARTIAL_TEXT`], waits until
/// it is checkpointed, prints [`STEP_STARTED`] and hangs mid-step; `ask`: asks a question, prints
/// [`AWAITING`] when the turn waits, and sleeps). The child exits when its stdin closes, so a
/// test that dies takes it along; dropping this kills it.
#[derive(Debug)]
pub struct CrashChild {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<String>>,
    _stdin: Option<ChildStdin>,
}

impl CrashChild {
    /// Starts the child binary at `bin` (an integration test passes
    /// `env!("CARGO_BIN_EXE_frogbot-crash-child")`).
    pub fn spawn(bin: &str, url: &str, chat: &ChatId, turn_lease_ms: Millis, text: &str) -> Self {
        let mut child = Command::new(bin)
            .args([url, chat.as_str(), &turn_lease_ms.to_string(), text])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {bin}: {e}"));
        let (tx, lines) = mpsc::unbounded_channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("stderr lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Self {
            child,
            lines,
            stderr,
            _stdin: stdin,
        }
    }

    /// Waits for the child to print the line `want` (an event, not a sleep); panics with the
    /// child's stderr when it prints something else, exits, or stays silent for `timeout`.
    pub async fn expect_line(&mut self, want: &str, timeout: Duration) {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Ok(Some(line)) if line == want => {}
            Ok(Some(line)) => panic!(
                "the child printed {line:?}, expected {want:?}; stderr:\n{}",
                self.stderr()
            ),
            Ok(None) => {
                let status = self.child.wait().ok();
                panic!(
                    "the child exited ({status:?}) before printing {want:?}; stderr:\n{}",
                    self.stderr()
                )
            }
            Err(_) => panic!(
                "the child printed nothing for {timeout:?}, expected {want:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    /// What the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }

    /// Kills the child with SIGKILL (no cleanup runs in it) and reaps it. Panics if it had already
    /// exited on its own.
    pub fn kill(&mut self) -> ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        if let Some(status) = self.child.try_wait().expect("poll child") {
            panic!(
                "the child exited on its own ({status}) before the kill; stderr:\n{}",
                self.stderr()
            );
        }
        self.child.kill().expect("SIGKILL the child");
        let status = self.child.wait().expect("reap the child");
        assert_eq!(
            status.signal(),
            Some(9),
            "the child died of SIGKILL: {status}"
        );
        status
    }
}

impl Drop for CrashChild {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
