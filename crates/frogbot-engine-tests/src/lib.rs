//! `frogbot-engine-tests`: frogbot-core's engine tested and measured on the real stores, SQLite
//! and PostgreSQL. It holds no code: `tests/` (approvals, channel progress, delivery,
//! elicitation, policy, questions, talk, turns) and `benches/` (`turns`, `questions`,
//! `channel_replies`; each bench's `//!` docs say how to run it and what it measured).
//!
//! It sits on top of frogbot-core, frogbot-sqlite, frogbot-postgres and frogbot-testkit, so that
//! none of them needs a dev-dependency on a crate above it ("no arrow runs back up",
//! `scripts/check-invariants.sh`). frogbot-core keeps its unit tests in `src`. Not published.
