//! The question engine against `frogbot-channel-questions.md`, driven by a test piece that
//! reimplements the page's forum-style example in Rust (one message per question, `/answer N`
//! replies, `/dismiss`), on SQLite (`sqlite::…`) and PostgreSQL (`postgres::…`).

use async_trait::async_trait;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use frogbot_core::BoxError;
use frogbot_core::agent::scripted::{ScriptedModel, call, reply};
use frogbot_core::agent::{
    AccessCheck, Channel, ChannelMessageOutcome, Engine, EngineConfig, InteractionOutcome,
    ModelMessage, ModelOffer, ModelRequest, STILL_POSTING, Settle, channel_chat_id,
};
use frogbot_core::model::{
    ActionEvent, Actor, Changed, ChannelQuestions, ChatInfo, HookArgs, Interaction, Notice,
    NoticeTo, ParseArgs, ParseResult, PlatformUser, PrefixedIdentity, QuestionAnswer,
    QuestionChange, QuestionInput, QuestionMessage, QuestionOutcome, QuestionOutput, RenderArgs,
    RenderedQuestion, Settlement, SupportsArgs, ThreadMessage, ThreadMessageMetadata, TurnState,
    UserId, millis_to_iso, now_millis,
};
use frogbot_core::store::DynStore;
use frogbot_testkit::last_user;
use serde_json::json;

// ---- the forum piece -----------------------------------------------------------------------------

#[derive(Default)]
struct Forum {
    next: AtomicUsize,
    posts: Mutex<Vec<(String, String)>>, // (id, text)
    edits: Mutex<Vec<(String, String)>>,
    notices: Mutex<Vec<(String, String)>>, // (kind, text)
    fail_render: AtomicBool,
    fail_updated: AtomicUsize,
    fail_settled: AtomicBool,
    unsupported: AtomicBool,
    supports_errors: AtomicBool,
    settled_actors: Mutex<Vec<Option<Actor>>>,
    settled_outcomes: Mutex<Vec<QuestionOutcome>>,
    /// The `expires_at` of each call rendered.
    expires_at: Mutex<Vec<Option<String>>>,
    /// While set, `render` waits after posting until a permit is added: the platform shows the
    /// question, the engine has not recorded it yet.
    hold_render: Mutex<Option<Arc<tokio::sync::Semaphore>>>,
}

impl Forum {
    fn post(&self, text: String) -> QuestionMessage {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let id = format!("post-{n}");
        self.posts.lock().unwrap().push((id.clone(), text));
        QuestionMessage {
            id,
            posted_at: millis_to_iso(now_millis()),
            question: None,
        }
    }
    fn notices(&self, kind: &str) -> Vec<String> {
        self.notices
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, t)| t.clone())
            .collect()
    }
}

fn ask(item: &frogbot_core::model::QuestionItem) -> String {
    let mut lines = vec![item.question.clone()];
    lines.extend(
        item.options
            .iter()
            .enumerate()
            .map(|(i, o)| format!("{}. {}", i + 1, o.label)),
    );
    lines.join("\n")
}

fn step(question: &frogbot_core::model::QuestionRecord) -> (usize, Vec<String>) {
    let s = question
        .state
        .clone()
        .unwrap_or(json!({"step": 0, "picks": []}));
    (
        s["step"].as_u64().unwrap_or(0) as usize,
        s["picks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
    )
}

struct ForumPiece(Arc<Forum>);

#[async_trait]
impl ChannelQuestions for ForumPiece {
    async fn supports(&self, _args: SupportsArgs<'_>) -> Result<bool, BoxError> {
        if self.0.supports_errors.load(Ordering::SeqCst) {
            return Err("supports exploded".into());
        }
        Ok(!self.0.unsupported.load(Ordering::SeqCst))
    }

    async fn render(&self, args: RenderArgs<'_>) -> Result<Vec<RenderedQuestion>, BoxError> {
        if self.0.fail_render.swap(false, Ordering::SeqCst) {
            return Err("forum is down".into());
        }
        // Only the first call: the rest are rendered once it is answered.
        let call = &args.calls[0];
        self.0
            .expires_at
            .lock()
            .unwrap()
            .push(call.expires_at.clone());
        let mut m = self.0.post(ask(&call.input.questions[0]));
        m.question = Some(0);
        let hold = self.0.hold_render.lock().unwrap().clone();
        if let Some(hold) = hold {
            drop(hold.acquire().await);
        }
        Ok(vec![RenderedQuestion {
            calls: vec![call.tool_call_id.clone()],
            messages: vec![m],
            state: None,
        }])
    }

    fn parse(&self, args: ParseArgs<'_>) -> ParseResult {
        let text = match args.interaction {
            Interaction::Message { message } => {
                let sent =
                    frogbot_core::model::iso_to_millis(&message.metadata.date_sent).unwrap_or(0);
                let current = args
                    .question
                    .messages
                    .last()
                    .and_then(|m| frogbot_core::model::iso_to_millis(&m.posted_at))
                    .unwrap_or(0);
                let t = message.text.trim().to_string();
                if (t == "/dismiss" || t.starts_with("/answer ")) && sent < current {
                    return ParseResult::Stale;
                }
                t
            }
            Interaction::Action { event } => {
                format!("/answer {}", event.value.clone().unwrap_or_default())
            }
            Interaction::ModalSubmit { event } => format!(
                "/answer {}",
                event
                    .values
                    .get("choice")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
            ),
        };
        if text == "/dismiss" {
            return ParseResult::Dismiss;
        }
        let Some(n) = text
            .strip_prefix("/answer ")
            .and_then(|n| n.trim().parse::<usize>().ok())
        else {
            return ParseResult::Ignore;
        };
        let (step, picks) = step(args.question);
        let item = &args.call.input.questions[step.min(args.call.input.questions.len() - 1)];
        let Some(option) = n.checked_sub(1).and_then(|i| item.options.get(i)) else {
            return ParseResult::Rejected {
                reason: format!("Reply with a number from 1 to {}.", item.options.len()),
            };
        };
        let mut selected = picks;
        selected.push(option.label.clone());
        if selected.len() < args.call.input.questions.len() {
            return ParseResult::Partial {
                state: Some(json!({"step": step + 1, "picks": selected})),
            };
        }
        ParseResult::Answer {
            output: QuestionOutput {
                answers: args
                    .call
                    .input
                    .questions
                    .iter()
                    .zip(selected)
                    .map(|(q, s)| QuestionAnswer {
                        header: q.header.clone(),
                        selected: vec![s],
                    })
                    .collect(),
            },
        }
    }

    async fn updated(
        &self,
        args: HookArgs<'_>,
        _interaction: Option<&Interaction>,
    ) -> Result<Option<QuestionChange>, BoxError> {
        if self.0.fail_updated.load(Ordering::SeqCst) > 0 {
            self.0.fail_updated.fetch_sub(1, Ordering::SeqCst);
            return Err("forum timed out".into());
        }
        let (step, _) = step(args.question);
        let mut m = self.0.post(ask(&args.call.input.questions[step]));
        m.question = Some(step);
        let mut messages = args.question.messages.clone();
        messages.push(m);
        Ok(Some(QuestionChange {
            messages: Some(messages),
            state: None,
        }))
    }

    async fn settled(&self, args: HookArgs<'_>, how: Settlement<'_>) -> Changed {
        self.0
            .settled_actors
            .lock()
            .unwrap()
            .push(how.actor.cloned());
        self.0
            .settled_outcomes
            .lock()
            .unwrap()
            .push(how.outcome.clone());
        if self.0.fail_settled.load(Ordering::SeqCst) {
            return Err("edit failed".into());
        }
        let text = match how.outcome {
            QuestionOutcome::Answered(_) => "Answered.",
            QuestionOutcome::Dismissed => "Dismissed.",
            QuestionOutcome::Cancelled => "Cancelled.",
            _ => "Expired.",
        };
        for m in &args.question.messages {
            self.0
                .edits
                .lock()
                .unwrap()
                .push((m.id.clone(), text.into()));
        }
        Ok(Some(QuestionChange {
            messages: None,
            state: Some(json!({"closed": text})),
        }))
    }

    async fn notify(&self, _args: HookArgs<'_>, to: NoticeTo<'_>) -> Result<(), BoxError> {
        let (kind, text) = match to.notice {
            Notice::Rejected(reason) => ("rejected", reason),
            Notice::Denied => ("denied", ""),
            Notice::Stale => ("stale", ""),
        };
        self.0
            .notices
            .lock()
            .unwrap()
            .push((kind.into(), text.into()));
        Ok(())
    }
}

struct DenyMallory;

#[async_trait]
impl AccessCheck for DenyMallory {
    async fn allow(&self, user: Option<&UserId>, _chat: &ChatInfo) -> Result<bool, BoxError> {
        Ok(user.is_none_or(|u| u.as_str() != "forum:mallory"))
    }
}

// ---- the world -----------------------------------------------------------------------------------

struct World {
    engine: Engine,
    store: DynStore,
    forum: Arc<Forum>,
    model: ScriptedModel,
}

fn q(header: &str) -> serde_json::Value {
    json!({"header": header, "question": format!("{header}?"), "options": [{"label": "red"}, {"label": "green"}, {"label": "blue"}]})
}

async fn world(url: &str) -> World {
    world_on(url, EngineConfig::default(), None).await
}

/// A thread that takes every post (the text of a reply), for a world whose replies are
/// delivered by jobs.
struct TakeAll;

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl frogbot_core::agent::OutboxDelivery for TakeAll {}

#[async_trait]
impl frogbot_core::agent::ChannelOutbox for TakeAll {
    async fn post_reply(
        &self,
        _thread: &frogbot_core::model::Thread,
        _reply: &frogbot_core::model::UiMessage,
    ) -> Result<(), BoxError> {
        Ok(())
    }
}

/// A thread that shows the messages an agent posts (a question's blocks) in the forum's list,
/// once per delivery key (as a platform with an idempotency key does), and counts the posts.
struct Shows(Arc<Forum>, Mutex<Vec<String>>);

/// Not a `Draw`: none of the shared delivery loops (the defaults post with `post_reply`).
impl frogbot_core::agent::OutboxDelivery for Shows {}

#[async_trait]
impl frogbot_core::agent::ChannelOutbox for Shows {
    async fn post_reply(
        &self,
        _thread: &frogbot_core::model::Thread,
        _reply: &frogbot_core::model::UiMessage,
    ) -> Result<(), BoxError> {
        Ok(())
    }

    async fn post_message(
        &self,
        _thread: &frogbot_core::model::Thread,
        message: &frogbot_core::model::UiMessage,
        delivery: &frogbot_core::agent::Delivery,
    ) -> Result<Vec<String>, BoxError> {
        let mut keys = self.1.lock().unwrap();
        if !keys.contains(&delivery.key) {
            keys.push(delivery.key.clone());
            let drawn: Vec<String> = frogbot_core::model::blocks_of(message)
                .iter()
                .map(|b| match &b.kind {
                    frogbot_core::model::BlockKind::Html { url: Some(u), .. } => {
                        format!("[{}] {} <{u}>", b.type_name(), b.plain_text())
                    }
                    _ => format!("[{}] {}", b.type_name(), b.plain_text()),
                })
                .collect();
            self.0.post(drawn.join(" "));
        }
        Ok(vec![])
    }
}

async fn world_on(
    url: &str,
    config: EngineConfig,
    outbox: Option<Arc<dyn frogbot_core::agent::ChannelOutbox>>,
) -> World {
    let store = frogbot_testkit::open_store(url).await;
    let forum = Arc::new(Forum::default());
    let model = ScriptedModel::new(|req: &ModelRequest| {
        if let Some(ModelMessage::Tool { content, .. }) = req.messages.last() {
            return reply(&format!("got {content}"));
        }
        let text = last_user(req);
        let has_tool = req.tools.iter().any(|t| t.name == "question");
        if text.contains("asktwo") && has_tool {
            let mut e = call("c1", "question", json!({"questions": [q("First")]}));
            e.insert(
                1,
                frogbot_core::agent::scripted::ScriptEvent::Event(
                    frogbot_core::agent::ModelEvent::ToolCall(
                        frogbot_core::agent::ToolCallRequest {
                            id: "c2".into(),
                            name: "question".into(),
                            input: json!({"questions": [q("Second")]}),
                        },
                    ),
                ),
            );
            return e;
        }
        if text.contains("askset") && has_tool {
            return call(
                "c1",
                "question",
                json!({"questions": [q("Colour"), q("Shade")]}),
            );
        }
        if text.contains("askexp") && has_tool {
            let mut a = q("Colour");
            a["default"] = json!(["green"]);
            return call(
                "c1",
                "question",
                json!({"questions": [a], "expiresInSeconds": 1}),
            );
        }
        if text.contains("asklong") && has_tool {
            return call(
                "c1",
                "question",
                json!({"questions": [q("Colour")], "expiresInSeconds": 3600}),
            );
        }
        if text.contains("askapp") && has_tool {
            return call(
                "c1",
                "question",
                json!({"questions": [q("Colour")], "blocks": [
                    {"type": "html", "title": "Chart", "html": "<p>chart</p>",
                     "url": "https://evil.example/phish", "link": "00000000000000000000000000000000"}
                ]}),
            );
        }
        if text.contains("askblocks") && has_tool {
            return call(
                "c1",
                "question",
                json!({"questions": [q("Colour")], "blocks": [
                    {"type": "table", "columns": ["file", "+"], "rows": [["a.rs", 3]]},
                    {"type": "code", "language": "diff", "code": "- old\n+ new"}
                ]}),
            );
        }
        if text.contains("ask") && has_tool {
            return call("c1", "question", json!({"questions": [q("Colour")]}));
        }
        reply(&format!("echo {text} tools={has_tool}"))
    });
    let engine = Engine::new(
        store.clone(),
        vec![ModelOffer {
            id: "main".into(),
            model: Arc::new(model.clone()),
            reasoning: vec![],
        }],
        vec![],
        config,
    )
    .with_channel(Channel {
        platform: "forum".into(),
        questions: Some(Arc::new(ForumPiece(forum.clone()))),
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(DenyMallory),
        outbox,
    });
    World {
        engine,
        store,
        forum,
        model,
    }
}

const THREAD: &str = "t-1";

fn reply_msg(who: &str, text: &str) -> ThreadMessage {
    ThreadMessage {
        id: {
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            format!("r-{}", N.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
        },
        text: text.into(),
        author: PlatformUser {
            id: who.into(),
            name: None,
            is_bot: false,
        },
        metadata: ThreadMessageMetadata {
            date_sent: millis_to_iso(now_millis() + 1),
        },
        reply_to: None,
        raw: json!(null),
        files: Vec::new(),
        mentions: Vec::new(),
    }
}

fn click(who: &str, message_id: &str, n: u32) -> Interaction {
    Interaction::Action {
        event: ActionEvent {
            action_id: "answer".into(),
            value: Some(n.to_string()),
            message_id: message_id.into(),
            user: PlatformUser {
                id: who.into(),
                name: None,
                is_bot: false,
            },
            trigger_id: None,
            raw: json!({}),
        },
    }
}

async fn say(w: &World, who: &str, text: &str) -> ChannelMessageOutcome {
    w.engine
        .channels()
        .message("forum", THREAD, reply_msg(who, text))
        .await
        .unwrap()
}

async fn start_and_wait(w: &World, text: &str) {
    match say(w, "alice", text).await {
        ChannelMessageOutcome::Sent(frogbot_core::agent::Sent::Started(h)) => {
            h.done.await.unwrap().unwrap();
        }
        other => panic!("expected a turn to start, got {other:?}"),
    }
}

async fn idle(w: &World) {
    let chat = channel_chat_id("forum", THREAD);
    let mut ev = w.engine.chats().subscribe();
    while w.engine.chats().state(&chat).await.unwrap() == TurnState::Running {
        let _ = tokio::time::timeout(std::time::Duration::from_millis(100), ev.recv()).await;
    }
}

fn consumed(o: ChannelMessageOutcome) -> InteractionOutcome {
    match o {
        ChannelMessageOutcome::Consumed(i) => i,
        other => panic!("expected the reply to be consumed, got {other:?}"),
    }
}

fn chat() -> frogbot_core::model::ChatId {
    channel_chat_id("forum", THREAD)
}

// ---- the rules -----------------------------------------------------------------------------------

async fn a_repeated_platform_message_is_taken_once(url: &str) {
    let w = world(url).await;
    let first = reply_msg("alice", "hello");
    start_and_wait_msg(&w, first.clone()).await;
    // The platform delivers the same message again (a retry): nothing new is stored or run.
    let again = w
        .engine
        .channels()
        .message("forum", THREAD, first.clone())
        .await
        .unwrap();
    assert!(
        matches!(again, ChannelMessageOutcome::Duplicate),
        "{again:?}"
    );
    let users = w
        .store
        .list_messages(&chat())
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.message.role == frogbot_core::model::Role::User)
        .count();
    assert_eq!(users, 1, "the repeated delivery was not stored");
    // A new message with another platform id is taken.
    start_and_wait_msg(&w, reply_msg("alice", "hello again")).await;
}

async fn start_and_wait_msg(w: &World, m: ThreadMessage) {
    match w
        .engine
        .channels()
        .message("forum", THREAD, m)
        .await
        .unwrap()
    {
        ChannelMessageOutcome::Sent(frogbot_core::agent::Sent::Started(h)) => {
            h.done.await.unwrap().unwrap();
        }
        other => panic!("expected a turn to start, got {other:?}"),
    }
}

async fn a_reply_answer_is_recorded_settled_and_continues_the_agent(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "please ask").await;
    assert_eq!(
        w.engine.chats().state(&chat()).await.unwrap(),
        TurnState::Awaiting
    );
    assert_eq!(
        w.forum.posts.lock().unwrap().len(),
        1,
        "render posted the question"
    );
    let out = consumed(say(&w, "bob", "/answer 2").await);
    assert_eq!(out, InteractionOutcome::Answered);
    idle(&w).await;
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.closed);
    assert_eq!(q.actor.unwrap().user, Some(UserId::new("forum:bob")));
    assert_eq!(
        w.forum.edits.lock().unwrap().as_slice(),
        [("post-0".to_string(), "Answered.".to_string())]
    );
    assert_eq!(
        q.record.state,
        Some(json!({"closed": "Answered."})),
        "settled's change is saved"
    );
    let last = w.model.requests().pop().unwrap();
    assert!(
        matches!(last.messages.last(), Some(ModelMessage::Tool { content, .. }) if content.contains("green"))
    );
    // The reply never reached the agent as a message.
    assert!(
        !w.model
            .requests()
            .iter()
            .any(|r| last_user(r) == "/answer 2")
    );
}

/// `who` says `text`, naming `named` (`(id, is_bot)`) where `@id` is written in it.
fn naming(who: &str, text: &str, named: &[(&str, bool)]) -> ThreadMessage {
    let mut m = reply_msg(who, text);
    m.author.name = Some(who.into());
    m.mentions = named
        .iter()
        .map(|(id, is_bot)| {
            let start = text.find(&format!("@{id}")).expect("written in the text");
            frogbot_core::model::Mention {
                user: PlatformUser {
                    id: (*id).into(),
                    name: Some((*id).into()),
                    is_bot: *is_bot,
                },
                start,
                end: start + 1 + id.len(),
            }
        })
        .collect();
    m
}

/// `ask @person QUESTION | OPTION…` (issue 40, item 4): the bot asks the person named, in the
/// thread, as an ask (the main model never runs); only they may answer, first answer wins; an ask
/// naming nobody, a bot, or someone the channel does not let in is refused, nothing saved.
async fn a_person_asks_another_person_only_they_answer(url: &str) {
    let w = world(url).await;
    let refused = [
        naming("alice", "/ask Ship today?", &[]),
        naming("alice", "/ask @bob", &[("bob", false)]),
        naming("alice", "/ask @mallory Ship today?", &[("mallory", false)]),
        naming("alice", "/ask @robot Ship today?", &[("robot", true)]),
        // Named, but not first: the question would be about them.
        naming("alice", "/ask is @bob in?", &[("bob", false)]),
    ];
    for m in refused {
        let text = m.text.clone();
        let out = w
            .engine
            .channels()
            .message("forum", THREAD, m)
            .await
            .unwrap();
        assert!(
            matches!(out, ChannelMessageOutcome::Told),
            "{text}: {out:?}"
        );
    }
    assert!(
        w.store.list_messages(&chat()).await.unwrap().is_empty(),
        "nothing saved"
    );

    let asked = naming(
        "alice",
        "/ask @bob: Ship today? | yes | no",
        &[("bob", false)],
    );
    let id = frogbot_core::agent::channel_message_id("forum", &asked.id);
    start_and_wait_msg(&w, asked).await;
    assert_eq!(
        w.engine.chats().state(&chat()).await.unwrap(),
        TurnState::Awaiting
    );
    let posted = w.forum.posts.lock().unwrap().clone();
    assert_eq!(
        posted.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["alice asks bob: Ship today?\n1. yes\n2. no"]
    );
    // Someone else's answer is not taken; bob's is.
    assert_eq!(
        consumed(say(&w, "carol", "/answer 2").await),
        InteractionOutcome::Denied
    );
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Answered
    );
    idle(&w).await;
    let status = w
        .engine
        .questions()
        .ask_status(&frogbot_core::agent::ask::AskId {
            chat: chat(),
            message: id,
        })
        .await
        .unwrap()
        .expect("the ask");
    assert_eq!(status.state, frogbot_core::agent::ask::AskState::Answered);
    assert_eq!(
        status.answers.unwrap().answers[0].selected,
        ["yes".to_string()]
    );
    assert_eq!(status.input.from, ["forum:bob"]);
    assert!(status.expires_at.is_some(), "a person's ask expires");
    assert!(w.model.requests().is_empty(), "the main model never ran");
    // The thread goes on with the model afterwards.
    start_and_wait(&w, "hello").await;
    assert_eq!(w.model.requests().len(), 1);
}

/// `model` alone in a thread that draws questions (issue 40, item 4): the offers as the platform's
/// own choice control, answered only by whoever asked; the answer chooses the thread's model (said
/// back as `model ID` is), and neither the picker nor its answer is history for the model.
async fn model_alone_is_a_choice_whose_answer_chooses_the_model(url: &str) {
    let store = frogbot_testkit::open_store(url).await;
    let forum = Arc::new(Forum::default());
    let main = ScriptedModel::new(|req: &ModelRequest| reply(&format!("main: {}", last_user(req))));
    let alt = ScriptedModel::new(|req: &ModelRequest| {
        let users = frogbot_testkit::user_texts(req);
        reply(&format!(
            "alt/{}: {}",
            req.reasoning.as_deref().unwrap_or("-"),
            users.join(" + ")
        ))
    });
    let engine = Engine::new(
        store.clone(),
        vec![
            ModelOffer {
                id: "main".into(),
                model: Arc::new(main.clone()),
                reasoning: vec![],
            },
            ModelOffer {
                id: "alt".into(),
                model: Arc::new(alt.clone()),
                reasoning: vec!["low".into(), "high".into()],
            },
        ],
        vec![],
        EngineConfig::default(),
    )
    .with_channel(Channel {
        platform: "forum".into(),
        questions: Some(Arc::new(ForumPiece(forum.clone()))),
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(DenyMallory),
        outbox: None,
    });
    let w = World {
        engine,
        store,
        forum,
        model: main,
    };
    start_and_wait(&w, "/model").await;
    assert_eq!(
        w.engine.chats().state(&chat()).await.unwrap(),
        TurnState::Awaiting
    );
    let posted = w.forum.posts.lock().unwrap().clone();
    assert_eq!(
        posted.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        [
            "Which model answers this thread from now on? Now: main.\n1. main\n2. alt\n3. alt · low\n4. alt · high"
        ]
    );
    assert_eq!(
        consumed(say(&w, "carol", "/answer 2").await),
        InteractionOutcome::Denied,
        "only the person who asked chooses"
    );
    assert_eq!(
        consumed(say(&w, "alice", "/answer 4").await),
        InteractionOutcome::Answered
    );
    idle(&w).await;
    let replies: Vec<String> = w
        .store
        .list_messages(&chat())
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.message.role == frogbot_core::model::Role::Assistant)
        .map(|m| m.message.text())
        .collect();
    assert_eq!(
        replies.last().unwrap(),
        &frogbot_core::model::model_choice_text("alt", Some("high"))
    );
    start_and_wait(&w, "hello").await;
    let last = w
        .store
        .list_messages(&chat())
        .await
        .unwrap()
        .pop()
        .unwrap()
        .message
        .text();
    assert_eq!(last, "alt/high: hello", "the picker is not history");
    assert!(w.model.requests().is_empty(), "main never ran");
}

async fn a_partial_answer_saves_state_bumps_revision_and_calls_updated(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "askset").await;
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Partial
    );
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.record.revision, 1);
    assert_eq!(
        q.record.messages.len(),
        2,
        "updated added the next question's message"
    );
    assert!(!q.posting);
    assert_eq!(q.record.state.as_ref().unwrap()["picks"], json!(["red"]));
    assert_eq!(
        consumed(say(&w, "bob", "/answer 3").await),
        InteractionOutcome::Answered
    );
    idle(&w).await;
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    let QuestionOutcome::Answered(out) = q.outcome.unwrap() else {
        panic!()
    };
    assert_eq!(out.answers[0].selected, ["red"]);
    assert_eq!(out.answers[1].selected, ["blue"]);
    // settled closes every message of the call.
    assert_eq!(w.forum.edits.lock().unwrap().len(), 2);
}

async fn a_click_on_a_message_that_is_not_current_is_stale(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "askset").await;
    consumed(say(&w, "bob", "/answer 1").await);
    // post-0 left being current; a click on it still finds the question and is stale.
    let out = w
        .engine
        .channels()
        .interaction("forum", Some(THREAD), &click("bob", "post-0", 1))
        .await
        .unwrap();
    assert_eq!(out, InteractionOutcome::Stale);
    assert_eq!(w.forum.notices("stale").len(), 1);
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(q.record.revision, 1, "nothing recorded");
    // A click on the current message counts.
    let out = w
        .engine
        .channels()
        .interaction("forum", Some(THREAD), &click("bob", "post-1", 2))
        .await
        .unwrap();
    assert_eq!(out, InteractionOutcome::Answered);
}

async fn parse_stale_and_a_second_answer_after_the_first_get_stale(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "ask").await;
    // A reply sent before the current question was posted answers an earlier one: stale.
    let mut early = reply_msg("bob", "/answer 1");
    early.metadata.date_sent = "2000-01-01T00:00:00.000Z".into();
    let out = w
        .engine
        .channels()
        .message("forum", THREAD, early)
        .await
        .unwrap();
    assert_eq!(consumed(out), InteractionOutcome::Stale);
    assert!(
        w.store
            .get_question(&chat(), "c1", now_millis())
            .await
            .unwrap()
            .unwrap()
            .outcome
            .is_none()
    );
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Answered
    );
    idle(&w).await;
    let out = w
        .engine
        .channels()
        .interaction("forum", Some(THREAD), &click("carol", "post-0", 2))
        .await
        .unwrap();
    assert_eq!(
        out,
        InteractionOutcome::Stale,
        "a second click after the answer"
    );
    let QuestionOutcome::Answered(o) = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap()
        .outcome
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(o.answers[0].selected, ["red"], "the first answer stands");
}

async fn a_participant_failing_access_is_denied_and_the_question_stays_open(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "ask").await;
    let out = w
        .engine
        .channels()
        .interaction("forum", Some(THREAD), &click("mallory", "post-0", 1))
        .await
        .unwrap();
    assert_eq!(out, InteractionOutcome::Denied);
    assert_eq!(w.forum.notices("denied").len(), 1);
    assert!(
        w.store
            .get_question(&chat(), "c1", now_millis())
            .await
            .unwrap()
            .unwrap()
            .outcome
            .is_none()
    );
    assert_eq!(
        w.engine.chats().state(&chat()).await.unwrap(),
        TurnState::Awaiting
    );
}

async fn a_rejected_parse_shows_the_reason_and_records_nothing(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "ask").await;
    let out = consumed(say(&w, "bob", "/answer 9").await);
    assert_eq!(
        out,
        InteractionOutcome::Rejected("Reply with a number from 1 to 3.".into())
    );
    assert_eq!(
        w.forum.notices("rejected"),
        ["Reply with a number from 1 to 3."]
    );
    assert!(
        w.store
            .get_question(&chat(), "c1", now_millis())
            .await
            .unwrap()
            .unwrap()
            .outcome
            .is_none()
    );
}

async fn an_ignored_reply_reaches_the_agent_as_a_queued_message(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "ask").await;
    match say(&w, "bob", "just chatting").await {
        ChannelMessageOutcome::Sent(frogbot_core::agent::Sent::Queued { .. }) => {}
        other => panic!("expected queued, got {other:?}"),
    }
    assert_eq!(w.store.queued_messages(&chat()).await.unwrap().len(), 1);
}

async fn a_failing_updated_is_retried_as_a_durable_job_and_holds_interactions(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "askset").await;
    w.forum.fail_updated.store(1, Ordering::SeqCst);
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Partial
    );
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.posting, "still posting after updated failed");
    assert_eq!(q.record.revision, 1);
    // While posting, an interaction for the question is rejected and nothing is recorded.
    let out = consumed(say(&w, "bob", "/answer 2").await);
    assert_eq!(out, InteractionOutcome::Rejected(STILL_POSTING.into()));
    assert_eq!(w.forum.notices("rejected"), [STILL_POSTING]);
    // The retry job is stored with a run-at time: run it as if 5 s had passed.
    let job = w
        .store
        .claim_job("test", 1_000, now_millis() + 60_000)
        .await
        .unwrap()
        .expect("a retry job");
    assert_eq!(job.kind, "question-updated");
    w.store
        .retry_job(&job, now_millis(), "test moved it")
        .await
        .unwrap();
    w.engine.ops().run_due_jobs("test").await.unwrap();
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(!q.posting, "the retry ran updated");
    assert_eq!(q.record.messages.len(), 2);
    assert_eq!(
        consumed(say(&w, "bob", "/answer 2").await),
        InteractionOutcome::Answered
    );
}

async fn a_click_before_its_question_is_recorded_is_told_it_is_still_posting(url: &str) {
    let w = world(url).await;
    let hold = Arc::new(tokio::sync::Semaphore::new(0));
    *w.forum.hold_render.lock().unwrap() = Some(hold.clone());
    let turn = match say(&w, "alice", "ask").await {
        ChannelMessageOutcome::Sent(frogbot_core::agent::Sent::Started(h)) => h,
        other => panic!("expected a turn to start, got {other:?}"),
    };
    // The platform shows the question (post-0); the engine has not recorded it yet.
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while w.forum.posts.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the question posted");
    let early = w
        .engine
        .channels()
        .interaction("forum", Some(THREAD), &click("bob", "post-0", 1))
        .await
        .unwrap();
    assert_eq!(early, InteractionOutcome::Rejected(STILL_POSTING.into()));
    assert_eq!(w.forum.notices("rejected"), [STILL_POSTING]);
    assert!(
        w.forum.notices("stale").is_empty(),
        "not stale: it is the question"
    );
    // Recorded, the same click answers.
    hold.add_permits(1);
    turn.done.await.unwrap().unwrap();
    let late = w
        .engine
        .channels()
        .interaction("forum", Some(THREAD), &click("bob", "post-0", 1))
        .await
        .unwrap();
    assert_eq!(late, InteractionOutcome::Answered);
    // A click on a message no question has, with no question being drawn, is still ignored.
    let foreign = w
        .engine
        .channels()
        .interaction("forum", Some(THREAD), &click("bob", "elsewhere", 1))
        .await
        .unwrap();
    assert_eq!(foreign, InteractionOutcome::Ignored);
}

async fn a_failing_settled_is_logged_and_the_question_closes_without_a_change(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "ask").await;
    w.forum.fail_settled.store(true, Ordering::SeqCst);
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Answered
    );
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.closed);
    assert_eq!(q.record.state, None, "no change saved");
    idle(&w).await;
}

async fn an_answer_recorded_but_not_closed_is_closed_by_the_next_interaction(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "ask").await;
    // The process stopped during settled: the outcome is recorded, the question not closed.
    let out = QuestionOutcome::Answered(QuestionOutput {
        answers: vec![QuestionAnswer {
            header: "Colour".into(),
            selected: vec!["blue".into()],
        }],
    });
    let recorded = w
        .store
        .record_outcome(&frogbot_core::store::RecordOp {
            chat: &chat(),
            tool_call_id: "c1",
            outcome: &out,
            actor: None,
            expected_revision: None,
            lock: None,
            resume: None,
            now: now_millis(),
        })
        .await
        .unwrap();
    assert!(
        matches!(recorded, frogbot_core::store::Recorded::Won { .. }),
        "{recorded:?}"
    );
    let r = w
        .engine
        .channels()
        .interaction("forum", Some(THREAD), &click("bob", "post-0", 1))
        .await
        .unwrap();
    assert_eq!(r, InteractionOutcome::Stale);
    assert_eq!(
        w.forum.settled_actors.lock().unwrap().as_slice(),
        [None],
        "settled with actor null"
    );
    assert_eq!(
        w.forum.settled_outcomes.lock().unwrap().as_slice(),
        [out],
        "and the stored outcome"
    );
    assert!(
        w.store
            .get_question(&chat(), "c1", now_millis())
            .await
            .unwrap()
            .unwrap()
            .closed
    );
}

async fn a_failing_render_posts_the_questions_again_with_the_next_message(url: &str) {
    let w = world(url).await;
    w.forum.fail_render.store(true, Ordering::SeqCst);
    start_and_wait(&w, "ask").await;
    assert!(w.forum.posts.lock().unwrap().is_empty());
    say(&w, "bob", "hello?").await;
    assert_eq!(
        w.forum.posts.lock().unwrap().len(),
        1,
        "posted again with the next message"
    );
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Answered
    );
}

/// A question is owed like the text before it: a render that fails (the platform down for a
/// moment) keeps the turn's delivery job, whose next attempt draws it, with no message from the
/// person (it used to wait for their next message, which a person who sees no question may
/// never write).
async fn a_failing_render_is_drawn_again_by_the_delivery_job(url: &str) {
    let config = EngineConfig {
        delivery_grace: std::time::Duration::from_millis(200),
        ..Default::default()
    };
    let w = world_on(url, config, Some(Arc::new(TakeAll))).await;
    let worker = w.engine.spawn_worker(std::time::Duration::from_millis(100));
    w.forum.fail_render.store(true, Ordering::SeqCst);
    start_and_wait(&w, "ask").await;
    // Drawn, and its render recorded (the posted message's link is what the answer is read
    // against: answering between the post and the record would race the job).
    frogbot_testkit::eventually(
        "the delivery job draws the question and records it",
        std::time::Duration::from_secs(20),
        async || {
            w.forum.posts.lock().unwrap().len() == 1
                && w.store
                    .get_question(&chat(), "c1", now_millis())
                    .await
                    .unwrap()
                    .is_some_and(|q| q.rendered && !q.record.messages.is_empty())
        },
    )
    .await;
    assert!(
        !w.forum.fail_render.load(Ordering::SeqCst),
        "the render failed once"
    );
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Answered
    );
    worker.abort();
}

/// Issue 40: a question's display blocks (a table, a diff) are shown in its thread before its
/// inputs, once — also when its render fails and it is drawn again; the answer goes on as usual.
/// Blocks with an input or an event button are refused (the model is told).
async fn a_questions_blocks_are_shown_before_its_inputs_once(url: &str) {
    let w = world_on(url, EngineConfig::default(), None).await;
    let shows = Arc::new(Shows(w.forum.clone(), Mutex::default()));
    let engine = w.engine.clone().with_channel(Channel {
        platform: "forum".into(),
        questions: Some(Arc::new(ForumPiece(w.forum.clone()))),
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(DenyMallory),
        outbox: Some(shows.clone()),
    });
    let w = World { engine, ..w };
    w.forum.fail_render.store(true, Ordering::SeqCst);
    start_and_wait(&w, "askblocks").await;
    assert!(
        w.forum.posts.lock().unwrap().len() == 1,
        "the blocks are shown, the render failed: {:?}",
        w.forum.posts.lock().unwrap()
    );
    // The next message draws the question again: the blocks are not shown twice.
    say(&w, "bob", "hello?").await;
    frogbot_testkit::eventually(
        "the question is drawn",
        std::time::Duration::from_secs(20),
        async || w.forum.posts.lock().unwrap().len() == 2,
    )
    .await;
    let posts: Vec<String> = w
        .forum
        .posts
        .lock()
        .unwrap()
        .iter()
        .map(|(_, t)| t.clone())
        .collect();
    assert_eq!(
        posts,
        [
            "[table] file | +\na.rs | 3 [code] - old\n+ new".to_owned(),
            "Colour?\n1. red\n2. green\n3. blue".to_owned()
        ],
        "the blocks first, then the question"
    );
    assert_eq!(
        shows.1.lock().unwrap().len(),
        1,
        "one delivery key for the blocks"
    );
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Answered
    );
}

/// An app among a question's blocks is, on a platform, a link to its web view when the server
/// has a `public_url`, as an agent message's app is: the engine gives it its capability (a link
/// or an address the model wrote is replaced), the link names the reply that asks, and that reply's page
/// is the app's; the record drawn holds the same capability as the reply.
async fn a_questions_app_links_to_its_web_view(url: &str) {
    let config = EngineConfig {
        public_url: Some("https://bot.example.com/fb/".into()),
        ..EngineConfig::default()
    };
    let w = world_on(url, config, None).await;
    let shows = Arc::new(Shows(w.forum.clone(), Mutex::default()));
    let engine = w.engine.clone().with_channel(Channel {
        platform: "forum".into(),
        questions: Some(Arc::new(ForumPiece(w.forum.clone()))),
        identity: Arc::new(PrefixedIdentity),
        access: Arc::new(DenyMallory),
        outbox: Some(shows),
    });
    let w = World { engine, ..w };
    start_and_wait(&w, "askapp").await;
    let reply_id = w
        .engine
        .chats()
        .get(&chat())
        .await
        .unwrap()
        .unwrap()
        .awaiting_message_id
        .expect("the reply waits");
    let reply = w
        .engine
        .chats()
        .message(&chat(), &reply_id)
        .await
        .unwrap()
        .unwrap()
        .message;
    let input = reply
        .tool_parts()
        .find(|t| t.tool_call_id == "c1")
        .expect("the question's call")
        .input
        .clone();
    assert_eq!(
        input["blocks"][0].get("url"),
        None,
        "an address is never kept"
    );
    let link = input["blocks"][0]["link"]
        .as_str()
        .expect("a capability")
        .to_owned();
    assert!(frogbot_core::model::is_app_link(&link), "{link}");
    assert_ne!(link, "0".repeat(32), "a link the model wrote is replaced");
    assert_eq!(
        frogbot_core::model::app_page(&reply, &link),
        Some(("<p>chart</p>".into(), Some("Chart".into())))
    );
    assert_eq!(frogbot_core::model::app_page(&reply, &"0".repeat(32)), None);
    let record = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        record.input.blocks,
        input["blocks"].as_array().unwrap().clone()
    );
    frogbot_testkit::eventually(
        "the question is drawn",
        std::time::Duration::from_secs(20),
        async || w.forum.posts.lock().unwrap().len() == 2,
    )
    .await;
    let chat_id = chat();
    assert_eq!(
        w.forum.posts.lock().unwrap()[0].1,
        format!("[html] App: Chart <https://bot.example.com/fb/apps/{chat_id}/{reply_id}/{link}>")
    );
}

/// Issue 38: a question record re-created after its row expired (the reply still waits) keeps
/// the set's deadline (`expiresAt`), so it still expires and its card still says until when.
async fn a_record_re_created_after_expiry_keeps_its_deadline(url: &str) {
    let w = world(url).await;
    w.forum.fail_render.store(true, Ordering::SeqCst);
    start_and_wait(&w, "asklong").await;
    let deadline = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap()
        .answer_deadline
        .expect("the set has a deadline");
    // The record's row runs out while the reply still waits.
    let later = now_millis() + frogbot_core::store::QUESTION_TTL_MS + 1;
    assert_eq!(w.store.purge_expired(later).await.unwrap(), 1);
    assert!(
        w.store
            .get_question(&chat(), "c1", now_millis())
            .await
            .unwrap()
            .is_none()
    );
    say(&w, "bob", "hello?").await;
    assert_eq!(w.forum.posts.lock().unwrap().len(), 1, "asked again");
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .expect("re-created");
    assert_eq!(q.answer_deadline, Some(deadline), "the deadline is kept");
    assert_eq!(
        w.forum.expires_at.lock().unwrap().last().cloned().flatten(),
        Some(millis_to_iso(deadline)),
        "the card is drawn with the deadline"
    );
}

async fn render_may_cover_some_calls_the_rest_follow_once_answered(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "asktwo").await;
    assert_eq!(
        w.forum.posts.lock().unwrap().len(),
        1,
        "only the first call is posted"
    );
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Answered
    );
    assert_eq!(
        w.engine.chats().state(&chat()).await.unwrap(),
        TurnState::Awaiting,
        "the second call still waits"
    );
    assert_eq!(
        w.forum.posts.lock().unwrap().len(),
        2,
        "then the second is posted"
    );
    assert_eq!(
        consumed(say(&w, "bob", "/answer 2").await),
        InteractionOutcome::Answered
    );
    idle(&w).await;
    assert_eq!(
        w.engine.chats().state(&chat()).await.unwrap(),
        TurnState::Idle
    );
}

async fn the_question_tool_is_offered_only_where_supported(url: &str) {
    let w = world(url).await;
    w.forum.unsupported.store(true, Ordering::SeqCst);
    start_and_wait(&w, "ask").await;
    assert!(
        !w.model.requests()[0]
            .tools
            .iter()
            .any(|t| t.name == "question")
    );
    w.forum.unsupported.store(false, Ordering::SeqCst);
    w.forum.supports_errors.store(true, Ordering::SeqCst);
    start_and_wait(&w, "ask again").await;
    assert!(
        !w.model.requests()[1]
            .tools
            .iter()
            .any(|t| t.name == "question"),
        "supports failing means not offered"
    );
    w.forum.supports_errors.store(false, Ordering::SeqCst);
    start_and_wait(&w, "ask once more").await;
    assert!(
        w.model.requests()[2]
            .tools
            .iter()
            .any(|t| t.name == "question")
    );
}

async fn the_first_answer_wins_across_http_and_channel(url: &str) {
    let w = world(url).await;
    for trial in 0..100 {
        let thread = format!("trial-{trial}");
        let h = match w
            .engine
            .channels()
            .message("forum", &thread, reply_msg("alice", "ask"))
            .await
            .unwrap()
        {
            ChannelMessageOutcome::Sent(frogbot_core::agent::Sent::Started(h)) => h,
            other => panic!("{other:?}"),
        };
        h.done.await.unwrap().unwrap();
        let chat = channel_chat_id("forum", &thread);
        let calls_before = w.model.requests().len();
        let post = w
            .store
            .get_question(&chat, "c1", now_millis())
            .await
            .unwrap()
            .unwrap()
            .record
            .messages[0]
            .id
            .clone();
        let mut tasks = Vec::new();
        for i in 0..32u32 {
            let e = w.engine.clone();
            let chat = chat.clone();
            let thread = thread.clone();
            let post = post.clone();
            tasks.push(tokio::spawn(async move {
                if i % 2 == 0 {
                    let out = QuestionOutput {
                        answers: vec![QuestionAnswer {
                            header: "Colour".into(),
                            selected: vec!["red".into()],
                        }],
                    };
                    e.questions()
                        .settle(&chat, "c1", Settle::Answer(out), None)
                        .await
                        .is_ok()
                } else {
                    e.channels()
                        .interaction(
                            "forum",
                            Some(&thread),
                            &click(&format!("u{i}"), &post, 1 + i % 3),
                        )
                        .await
                        .unwrap()
                        == InteractionOutcome::Answered
                }
            }));
        }
        let mut wins = 0;
        for t in tasks {
            wins += usize::from(t.await.unwrap());
        }
        assert_eq!(wins, 1, "trial {trial}: exactly one answer recorded");
        let mut ev = w.engine.chats().subscribe();
        while w.engine.chats().state(&chat).await.unwrap() != TurnState::Idle {
            let _ = tokio::time::timeout(std::time::Duration::from_millis(100), ev.recv()).await;
        }
        assert_eq!(
            w.model.requests().len(),
            calls_before + 1,
            "trial {trial}: the agent continued once"
        );
    }
}

async fn an_expired_question_uses_its_default_and_reaches_agent_and_settled(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "askexp").await;
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    let deadline = q.answer_deadline.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(
        (deadline - now_millis()).max(0) as u64 + 10,
    ))
    .await;
    w.engine.ops().run_due_jobs("test").await.unwrap();
    idle(&w).await;
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    let QuestionOutcome::Expired(Some(out)) = q.outcome.clone().unwrap() else {
        panic!("{:?}", q.outcome)
    };
    assert_eq!(out.answers[0].selected, ["green"]);
    assert!(matches!(
        w.forum.settled_outcomes.lock().unwrap().as_slice(),
        [QuestionOutcome::Expired(Some(_))]
    ));
    let last = w.model.requests().pop().unwrap();
    assert!(
        matches!(last.messages.last(), Some(ModelMessage::Tool { content, .. }) if content.contains("green"))
    );
    // After expiry, answers are refused.
    let r = w
        .engine
        .channels()
        .interaction("forum", Some(THREAD), &click("bob", "post-0", 1))
        .await
        .unwrap();
    assert_eq!(r, InteractionOutcome::Stale);
}

async fn a_withdrawn_question_is_cancelled_and_settled(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "ask").await;
    let reply_id = w
        .store
        .get_chat(&chat())
        .await
        .unwrap()
        .unwrap()
        .awaiting_message_id
        .unwrap();
    // Two withdrawals at once (two `DELETE /api/asks/{id}`): one withdraws, the other is told
    // it found the question over (it answered 200 to both before).
    let c = chat();
    let (a, b) = tokio::join!(
        w.engine.questions().withdraw(&c, &reply_id),
        w.engine.questions().withdraw(&c, &reply_id)
    );
    assert_eq!(
        [a.unwrap(), b.unwrap()].iter().filter(|w| **w).count(),
        1,
        "exactly one withdrawal wins"
    );
    assert!(
        !w.engine
            .questions()
            .withdraw(&chat(), &reply_id)
            .await
            .unwrap()
    );
    assert_eq!(
        w.engine.chats().state(&chat()).await.unwrap(),
        TurnState::Idle
    );
    assert_eq!(
        w.forum.settled_outcomes.lock().unwrap().as_slice(),
        [QuestionOutcome::Cancelled]
    );
    let _ = QuestionInput {
        questions: vec![],
        expires_in_seconds: None,
        from: Vec::new(),
        blocks: Vec::new(),
    };
}

fn form(who: &str, thread: &str, message_id: &str, n: u32) -> Interaction {
    let mut values = serde_json::Map::new();
    values.insert("choice".into(), json!(n.to_string()));
    Interaction::ModalSubmit {
        event: frogbot_core::model::ModalSubmitEvent {
            values,
            private_metadata: Some(frogbot_core::model::encode_question_modal_metadata(
                &frogbot_core::model::QuestionModalMetadata {
                    thread_id: thread.into(),
                    message_id: message_id.into(),
                },
            )),
            related_message_id: None,
            user: PlatformUser {
                id: who.into(),
                name: None,
                is_bot: false,
            },
            trigger_id: None,
            raw: json!({}),
        },
    }
}

async fn a_form_is_found_by_its_locator_and_checked_like_a_click(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "askset").await;
    consumed(say(&w, "bob", "/answer 1").await);
    // A form opened from the message that is no longer current submits to stale.
    let r = w
        .engine
        .channels()
        .interaction("forum", None, &form("bob", THREAD, "post-0", 2))
        .await
        .unwrap();
    assert_eq!(r, InteractionOutcome::Stale);
    // A locator naming another conversation does not reach the question.
    let r = w
        .engine
        .channels()
        .interaction("forum", None, &form("bob", "another-thread", "post-1", 2))
        .await
        .unwrap();
    assert_eq!(r, InteractionOutcome::Ignored);
    // Still access-checked.
    let r = w
        .engine
        .channels()
        .interaction("forum", None, &form("mallory", THREAD, "post-1", 2))
        .await
        .unwrap();
    assert_eq!(r, InteractionOutcome::Denied);
    let r = w
        .engine
        .channels()
        .interaction("forum", None, &form("bob", THREAD, "post-1", 2))
        .await
        .unwrap();
    assert_eq!(r, InteractionOutcome::Answered);
    let QuestionOutcome::Answered(o) = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap()
        .outcome
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(o.answers[1].selected, ["green"]);
}

async fn after_a_restart_waiting_and_still_posting_questions_carry_on(url: &str) {
    {
        let w = world(url).await;
        start_and_wait(&w, "askset").await;
        w.forum.fail_updated.store(1, Ordering::SeqCst);
        assert_eq!(
            consumed(say(&w, "bob", "/answer 1").await),
            InteractionOutcome::Partial
        );
        // The process stops here: the question waits, still posting, with a retry job stored.
    }
    let w = world(url).await; // a new process: new engine, new pool, same database
    assert_eq!(
        w.engine.chats().state(&chat()).await.unwrap(),
        TurnState::Awaiting
    );
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    assert!(q.posting);
    // A held interaction is rejected and queues the retry again.
    assert_eq!(
        consumed(say(&w, "bob", "/answer 2").await),
        InteractionOutcome::Rejected(STILL_POSTING.into())
    );
    let job = w
        .store
        .claim_job("t", 1_000, now_millis() + 3_600_000)
        .await
        .unwrap()
        .expect("the retry survived the restart");
    w.store
        .retry_job(&job, now_millis(), "moved")
        .await
        .unwrap();
    w.engine.ops().run_due_jobs("t").await.unwrap();
    assert!(
        !w.store
            .get_question(&chat(), "c1", now_millis())
            .await
            .unwrap()
            .unwrap()
            .posting
    );
    assert_eq!(
        consumed(say(&w, "bob", "/answer 2").await),
        InteractionOutcome::Answered
    );
    idle(&w).await;
    assert_eq!(
        w.engine.chats().state(&chat()).await.unwrap(),
        TurnState::Idle
    );
}

async fn a_retry_that_finds_another_revision_does_nothing(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "askset").await;
    let q = w
        .store
        .get_question(&chat(), "c1", now_millis())
        .await
        .unwrap()
        .unwrap();
    w.store
        .enqueue_job(&frogbot_core::store::NewJob {
            kind: "question-updated".into(),
            key: None,
            payload: json!({"chat": chat(), "call": "c1", "revision": q.record.revision + 5}),
            run_at: 0,
        })
        .await
        .unwrap();
    let posts = w.forum.posts.lock().unwrap().len();
    w.engine.ops().run_due_jobs("t").await.unwrap();
    assert_eq!(
        w.forum.posts.lock().unwrap().len(),
        posts,
        "updated was not called"
    );
    assert!(
        w.store
            .claim_job("t", 1_000, now_millis())
            .await
            .unwrap()
            .is_none(),
        "the job finished"
    );
}

/// Issue 14, defect 9: once a question is answered, replies in its thread reach the agent again,
/// even one that reads like an answer and a piece whose `parse` does not look at `settled`.
async fn a_reply_after_an_answered_question_reaches_the_agent(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "please ask").await;
    assert_eq!(
        consumed(say(&w, "bob", "/answer 2").await),
        InteractionOutcome::Answered
    );
    idle(&w).await;
    for text in ["great, thanks", "/answer 3"] {
        match say(&w, "bob", text).await {
            ChannelMessageOutcome::Sent(frogbot_core::agent::Sent::Started(h)) => {
                h.done.await.unwrap().unwrap();
            }
            other => panic!("{text:?} should start a turn, got {other:?}"),
        }
        assert!(
            // The model sees who spoke in the thread.
            w.model
                .requests()
                .iter()
                .any(|r| last_user(r) == format!("bob: {text}")),
            "the agent got {text:?}"
        );
    }
    assert!(w.forum.notices("stale").is_empty(), "no stale notice");
}

/// Issue 14, defect 9: while a question is open, a reply its piece ignores is queued for the
/// agent behind the question, and runs once the question is answered.
async fn chatter_while_a_question_is_open_is_queued_not_consumed(url: &str) {
    let w = world(url).await;
    start_and_wait(&w, "please ask").await;
    match say(&w, "bob", "what about blue?").await {
        ChannelMessageOutcome::Sent(frogbot_core::agent::Sent::Queued { .. }) => {}
        other => panic!("chatter should be queued, got {other:?}"),
    }
    assert_eq!(
        consumed(say(&w, "bob", "/answer 1").await),
        InteractionOutcome::Answered
    );
    let chat = chat();
    let mut events = w.engine.chats().subscribe();
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while !w
            .model
            .requests()
            .iter()
            .any(|r| last_user(r) == "bob: what about blue?")
        {
            let _ =
                tokio::time::timeout(std::time::Duration::from_millis(100), events.recv()).await;
        }
    })
    .await
    .expect("the queued chatter ran after the answer");
    idle(&w).await;
    assert_eq!(
        w.engine.chats().state(&chat).await.unwrap(),
        TurnState::Idle
    );
}

frogbot_testkit::backends!(
    a_questions_app_links_to_its_web_view,
    a_person_asks_another_person_only_they_answer,
    model_alone_is_a_choice_whose_answer_chooses_the_model,
    a_reply_answer_is_recorded_settled_and_continues_the_agent,
    a_partial_answer_saves_state_bumps_revision_and_calls_updated,
    a_click_on_a_message_that_is_not_current_is_stale,
    parse_stale_and_a_second_answer_after_the_first_get_stale,
    a_participant_failing_access_is_denied_and_the_question_stays_open,
    a_rejected_parse_shows_the_reason_and_records_nothing,
    an_ignored_reply_reaches_the_agent_as_a_queued_message,
    a_failing_updated_is_retried_as_a_durable_job_and_holds_interactions,
    a_click_before_its_question_is_recorded_is_told_it_is_still_posting,
    a_failing_settled_is_logged_and_the_question_closes_without_a_change,
    an_answer_recorded_but_not_closed_is_closed_by_the_next_interaction,
    a_failing_render_posts_the_questions_again_with_the_next_message,
    a_failing_render_is_drawn_again_by_the_delivery_job,
    a_record_re_created_after_expiry_keeps_its_deadline,
    a_questions_blocks_are_shown_before_its_inputs_once,
    render_may_cover_some_calls_the_rest_follow_once_answered,
    the_question_tool_is_offered_only_where_supported,
    the_first_answer_wins_across_http_and_channel,
    an_expired_question_uses_its_default_and_reaches_agent_and_settled,
    a_withdrawn_question_is_cancelled_and_settled,
    a_form_is_found_by_its_locator_and_checked_like_a_click,
    after_a_restart_waiting_and_still_posting_questions_carry_on,
    a_retry_that_finds_another_revision_does_nothing,
    a_repeated_platform_message_is_taken_once,
    a_reply_after_an_answered_question_reaches_the_agent,
    chatter_while_a_question_is_open_is_queued_not_consumed,
);
