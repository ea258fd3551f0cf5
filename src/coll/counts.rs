//! The count matrix of an all-to-all-v: entry `(i, j)` is how many units rank `i`
//! sends rank `j` (`MPI_Alltoallv`'s `sendcounts[j]` on rank `i`, and
//! `recvcounts[i]` on rank `j`). A unit is the size of the sweep (MPI's datatype
//! extent): the pair sends `count * size` bytes, so a `--sizes` sweep scales the
//! whole matrix and keeps its shape.
//!
//! - `uniform`: 1 everywhere, the all-to-all (what OSU's `osu_alltoallv` and IMB's
//!   `Alltoallv` send);
//! - `random:SEED`: 0, 1 or 2 per pair, drawn from the pair and the seed (mean 1,
//!   so `size` stays the mean bytes per pair; a third of the pairs send nothing);
//! - a file: `np` rows of `np` non-negative integers, as CSV (commas or blanks,
//!   `#` comments) or as a JSON array of rows.
//!
//! Every count is a function of the pair, so a rank's schedule needs only its row
//! and column (O(np)), and the generated matrices are never materialized. A file's
//! matrix is read once per process and kept for its life (leaked), so that an
//! [`super::Algorithm`] carrying it stays `Copy`.

use crate::rng::mix;
use ngauge_transport::Rank;
use std::fmt;
use std::sync::Mutex;

/// A matrix read from a file.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CountMatrix {
    /// Where it came from, for reports.
    pub path: String,
    /// Ranks (rows and columns).
    pub np: usize,
    /// Row-major: `counts[i * np + j]` is rank `i`'s count for rank `j`.
    pub counts: Vec<u64>,
}

/// Where an all-to-all-v's counts come from (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Counts {
    /// 1 for every pair.
    Uniform,
    /// 0, 1 or 2 per pair from a seed.
    Random {
        /// The seed.
        seed: u64,
    },
    /// A matrix read from a file.
    Given(&'static CountMatrix),
}

impl Counts {
    /// Parses `uniform`, `random:SEED`, or a file name (read and checked here).
    ///
    /// # Errors
    /// A bad seed, an unreadable file, or one that is no square matrix of counts,
    /// in one line naming the file and the row.
    pub fn parse(text: &str) -> Result<Counts, String> {
        match text.split_once(':') {
            _ if text == "uniform" => Ok(Counts::Uniform),
            Some(("random", seed)) => seed
                .parse()
                .map(|seed| Counts::Random { seed })
                .map_err(|_| format!("random:SEED needs an unsigned integer seed, not `{seed}`")),
            _ => {
                static READ: Mutex<Vec<&'static CountMatrix>> = Mutex::new(Vec::new());
                let mut read = READ.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(m) = read.iter().find(|m| m.path == text) {
                    return Ok(Counts::Given(m));
                }
                let body = std::fs::read_to_string(text)
                    .map_err(|e| format!("cannot read the count matrix {text}: {e}"))?;
                let m = CountMatrix::parse(text, &body).map_err(|e| format!("{text}: {e}"))?;
                read.push(Box::leak(Box::new(m)));
                Ok(Counts::Given(read[read.len() - 1]))
            }
        }
    }

    /// Units rank `from` sends rank `to`.
    pub fn count(&self, from: Rank, to: Rank) -> usize {
        match self {
            Counts::Uniform => 1,
            Counts::Random { seed } => (mix(seed ^ ((from as u64) << 32) ^ to as u64) % 3) as usize,
            Counts::Given(m) => m.counts[from * m.np + to] as usize,
        }
    }

    /// Units rank `from` sends to ranks below `to` (the offset of its block for
    /// `to` in its send buffer, MPI's `sdispls[to]`).
    pub fn send_offset(&self, from: Rank, to: Rank) -> usize {
        match self {
            Counts::Uniform => to,
            _ => (0..to).map(|j| self.count(from, j)).sum(),
        }
    }

    /// Units ranks below `from` send rank `to` (the offset of `from`'s block in
    /// `to`'s receive buffer, MPI's `rdispls[from]`).
    pub fn recv_offset(&self, from: Rank, to: Rank) -> usize {
        match self {
            Counts::Uniform => from,
            _ => (0..from).map(|i| self.count(i, to)).sum(),
        }
    }

    /// The sum of the counts of a job of `np`: the bytes of one call in units of
    /// `size` (O(np^2) for a random or a given matrix).
    pub fn total(&self, np: usize) -> u64 {
        match self {
            Counts::Uniform => (np * np) as u64,
            Counts::Given(m) => m.counts.iter().sum(),
            _ => (0..np).map(|i| self.send_offset(i, np) as u64).sum(),
        }
    }

    /// The largest count of a pair of distinct ranks of a job of `np` (its largest
    /// message is that many units; 0 for one rank; O(np^2) for a random matrix).
    pub fn largest(&self, np: usize) -> usize {
        let pairs = (0..np).flat_map(|i| (0..np).filter(move |&j| j != i).map(move |j| (i, j)));
        match self {
            _ if np < 2 => 0,
            Counts::Uniform => 1,
            _ => pairs.map(|(i, j)| self.count(i, j)).max().unwrap_or(0),
        }
    }

    /// The mean count of a pair of distinct ranks of a job of `np` (the generated
    /// matrices' expectation, a file's actual mean; 0 for one rank).
    pub fn mean_off_diagonal(&self, np: usize) -> f64 {
        match self {
            _ if np < 2 => 0.0,
            Counts::Uniform | Counts::Random { .. } => 1.0,
            Counts::Given(m) => {
                let diagonal: u64 = (0..np).map(|i| m.counts[i * np + i]).sum();
                let all: u64 = m.counts.iter().sum();
                (all - diagonal) as f64 / (np * (np - 1)) as f64
            }
        }
    }

    /// Refuses a file's matrix that is not `np` x `np`.
    pub fn check_np(&self, np: usize) -> Result<(), String> {
        match self {
            Counts::Given(m) if m.np != np => Err(format!(
                "the count matrix {} is {} x {}, and the job has {np} ranks",
                m.path, m.np, m.np
            )),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Counts {
    /// What [`Counts::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Counts::Uniform => f.write_str("uniform"),
            Counts::Random { seed } => write!(f, "random:{seed}"),
            Counts::Given(m) => f.write_str(&m.path),
        }
    }
}

impl CountMatrix {
    /// Parses `body`, a JSON array of rows or CSV (see the module docs).
    fn parse(path: &str, body: &str) -> Result<CountMatrix, String> {
        let rows: Vec<Vec<u64>> = if body.trim_start().starts_with('[') {
            serde_json::from_str(body).map_err(|e| format!("not a JSON array of rows: {e}"))?
        } else {
            let lines = body.lines().map(|l| l.split('#').next().unwrap_or(""));
            let rows = lines.filter(|l| !l.trim().is_empty()).enumerate();
            rows.map(|(i, l)| {
                let cells = l.split(|c: char| c == ',' || c.is_whitespace());
                let cells = cells.filter(|c| !c.is_empty());
                cells
                    .map(|c| {
                        c.parse()
                            .map_err(|_| format!("row {}: `{c}` is no count", i + 1))
                    })
                    .collect()
            })
            .collect::<Result<_, String>>()?
        };
        let np = rows.len();
        if np == 0 {
            return Err("no rows; one row of counts per rank".into());
        }
        if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != np) {
            let (i, n) = (i + 1, r.len());
            return Err(format!(
                "row {i} has {n} counts, and {np} rows need {np} each"
            ));
        }
        let counts = rows.concat();
        Ok(CountMatrix {
            path: path.into(),
            np,
            counts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The largest block a rank sends another (not itself), in units.
    #[test]
    fn the_largest_count_leaves_out_the_diagonal() {
        let m = CountMatrix::parse("m", "99 1 2\n3 99 5\n6 7 99").unwrap();
        assert_eq!(Counts::Given(Box::leak(Box::new(m))).largest(3), 7);
        assert_eq!(Counts::Uniform.largest(4), 1);
        assert_eq!(Counts::Uniform.largest(1), 0);
        assert_eq!(Counts::Random { seed: 1 }.largest(8), 2);
    }

    #[test]
    fn csv_and_json_give_the_same_matrix() {
        let csv = CountMatrix::parse("m", "# a comment\n0, 1,2\n3 4 5\n\n6,7,8 # end\n").unwrap();
        let json = CountMatrix::parse("m", "[[0,1,2],[3,4,5],[6,7,8]]").unwrap();
        assert_eq!(csv, json);
        assert_eq!(csv.np, 3);
        let c = Counts::Given(Box::leak(Box::new(csv)));
        assert_eq!(c.count(1, 2), 5);
        assert_eq!(c.send_offset(1, 2), 7);
        assert_eq!(c.recv_offset(2, 1), 1 + 4);
        assert_eq!(c.mean_off_diagonal(3), (36.0 - 12.0) / 6.0);
        assert!(c.check_np(3).is_ok());
        let e = c.check_np(4).unwrap_err();
        assert_eq!(e, "the count matrix m is 3 x 3, and the job has 4 ranks");
    }

    #[test]
    fn bad_matrices_are_named_in_one_line() {
        let e = |body| CountMatrix::parse("m", body).unwrap_err();
        assert_eq!(e("1,2\n3\n"), "row 2 has 1 counts, and 2 rows need 2 each");
        assert_eq!(e("1,-2\n3,4\n"), "row 1: `-2` is no count");
        assert_eq!(e("# nothing\n"), "no rows; one row of counts per rank");
        assert!(e("[[1,2],[3]]").starts_with("row 2 has 1 counts"));
        assert!(e("[1,2]").starts_with("not a JSON array of rows"));
        let e = Counts::parse("random:x").unwrap_err();
        assert_eq!(e, "random:SEED needs an unsigned integer seed, not `x`");
        assert!(Counts::parse("/no/such/matrix")
            .unwrap_err()
            .starts_with("cannot read the count matrix /no/such/matrix: "));
    }

    #[test]
    fn generated_counts_parse_back_and_offsets_add_up() {
        for text in ["uniform", "random:7"] {
            let c = Counts::parse(text).unwrap();
            assert_eq!(c.to_string(), text);
            for (from, to) in [(0, 0), (3, 5), (5, 3)] {
                let row: usize = (0..to).map(|j| c.count(from, j)).sum();
                let column: usize = (0..from).map(|i| c.count(i, to)).sum();
                assert_eq!(c.send_offset(from, to), row);
                assert_eq!(c.recv_offset(from, to), column);
            }
        }
        // Random counts take every value 0..=2 and average about 1.
        let c = Counts::Random { seed: 7 };
        let all: Vec<usize> = (0..30)
            .flat_map(|i| (0..30).map(move |j| c.count(i, j)))
            .collect();
        assert!((0..3).all(|v| all.contains(&v)) && all.iter().all(|&v| v < 3));
        let mean = all.iter().sum::<usize>() as f64 / all.len() as f64;
        assert!((mean - 1.0).abs() < 0.15, "{mean}");
    }
}
