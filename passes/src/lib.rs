//! passel passes
