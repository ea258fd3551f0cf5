//! Plain-text tables with right-aligned numeric columns and units in the headers.

/// A table: a header row and data rows, all cells already formatted.
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers (put the unit in the header: `median [us]`).
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing cells render empty, extra cells are kept).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Renders with two spaces between columns; the first column is left-aligned, the
    /// others right-aligned.
    pub fn render(&self) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = row.get(i).map_or("", String::as_str);
                if i > 0 {
                    line.push_str("  ");
                }
                if i == 0 {
                    line.push_str(&format!("{cell:<width$}"));
                } else {
                    line.push_str(&format!("{cell:>width$}"));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `x` with `digits` significant digits in decimal notation (`0.0003125`, `1.234`,
/// `25340`): for a column whose values span orders of magnitude, such as a time
/// per byte, where a fixed number of decimals shows some as zero.
pub fn significant(x: f64, digits: usize) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let decimals = (digits as i32 - 1 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.decimals$}")
}

/// `items` written out and separated by `, `.
pub fn joined<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = items.into_iter().map(|i| i.to_string()).collect();
    items.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let mut t = Table::new(["size [B]", "median [us]"]);
        t.row(["1", "6.10"]);
        t.row(["65536", "40.25"]);
        assert_eq!(
            t.render(),
            "size [B]  median [us]\n1                6.10\n65536           40.25\n"
        );
    }

    #[test]
    fn significant_digits_whatever_the_magnitude() {
        assert_eq!(significant(0.000_312_5, 4), "0.0003125");
        assert_eq!(significant(-0.000_012_344, 4), "-0.00001234");
        assert_eq!(significant(1.23456, 4), "1.235");
        assert_eq!(significant(25343.9, 4), "25344");
        assert_eq!(significant(0.0, 4), "0");
    }
}
