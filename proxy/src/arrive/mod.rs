//! Where bytes arrive: the data [`listener`]s (explicit proxy, transparent HTTP and TLS), TLS
//! [`intercept`]ion under the environment CA, and the [`smtp`] listener.

pub mod accept;
pub mod intercept;
pub mod listener;
pub mod smtp;
