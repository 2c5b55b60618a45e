//! Tools: user-defined async functions with a JSON-schema input.
//!
//! `Tool::approval()` is `None`, or the `ApprovalPolicy` a call waits for (`with_approval` wraps
//! any tool). `call_or_ask` / `resume` serve a call that asks the driver for input while it runs
//! (`ToolStep`, `ToolAnswer`). `ToolSource` gives tools that change while the engine runs, asked at
//! every model step (`Engine::with_tool_source`): the turn offers them after its own tools, a name
//! it already has not twice, and looks calls up in both.

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use super::ToolSpec;
use crate::BoxError;
use crate::model::{ChatId, QuestionInput, QuestionOutcome, QuestionOutput, UserId};

/// What a tool call knows about where it runs.
#[derive(Clone, Debug)]
pub struct ToolContext {
    /// The chat.
    pub chat_id: ChatId,
    /// The user driving the turn.
    pub driver: Option<UserId>,
    /// The call id.
    pub tool_call_id: String,
    /// The id of the reply the call is part of (the turn's assistant message).
    pub message_id: String,
}

/// A tool the agent may call. Its error becomes an error result the model sees in the next step.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description and input schema.
    fn spec(&self) -> ToolSpec;
    /// Runs the tool.
    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, BoxError>;
    /// Whether a call waits for a person's approval before it runs (`None`: it runs at once).
    /// A call that needs one is asked in the chat as a question; approved, it runs once and its
    /// result goes to the model; denied or expired, the model gets an error result.
    fn approval(&self) -> Option<ApprovalPolicy> {
        None
    }
    /// Runs the tool where it may ask the person driving the turn for input while it runs (an
    /// MCP server's elicitation): [`ToolStep::Ask`] suspends the call; the engine asks the
    /// question in the chat (the turn waits like on any question) and, once it has an outcome,
    /// continues the call with [`Tool::resume`]. By default the call cannot ask ([`Tool::call`]).
    async fn call_or_ask(&self, input: Value, ctx: ToolContext) -> Result<ToolStep, BoxError> {
        self.call(input, ctx).await.map(ToolStep::Done)
    }
    /// Continues a call that asked ([`ToolStep::Ask`]) with what became of its question; `ctx` is
    /// the call's (same chat and call id). It may finish or ask again. A call this process no
    /// longer holds (it restarted, or another process continued the turn) fails.
    async fn resume(&self, answer: ToolAnswer, ctx: ToolContext) -> Result<ToolStep, BoxError> {
        let _ = (answer, ctx);
        Err(format!("tool {} asked nothing to continue", self.spec().name).into())
    }
}

/// How a call that may ask went ([`Tool::call_or_ask`], [`Tool::resume`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ToolStep {
    /// It finished with this output.
    Done(Value),
    /// It waits for a person's answer to this question. The engine decides who may answer (the
    /// person driving the turn, else whoever the chat lets answer) and keeps the expiry given.
    Ask(QuestionInput),
}

/// What became of a call's question ([`Tool::resume`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolAnswer {
    /// A person answered.
    Answered(QuestionOutput),
    /// A person declined (dismissed or skipped it), or nobody could be asked (`reason` says why).
    Declined {
        /// Why, when no person declined.
        reason: Option<String>,
    },
    /// Nobody answered in time, the question was withdrawn, or the turn stopped.
    Cancelled {
        /// What happened.
        reason: String,
    },
}

impl ToolAnswer {
    /// The answer a question's outcome gives: answered → [`ToolAnswer::Answered`]; dismissed →
    /// declined; expired (even with defaults) or withdrawn → cancelled.
    pub fn of(outcome: &QuestionOutcome) -> ToolAnswer {
        match outcome {
            QuestionOutcome::Answered(o) => ToolAnswer::Answered(o.clone()),
            QuestionOutcome::Dismissed => ToolAnswer::Declined { reason: None },
            QuestionOutcome::Expired(_) => ToolAnswer::Cancelled {
                reason: "nobody answered in time".into(),
            },
            _ => ToolAnswer::Cancelled {
                reason: "the question was withdrawn".into(),
            },
        }
    }
}

/// Who approves a tool's calls, and for how long they may.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalPolicy {
    /// Who may approve: FrogBot user ids or `platform:user` channel identities (`slack:U123`).
    /// Empty: the user driving the turn (whoever the chat lets answer when none drives it).
    pub approvers: Vec<String>,
    /// Unanswered this long, the call is denied (`None`: it waits as long as a question can).
    pub expires_in_seconds: Option<u64>,
}

/// `tool` with every call waiting for approval under `policy`.
pub fn with_approval(tool: Arc<dyn Tool>, policy: ApprovalPolicy) -> Arc<dyn Tool> {
    Arc::new(Approved { tool, policy })
}

struct Approved {
    tool: Arc<dyn Tool>,
    policy: ApprovalPolicy,
}

#[async_trait]
impl Tool for Approved {
    fn spec(&self) -> ToolSpec {
        self.tool.spec()
    }
    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, BoxError> {
        self.tool.call(input, ctx).await
    }
    async fn call_or_ask(&self, input: Value, ctx: ToolContext) -> Result<ToolStep, BoxError> {
        self.tool.call_or_ask(input, ctx).await
    }
    async fn resume(&self, answer: ToolAnswer, ctx: ToolContext) -> Result<ToolStep, BoxError> {
        self.tool.resume(answer, ctx).await
    }
    fn approval(&self) -> Option<ApprovalPolicy> {
        Some(self.policy.clone())
    }
}

/// Tools that come and go while the engine runs (an MCP server's, which it lists again when
/// they change): asked at every model step, after the engine's own tools. A name the engine's
/// own tools already have is not offered twice (the engine's wins).
pub trait ToolSource: Send + Sync {
    /// The tools a step offers in a chat of `platform` (`None`: the web chat and the HTTP API).
    fn tools(&self, platform: Option<&str>) -> Vec<Arc<dyn Tool>>;
}

/// A tool made from an async function whose input type derives `Deserialize` and `JsonSchema`.
pub struct FnTool<I, F> {
    name: String,
    description: String,
    schema: Value,
    f: F,
    _input: PhantomData<fn(I)>,
}

impl<I, F> std::fmt::Debug for FnTool<I, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool").field("name", &self.name).finish()
    }
}

/// Makes a tool from an async function; the input schema is derived from `I` with `schemars`.
///
/// ```
/// use frogbot_core::agent::tool_fn;
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add { a: i64, b: i64 }
/// let add = tool_fn("add", "Adds two numbers", |i: Add, _ctx| async move {
///     Ok::<_, frogbot_core::BoxError>(serde_json::json!(i.a + i.b))
/// });
/// ```
pub fn tool_fn<I, F, Fut>(name: &str, description: &str, f: F) -> Arc<dyn Tool>
where
    I: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, BoxError>> + Send + 'static,
{
    let schema = serde_json::to_value(schemars::schema_for!(I)).unwrap_or(Value::Null);
    Arc::new(FnTool {
        name: name.into(),
        description: description.into(),
        schema,
        f,
        _input: PhantomData,
    })
}

#[async_trait]
impl<I, F, Fut> Tool for FnTool<I, F>
where
    I: DeserializeOwned + Send + 'static,
    F: Fn(I, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, BoxError>> + Send + 'static,
{
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema: self.schema.clone(),
        }
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<Value, BoxError> {
        let input: I = serde_json::from_value(input)
            .map_err(|e| format!("invalid input for tool {}: {e}", self.name))?;
        (self.f)(input, ctx).await
    }
}
