//! Where bytes arrive: the data [`listener`]s (explicit proxy, transparent HTTP and TLS), TLS
//! [`intercept`]ion under the environment CA, and the [`smtp`] listener; the data
//! [`threads`] accept on them.

pub(crate) mod accept;
pub(crate) mod intercept;
pub(crate) mod listener;
pub(crate) mod smtp;
pub(crate) mod threads;
