//! Where a request is answered: the [`request`] path (decide, then refuse, forward or answer
//! here), the sidecar's own [`refusal`]s (in [`grpc`]'s terms to a gRPC call), [`local`] answers and the answering [`modes`].

pub(crate) mod body;
pub(crate) mod grpc;
pub(crate) mod local;
pub(crate) mod modes;
pub(crate) mod refusal;
pub(crate) mod refuse;
pub(crate) mod request;
