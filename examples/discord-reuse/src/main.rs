//! discord-reuse: frogbot-discord's pure `ids`, `convert` and `render` inside a plain serenity
//! bot — frogbot-discord without its `engine` feature and frogbot-model only: no FrogBot engine,
//! no database.
//!
//! Run it:
//!
//!     DISCORD_TOKEN=... cargo run -p discord-reuse
//!
//! (the bot needs the MESSAGE CONTENT intent enabled in the Discord developer portal). Mention the
//! bot in a channel with "ask": it posts a question with buttons. Clicking one acknowledges the
//! click and prints the FrogBot `Interaction` it converts to; the bot then replaces the controls with
//! the answer ("Skipped." for the Skip button), the same rendering FrogBot's question engine uses.

use frogbot_discord::ids::{Control, ControlKind};
use frogbot_discord::{convert, render};
use frogbot_model::{
    QuestionAnswer, QuestionCall, QuestionMessage, QuestionOutcome, QuestionOutput,
};
use serenity::all::{Context, EventHandler, GatewayIntents, Interaction, Message, Ready};
use serenity::async_trait;
use serenity::model::id::UserId;
use std::sync::OnceLock;

/// The bot's own user id, learnt from `ready` (this bot runs without serenity's cache).
#[derive(Debug, Default)]
struct Handler {
    me: OnceLock<UserId>,
}

fn demo_call() -> QuestionCall {
    serde_json::from_value(serde_json::json!({
        "toolCallId": "demo",
        "input": {"questions": [{
            "header": "Pond",
            "question": "Which pond should the frog visit?",
            "options": [{"label": "Lily pond"}, {"label": "Mill pond"}, {"label": "Garden pond"}]
        }]}
    }))
    .expect("a valid question")
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        let _ = self.me.set(ready.user.id);
        println!("connected as {}", ready.user.name);
    }

    async fn message(&self, ctx: Context, msg: Message) {
        let Some(&me) = self.me.get() else {
            return;
        };
        if convert::is_own_message(&msg, me) || !convert::mentions(&msg, me) {
            return;
        }
        let thread = convert::thread_message(&msg);
        println!(
            "thread {} message: {:?}",
            convert::thread_id(&msg),
            thread.text
        );
        if convert::strip_mention(&msg.content, me) == "ask" {
            let question = render::question_message(&demo_call(), 0, 0);
            if let Err(e) = msg.channel_id.send_message(&ctx.http, question).await {
                eprintln!("posting the question failed: {e}");
            }
        }
    }

    async fn interaction_create(&self, ctx: Context, interaction: Interaction) {
        let Interaction::Component(click) = &interaction else {
            return;
        };
        if let Err(e) =
            frogbot_discord::acknowledge(ctx.http.as_ref(), click.id, &click.token).await
        {
            eprintln!("acknowledging failed: {e}");
        }
        let converted = convert::action(click);
        println!(
            "{}",
            serde_json::to_string_pretty(&converted).unwrap_or_default()
        );
        let call = demo_call();
        let outcome = match Control::decode(&click.data.custom_id).map(|c| c.kind) {
            Some(ControlKind::Option(i)) => {
                let Some(option) = call.input.questions[0].options.get(i) else {
                    return;
                };
                QuestionOutcome::Answered(QuestionOutput {
                    answers: vec![QuestionAnswer {
                        header: "Pond".into(),
                        selected: vec![option.label.clone()],
                    }],
                })
            }
            // "Skip" dismisses the question.
            Some(ControlKind::Skip) => QuestionOutcome::Dismissed,
            _ => return,
        };
        let message = QuestionMessage {
            id: click.message.id.to_string(),
            posted_at: String::new(),
            question: Some(0),
        };
        // FrogBot passes who answered (shown on a skip: "Skipped by …"); this demo does not.
        let edit = render::settled_edit(&call, &message, &outcome, None);
        if let Err(e) = ctx
            .http
            .edit_message(click.channel_id, click.message.id, &edit, vec![])
            .await
        {
            eprintln!("settling failed: {e}");
        }
    }
}

#[tokio::main]
async fn main() {
    let token = std::env::var("DISCORD_TOKEN").expect("set DISCORD_TOKEN");
    let intents = GatewayIntents::GUILD_MESSAGES | GatewayIntents::MESSAGE_CONTENT;
    let mut client = serenity::Client::builder(token, intents)
        .event_handler(Handler::default())
        .await
        .expect("a Discord client");
    if let Err(e) = client.start().await {
        eprintln!("client error: {e}");
    }
}
