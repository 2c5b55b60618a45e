//! telegram-reuse: frogbot-telegram's pure `ids`, `convert` and `render` inside a plain teloxide
//! bot — frogbot-telegram without its `engine` feature and frogbot-model only: no FrogBot engine,
//! no database.
//!
//! Run it:
//!
//!     TELEGRAM_BOT_TOKEN=123456:ABC... cargo run -p telegram-reuse
//!
//! (a token from @BotFather, see README.md). Write "ask" to the bot: it posts a question with an
//! inline keyboard. Clicking a button answers the callback query and prints the FrogBot
//! `Interaction` it converts to; the bot then edits the message to the answer (or "Skipped by …"
//! for the Skip button) and removes the buttons, the same rendering FrogBot's question engine
//! uses.

use frogbot_model::{
    Interaction, Progress, QuestionAnswer, QuestionCall, QuestionOutcome, QuestionOutput,
};
use frogbot_telegram::ids::{Pick, Token, split_message_id};
use frogbot_telegram::{convert, render};
use futures::StreamExt;
use teloxide::Bot;
use teloxide::payloads::{AnswerCallbackQuerySetters, EditMessageTextSetters, SendMessageSetters};
use teloxide::requests::{Request, Requester};
use teloxide::types::{AllowedUpdate, CallbackQuery, Message, ParseMode, UpdateKind};
use teloxide::update_listeners::{AsUpdateStream, Polling, UpdateListener};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The question the bot asks (a `question` tool call as FrogBot's agent would make it).
fn demo_call() -> QuestionCall {
    serde_json::from_value(serde_json::json!({
        "toolCallId": "demo",
        "input": {"questions": [{
            "header": "Pond",
            "question": "Which pond should the frog visit?",
            "options": [
                {"label": "Lily pond", "description": "quiet, lots of flies"},
                {"label": "Mill pond"},
                {"label": "Garden pond"}
            ]
        }]}
    }))
    .expect("a valid question")
}

/// "ask" → the question, drawn by frogbot-telegram's render: its text and an inline keyboard whose
/// callback data is a short token (revision 0, question 0, option n).
async fn ask(bot: &Bot, message: &Message) -> Result<(), Error> {
    if message.text().map(str::trim) != Some("ask") {
        bot.send_message(
            message.chat.id,
            "Write \"ask\" and I will ask you something.",
        )
        .send()
        .await?;
        return Ok(());
    }
    let call = demo_call();
    let progress = Progress::from_state(&call.input, None);
    let keyboard = render::keyboard(&call.input, 0, 0, &progress);
    // The texts are Telegram HTML (escaped): sent with parse mode HTML.
    bot.send_message(message.chat.id, render::question_text(&call.input, 0, None))
        .parse_mode(ParseMode::Html)
        .reply_markup(keyboard)
        .send()
        .await?;
    Ok(())
}

/// A click: converted to a FrogBot `Interaction`, its token read back to the option, the query
/// answered, and the message settled (the answer, no buttons).
async fn clicked(bot: &Bot, query: &CallbackQuery) -> Result<(), Error> {
    let interaction = convert::action(query)?;
    println!("{}", serde_json::to_string_pretty(&interaction)?);
    let Interaction::Action { event } = &interaction else {
        return Ok(());
    };
    let call = demo_call();
    let item = &call.input.questions[0];
    let outcome = match Token::from_action(&event.action_id, event.value.as_deref()) {
        Some(Token {
            revision: 0,
            question: 0,
            pick: Pick::Option(o),
        }) => item.options.get(o).map(|o| {
            QuestionOutcome::Answered(QuestionOutput {
                answers: vec![QuestionAnswer {
                    header: item.header.clone(),
                    selected: vec![o.label.clone()],
                }],
            })
        }),
        // "Skip" dismisses the question.
        Some(Token {
            revision: 0,
            question: 0,
            pick: Pick::Skip,
        }) => Some(QuestionOutcome::Dismissed),
        _ => None,
    };
    let Some(outcome) = outcome else {
        bot.answer_callback_query(query.id.clone())
            .text("That button is not one of this question's.")
            .send()
            .await?;
        return Ok(());
    };
    bot.answer_callback_query(query.id.clone()).send().await?;
    let by = convert::platform_user(&query.from).name;
    let (chat, id) = split_message_id(&event.message_id)?;
    bot.edit_message_text(
        chat,
        id,
        render::settled_text(&call.input, 0, false, &outcome, by.as_deref()),
    )
    .parse_mode(ParseMode::Html)
    .reply_markup(render::no_keyboard())
    .send()
    .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    // Both ring and aws-lc-rs may be in the tree: pick one before any TLS client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let token = std::env::var("TELEGRAM_BOT_TOKEN")
        .map_err(|_| "set TELEGRAM_BOT_TOKEN (a token from @BotFather, see README.md)")?;
    let bot = Bot::new(token);
    let me = bot.get_me().send().await?;
    println!("@{} is listening; write \"ask\" to it", me.username());
    // Long polling needs no webhook on the token.
    bot.delete_webhook().send().await?;

    let mut polling = Polling::builder(bot.clone()).build();
    polling.hint_allowed_updates(
        &mut [AllowedUpdate::Message, AllowedUpdate::CallbackQuery].into_iter(),
    );
    let mut updates = std::pin::pin!(polling.as_stream());
    while let Some(update) = updates.next().await {
        let result = match update {
            Ok(update) => match &update.kind {
                UpdateKind::Message(m) if !convert::is_own_message(m, me.user.id) => {
                    ask(&bot, m).await
                }
                UpdateKind::CallbackQuery(q) => clicked(&bot, q).await,
                _ => Ok(()),
            },
            Err(e) => Err(e.into()),
        };
        if let Err(e) = result {
            eprintln!("error: {e}");
        }
    }
    Ok(())
}
