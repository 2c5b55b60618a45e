//! `engine.files()`: files people upload to a chat and read back, under the one policy — who
//! may write a chat, and its agent, may upload to it (who may create it, while it does not exist yet), who may
//! read a chat may read its files (only the uploader, while it does not exist yet).

use futures::Stream;

use super::*;
use crate::agent::files;
use crate::store::FileRow;

/// Files of chats ([`Engine::files`]).
#[derive(Clone, Copy, Debug)]
pub struct Files<'a>(pub(super) &'a Engine);

impl<'a> Files<'a> {
    /// Uploads a file to `chat` as `body` streams in, for `by` (refused by the policy, and by
    /// the [`crate::agent::FileLimits`]: nothing is kept then). The record's URL
    /// ([`crate::agent::files::file_url`]) is what a message's file part names it by.
    pub async fn upload<S, B, E>(
        self,
        chat: &ChatId,
        by: Option<&UserId>,
        media_type: &str,
        filename: &str,
        body: S,
    ) -> Result<FileRow>
    where
        S: Stream<Item = std::result::Result<B, E>> + Send,
        B: AsRef<[u8]> + Send,
        E: std::fmt::Display,
    {
        match self.0.store().get_chat(chat).await? {
            Some(_) => self.0.authorize_chat(by, chat, ChatAct::Upload).await?,
            // A chat id in the channels' space (`_…`) is a thread's, never created from here.
            None if chat.as_str().starts_with('_') => {
                return Err(Error::ChannelChat {
                    chat_id: chat.clone(),
                    reason: "is a channel thread's id; upload to a chat that exists",
                });
            }
            None => self.0.authorize(by, crate::policy::Action::CreateChat)?,
        }
        let owner = by.map(|u| u.as_str().to_string()).unwrap_or_default();
        files::write_file(
            self.0.store(),
            &self.0.config().files,
            chat,
            &owner,
            media_type,
            filename,
            self.0.now(),
            body,
        )
        .await
    }

    /// File `id` of `chat`, when `by` may read it: `NotFound` when there is none (or it is
    /// hidden from `by`), `Denied` when the chat is another's.
    pub async fn get(self, chat: &ChatId, id: &str, by: Option<&UserId>) -> Result<FileRow> {
        let not_found = || Error::NotFound {
            item: crate::Item::File,
            id: id.to_string(),
        };
        let row = self
            .0
            .store()
            .get_file(chat, id)
            .await?
            .ok_or_else(not_found)?;
        match self.0.store().get_chat(chat).await? {
            Some(c) => {
                let view = crate::policy::ChatView::of(&c);
                self.0
                    .authorize(by, crate::policy::Action::ReadChat(&view))?;
            }
            // Uploaded before its chat's first message: only its uploader reads it.
            None => {
                if self.0.inner.auth.get().is_some()
                    && by.map(UserId::as_str).unwrap_or("") != row.owner
                {
                    return Err(not_found());
                }
            }
        }
        Ok(row)
    }

    /// A file's bytes (from [`Files::get`]), a chunk at a time.
    pub fn bytes(self, row: FileRow) -> impl Stream<Item = Result<Vec<u8>>> + Send + 'static {
        files::file_chunks(self.0.store().clone(), row)
    }
}
