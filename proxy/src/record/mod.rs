//! Where a request is recorded: the [`journal`], the captured [`message`]s of the inbox, and
//! the [`mime`] reading of mail.

pub mod journal;
pub mod message;
pub mod mime;
