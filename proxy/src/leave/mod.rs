//! Where a request leaves: [`forward`]ing HTTP and tunnels, every dial through the address
//! [`guard`], the TLS [`upstream`] client for intercepted requests, and their [`pools`], one
//! per thread.

pub(crate) mod forward;
pub(crate) mod guard;
pub(crate) mod pools;
pub(crate) mod upstream;
