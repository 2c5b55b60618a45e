//! `frogbot-postgres`: FrogBot's PostgreSQL store (work in progress).
