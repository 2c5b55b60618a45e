//! Question engine benchmarks, zero-latency scripted model, every write durable (SQLite file in WAL
//! mode with `synchronous=NORMAL`, as `SqliteStore` opens it; PostgreSQL with `fsync` and
//! `synchronous_commit` on).
//!
//! 1. Latency from a channel interaction (a button click) arriving to the agent's next model call
//!    starting: p50 / p99.
//! 2. Full question cycles per second — a new chat, a step that calls `question`, the answer, a step
//!    that replies — at concurrency 1 and 8.
//!
//! ```text
//! cargo bench -p frogbot-core --bench questions                # both backends
//! cargo bench -p frogbot-core --bench questions -- sqlite      # one backend (or `postgres`)
//! ```

use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    AllowAll, Channel, ChannelMessageOutcome, Engine, EngineConfig, InteractionOutcome,
    ModelMessage, ModelOffer, ModelRequest, SendMessage, Sent, Settle, channel_chat_id,
};
use frogbot_core::model::{
    ActionEvent, Actor, ChannelQuestions, ChatId, Delivery, HookArgs, Interaction, MessagePart,
    ParseArgs, ParseResult, PlatformUser, PrefixedIdentity, QuestionAnswer, QuestionChange,
    QuestionMessage, QuestionOutcome, QuestionOutput, RenderArgs, RenderedQuestion, ThreadMessage,
    ThreadMessageMetadata, TurnState, millis_to_iso, now_millis,
};
use frogbot_core::store::DynStore;
use serde_json::json;

/// A piece whose platform is free: `render` returns a fresh message id, clicks answer.
struct Buttons {
    next: std::sync::atomic::AtomicU64,
}

#[async_trait]
impl ChannelQuestions for Buttons {
    async fn render(&self, args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(vec![RenderedQuestion {
            calls: args.calls.iter().map(|c| c.tool_call_id.clone()).collect(),
            messages: vec![QuestionMessage {
                id: format!("m{n}"),
                posted_at: millis_to_iso(now_millis()),
                question: None,
            }],
            state: None,
        }])
    }
    fn parse(&self, args: ParseArgs<'_>) -> ParseResult {
        let Interaction::Action { event } = args.interaction else {
            return ParseResult::Ignore;
        };
        let q = &args.call.input.questions[0];
        ParseResult::Answer {
            output: QuestionOutput {
                answers: vec![QuestionAnswer {
                    header: q.header.clone(),
                    selected: vec![event.value.clone().unwrap_or_default()],
                }],
            },
        }
    }
    async fn settled(
        &self,
        _a: HookArgs<'_>,
        _actor: Option<&Actor>,
        _o: &QuestionOutcome,
    ) -> Result<Option<QuestionChange>, BoxError> {
        Ok(None)
    }
    async fn rejected(&self, _a: HookArgs<'_>, _i: &Interaction, _r: &str) -> Result<(), BoxError> {
        Ok(())
    }
    async fn denied(&self, _a: HookArgs<'_>, _i: &Interaction) -> Result<(), BoxError> {
        Ok(())
    }
    async fn stale(&self, _a: HookArgs<'_>, _i: &Interaction) -> Result<(), BoxError> {
        Ok(())
    }
}

type Stamps = Arc<Mutex<Vec<Instant>>>;

fn engine(store: DynStore, stamps: Stamps) -> Engine {
    let model = ScriptedModel::new(move |req: &ModelRequest| {
        if let Some(ModelMessage::Tool { .. }) = req.messages.last() {
            stamps.lock().unwrap().push(Instant::now());
            return reply("thanks");
        }
        call(
            &format!("q{}", req.messages.len()),
            "question",
            json!({"questions": [{"header": "Ship", "question": "Ship it?", "options": [{"label": "yes"}, {"label": "no"}]}]}),
        )
    });
    Engine::new(
        store,
        vec![ModelOffer {
            id: "main".into(),
            model: Arc::new(model),
            reasoning: vec![],
        }],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(Channel {
        platform: "bench".into(),
        questions: Some(Arc::new(Buttons {
            next: Default::default(),
        })),
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(AllowAll),
        outbox: None,
    })
}

async fn wait_idle(engine: &Engine, chat: &ChatId) {
    let mut ev = engine.subscribe();
    loop {
        if engine.state(chat).await.unwrap() == TurnState::Idle {
            return;
        }
        let _ = tokio::time::timeout(Duration::from_millis(50), ev.recv()).await;
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Scenario 1: click → next model call.
async fn latency(engine: &Engine, stamps: &Stamps, n: usize) -> (Duration, Duration) {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n + 20 {
        let thread = format!("lat-{i}-{}", now_millis());
        let msg = ThreadMessage {
            id: String::new(),
            text: "go".into(),
            author: PlatformUser {
                id: "u1".into(),
                name: None,
                is_bot: false,
            },
            metadata: ThreadMessageMetadata {
                date_sent: millis_to_iso(now_millis()),
            },
            reply_to: None,
            raw: json!(null),
        };
        let ChannelMessageOutcome::Sent(Sent::Started(h)) =
            engine.channel_message("bench", &thread, msg).await.unwrap()
        else {
            panic!("turn")
        };
        h.done.await.unwrap().unwrap();
        let chat = channel_chat_id("bench", &thread);
        let q = engine
            .store_for_tests()
            .get_chat(&chat)
            .await
            .unwrap()
            .unwrap();
        let reply_id = q.awaiting_message_id.unwrap();
        let qs = engine
            .store_for_tests()
            .questions_of_message(&chat, &reply_id, now_millis())
            .await
            .unwrap();
        let message_id = qs[0].record.messages[0].id.clone();
        let click = Interaction::Action {
            event: ActionEvent {
                action_id: "ship".into(),
                value: Some("yes".into()),
                message_id,
                user: PlatformUser {
                    id: "u2".into(),
                    name: None,
                    is_bot: false,
                },
                trigger_id: None,
                raw: json!({}),
            },
        };
        stamps.lock().unwrap().clear();
        let t0 = Instant::now();
        let r = engine
            .handle_interaction("bench", Some(&thread), &click)
            .await
            .unwrap();
        assert_eq!(r, InteractionOutcome::Answered);
        wait_idle(engine, &chat).await;
        let t1 = stamps
            .lock()
            .unwrap()
            .first()
            .copied()
            .expect("the model was called");
        if i >= 20 {
            samples.push(t1 - t0);
        }
    }
    samples.sort();
    (pct(&samples, 0.5), pct(&samples, 0.99))
}

/// Scenario 2: full cycles (HTTP-style settle) at a concurrency.
async fn cycles(engine: &Engine, concurrency: usize, per_task: usize) -> f64 {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..per_task {
                let chat = ChatId::new(format!("cyc-{t}-{i}-{}", now_millis())).unwrap();
                let sent = engine
                    .send(SendMessage {
                        chat_id: chat.clone(),
                        id: None,
                        parts: vec![MessagePart::text("ask")],
                        author: None,
                        delivery: Delivery::Queue,
                        model: None,
                        reasoning: None,
                        channel: None,
                    })
                    .await
                    .unwrap();
                let Sent::Started(h) = sent else {
                    panic!("turn")
                };
                let out = h.done.await.unwrap().unwrap();
                assert_eq!(out.state, TurnState::Awaiting);
                let call_id = out
                    .reply
                    .unwrap()
                    .tool_parts()
                    .next()
                    .unwrap()
                    .tool_call_id
                    .clone();
                let answer = QuestionOutput {
                    answers: vec![QuestionAnswer {
                        header: "Ship".into(),
                        selected: vec!["yes".into()],
                    }],
                };
                engine
                    .settle(&chat, &call_id, Settle::Answer(answer), None)
                    .await
                    .unwrap();
                wait_idle(&engine, &chat).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (concurrency * per_task) as f64 / started.elapsed().as_secs_f64()
}

async fn run(name: &str, url: &str) {
    frogbot_core::store::open(url).await.unwrap(); // migrate once
    let stamps: Stamps = Arc::default();
    let engine = engine(
        frogbot_core::store::open(url).await.unwrap(),
        stamps.clone(),
    );
    let (p50, p99) = latency(&engine, &stamps, 300).await;
    let c1 = cycles(&engine, 1, 200).await;
    let c8 = cycles(&engine, 8, 60).await;
    println!(
        "{name:<10} | click→next model call p50 {:>7.2} ms  p99 {:>7.2} ms | cycles/s c=1 {:>7.0}  c=8 {:>7.0}",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        c1,
        c8
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |b: &str| args.is_empty() || args.iter().any(|a| a == b);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if want("sqlite") {
            let db = frogbot_testkit::sqlite_db();
            run("sqlite", &db.url).await;
        }
        if want("postgres") {
            match frogbot_testkit::PgCluster::shared_durable() {
                Some(c) => run("postgres", &c.create_database()).await,
                None => println!("postgres   | skipped: no PostgreSQL server binaries"),
            }
        }
    });
}
