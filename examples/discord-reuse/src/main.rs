//! discord-reuse: frogbot-discord's pure `convert`, `render` and `ids` in a plain serenity bot, no
//! FrogBot engine, no database. `DISCORD_TOKEN=... cargo run -p discord-reuse` (with the MESSAGE
//! CONTENT intent). "@bot ask" posts a question with buttons; a click is acknowledged, printed as
//! the FrogBot `Interaction` it converts to, read back with `ids::read_control`, and the buttons
//! give way to the answer ("Skipped." for Skip) as FrogBot's question engine draws it.

use frogbot_discord::{acknowledge, convert, ids, render};
use frogbot_model::{QuestionCall, QuestionMessage};
use serenity::all::{Client, Context, EventHandler, GatewayIntents, Interaction, Message, Ready};

/// The bot's own user id, learnt from `ready` (this bot runs without serenity's cache).
struct Handler(std::sync::OnceLock<serenity::all::UserId>);

const CALL: &str = r#"{"toolCallId": "demo", "input": {"questions": [{"header": "Pond",
    "question": "Which pond should the frog visit?",
    "options": [{"label": "Lily pond"}, {"label": "Mill pond"}, {"label": "Garden pond"}]}]}}"#;

#[serenity::async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        let _ = self.0.set(ready.user.id);
    }

    async fn message(&self, ctx: Context, msg: Message) {
        if let (Some(&me), Ok(call)) = (self.0.get(), serde_json::from_str(CALL))
            && convert::mentions(&msg, me)
            && !convert::is_own_message(&msg, me)
            && convert::strip_mention(&msg.content, me) == "ask"
        {
            let question = render::question_message(&call, 0, 0);
            let _ = msg.channel_id.send_message(&ctx.http, question).await;
        }
    }

    async fn interaction_create(&self, ctx: Context, interaction: Interaction) {
        let Interaction::Component(click) = &interaction else {
            return;
        };
        let _ = acknowledge(ctx.http.as_ref(), click.id, &click.token).await;
        let converted = convert::action(click);
        println!("{converted:#?}");
        let call: QuestionCall = serde_json::from_str(CALL).expect("a valid question");
        // A pick of an option answers, "Skip" dismisses; anything else is not this question's.
        let control = converted.as_action().and_then(ids::read_control);
        if let Some(outcome) = control.and_then(|c| c.outcome(&call.input, 0)) {
            let edit = render::settled_edit(&call, &QuestionMessage::default(), &outcome, None);
            let (channel, message) = (click.channel_id, click.message.id);
            let _ = ctx.http.edit_message(channel, message, &edit, vec![]).await;
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let token = std::env::var("DISCORD_TOKEN").expect("set DISCORD_TOKEN");
    let intents = GatewayIntents::GUILD_MESSAGES | GatewayIntents::MESSAGE_CONTENT;
    let handler = Handler(std::sync::OnceLock::new());
    let builder = Client::builder(token, intents);
    Ok(builder.event_handler(handler).await?.start().await?)
}
