//! Tables for a person: each column as wide as its widest cell up to a bound, cells past the
//! bound cut with `…`, two spaces between columns so a full cell never runs into the next.

/// One column of a table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The heading, printed above the cells.
    pub heading: &'static str,
    /// The widest the column grows, in characters.
    pub max: usize,
    /// Whether cells are aligned right (numbers).
    pub right: bool,
}

impl Column {
    /// A left-aligned column at most `max` characters wide.
    pub const fn left(heading: &'static str, max: usize) -> Column {
        Column {
            heading,
            max,
            right: false,
        }
    }

    /// A right-aligned column at most `max` characters wide.
    pub const fn right(heading: &'static str, max: usize) -> Column {
        Column {
            heading,
            max,
            right: true,
        }
    }
}

/// The heading line and one line per row, each ending in a newline.
pub fn render(columns: &[Column], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            rows.iter()
                .filter_map(|row| row.get(i))
                .map(|cell| cell.chars().count())
                .chain([column.heading.chars().count()])
                .max()
                .unwrap_or(0)
                .min(column.max)
        })
        .collect();
    let headings: Vec<String> = columns.iter().map(|c| c.heading.to_owned()).collect();
    let mut out = String::new();
    for row in [&headings].into_iter().chain(rows) {
        let mut line = String::new();
        for (i, (column, width)) in columns.iter().zip(&widths).enumerate() {
            let cell = clip(row.get(i).map_or("", String::as_str), *width);
            if i > 0 {
                line.push_str("  ");
            }
            let pad = " ".repeat(width - cell.chars().count());
            if column.right {
                line.push_str(&pad);
                line.push_str(&cell);
            } else {
                line.push_str(&cell);
                line.push_str(&pad);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `text` cut to `width` characters, ending in `…` when cut.
pub fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_cell_is_cut_and_still_two_spaces_from_the_next() {
        let columns = [
            Column::right("SEQ", 5),
            Column::left("TO", 10),
            Column::left("SUBJECT", 40),
        ];
        let rows = vec![
            vec!["7".into(), "alice@example.com".into(), "Hi".into()],
            vec!["12".into(), "bo@x.test".into(), "Your code".into()],
        ];
        assert_eq!(
            render(&columns, &rows),
            "SEQ  TO          SUBJECT\n  7  alice@exa…  Hi\n 12  bo@x.test   Your code\n"
        );
    }

    #[test]
    fn a_column_is_as_narrow_as_its_cells_and_heading() {
        let columns = [Column::left("CODE", 8), Column::left("TO", 28)];
        let rows = vec![vec!["".into(), "a@b.test".into()]];
        assert_eq!(render(&columns, &rows), "CODE  TO\n      a@b.test\n");
    }
}
