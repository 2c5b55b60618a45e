//! A real Synapse homeserver on loopback, shared by the tests of one test binary, and people
//! driven with a second matrix-sdk client.
//!
//! Synapse comes from the venv `scripts/synapse.sh` installs
//! (`${FROGBOT_SYNAPSE_VENV:-$HOME/.cache/frogbot-synapse-venv}`). Without it the tests print why
//! and return early, unless `FROGBOT_REQUIRE_SYNAPSE=1` (then they fail). Synapse is started once
//! per test binary on a free port with a generated config (SQLite, no TLS, registration only with
//! the shared secret, rate limits raised) and stopped when the test process exits: it runs under a
//! small shell guard that kills it as soon as the test process closes the guard's stdin.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::config::SyncSettings;
use matrix_sdk::ruma::api::client::filter::FilterDefinition;
use matrix_sdk::ruma::api::client::sync::sync_events::v3::Filter;
use matrix_sdk::ruma::events::AnySyncTimelineEvent;
use matrix_sdk::ruma::serde::Raw;
use matrix_sdk::ruma::{OwnedDeviceId, OwnedRoomId, OwnedUserId, RoomId};
use matrix_sdk::{Client, Room, SessionMeta, SessionTokens};
use serde_json::{Value, json};
use tokio::sync::{Notify, OnceCell};

const SECRET: &str = "frogbot-test-shared-secret";

/// A running Synapse.
#[derive(Debug)]
pub struct Synapse {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its server name.
    pub server_name: String,
    /// How long it took to answer `/_matrix/client/versions`.
    pub start_time: Duration,
    _dir: tempfile::TempDir,
    _guard: Mutex<Child>,
}

static SYNAPSE: OnceCell<Option<Arc<Synapse>>> = OnceCell::const_new();
static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn venv() -> PathBuf {
    match std::env::var_os("FROGBOT_SYNAPSE_VENV") {
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".cache/frogbot-synapse-venv"),
    }
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config(dir: &std::path::Path, port: u16) -> String {
    let d = dir.display();
    let rate = "{per_second: 10000, burst_count: 100000}";
    format!(
        r#"server_name: "localhost"
pid_file: "{d}/homeserver.pid"
public_baseurl: "http://127.0.0.1:{port}/"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{d}/homeserver.db"
log_config: "{d}/log.yaml"
media_store_path: "{d}/media"
signing_key_path: "{d}/signing.key"
registration_shared_secret: "{SECRET}"
enable_registration: false
report_stats: false
macaroon_secret_key: "frogbot-test-macaroon"
form_secret: "frogbot-test-form"
trusted_key_servers: []
suppress_key_server_warning: true
presence:
  enabled: false
url_preview_enabled: false
rc_message: {rate}
rc_registration: {rate}
rc_room_creation: {rate}
rc_login:
  address: {rate}
  account: {rate}
  failed_attempts: {rate}
rc_joins:
  local: {rate}
  remote: {rate}
rc_joins_per_room: {rate}
rc_invites:
  per_room: {rate}
  per_user: {rate}
  per_issuer: {rate}
rc_3pid_validation: {rate}
rc_admin_redaction: {rate}
rc_key_requests: {rate}
"#
    )
}

const LOG_CONFIG: &str = r#"version: 1
formatters:
  precise:
    format: '%(asctime)s - %(name)s - %(lineno)d - %(levelname)s - %(message)s'
handlers:
  file:
    class: logging.FileHandler
    formatter: precise
    filename: LOGFILE
root:
  level: WARNING
  handlers: [file]
disable_existing_loggers: false
"#;

fn required() -> bool {
    std::env::var("FROGBOT_REQUIRE_SYNAPSE").is_ok_and(|v| v == "1")
}

/// The shared Synapse, or `None` (with a message) when it is not installed and not required.
pub async fn synapse() -> Option<Arc<Synapse>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    SYNAPSE
        .get_or_init(|| async {
            let python = venv().join("bin/python");
            if !python.exists() {
                let msg = format!(
                    "Synapse is not installed ({} missing): run `bash scripts/synapse.sh`",
                    python.display()
                );
                if required() {
                    panic!("{msg} (FROGBOT_REQUIRE_SYNAPSE=1)");
                }
                eprintln!("skipping the Synapse tests: {msg}");
                return None;
            }
            Some(Arc::new(start(&python).await))
        })
        .await
        .clone()
}

async fn start(python: &std::path::Path) -> Synapse {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let cfg = dir.path().join("homeserver.yaml");
    std::fs::write(&cfg, config(dir.path(), port)).unwrap();
    std::fs::write(
        dir.path().join("log.yaml"),
        LOG_CONFIG.replace(
            "LOGFILE",
            &dir.path().join("homeserver.log").display().to_string(),
        ),
    )
    .unwrap();
    let began = Instant::now();
    let keys = Command::new(python)
        .args(["-m", "synapse.app.homeserver", "-c"])
        .arg(&cfg)
        .arg("--generate-keys")
        .output()
        .unwrap();
    assert!(
        keys.status.success(),
        "synapse --generate-keys failed: {}",
        String::from_utf8_lossy(&keys.stderr)
    );
    // The guard: runs Synapse, and kills it when our end of its stdin closes (test exit).
    let guard = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" -m synapse.app.homeserver -c "$1" >"$2" 2>&1 </dev/null & pid=$!; cat >/dev/null; kill "$pid"; wait "$pid"; rm -rf "$3""#)
            .arg(python)
            .arg(&cfg)
            .arg(dir.path().join("stdout.log"))
            // The static `Synapse` is never dropped: the guard removes its folder.
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(r) = http
            .get(format!("{url}/_matrix/client/versions"))
            .send()
            .await
            && r.status().is_success()
        {
            break;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.path().join("stdout.log")).unwrap_or_default();
            panic!("Synapse did not start within 120 s:\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let start_time = began.elapsed();
    eprintln!("Synapse started at {url} in {start_time:?}");
    Synapse {
        url,
        server_name: "localhost".into(),
        start_time,
        _dir: dir,
        _guard: Mutex::new(guard),
    }
}

/// A registered account.
#[derive(Clone, Debug)]
pub struct Account {
    /// Its user id.
    pub user_id: OwnedUserId,
    /// Its password.
    pub password: String,
    /// An access token (of the registration's device).
    pub access_token: String,
    /// The registration's device.
    pub device_id: OwnedDeviceId,
}

impl Synapse {
    /// Registers a new user (`{prefix}{n}`) through the shared-secret admin API.
    pub async fn register(&self, prefix: &str) -> Account {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let username = format!("{prefix}{n}_{}", std::process::id());
        let password = format!("pw-{username}");
        let http = reqwest::Client::new();
        let endpoint = format!("{}/_synapse/admin/v1/register", self.url);
        let nonce: Value = http
            .get(&endpoint)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let nonce = nonce["nonce"].as_str().unwrap().to_owned();
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(nonce.as_bytes());
        mac.update(b"\0");
        mac.update(username.as_bytes());
        mac.update(b"\0");
        mac.update(password.as_bytes());
        mac.update(b"\0notadmin");
        let mac = hex::encode(mac.finalize().into_bytes());
        let r: Value = http
                .post(&endpoint)
                .json(&json!({"nonce": nonce, "username": username, "password": password, "admin": false, "mac": mac}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
        Account {
            user_id: OwnedUserId::try_from(r["user_id"].as_str().expect("registered")).unwrap(),
            password,
            access_token: r["access_token"].as_str().unwrap().to_owned(),
            device_id: r["device_id"].as_str().unwrap().into(),
        }
    }

    /// A person: a matrix-sdk client on `account`, syncing, recording every timeline event.
    pub async fn person(&self, account: &Account) -> Person {
        let client = Client::builder()
            .homeserver_url(&self.url)
            .build()
            .await
            .unwrap();
        client
            .restore_session(MatrixSession {
                meta: SessionMeta {
                    user_id: account.user_id.clone(),
                    device_id: account.device_id.clone(),
                },
                tokens: SessionTokens {
                    access_token: account.access_token.clone(),
                    refresh_token: None,
                },
            })
            .await
            .unwrap();
        client.sync_once(SyncSettings::default()).await.unwrap();
        let seen: Seen = Arc::default();
        let s = seen.clone();
        client.add_event_handler(move |raw: Raw<AnySyncTimelineEvent>, room: Room| {
            let s = s.clone();
            async move {
                let v: Value = serde_json::from_str(raw.json().get()).unwrap();
                s.0.lock().unwrap().push((room.room_id().to_owned(), v));
                s.1.notify_waiters();
            }
        });
        let c = client.clone();
        // A large timeline limit: matrix-sdk's loop syncs at most once a second, and a sync's
        // default limit (10 events a room) would hide the rest of a burst from the recorder.
        let mut filter = FilterDefinition::default();
        filter.room.timeline.limit = Some(10_000u32.into());
        let task = tokio::spawn(async move {
            let _ = c
                .sync(
                    SyncSettings::default()
                        .timeout(Duration::from_secs(5))
                        .filter(Filter::FilterDefinition(filter)),
                )
                .await;
        });
        Person {
            client,
            account: account.clone(),
            seen,
            _task: task,
        }
    }
}

type Seen = Arc<(Mutex<Vec<(OwnedRoomId, Value)>>, Notify)>;

/// A test person.
#[derive(Debug)]
pub struct Person {
    /// The person's client.
    pub client: Client,
    /// The person's account.
    pub account: Account,
    seen: Seen,
    _task: tokio::task::JoinHandle<()>,
}

impl Drop for Person {
    fn drop(&mut self) {
        self._task.abort();
    }
}

impl Person {
    /// The person's user id.
    pub fn user_id(&self) -> &matrix_sdk::ruma::UserId {
        &self.account.user_id
    }

    /// Creates a room inviting `invite` (a DM flag is not set: rooms of two count as DMs anyway).
    pub async fn create_room(&self, invite: &[&OwnedUserId], encrypted: bool) -> OwnedRoomId {
        use matrix_sdk::ruma::api::client::room::create_room::v3::Request;
        let mut req = Request::new();
        req.invite = invite.iter().map(|u| (*u).clone()).collect();
        if encrypted {
            let ev = json!({"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}});
            req.initial_state = vec![Raw::from_json(
                serde_json::value::to_raw_value(&ev).unwrap(),
            )];
        }
        let room = self.client.create_room(req).await.unwrap();
        room.room_id().to_owned()
    }

    /// Joins a room (after an invite).
    pub async fn join(&self, room: &RoomId) {
        self.client.join_room_by_id(room).await.unwrap();
    }

    /// A room the person is in.
    pub fn room(&self, room: &RoomId) -> Room {
        self.client
            .get_room(room)
            .expect("room known to the person")
    }

    /// Sends an event; returns its id.
    pub async fn send(&self, room: &RoomId, event_type: &str, content: Value) -> String {
        self.room(room)
            .send_raw(event_type, content)
            .await
            .unwrap()
            .response
            .event_id
            .to_string()
    }

    /// Waits (up to `secs`) until an event matching `pred` has been seen in `room`; returns it.
    pub async fn wait_for(
        &self,
        room: &RoomId,
        secs: u64,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let notified = self.seen.1.notified();
            // A copy: `pred` may look at `seen` itself.
            let events: Vec<Value> = self.seen(room, |_| true);
            if let Some(v) = events.into_iter().find(|v| pred(v)) {
                return v;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let all: Vec<Value> = self
                    .seen
                    .0
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|(r, _)| r == room)
                    .map(|(_, v)| v.clone())
                    .collect();
                panic!("timed out waiting for {what}; seen in the room: {all:#?}");
            }
            let _ = tokio::time::timeout(left.min(Duration::from_millis(500)), notified).await;
        }
    }

    /// Every event seen in `room` matching `pred`.
    pub fn seen(&self, room: &RoomId, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.seen
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|(r, v)| r == room && pred(v))
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// The event's thread root, if it is in a thread.
pub fn thread_root(ev: &Value) -> Option<&str> {
    let rel = &ev["content"]["m.relates_to"];
    (rel["rel_type"] == "m.thread")
        .then(|| rel["event_id"].as_str())
        .flatten()
}
