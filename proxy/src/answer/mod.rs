//! Where a request is answered: the [`request`] path (decide, then refuse, forward or answer
//! here), the sidecar's own [`refusal`]s, [`local`] answers and the answering [`modes`].

pub(crate) mod body;
pub(crate) mod local;
pub(crate) mod modes;
pub(crate) mod refusal;
pub(crate) mod refuse;
pub(crate) mod request;
