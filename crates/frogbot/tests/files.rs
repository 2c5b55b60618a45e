//! Files over HTTP (issue 40, item 1): `POST /api/chats/{id}/files` streams an upload into the
//! store and answers the part a message sends it with; `GET …/files/{file}` serves it back to
//! whoever may read the chat, never as a page of this origin; the limits of `[files]` answer
//! 413 / 415 and keep nothing; a message naming another chat's file is refused.

mod common;

use common::{ALICE, BOB, Server};
use serde_json::{Value, json};

async fn upload(
    s: &Server,
    chat: &str,
    token: &str,
    media: &str,
    name: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let res = s
        .client
        .post(format!("{}/api/chats/{chat}/files?name={name}", s.base))
        .bearer_auth(token)
        .header("content-type", media)
        .header("x-frogbot-upload", "1")
        .body(body)
        .send()
        .await
        .expect("upload");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_uploaded_served_and_sent_in_messages() {
    let db = frogbot_testkit::sqlite_db();
    let s = common::start_with(
        &db,
        "[files]\nmax_bytes = 1000000\nmedia_types = [\"image/*\", \"text/*\"]\n",
    )
    .await;
    let image: Vec<u8> = (0..700_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let (status, body) = upload(&s, "mine", ALICE, "image/png", "cat.png", image.clone()).await;
    assert_eq!(status, 201, "{body}");
    let part = body["part"].clone();
    assert_eq!(part["type"], "file");
    assert_eq!(part["mediaType"], "image/png");
    assert_eq!(part["filename"], "cat.png");
    let url = part["url"].as_str().unwrap().to_string();
    assert_eq!(
        url,
        format!("/api/chats/mine/files/{}", body["id"].as_str().unwrap())
    );

    // Served back whole, as an image shown inline, to its owner only.
    let res = s
        .client
        .get(format!("{}{url}", s.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let h = res.headers().clone();
    assert_eq!(h["content-type"], "image/png");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(
        h["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("inline")
    );
    assert!(
        h["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("sandbox")
    );
    assert_eq!(res.bytes().await.unwrap().to_vec(), image);
    assert_eq!(
        s.get(&url, Some(BOB)).await.status,
        404,
        "the chat does not exist yet: only its uploader reads"
    );

    // Sent in a message: kept in the chat as the part names it.
    let r = s
        .post(
            "/api/chats/mine/messages",
            Some(ALICE),
            json!({"parts": [part, {"type": "text", "text": "look"}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let chat = s.chat("mine", Some(ALICE)).await;
    let first = &common::messages(&chat.json)[0];
    assert_eq!(first["parts"][0]["url"], url.as_str());
    assert_eq!(
        s.get(&url, Some(BOB)).await.status,
        403,
        "another user's chat"
    );

    // A text file that would be a page of this origin is a download, sandboxed.
    let (status, body) = upload(
        &s,
        "mine",
        ALICE,
        "text/html",
        "x.html",
        b"<script>alert(1)</script>".to_vec(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let res = s
        .client
        .get(format!(
            "{}{}",
            s.base,
            body["part"]["url"].as_str().unwrap()
        ))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert!(
        res.headers()["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment")
    );

    // The limits: 413 and 415, and nothing kept.
    let (status, body) = upload(
        &s,
        "mine",
        ALICE,
        "image/png",
        "big.png",
        vec![0; 1_000_001],
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "too-large");
    let (status, body) = upload(
        &s,
        "mine",
        ALICE,
        "application/zip",
        "a.zip",
        b"PK".to_vec(),
    )
    .await;
    assert_eq!(status, 415, "{body}");
    assert_eq!(body["error"]["code"], "unsupported-media-type");
    // Bob may not upload to alice's chat.
    let (status, _) = upload(&s, "mine", BOB, "text/plain", "b.txt", b"b".to_vec()).await;
    assert_eq!(status, 403);

    // A page of another origin cannot upload: a form's `text/plain` POST carries no
    // X-FrogBot-Upload, and adding it needs a preflight this server never grants.
    let res = s
        .client
        .post(format!("{}/api/chats/mine/files?name=x.txt", s.base))
        .bearer_auth(ALICE)
        .header("content-type", "text/plain")
        .body("from a form")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    assert!(res.text().await.unwrap().contains("X-FrogBot-Upload"));

    // Bob's message naming alice's file is refused, and his chat is not created.
    let r = s
        .post(
            "/api/chats/bobs/messages",
            Some(BOB),
            json!({"parts": [{"type": "file", "mediaType": "image/png", "url": url}, {"type": "text", "text": "mine now"}]}),
        )
        .await;
    r.assert_error(400, "invalid-request");
    assert_eq!(s.get("/api/chats/bobs", Some(BOB)).await.status, 404);
}

/// A person's files in a chat bound to an agent go to the agent's inbox with the message (and
/// the agent reads them through the chat); a file-only message is a message there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_reach_an_agents_inbox() {
    use common::AGENT;
    let db = frogbot_testkit::sqlite_db();
    let s = common::start(&db).await;
    let r = s
        .post(
            "/api/agent-chats",
            Some(AGENT),
            json!({"to": {"web": "deploy-for-alice", "user": "alice"}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let (status, up) = upload(
        &s,
        "deploy-for-alice",
        ALICE,
        "text/plain",
        "log.txt",
        b"error at line 3".to_vec(),
    )
    .await;
    assert_eq!(status, 201, "{up}");
    let url = up["part"]["url"].as_str().unwrap().to_string();
    let r = s
        .post(
            "/api/chats/deploy-for-alice/messages",
            Some(ALICE),
            json!({"id": "p1", "parts": [up["part"], {"type": "text", "text": "see this"}]}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text);
    let r = s
        .post(
            "/api/chats/deploy-for-alice/messages",
            Some(ALICE),
            json!({"id": "p2", "parts": [up["part"]]}),
        )
        .await;
    assert_eq!(r.status, 202, "a file alone: {}", r.text);
    let inbox = s.get("/api/inbox", Some(AGENT)).await;
    let items = inbox.json["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 2, "{}", inbox.text);
    let parts = &items[0]["message"]["parts"];
    assert_eq!(parts[0]["type"], "file", "{parts}");
    assert_eq!(parts[0]["url"], url.as_str());
    assert_eq!(parts[1]["text"], "see this");
    assert_eq!(items[1]["message"]["parts"][0]["url"], url.as_str());
    // The agent reads the file through the chat.
    let got = s
        .client
        .get(format!("{}{url}", s.base))
        .bearer_auth(AGENT)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status().as_u16(), 200);
    assert_eq!(got.text().await.unwrap(), "error at line 3");
}

/// An agent sends a file (issue 40, item 2): it uploads to its chat, then posts a message naming
/// the upload in `files`; the message carries the file part, the person reads the file through
/// the chat; a file of another chat, or a `files` entry that is not a file part, is a 400 and
/// nothing is posted.
#[tokio::test]
async fn an_agent_sends_files_with_its_message() {
    use common::AGENT;
    let db = frogbot_testkit::sqlite_db();
    let s = common::start(&db).await;
    for chat in ["report-for-alice", "other-for-alice"] {
        let r = s
            .post(
                "/api/agent-chats",
                Some(AGENT),
                json!({"to": {"web": chat, "user": "alice"}}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let (status, up) = upload(
        &s,
        "report-for-alice",
        AGENT,
        "application/pdf",
        "report.pdf",
        b"%PDF-1.7 weekly".to_vec(),
    )
    .await;
    assert_eq!(status, 201, "the agent uploads to its chat: {up}");
    let url = up["part"]["url"].as_str().unwrap().to_string();
    let r = s
        .post(
            "/api/chats/report-for-alice/agent-messages",
            Some(AGENT),
            json!({"id": "m1", "text": "The weekly report", "files": [up["part"]]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let parts = &r.json["parts"];
    assert_eq!(parts[0]["text"], "The weekly report", "{parts}");
    assert_eq!(parts[1]["type"], "file");
    assert_eq!(parts[1]["url"], url.as_str());
    assert_eq!(parts[1]["filename"], "report.pdf");
    assert_eq!(parts[1]["mediaType"], "application/pdf");
    let got = s
        .client
        .get(format!("{}{url}", s.base))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status().as_u16(), 200, "the person reads it");
    assert_eq!(got.text().await.unwrap(), "%PDF-1.7 weekly");
    // Files alone are a message.
    let r = s
        .post(
            "/api/chats/report-for-alice/agent-messages",
            Some(AGENT),
            json!({"id": "m2", "files": [up["part"]]}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    // Another chat's file, a part that is not a file: refused, nothing posted.
    for files in [json!([up["part"]]), json!([{"type": "text", "text": "x"}])] {
        let r = s
            .post(
                "/api/chats/other-for-alice/agent-messages",
                Some(AGENT),
                json!({"text": "stolen", "files": files}),
            )
            .await;
        assert_eq!(r.status, 400, "{}", r.text);
    }
    let messages = s.get("/api/chats/other-for-alice", Some(AGENT)).await;
    assert!(
        !messages.text.contains("stolen"),
        "nothing was posted: {}",
        messages.text
    );
}
