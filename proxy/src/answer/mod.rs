//! Where a request is answered: the [`request`] path (decide, then refuse, forward or answer
//! here), the sidecar's own [`refusal`]s, [`local`] answers and the answering [`modes`].

pub mod body;
pub mod local;
pub mod modes;
pub mod refusal;
pub mod refuse;
pub mod request;
