//! What an operator reaches for: held and quarantined instances, certification,
//! rollback, evidence (`explain`), garbage collection and verification,
//! impact and repair.

pub mod backfills;
pub mod decide;
pub mod explain;
pub mod gc;
pub mod impact;
pub mod problems;
pub mod repair;
pub mod rollback;
pub mod slo;
pub mod status;
pub mod table_rows;
pub mod verify;

use crate::events::EventLog;
use crate::store::Warehouse;

/// The event log of one operator action (its run id starts with `op-`).
pub fn operator_log(warehouse: &Warehouse) -> std::io::Result<EventLog> {
    let id = crate::exec::new_run_id().replacen("run-", "op-", 1);
    EventLog::open_in(&warehouse.events(), &id)
}

/// `text` safe to print on an operator's terminal: control characters
/// (escape sequences, carriage returns, backspaces, C1 controls) shown as
/// `\x1b`-style escapes, as are the bidirectional overrides that reorder a
/// line (`\u{202e}`); tabs and newlines kept. A
/// task's stderr can otherwise clear the screen or draw a fake success line,
/// whatever NO_COLOR says and even when piped.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if unsafe_char(c) && (c as u32) < 0x100 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    // A task's stderr cannot drive the operator's terminal
    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(
            super::printable("\u{1b}[2J\u{1b}[32mOK\u{1b}[0m\rdone\u{8}\u{9b}1m\tx\u{202e}y\nnext"),
            "\\x1b[2J\\x1b[32mOK\\x1b[0m\\x0ddone\\x08\\x9b1m\tx\\u{202e}y\nnext"
        );
        assert!(matches!(
            super::printable("plain é"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
