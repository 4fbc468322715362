//! The pipeline debugging tools behind `passel run`'s flags and `passel bisect` (see the
//! README's "Debugging a pipeline"): pass statistics rendering ([`stats`]).

pub mod stats;
