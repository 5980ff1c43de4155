//! The lifecycle commands: `af up`, `af down`, `af status`, `af logs`, `af restart`, `af exec`, `af ls`, `af net log`,
//! `af net suggest`, `af inbox`, `af webhook trigger`, `af doctor`, `af ui`. Each returns what it
//! found, or the coded
//! refusal to print.

pub mod doctor;
pub mod down;
pub mod exec;
pub mod inbox;
pub mod interrupt;
pub mod live;
pub mod logs;
pub mod ls;
pub mod net_log;
pub mod net_suggest;
pub mod output;
pub mod restart;
pub mod status;
pub mod table;
pub mod ui;
pub mod up;
pub mod webhook;
