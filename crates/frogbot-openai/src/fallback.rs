//! [`WithFallbacks`]: a model that hands a step to other models when it cannot answer.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use frogbot_core::BoxError;
use frogbot_core::agent::{Model, ModelEvent, ModelRequest, ModelStream};
use frogbot_core::model::Transient;
use futures::StreamExt;

/// A model followed by fallback models, tried in order when the one before failed **before any
/// event of its stream** with a transient failure (its own retries used up, a 429 or 5xx, the
/// connection refused: a [`Transient`] in the error's source chain). A permanent failure (a 400,
/// a 401) or a failure after the first event is the step's failure, as without fallbacks.
///
/// When a fallback answers, its stream starts with [`ModelEvent::Fallback`] naming it (the engine
/// records it in the reply's metadata). When every model failed, the error names each model's
/// failure ([`AllFailed`]).
#[derive(Clone)]
pub struct WithFallbacks {
    members: Arc<[Member]>,
}

#[derive(Clone)]
struct Member {
    id: String,
    model: Arc<dyn Model>,
    /// The reasoning options it offers (`None`: whatever the request asks, for the first).
    reasoning: Option<Vec<String>>,
}

impl fmt::Debug for WithFallbacks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithFallbacks")
            .field("models", &self.ids().collect::<Vec<_>>())
            .finish()
    }
}

impl WithFallbacks {
    /// `model`, known as `id`, with no fallback yet.
    pub fn new(id: impl Into<String>, model: Arc<dyn Model>) -> Self {
        Self {
            members: Arc::new([Member {
                id: id.into(),
                model,
                reasoning: None,
            }]),
        }
    }

    /// Adds `model`, known as `id`, as the next fallback. `reasoning` is the reasoning options it
    /// offers: a request's option it does not offer is left out when the request goes to it.
    #[must_use]
    pub fn fallback(
        self,
        id: impl Into<String>,
        model: Arc<dyn Model>,
        reasoning: Vec<String>,
    ) -> Self {
        let mut members = self.members.to_vec();
        members.push(Member {
            id: id.into(),
            model,
            reasoning: Some(reasoning),
        });
        Self {
            members: members.into(),
        }
    }

    /// The ids of the model and its fallbacks, in the order they are tried.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|m| m.id.as_str())
    }
}

impl Member {
    fn request(&self, request: &ModelRequest) -> ModelRequest {
        let mut request = request.clone();
        if let Some(offered) = &self.reasoning
            && request
                .reasoning
                .as_ref()
                .is_some_and(|option| !offered.contains(option))
        {
            request.reasoning = None;
        }
        request
    }
}

/// Every model of a [`WithFallbacks`] failed: each one's id and error, in the order tried. Its
/// source is the last error (so a [`Transient`] there is found through it).
#[derive(Debug)]
pub struct AllFailed {
    /// Each model's id and failure, in the order tried.
    pub failures: Vec<(String, BoxError)>,
}

impl fmt::Display for AllFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the model and its fallbacks failed: ")?;
        for (i, (id, error)) in self.failures.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{id}: {error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for AllFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.failures
            .last()
            .map(|(_, error)| error.as_ref() as &(dyn std::error::Error + 'static))
    }
}

/// The error to report: the only failure as it is, several as [`AllFailed`].
fn report(mut failures: Vec<(String, BoxError)>) -> BoxError {
    if failures.len() == 1 {
        return failures.remove(0).1;
    }
    Box::new(AllFailed { failures })
}

/// Opens the members from `start` on until one's stream opens (its index and stream); a
/// transient failure moves on to the next, a permanent one or the last one is reported.
async fn open(
    members: &[Member],
    start: usize,
    request: &ModelRequest,
    failures: &mut Vec<(String, BoxError)>,
) -> Result<(usize, ModelStream), BoxError> {
    for (index, member) in members.iter().enumerate().skip(start) {
        match member.model.stream(member.request(request)).await {
            Ok(stream) => return Ok((index, stream)),
            Err(error) => {
                let transient = Transient::is_transient(error.as_ref());
                failures.push((member.id.clone(), error));
                if !transient || index + 1 == members.len() {
                    break;
                }
                tracing::warn!(
                    model = member.id,
                    fallback = members[index + 1].id,
                    error = %failures.last().map(|(_, e)| e.to_string()).unwrap_or_default(),
                    "model failed, trying its fallback"
                );
            }
        }
    }
    Err(report(std::mem::take(failures)))
}

#[async_trait]
impl Model for WithFallbacks {
    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, BoxError> {
        struct State {
            members: Arc<[Member]>,
            request: ModelRequest,
            index: usize,
            stream: Option<ModelStream>,
            /// The event held back while `Fallback` goes first.
            held: Option<ModelEvent>,
            yielded: bool,
            failures: Vec<(String, BoxError)>,
        }

        let mut failures = Vec::new();
        let (index, stream) = open(&self.members, 0, &request, &mut failures).await?;
        let state = State {
            members: self.members.clone(),
            request,
            index,
            stream: Some(stream),
            held: None,
            yielded: false,
            failures,
        };
        let events = futures::stream::unfold(state, |mut state| async move {
            loop {
                if let Some(event) = state.held.take() {
                    return Some((Ok(event), state));
                }
                let item = state.stream.as_mut()?.next().await;
                match item {
                    Some(Ok(event)) => {
                        let first = !state.yielded;
                        state.yielded = true;
                        if first && state.index > 0 {
                            state.held = Some(event);
                            let model = state.members[state.index].id.clone();
                            return Some((Ok(ModelEvent::Fallback { model }), state));
                        }
                        return Some((Ok(event), state));
                    }
                    Some(Err(error)) => {
                        state.stream = None;
                        if state.yielded {
                            return Some((Err(error), state));
                        }
                        let transient = Transient::is_transient(error.as_ref());
                        let member = &state.members[state.index];
                        state.failures.push((member.id.clone(), error));
                        let next = state.index + 1;
                        if !transient || next == state.members.len() {
                            let error = report(std::mem::take(&mut state.failures));
                            return Some((Err(error), state));
                        }
                        tracing::warn!(
                            model = member.id,
                            fallback = state.members[next].id,
                            "model failed before answering, trying its fallback"
                        );
                        match open(&state.members, next, &state.request, &mut state.failures).await
                        {
                            Ok((index, stream)) => {
                                state.index = index;
                                state.stream = Some(stream);
                            }
                            Err(error) => return Some((Err(error), state)),
                        }
                    }
                    None => return None,
                }
            }
        });
        Ok(events.boxed())
    }
}
