//! Where a request leaves: [`forward`]ing HTTP and tunnels, every dial through the address
//! [`guard`], and the TLS [`upstream`] client for intercepted requests.

pub mod forward;
pub mod guard;
pub mod upstream;
