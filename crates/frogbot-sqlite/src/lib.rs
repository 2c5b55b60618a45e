//! `frogbot-sqlite`: FrogBot's embedded store (work in progress).
