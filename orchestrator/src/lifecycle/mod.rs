//! The lifecycle commands: `af up`, `af down`, `af status`, `af logs`, `af net log`,
//! `af doctor`. Each returns the exit status, or the coded refusal to print.

pub mod doctor;
pub mod down;
pub mod logs;
pub mod net_log;
pub mod output;
pub mod status;
pub mod up;
