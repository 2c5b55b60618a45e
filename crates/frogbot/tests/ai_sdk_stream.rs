//! The AI SDK reads FrogBot's UI message stream: a real server in-process, and
//! `tests/js/read-stream.mjs` (the `ai` package's parser and `readUIMessageStream`) as the client.
//!
//! Needs Node and the packages of `tests/js` (`bash scripts/install-test-tools.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

struct Server {
    url: String,
    _db: frogbot_testkit::TestDb,
    task: tokio::task::JoinHandle<()>,
    worker: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
        self.worker.abort();
    }
}

async fn start_server() -> Server {
    let db = frogbot_testkit::sqlite_db();
    let mut config = frogbot::Config::parse("").expect("empty config");
    config.database = db.url.clone();
    let engine = frogbot::build_engine(&config).await.expect("engine");
    let worker = engine.spawn_worker(Duration::from_millis(200));
    let app = frogbot::app(&config, engine);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("serve");
    });
    Server {
        url: format!("http://{addr}"),
        _db: db,
        task,
        worker,
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// Makes sure `tests/js/node_modules` exists, running `scripts/install-test-tools.sh` if not.
fn ensure_js_tools() -> PathBuf {
    let root = workspace_root();
    let js = root.join("crates/frogbot/tests/js");
    if !js.join("node_modules").is_dir() {
        let status = Command::new("bash")
            .arg(root.join("scripts/install-test-tools.sh"))
            .status()
            .expect("run scripts/install-test-tools.sh (needs bash)");
        assert!(
            status.success() && js.join("node_modules").is_dir(),
            "the test tools are missing: run `bash scripts/install-test-tools.sh` (installs chromium and the npm packages of crates/frogbot/tests/js)"
        );
    }
    js
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ai_sdk_reads_the_ui_message_stream() {
    let js = ensure_js_tools();
    let server = start_server().await;
    let script = js.join("read-stream.mjs");
    let url = server.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(script)
            .arg(url)
            .output()
            .expect("run node (is Node installed?)")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("--- read-stream.mjs stdout ---\n{stdout}");
    println!("--- read-stream.mjs stderr ---\n{stderr}");
    assert!(
        output.status.success(),
        "read-stream.mjs failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(stdout.contains("read-stream: ok"), "no ok line:\n{stdout}");
}
