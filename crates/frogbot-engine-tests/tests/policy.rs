//! The engine asks the authorization policy at its agent entries (`Engine::with_policy`): an
//! agent reaches only its targets and its own chats, a person's inbox stays closed to others.

use frogbot_core::Error;
use frogbot_core::agent::{AgentMessage, AgentPlace, ChannelTarget};
use frogbot_core::model::{ChatId, UserId};
use frogbot_core::policy::{Agent, AnonymousAccess, Denied, Policy, Principal, Targets};
use frogbot_testkit::TestModel;

fn agent(id: &str, targets: &[&str]) -> Principal {
    Principal::Agent(Agent {
        id: UserId::new(id),
        targets: Targets::parse(targets.iter().copied()).unwrap(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_asks_the_policy_at_its_agent_entries() {
    let db = frogbot_testkit::sqlite_db();
    let engine = frogbot_testkit::test_engine(&db.url, &TestModel::new("m"), 60_000)
        .await
        .with_policy(
            Policy::new(AnonymousAccess::Chat),
            [
                agent("deploy", &["web", "telegram:*"]),
                agent("narrow", &["slack:C0123"]),
                Principal::User(UserId::new("alice")),
            ],
        );
    let deploy = UserId::new("deploy");
    let narrow = UserId::new("narrow");
    let alice = UserId::new("alice");
    let web = |id: &str| AgentPlace::Web {
        chat: ChatId::new(id).unwrap(),
        owner: None,
    };
    // Its own web chat: yes. A person, an anonymous caller, an agent not allowed web: no.
    let row = engine
        .agents()
        .open_chat(Some(&deploy), web("deploys"), "", "k1")
        .await
        .unwrap();
    assert_eq!(row.owner.as_ref(), Some(&deploy));
    for (who, want) in [
        (Some(&alice), "forbidden"),
        (None, "unauthenticated"),
        (Some(&narrow), "forbidden"),
    ] {
        let e = engine
            .agents()
            .open_chat(who, web("other"), "", "k2")
            .await
            .unwrap_err();
        match (&e, want) {
            (Error::Denied(Denied::Forbidden(_)), "forbidden")
            | (Error::Denied(Denied::Unauthenticated(_)), "unauthenticated") => {}
            _ => panic!("{who:?}: {e:?}"),
        }
    }
    // A platform target it is not allowed: refused before the channel is asked.
    let e = engine
        .agents()
        .open_chat(
            Some(&narrow),
            AgentPlace::Channel {
                platform: "telegram".into(),
                place: ChannelTarget::User("777".into()),
            },
            "hi",
            "k3",
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Denied(Denied::Forbidden(_))), "{e:?}");
    // Only the chat's agent posts in it; another agent finds nothing there.
    let chat = ChatId::new("deploys").unwrap();
    let hi = || AgentMessage {
        text: Some("hi".into()),
        ..Default::default()
    };
    engine
        .agents()
        .post(&chat, Some(&deploy), hi())
        .await
        .unwrap();
    let e = engine
        .agents()
        .post(&chat, Some(&narrow), hi())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Denied(Denied::Hidden(_))), "{e:?}");
    let e = engine
        .agents()
        .post(&chat, Some(&alice), hi())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Denied(Denied::Forbidden(_))), "{e:?}");
    // The inbox is an agent's.
    assert!(engine.agents().inbox(Some(&deploy), None, 10).await.is_ok());
    let e = engine
        .agents()
        .inbox(Some(&alice), None, 10)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Denied(_)), "{e:?}");
    let e = engine.agents().inbox(None, None, 10).await.unwrap_err();
    assert!(matches!(e, Error::Denied(_)), "{e:?}");
}
