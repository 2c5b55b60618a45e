//! telegram-reuse: frogbot-telegram's pure `convert`, `render` and `ids` in a plain teloxide bot,
//! no FrogBot engine, no database. `TELEGRAM_BOT_TOKEN=123456:ABC... cargo run -p telegram-reuse`
//! (a token from @BotFather, see README.md), then write "ask" to the bot: it posts a question with
//! an inline keyboard. A click is answered, printed as the FrogBot `Interaction` it converts to,
//! read back with `ids::read_control`, and its message settled as FrogBot's engine settles it.

use frogbot_model::{Progress, QuestionCall};
use frogbot_telegram::{convert, ids, render};
use futures::StreamExt;
use teloxide::prelude::*;
use teloxide::types::{ParseMode::Html, UpdateKind};
use teloxide::update_listeners::{AsUpdateStream, Polling};

type Error = Box<dyn std::error::Error + Send + Sync>;

const CALL: &str = r#"{"toolCallId": "demo", "input": {"questions": [{"header": "Pond",
    "question": "Which pond should the frog visit?", "options": [{"label": "Lily pond",
    "description": "quiet, lots of flies"}, {"label": "Mill pond"}, {"label": "Garden pond"}]}]}}"#;

/// A click: answered, read back, and its message edited to the answer ("Skipped by …" for Skip).
async fn clicked(bot: &Bot, query: &CallbackQuery, call: &QuestionCall) -> Result<(), Error> {
    let interaction = convert::action(query)?;
    println!("{interaction:#?}");
    bot.answer_callback_query(query.id.clone()).await?;
    let event = interaction.as_action().ok_or("not a click")?;
    let Some(outcome) = ids::read_control(event).and_then(|c| c.outcome(&call.input, 0)) else {
        return Ok(()); // not a button of this question
    };
    let by = convert::platform_user(&query.from).name;
    let (chat, id) = ids::split_message_id(&event.message_id)?;
    let text = render::settled_text(&call.input, 0, false, &outcome, by.as_deref());
    let edit = bot.edit_message_text(chat, id, text).parse_mode(Html);
    edit.reply_markup(render::no_keyboard()).await?; // and no buttons
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let _ = rustls::crypto::ring::default_provider().install_default(); // one TLS provider
    let token = std::env::var("TELEGRAM_BOT_TOKEN").map_err(|_| "set TELEGRAM_BOT_TOKEN")?;
    let (bot, call): (_, QuestionCall) = (Bot::new(token), serde_json::from_str(CALL)?);
    let keyboard = render::keyboard(&call.input, 0, 0, &Progress::from_state(&call.input, None));
    bot.delete_webhook().await?; // Long polling needs no webhook on the token.
    let mut polling = Polling::builder(bot.clone()).build();
    let mut updates = std::pin::pin!(polling.as_stream());
    while let Some(update) = updates.next().await {
        let result = match update.map(|u| u.kind) {
            Ok(UpdateKind::Message(m)) if m.text().map(str::trim) == Some("ask") => {
                let text = render::question_text(&call.input, 0, None);
                let send = bot.send_message(m.chat.id, text).parse_mode(Html);
                let sent = send.reply_markup(keyboard.clone()).await;
                sent.map(drop).map_err(Error::from)
            }
            Ok(UpdateKind::CallbackQuery(q)) => clicked(&bot, &q, &call).await,
            other => other.map(drop).map_err(Error::from),
        };
        let _ = result.inspect_err(|e| eprintln!("error: {e}"));
    }
    Ok(())
}
