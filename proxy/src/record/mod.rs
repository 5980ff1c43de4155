//! Where a request is recorded: the [`journal`], the captured [`message`]s of the inbox, and
//! the [`mime`] reading of mail.

pub(crate) mod journal;
pub(crate) mod message;
pub(crate) mod mime;
