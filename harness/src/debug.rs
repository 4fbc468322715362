//! The pipeline debugging tools behind `passel run`'s flags and `passel bisect` (see the
//! README's "Debugging a pipeline"): pass statistics rendering ([`stats`]) and opt-bisect
//! ([`bisect`]).

pub mod bisect;
pub mod stats;
