//! Where a request leaves: [`forward`]ing HTTP and tunnels, every dial through the address
//! [`guard`], and the TLS [`upstream`] client for intercepted requests.

pub(crate) mod forward;
pub(crate) mod guard;
pub(crate) mod upstream;
