//! The pipeline debugging tools behind `passel run`'s flags and `passel bisect` (see the
//! README's "Debugging a pipeline"): pass statistics rendering ([`stats`]), opt-bisect
//! ([`bisect`]) and crash reproducers ([`reproducer`]).

pub mod bisect;
pub mod reproducer;
pub mod stats;
